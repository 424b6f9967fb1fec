"""BART without PyTorch: shapes and counts, cached decoding, export/import, the vocabulary, the
protocol (examples, labels, FLOPs) and clear errors. Parity with Hugging Face's PyTorch BART is
``test_bart_parity.py``."""

from __future__ import annotations

import dataclasses
import functools
import json
import math

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from safetensors.numpy import load_file, save_file

from tw_jax.errors import UsageError
from tw_jax.models import (
    BART,
    BARTConfig,
    BARTModel,
    KAdapterConfig,
    LoRAConfig,
    ModularConfig,
    abstract_variables,
    bart,
    decoding,
    forward_logits,
    load_pretrained,
    model_for,
)
from tw_jax.models.bart_io import load_bart, save_bart
from tw_jax.models.token_scores import Seq2SeqExample
from tw_jax.models.variants import FROZEN, TRAINABLE, path_names

TINY = BARTConfig(vocab_size=100, max_position_embeddings=24, d_model=32, encoder_layers=2,
                  decoder_layers=3, encoder_attention_heads=4, decoder_attention_heads=2,
                  encoder_ffn_dim=64, decoder_ffn_dim=48, dropout_rate=0.0, init_std=0.2)
SCALED = dataclasses.replace(TINY, scale_embedding=True, activation_function="relu",
                             tie_word_embeddings=False)


def _init(config: BARTConfig, seed: int = 0) -> tuple[BART, dict]:
    """The model and its parameters: initialised once per config and seed for the whole file;
    each call gets its own copy of the tree's dicts, so a test may edit its copy in place."""
    model, params = _init_once(config, seed)
    return model, jax.tree.map(lambda x: x, params)


@functools.cache
def _init_once(config: BARTConfig, seed: int) -> tuple[BART, dict]:
    model = BART(config)
    dummy = jnp.zeros((1, 8), jnp.int32)
    params = nn.unbox(jax.jit(model.init)(jax.random.key(seed), dummy, dummy)["params"])
    # A non-zero bias, so that every test also checks where final_logits_bias goes.
    bias = jax.random.normal(jax.random.key(seed + 1), (config.vocab_size,))
    return model, {**params, "final_logits_bias": bias}


def _ids(seed: int, shape: tuple[int, int]) -> np.ndarray:
    return np.random.RandomState(seed).randint(3, 100, shape)


def _assert_trees_equal(a, b) -> None:
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_bart_large_has_the_406m_parameters_ecbd_reports():
    """ECBD Table 3: "Type: seq-to-seq BART Large Size: 406M"."""
    import gin

    from tw_jax.runtime import gin_setup

    gin_setup.parse(["models/bart_large.gin"], [], [])
    try:
        large = gin_setup.model_config()
    finally:
        gin.clear_config()
    assert large == BARTConfig()  # the gin file spells out Hugging Face's BART-large defaults
    d, v, ffn, rows = 1024, 50265, 4096, 1026
    attention = 4 * (d * d + d)
    encoder_layer = attention + 2 * d * ffn + ffn + d + 2 * 2 * d
    decoder_layer = 2 * attention + 2 * d * ffn + ffn + d + 3 * 2 * d
    stack = rows * d + 2 * d  # positions and layernorm_embedding
    expected = v * d + v + 2 * stack + 12 * encoder_layer + 12 * decoder_layer
    count = model_for(large).count_params()
    assert count.total == expected == 406_341_721
    # final_logits_bias is a buffer: it never trains, and Hugging Face does not count it either
    assert count.trainable == expected - v == 406_291_456
    assert round(count.total / 1e6) == 406


