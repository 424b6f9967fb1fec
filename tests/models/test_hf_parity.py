"""Parity with the reference implementation: Hugging Face ``GPT2LMHeadModel`` (PyTorch).

Skipped where torch is absent (install the ``parity`` extra). A tiny random model is saved with
``save_pretrained`` and imported with our safetensors reader; logits must agree to 1e-4 in float32
and greedy decodes token for token.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from safetensors.numpy import load_file  # noqa: E402

from tw_jax.models import decoding, forward_logits, load_pretrained  # noqa: E402
from tw_jax.models.hf_io import save_gpt2  # noqa: E402

EOS = 99


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """A random tiny HF GPT-2 saved to disk, and the same folder imported into tw_jax."""
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=4, initializer_range=0.2,
        bos_token_id=EOS, eos_token_id=EOS,
    )
    hf = transformers.GPT2LMHeadModel(config).eval()
    folder = tmp_path_factory.mktemp("hf_gpt2")
    hf.save_pretrained(folder, safe_serialization=True)
    model, params = load_pretrained(folder)
    return hf, folder, model, params


def _hf_logits(hf, ids: np.ndarray, mask: np.ndarray | None = None) -> np.ndarray:
    with torch.no_grad():
        kwargs = {} if mask is None else {"attention_mask": torch.tensor(mask)}
        return hf(torch.tensor(ids), **kwargs).logits.numpy()


def test_logits_match_hugging_face(reference):
    hf, _, model, params = reference
    ids = np.random.RandomState(0).randint(0, 100, (3, 20))
    diff = np.max(np.abs(forward_logits(model, params, ids) - _hf_logits(hf, ids)))
    assert diff <= 1e-4, diff
    # Right padding: the real positions are unaffected by what follows them.
    mask = np.ones_like(ids)
    mask[1, 12:] = 0
    ours = np.asarray(model.apply({"params": params}, ids, attention_mask=mask))
    theirs = _hf_logits(hf, ids, mask)
    assert np.max(np.abs(ours[mask == 1] - theirs[mask == 1])) <= 1e-4


def _hf_greedy(hf, ids, mask, new: int, eos: int | None) -> np.ndarray:
    with torch.no_grad():
        out = hf.generate(
            torch.tensor(ids), attention_mask=torch.tensor(mask), do_sample=False,
            max_new_tokens=new, min_new_tokens=0, eos_token_id=eos, pad_token_id=0,
        ).numpy()[:, ids.shape[1]:]
    return np.pad(out, ((0, 0), (0, new - out.shape[1])))  # HF stops once every row is done


def test_greedy_decodes_match_hugging_face(reference):
    hf, _, model, params = reference
    ids = np.random.RandomState(1).randint(0, 99, (3, 7))
    ids[2, :3] = 0
    mask = np.ones_like(ids)
    mask[2, :3] = 0  # left padding
    ours = np.asarray(decoding.greedy_decode(model, params, ids, mask, max_new_tokens=12,
                                             eos_id=None))
    np.testing.assert_array_equal(ours, _hf_greedy(hf, ids, mask, 12, None))
    eos = int(ours[1, 4])  # a token that row 1 emits: EOS then ends it early
    ours = np.asarray(decoding.greedy_decode(model, params, ids, mask, max_new_tokens=12,
                                             eos_id=eos, pad_id=0))
    first = ours[1].tolist().index(eos)
    assert first <= 4 and ours[1, first + 1:].tolist() == [0] * (11 - first)
    np.testing.assert_array_equal(ours, _hf_greedy(hf, ids, mask, 12, eos))


def test_our_export_equals_the_hugging_face_file(reference, tmp_path):
    _, folder, model, params = reference
    save_gpt2(tmp_path, model.config, params)
    theirs = load_file(folder / "model.safetensors")
    theirs = {k: v for k, v in theirs.items() if not k.endswith((".attn.bias", ".attn.masked_bias"))}
    ours = load_file(tmp_path / "model.safetensors")
    assert set(ours) == set(theirs) - {"lm_head.weight"}
    for name, array in ours.items():
        np.testing.assert_array_equal(array, theirs[name], err_msg=name)
    reloaded = transformers.GPT2LMHeadModel.from_pretrained(tmp_path).eval()
    ids = np.arange(10)[None]
    np.testing.assert_array_equal(_hf_logits(reloaded, ids), _hf_logits(reference[0], ids))


def test_sharded_hugging_face_checkpoint_loads(reference, tmp_path):
    hf, _, model, params = reference
    hf.save_pretrained(tmp_path, safe_serialization=True, max_shard_size="20KB")
    assert (tmp_path / "model.safetensors.index.json").exists()
    _, loaded = load_pretrained(tmp_path)
    ids = np.arange(15)[None]
    np.testing.assert_array_equal(forward_logits(model, loaded, ids),
                                  forward_logits(model, params, ids))
