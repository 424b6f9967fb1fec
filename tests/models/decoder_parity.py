"""The parity harness of the Hugging Face decoder families (``test_llama_family.py``,
``test_gemma_family.py``): our model against a tiny random transformers model saved with
``save_pretrained`` (logits on left-padded rows, greedy KV-cache decoding against ``generate``,
beam search against its beams and scores, an export that transformers loads back, sharded and
bf16 checkpoints, broken ones failing on one line), and the training steps and FLOP counts of
a family's tiny gin config. Each check is one family-neutral function; the test files call them
with their references and add what is their family's own.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.numpy import load_file, save_file  # noqa: E402

from tw_jax.models import LoRAConfig, decoding, load_pretrained, model_for  # noqa: E402

VOCAB, PAD = 101, 0


def rows(seed: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Three rows of ``length`` tokens; rows 1 and 2 left-padded (7 and 3 pads)."""
    ids = np.random.RandomState(seed).randint(3, VOCAB, (3, length))
    mask = np.ones_like(ids)
    for row, pads in ((1, 7), (2, 3)):
        ids[row, :pads], mask[row, :pads] = PAD, 0
    return ids, mask


def hf_logits(hf, ids: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    with torch.no_grad():
        kwargs = {} if mask is None else {"attention_mask": torch.tensor(mask)}
        return hf(torch.tensor(ids), **kwargs).logits.numpy()


def logits(model, params, ids, mask=None) -> np.ndarray:
    return np.asarray(_apply(model, params, jnp.asarray(ids),
                             None if mask is None else jnp.asarray(mask)))


@functools.partial(jax.jit, static_argnums=0)
def _apply(model, params, ids, mask):
    return model.apply({"params": params}, ids, attention_mask=mask)


def max_diff(a: np.ndarray, b: np.ndarray, mask: np.ndarray) -> float:
    """The largest ``|a - b|`` over the real (unpadded) positions."""
    return float(np.max(np.abs(a - b)[mask == 1]))


# --- against transformers ------------------------------------------------------------------


def check_logits_match(label: str, hf, model, params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Logits within 1e-4 of transformers' on three left-padded rows of 20 tokens (printed as
    ``label: max |logit difference| ...``); returns the rows, their mask and our logits."""
    ids, mask = rows(0, 20)
    ours, theirs = logits(model, params, ids, mask), hf_logits(hf, ids, mask)
    diff = max_diff(ours, theirs, mask)
    print(f"{label}: max |logit difference| {diff:.2e}")
    assert diff <= 1e-4, diff
    return ids, mask, ours


def check_greedy_equals_generate(hf, model, params) -> None:
    """16 greedy KV-cache tokens after left-padded prompts equal ``generate``'s."""
    ids, mask = rows(1, 9)
    ours = np.asarray(decoding.greedy_decode(model, params, jnp.asarray(ids), jnp.asarray(mask),
                                             max_new_tokens=16, eos_id=None))
    with torch.no_grad():
        theirs = hf.generate(torch.tensor(ids), attention_mask=torch.tensor(mask),
                             do_sample=False, max_new_tokens=16, min_new_tokens=16,
                             eos_token_id=None, pad_token_id=PAD).numpy()[:, ids.shape[1]:]
    np.testing.assert_array_equal(ours, theirs)
    assert len(set(ours.ravel().tolist())) > 8  # not one token repeated: the test can fail


def check_fused_attention(label: str, hf, model, params) -> None:
    """``attention_kernel='fused'`` (jax.nn.dot_product_attention; XLA's computation on CPU)
    gives transformers' logits as the einsum path does, and the same greedy tokens."""
    fused = model_for(dataclasses.replace(model.config, attention_kernel="fused")).module
    check_logits_match(f"{label} (fused attention)", hf, fused, params)
    check_greedy_equals_generate(hf, fused, params)


def check_beam_search(hf, model, params) -> None:
    """Beam search (3 beams, 6 tokens) equals transformers' beams and scores, and each score is
    its beam's teacher-forced log-likelihood."""
    ids, mask = rows(3, 10)
    seqs, scores = decoding.beam_search(model, params, jnp.asarray(ids), jnp.asarray(mask),
                                        beam_size=3, max_new_tokens=6, eos_id=None)
    with torch.no_grad():
        out = hf.generate(torch.tensor(ids), attention_mask=torch.tensor(mask), do_sample=False,
                          num_beams=3, num_return_sequences=3, max_new_tokens=6,
                          eos_token_id=None, pad_token_id=PAD, length_penalty=0.0,
                          output_scores=True, return_dict_in_generate=True)
    np.testing.assert_array_equal(np.asarray(seqs), out.sequences[:, 10:].numpy().reshape(3, 3, 6))
    np.testing.assert_allclose(np.asarray(scores), out.sequences_scores.numpy().reshape(3, 3),
                               atol=1e-4)
    # and each score is the teacher-forced log-likelihood of its beam, as transformers scores it
    full = np.concatenate([ids, np.asarray(seqs[:, 0])], axis=1)
    full_mask = np.concatenate([mask, np.ones((3, 6), mask.dtype)], axis=1)
    log_probs = torch.log_softmax(torch.tensor(hf_logits(hf, full, full_mask)), -1).numpy()
    picked = np.take_along_axis(log_probs[:, 9:-1], full[:, 10:, None], -1)[..., 0]
    np.testing.assert_allclose(picked.sum(-1), np.asarray(scores[:, 0]), atol=1e-4)


def check_export(save: Callable[..., None], hf, folder: str, model, params,
                 out: Path) -> tuple[dict[str, Any], Any]:
    """``save`` (the family's writer) into ``out``: the same tensors as ``save_pretrained``
    wrote, a folder transformers loads into ``hf``'s class with equal logits; returns the
    exported ``config.json`` and the reloaded model for the family's own checks."""
    save(out, model.config, params)
    hf_config = json.loads((out / "config.json").read_text())
    theirs = load_file(f"{folder}/model.safetensors")
    ours = load_file(out / "model.safetensors")
    assert set(ours) == set(theirs)
    for name, array in ours.items():
        np.testing.assert_array_equal(array, theirs[name], err_msg=name)
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(out).eval()
    assert type(reloaded) is type(hf)
    ids, mask = rows(2, 12)
    np.testing.assert_array_equal(hf_logits(reloaded, ids, mask), hf_logits(hf, ids, mask))
    return hf_config, reloaded


def check_sharded_and_bf16(hf, params, tmp_path: Path, max_shard_size: str) -> None:
    """``save_pretrained`` in shards of ``max_shard_size`` loads exactly; bf16 storage loads as
    float32 of the rounded values, or stays bf16 with ``param_dtype="bfloat16"``."""
    hf.save_pretrained(tmp_path / "sharded", max_shard_size=max_shard_size)
    assert (tmp_path / "sharded" / "model.safetensors.index.json").exists()
    _, sharded = load_pretrained(tmp_path / "sharded")
    jax.tree.map(np.testing.assert_array_equal, sharded, params)

    copy.deepcopy(hf).to(torch.bfloat16).save_pretrained(tmp_path / "bf16")
    _, loaded = load_pretrained(tmp_path / "bf16")
    rounded = jax.tree.map(
        lambda x: np.asarray(x).astype(ml_dtypes.bfloat16).astype(np.float32), params)
    assert {x.dtype for x in jax.tree.leaves(loaded)} == {jnp.dtype("float32")}
    jax.tree.map(np.testing.assert_array_equal, loaded, rounded)
    _, kept = load_pretrained(tmp_path / "bf16", param_dtype="bfloat16")
    assert {x.dtype for x in jax.tree.leaves(kept)} == {jnp.dtype("bfloat16")}


def broken_loader(folder: str, tmp_path: Path) -> Callable[[dict, str], str]:
    """``broken(tensors, label)``: ``tensors`` saved with ``folder``'s ``config.json`` under
    ``tmp_path / label``; loading it must fail with one line naming the file, returned."""

    def broken(tensors: dict, label: str) -> str:
        out = tmp_path / label
        out.mkdir()
        (out / "config.json").write_text(Path(folder, "config.json").read_text())
        save_file(tensors, out / "model.safetensors", metadata={"format": "pt"})
        with pytest.raises(ValueError) as error:
            load_pretrained(out)
        message = str(error.value)
        assert "\n" not in message and str(out / "model.safetensors") in message
        return message

    return broken


def check_broken_checkpoints(folder: str, tmp_path: Path, name: str,
                             wrong: tuple[int, int], stored: tuple[int, int],
                             ) -> tuple[Callable[[dict, str], str], dict]:
    """Tensor ``name`` (stored ``stored``) of the wrong shape ``wrong``, an extra tensor and
    ``name`` missing each fail on one line naming the tensor; returns the ``broken`` loader
    (:func:`broken_loader`) and the folder's tensors for the family's further cases."""
    tensors = load_file(f"{folder}/model.safetensors")
    broken = broken_loader(folder, tmp_path)
    message = broken({**tensors, name: np.zeros(wrong, np.float32)}, "shape")
    assert f"tensor {name!r} has shape {wrong}, expected {stored}" in message
    extra = broken({**tensors, "model.layers.1.mlp.extra.weight": np.zeros(3, np.float32)}, "extra")
    assert "model.layers.1.mlp.extra.weight" in extra
    missing = broken({k: v for k, v in tensors.items() if k != name}, "missing")
    assert f"tensor {name!r} (shape {stored}) is missing" in missing
    return broken, tensors


# --- training steps on a family's tiny gin config --------------------------------------------


def gin_config(gin_file: str, config_class: type, *bindings: str) -> Any:
    """The config ``gin_file`` (and ``bindings``) builds, as a plain ``config_class``."""
    import gin

    from tw_jax.runtime import gin_setup

    gin_setup.parse([gin_file], bindings, input_pipeline=False)
    try:
        built = gin_setup.model_config()
    finally:
        gin.clear_config()
    return config_class(**{f.name: getattr(built, f.name) for f in dataclasses.fields(built)})


def check_train_step(config, method: str) -> None:
    """One LoRA (``method`` ``lora``: only LoRA's B moves), K-Adapter (``kadapter``: only the
    adapters move, the base frozen) or DIFF (every parameter moves) train step on ``config``,
    with a finite loss; K-Adapter's decoding with the KV cache equals its teacher-forced
    argmax."""
    from tw_jax.models import KAdapterConfig
    from tw_jax.models.sharding import activate
    from tw_jax.runtime.run_model import build_run_model
    from tw_jax.train.optimizers import AdamWConfig
    from tw_jax.train.schedules import make_schedule
    from tw_jax.train.trainer import build_train_step

    variant = {"lora": {"lora": LoRAConfig()},
               "kadapter": {"kadapter": KAdapterConfig(taps=(0, 1))}}  # tiny: 2 layers
    config = (dataclasses.replace(config, freeze="base", **variant[method])
              if method in variant else config)
    run = build_run_model(config, (1, 1, 1), devices=jax.devices()[:1])
    step = build_train_step(run, config, optimizer=AdamWConfig(),
                            schedule_fn=functools.partial(make_schedule, "constant", 1e-2),
                            train_steps=1, accumulate_steps=1, seed=0)
    tokens = np.random.RandomState(0).randint(0, config.vocab_size, (2, 16)).astype(np.int32)
    batch = {"decoder_target_tokens": tokens, "decoder_input_tokens": np.roll(tokens, 1, axis=1),
             "decoder_loss_weights": np.ones((2, 16), np.float32),
             "decoder_mask": np.ones((2, 16), np.float32)}
    with activate(run.mesh):
        params = run.init_params(0)
        before = jax.tree.map(np.array, params)
        opt_state = jax.jit(step.tx.init)(params)
        params, _, out = step(params, opt_state, 0, batch)
    assert np.isfinite(float(out["loss"]))
    changed = {"/".join(str(k.key) for k in path): not np.array_equal(np.asarray(a), b)
               for (path, a), b in zip(jax.tree_util.tree_flatten_with_path(params)[0],
                                       jax.tree.leaves(before), strict=True)}
    lora = {name for name in changed if "lora_" in name}
    adapters = {name for name in changed if name.startswith("kadapter/")}
    if method == "lora":  # only LoRA's B moves in the first step (the update is A·B, B = 0)
        assert lora and all(changed[n] for n in lora if n.endswith("lora_b"))
        assert not any(changed[n] for n in changed if n not in lora)
    elif method == "kadapter":  # every adapter tensor moves, no base one
        assert adapters and all(changed[n] for n in adapters)
        assert not any(changed[n] for n in changed if n not in adapters)
        prompt = jnp.asarray(tokens[:, :6])
        greedy = np.asarray(decoding.greedy_decode(run.model.module, params, prompt,
                                                   jnp.ones_like(prompt), max_new_tokens=3,
                                                   eos_id=None))
        row = np.concatenate([tokens[:, :6], greedy], axis=1)
        forced = logits(run.model.module, params, row, np.ones_like(row))
        np.testing.assert_array_equal(greedy, forced[:, 5:-1].argmax(-1))
    else:
        assert not lora and not adapters and all(changed.values())


def check_flops(c) -> None:
    """The FLOPs of a train step count grouped key/value heads and the gated MLP at their size,
    a tied embedding as the head."""
    from tw_jax.train.flops import train_step_flops

    e, h, k, d, f = (c.hidden_size, c.num_attention_heads, c.num_key_value_heads, c.head_dim,
                     c.intermediate_size)
    per_layer = e * h * d + 2 * e * k * d + h * d * e + 3 * e * f  # q, k and v, o, gate/up/down
    kernels = c.num_hidden_layers * per_layer + c.vocab_size * e  # the tied embedding as head
    flops = train_step_flops(c, 4, {"targets": 32})
    assert flops.matmul_forward == 2 * kernels * 4 * 32
    assert flops.attention_forward == c.num_hidden_layers * 4 * 4 * 32 * 32 * h * d