def test_parameter_tree_layout():
    params = nn.unbox(abstract_variables(TINY)["params"])
    assert set(params) == {"shared", "encoder", "decoder", "final_logits_bias"}
    assert params["encoder"]["embed_positions"]["embedding"].shape == (24 + 2, 32)  # offset 2
    assert set(params["encoder"]) == {"embed_positions", "layernorm_embedding", "layer_0", "layer_1"}
    layer = params["decoder"]["layer_2"]
    assert set(layer) == {"self_attn", "self_attn_layer_norm", "encoder_attn",
                          "encoder_attn_layer_norm", "fc1", "fc2", "final_layer_norm"}
    assert layer["self_attn"]["query"]["kernel"].shape == (32, 2, 16)
    assert layer["encoder_attn"]["out"]["kernel"].shape == (2, 16, 32)
    assert layer["fc1"]["bias"].shape == (48,)
    assert params["encoder"]["layer_0"]["self_attn"]["key"]["bias"].shape == (4, 8)
    assert nn.unbox(abstract_variables(SCALED)["params"])["lm_head"]["kernel"].shape == (32, 100)


def test_shift_tokens_right_is_hugging_faces():
    labels = np.array([[0, 5, 6, 2], [0, 7, -100, -100]])
    np.testing.assert_array_equal(bart.shift_tokens_right(labels, 1, 2),
                                  [[2, 0, 5, 6], [2, 0, 7, 1]])


def test_positions_are_learned_with_an_offset_of_two():
    """Moving row ``p + 2`` of the encoder's table changes the output at position ``p`` only."""
    model, params = _init(TINY)
    ids, dec = _ids(0, (1, 6)), _ids(1, (1, 4))
    base = forward_logits(model, params, ids, dec)
    table = params["encoder"]["embed_positions"]["embedding"]
    moved = jax.tree.map(lambda x: x, params)
    moved["encoder"]["embed_positions"]["embedding"] = table.at[6 + 2].add(5.0)  # past the input
    np.testing.assert_array_equal(forward_logits(model, moved, ids, dec), base)
    moved["encoder"]["embed_positions"]["embedding"] = table.at[0].add(5.0)  # never read
    np.testing.assert_array_equal(forward_logits(model, moved, ids, dec), base)
    with pytest.raises(ValueError, match="at most max_position_embeddings=24 encoder"):
        forward_logits(model, params, _ids(2, (1, 25)), dec)


@pytest.mark.parametrize("config", [TINY, SCALED], ids=["tied", "scaled_untied"])
def test_cached_step_by_step_decoding_equals_the_full_forward(config):
    model, params = _init(config)
    ids, dec = _ids(0, (2, 11)), _ids(1, (2, 7))
    mask = np.ones_like(ids)
    mask[1, 6:] = 0
    full = np.asarray(jax.jit(lambda p: model.apply({"params": p}, ids, dec, attention_mask=mask))(params))
    encoded = jax.jit(lambda p: model.apply({"params": p}, ids, mask, method=BART.encode))(params)
    cache = bart.init_cache(model, params, 2, 7, 11)
    step = jax.jit(bart.decode_step, static_argnums=0)
    # A two-token prefix (which fills the cross-attention cache), then single steps.
    logits, cache = step(model, params, cache, dec[:, :2], encoded, mask)
    steps = [logits]
    for i in range(2, 7):
        logits, cache = step(model, params, cache, dec[:, i:i + 1])
        steps.append(logits)
    np.testing.assert_allclose(np.concatenate(steps, axis=1), full, atol=1e-4, rtol=1e-5)
    assert int(cache["decoder"]["cache_index"]) == 7


def test_greedy_decode_starts_from_eos_and_follows_the_teacher_forced_argmax():
    model, params = _init(TINY)
    ids = _ids(2, (3, 9))
    out = np.asarray(decoding.greedy_decode(model, params, ids, max_new_tokens=6, eos_id=None))
    dec = bart.shift_tokens_right(out, 1, TINY.decoder_start_token_id)
    assert (dec[:, 0] == 2).all()
    np.testing.assert_array_equal(out, forward_logits(model, params, ids, dec).argmax(-1))
    beams, _ = decoding.beam_search(model, params, ids, beam_size=1, max_new_tokens=6, eos_id=None)
    np.testing.assert_array_equal(np.asarray(beams[:, 0]), out)


@pytest.mark.parametrize("config", [TINY, SCALED], ids=["tied", "scaled_untied"])
def test_export_import_round_trip_is_exact(tmp_path, config):
    model, params = _init(config)
    save_bart(tmp_path / "a", config, params)
    loaded_config, loaded = load_bart(tmp_path / "a")
    assert loaded_config == config
    _assert_trees_equal(loaded, jax.tree.map(np.asarray, params))
    save_bart(tmp_path / "b", loaded_config, loaded)
    for name in ("model.safetensors", "config.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    tensors = load_file(tmp_path / "a" / "model.safetensors")
    assert tensors["model.encoder.layers.0.self_attn.q_proj.weight"].shape == (32, 32)
    assert tensors["model.decoder.layers.2.fc2.weight"].shape == (32, 48)  # (out, in)
    assert tensors["final_logits_bias"].shape == (1, 100)
    assert ("lm_head.weight" in tensors) == (not config.tie_word_embeddings)
    assert not any("embed_tokens" in name for name in tensors)
    save_bart(tmp_path / "c", config, params, max_shard_bytes=20_000)
    index = json.loads((tmp_path / "c" / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    loaded_model, sharded = load_pretrained(tmp_path / "c")
    assert isinstance(model_for(loaded_model), BARTModel)
    ids, dec = _ids(5, (1, 10)), _ids(6, (1, 4))
    np.testing.assert_array_equal(forward_logits(loaded_model, sharded, ids, dec),
                                  forward_logits(model, params, ids, dec))


def test_import_reads_bart_model_folders_and_refuses_what_does_not_fit(tmp_path):
    model, params = _init(TINY)
    save_bart(tmp_path, TINY, params)
    path = tmp_path / "model.safetensors"
    tensors = load_file(path)

    def write(t: dict) -> None:
        save_file(t, str(path), metadata={"format": "pt"})

    # A BartModel folder (facebook/bart-large's layout): no prefix, no bias, embedding copies.
    bare = {k.removeprefix("model."): v for k, v in tensors.items() if k != "final_logits_bias"}
    bare["encoder.embed_tokens.weight"] = bare["shared.weight"].copy()
    write(bare)
    _, loaded = load_bart(tmp_path)
    np.testing.assert_array_equal(loaded["final_logits_bias"], np.zeros(100, np.float32))
    np.testing.assert_array_equal(loaded["shared"]["embedding"], np.asarray(params["shared"]["embedding"]))

    missing = "model.decoder.layers.1.encoder_attn.v_proj.bias"
    write({k: v for k, v in tensors.items() if k != missing})
    with pytest.raises(KeyError, match=f"{tmp_path}: tensor '{missing}' is missing"):
        load_bart(tmp_path)
    name = "model.encoder.layers.0.fc1.weight"
    write({**tensors, name: tensors[name].T.copy()})
    with pytest.raises(ValueError, match=r"tensor 'model.encoder.layers.0.fc1.weight' has shape "
                                         r"\(32, 64\), expected \(64, 32\)"):
        load_bart(tmp_path)
    write({**tensors, "model.decoder.layers.3.fc1.bias": np.zeros(48, np.float32)})
    with pytest.raises(ValueError, match="not part of a BART"):
        load_bart(tmp_path)
    write({**tensors, "lm_head.weight": tensors["model.shared.weight"] + 1})
    with pytest.raises(ValueError, match="lm_head.weight differs from model.shared.weight"):
        load_bart(tmp_path)
    write(tensors)
    config = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**config, "normalize_before": True}))
    with pytest.raises(ValueError, match="normalize_before=True is not supported"):
        load_bart(tmp_path)
    with pytest.raises(ValueError, match="BART is an encoder-decoder: pass decoder_input_ids"):
        forward_logits(model, params, _ids(0, (1, 4)))


def test_config_from_hugging_face_fields():
    hf = {"model_type": "bart", "vocab_size": 50265, "d_model": 768, "encoder_layers": 6,
          "decoder_layers": 6, "encoder_attention_heads": 12, "decoder_attention_heads": 12,
          "encoder_ffn_dim": 3072, "decoder_ffn_dim": 3072, "dropout": 0.1,
          "attention_dropout": 0.1, "activation_dropout": 0.1, "scale_embedding": False,
          "forced_bos_token_id": 0, "eos_token_id": 2, "pad_token_id": 1,
          "decoder_start_token_id": 2, "normalize_before": False, "extra_pos_embeddings": 2}
    config = BARTConfig.from_hf_config(hf, dtype="bfloat16")
    assert (config.d_model, config.encoder_layers, config.attention_dropout) == (768, 6, 0.1)
    assert config.dtype == "bfloat16" and config.decoder_start_token_id == 2
    assert config.to_hf_config()["forced_eos_token_id"] is None  # we never force EOS
    with pytest.raises(ValueError, match="not a BART config"):
        BARTConfig.from_hf_config({**hf, "model_type": "mbart"})


def test_adapters_and_modular_are_refused_lora_works(tmp_path):
    with pytest.raises(UsageError, match="K-Adapter is not supported on the BART family"):
        BARTConfig(kadapter=KAdapterConfig())
    with pytest.raises(UsageError, match="Modular is not supported on the BART family"):
        BARTConfig(modular=ModularConfig())
    lora = dataclasses.replace(TINY, lora=LoRAConfig(rank=2, targets=("query", "value")))
    model, params = _init(TINY)
    lora_model, lora_params = _init(lora)
    lora_params = {**lora_params, "final_logits_bias": params["final_logits_bias"]}
    for kind in ("encoder", "decoder"):  # the base weights of the plain model, fresh LoRA
        for name, tree in params[kind].items():
            lora_params[kind][name] = jax.tree.map(lambda x: x, lora_params[kind][name])
            _copy_base(lora_params[kind][name], tree)
    lora_params["shared"] = params["shared"]
    ids, dec = _ids(0, (2, 6)), _ids(1, (2, 5))
    np.testing.assert_allclose(forward_logits(lora_model, lora_params, ids, dec),
                               forward_logits(model, params, ids, dec), atol=1e-5)
    labels = model_for(lora).param_labels(lora_params)
    for path, label in jax.tree_util.tree_leaves_with_path(labels):
        names = path_names(path)
        assert label == (TRAINABLE if names[-1] in ("lora_a", "lora_b") else FROZEN), names
    trained = jax.tree_util.tree_map_with_path(
        lambda p, x: x + 0.1 if path_names(p)[-1] == "lora_b" else x, lora_params)
    save_bart(tmp_path, lora, trained)  # LoRA folds into the kernels
    merged_config, merged = load_bart(tmp_path)
    assert merged_config.lora is None
    np.testing.assert_allclose(forward_logits(BART(merged_config), merged, ids, dec),
                               forward_logits(lora_model, trained, ids, dec), atol=1e-4)


def _copy_base(target: dict, source: dict) -> None:
    for key, value in source.items():
        if isinstance(value, dict):
            _copy_base(target[key], value)
        else:
            target[key] = value


def test_final_logits_bias_is_frozen_whatever_the_method():
    params = nn.unbox(abstract_variables(TINY)["params"])
    labels = model_for(TINY).param_labels(params)
    assert labels["final_logits_bias"] == FROZEN
    assert labels["decoder"]["layer_0"]["fc1"]["kernel"] == TRAINABLE
    count = model_for(TINY).count_params()
    assert count.total - count.trainable == TINY.vocab_size


def test_examples_are_framed_like_bart_pretraining_and_too_long_ones_are_cut_or_refused():
    model = model_for(TINY)
    assert model.answer_text("  Paris,\n France ") == "Paris, France"  # the whole output
    assert model.qa_protocol == "free"
    example = model.sequence_example([5, 6, 7], [1, 0, 1])
    assert example == Seq2SeqExample((0, 2), (0, 5, 6, 7), (0.0, 1.0, 0.0, 1.0))
    long = Seq2SeqExample((0, *range(3, 30), 2), (0, *range(3, 30), 2),
                          (0.0, *[0.0] * 20, *[1.0] * 7, 0.0))
    cut, was_cut = model.truncate_left(long, 24)
    assert was_cut and len(cut.inputs) == len(cut.targets) == 24
    assert cut.inputs[:2] == (0, 8) and cut.targets[-1] == 2 and sum(cut.weights) == 7
    assert model.truncate_left(cut, 24) == (cut, False)
    with pytest.raises(ValueError, match="a scored token lies in the first 5 target tokens"):
        model.truncate_left(Seq2SeqExample(long.inputs, long.targets, (0.0, 1.0, *long.weights[2:])), 24)
    _, params = _init(TINY)
    with pytest.raises(ValueError, match="example 0 has 29 tokens; BART takes at most 24"):
        model.score(params, [long])


def test_flops_follow_the_bart_layout():
    """Forward matmuls (2 FLOPs per weight per position) and attention in closed form."""
    from tw_jax.train.flops import train_step_flops

    batch, n_in, n_out = 2, 16, 8
    flops = train_step_flops(TINY, batch, {"inputs": n_in, "targets": n_out})
    d, v = 32, 100
    encoder = 2 * (4 * d * d + 2 * d * 64) * n_in
    decoder = 3 * ((6 * d * d + 2 * d * 48) * n_out + 2 * d * d * n_in)
    head = v * d * n_out
    assert flops.matmul_forward == 2 * batch * (encoder + decoder + head)
    attention = 2 * n_in * n_in * d + 3 * (n_out * n_out + n_out * n_in) * d
    assert flops.attention_forward == 4 * batch * attention
    assert flops.matmul_backward_weights == flops.matmul_forward  # everything trains
    assert math.isclose(flops.total, 3 * flops.forward)
    assert flops.tokens == batch * (n_in + n_out)


def test_bart_vocabulary_matches_hugging_faces_tokenizer(tmp_path):
    """Our BART vocabulary encodes as Hugging Face's BartTokenizer (without its <s> … </s>)."""
    transformers = pytest.importorskip("transformers")
    from tokenizers import AddedToken

    from tw_jax.data.tokens import encode_with_offsets
    from tw_jax.data.vocab_training import gpt2_byte_to_unicode
    from tw_jax.data.vocabularies import VocabularyFileError, bart_vocabulary

    chars = list(gpt2_byte_to_unicode().values())
    merges = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("i", "n"), ("Ġ", "in")]
    pieces = ["<s>", "<pad>", "</s>", "<unk>", *chars, *(a + b for a, b in merges), "<mask>"]
    (tmp_path / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces)}))
    (tmp_path / "merges.txt").write_text("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges))
    vocab = bart_vocabulary(tmp_path)
    # <mask> with lstrip, as BART's released tokenizer declares it (transformers 5 builds it
    # without lstrip from bare vocab.json + merges.txt, so it is passed here).
    theirs = transformers.BartTokenizer.from_pretrained(
        str(tmp_path), mask_token=AddedToken("<mask>", lstrip=True, special=True, normalized=False))
    assert (vocab.eos_id, vocab.bos_id, vocab.mask_id, vocab.vocab_size) == (2, 0, 265, 266)
    for text in ["the cat sat in <mask> on the mat.", "<mask> began in 2019.",
                 "The entity, founded in the <mask>, Zürich"]:
        ids = vocab.encode(text)
        assert [0, *ids, 2] == theirs(text)["input_ids"], text
        assert encode_with_offsets(vocab, text)[0] == ids
        assert vocab.decode(ids) == text.replace(" <mask>", "").replace("<mask>", "")
    assert vocab.encode("in <mask>") == [vocab.encode("in")[0], 265]  # <mask> takes the space
    (tmp_path / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(pieces[:-1])}))
    with pytest.raises(VocabularyFileError, match="no '<mask>' or '<s>' token"):
        bart_vocabulary(tmp_path)
