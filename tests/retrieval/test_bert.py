"""The BERT encoder, its Hugging Face tensor mapping and the WordPiece tokenizer, without PyTorch
(Hugging Face parity is in test_dpr_parity.py)."""

from __future__ import annotations

import functools
import json
import logging

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import PartitionSpec

from tw_jax.models.hf_io import write_folder
from tw_jax.models.sharding import make_mesh, mesh_shardings
from tw_jax.retrieval.bert import BertConfig, BertEncoder, init_params
from tw_jax.retrieval.bert_io import (
    WordPieceTokenizer,
    bert_params_from_hf,
    bert_params_to_hf,
    load_bert_encoder,
    save_bert_encoder,
)

VOCAB = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "the", "capital", "of", "france", "is",
         "paris", "##s", "river", "?"]
TINY = BertConfig(vocab_size=len(VOCAB), hidden_size=16, num_hidden_layers=2,
                  num_attention_heads=4, intermediate_size=24, max_position_embeddings=20,
                  initializer_range=0.2, dropout_rate=0.0, attention_dropout=0.0)


def _forward(config: BertConfig, params, ids, mask=None, types=None, sequence=False) -> np.ndarray:
    apply = _jitted_apply(config)
    return np.asarray(apply({"params": params}, jnp.asarray(ids), mask, types, sequence=sequence))


@functools.cache
def _jitted_apply(config: BertConfig):
    """One jitted forward pass per configuration: a new ``jax.jit`` per call misses jit's cache
    and traces and compiles again."""
    return jax.jit(BertEncoder(config).apply, static_argnames="sequence")


def test_config_reads_dpr_and_bert_configs_and_refuses_other_models():
    dpr = BertConfig.from_hf_config({"model_type": "dpr", "hidden_size": 16, "num_attention_heads": 2,
                                     "projection_dim": 8, "hidden_dropout_prob": 0.0})
    assert (dpr.projection_dim, dpr.embedding_dim, dpr.dropout_rate) == (8, 8, 0.0)
    assert dpr.layer_norm_eps == 1e-12 and dpr.hidden_act == "gelu"
    bert = BertConfig.from_hf_config({"model_type": "bert", "projection_dim": 8})
    assert bert.projection_dim == 0 and bert.embedding_dim == 768  # BertModel has no encode_proj
    with pytest.raises(ValueError, match="not a BERT or DPR config: model_type='gpt2'"):
        BertConfig.from_hf_config({"model_type": "gpt2"})
    with pytest.raises(ValueError, match="position_embedding_type='relative_key'"):
        BertConfig.from_hf_config({"model_type": "bert", "position_embedding_type": "relative_key"})
    with pytest.raises(ValueError, match="hidden_size=10 is not a positive multiple"):
        BertConfig(hidden_size=10, num_attention_heads=4)
    assert BertConfig.from_hf_config(TINY.to_hf_config("DPRContextEncoder")) == TINY


def test_embedding_is_the_cls_state_unchanged_by_padding_and_projected_when_asked():
    params = init_params(TINY, seed=0)
    ids = np.asarray([[2, 10, 9, 5, 6, 7, 8, 3]])
    out = _forward(TINY, params, ids)
    sequence = _forward(TINY, params, ids, sequence=True)
    assert out.shape == (1, 16) and out.dtype == np.float32
    np.testing.assert_array_equal(out, sequence[:, 0])
    padded = np.concatenate([ids, np.zeros((1, 5), int)], axis=1)
    mask = (padded != 0).astype(np.int32)
    np.testing.assert_allclose(_forward(TINY, params, padded, mask), out, atol=1e-6)
    # Without the mask the pads are attended to, and the embedding moves.
    assert np.abs(_forward(TINY, params, padded) - out).max() > 1e-3
    # Segment ids enter through their own embedding.
    assert np.abs(_forward(TINY, params, ids, types=np.ones_like(ids)) - out).max() > 1e-3

    projected = BertConfig(**{**TINY.__dict__, "projection_dim": 6})
    proj_params = init_params(projected, seed=0)
    assert proj_params["encode_proj"]["kernel"].shape == (16, 6)
    cls = _forward(projected, proj_params, ids, sequence=True)[:, 0]
    kernel, bias = proj_params["encode_proj"]["kernel"], proj_params["encode_proj"]["bias"]
    np.testing.assert_allclose(_forward(projected, proj_params, ids), cls @ kernel + bias,
                               atol=1e-5)
    with pytest.raises(ValueError, match="at most max_position_embeddings=20 positions, got 21"):
        _forward(TINY, params, np.zeros((1, 21), int))


def test_bfloat16_compute_stays_close_and_returns_float32():
    params = init_params(TINY, seed=0)
    ids = np.asarray([[2, 10, 9, 5, 6, 7, 8, 3]])
    half = _forward(BertConfig(**{**TINY.__dict__, "dtype": "bfloat16"}), params, ids)
    assert half.dtype == np.float32
    assert np.abs(half - _forward(TINY, params, ids)).max() < 0.1


def test_parameters_carry_logical_axes_for_the_sharding_rules():
    model = BertEncoder(TINY)
    abstract = jax.eval_shape(model.init, jax.random.key(0), jnp.zeros((1, 2), jnp.int32))
    specs = nn.get_partition_spec(abstract)["params"]
    assert specs["word_embeddings"]["embedding"] == PartitionSpec("vocab", "embed")
    assert specs["layer_0"]["attention"]["query"]["kernel"] == PartitionSpec("embed", "heads", "kv")
    assert specs["layer_1"]["output"]["kernel"] == PartitionSpec("mlp", "embed")
    shardings = mesh_shardings(abstract, make_mesh())["params"]
    assert shardings["layer_0"]["intermediate"]["kernel"].spec == PartitionSpec("fsdp", "model")


@pytest.mark.parametrize("role", ["question", "ctx", "bert"])
def test_hugging_face_tensors_round_trip_bit_for_bit(role):
    config = TINY if role == "bert" else BertConfig(**{**TINY.__dict__, "projection_dim": 6})
    params = init_params(config, seed=3)
    tensors = bert_params_to_hf(params, config, role)
    prefix = {"question": "question_encoder.bert_model.", "ctx": "ctx_encoder.bert_model.",
              "bert": ""}[role]
    assert tensors[f"{prefix}encoder.layer.1.attention.self.key.weight"].shape == (16, 16)
    assert tensors[f"{prefix}encoder.layer.0.intermediate.dense.weight"].shape == (24, 16)
    back, found = bert_params_from_hf(tensors, config, "folder", None)
    assert found == role
    for a, b in zip(jax.tree.leaves(params), jax.tree.leaves(back), strict=True):
        np.testing.assert_array_equal(np.asarray(a), b)
    assert jax.tree.structure(params) == jax.tree.structure(back)


def test_import_skips_pooler_heads_and_buffers_and_reads_old_layer_norm_names(caplog):
    params = init_params(TINY, seed=1)
    tensors = {f"bert.{k}": v for k, v in bert_params_to_hf(params, TINY, "bert").items()}
    for name in [n for n in tensors if n.endswith("LayerNorm.weight")]:
        tensors[name.replace(".weight", ".gamma")] = tensors.pop(name)
        tensors[name.replace(".weight", ".beta")] = tensors.pop(name.replace(".weight", ".bias"))
    tensors["bert.pooler.dense.weight"] = np.zeros((16, 16), np.float32)
    tensors["cls.predictions.bias"] = np.zeros((len(VOCAB),), np.float32)
    tensors["bert.embeddings.position_ids"] = np.arange(20)[None]
    with caplog.at_level(logging.INFO):
        back, role = bert_params_from_hf(tensors, TINY, "old/bert-base-uncased")
    assert role == "bert"
    assert "3 tensors an encoder does not use" in caplog.text
    np.testing.assert_array_equal(back["layer_1"]["output_norm"]["scale"],
                                  params["layer_1"]["output_norm"]["scale"])


def test_import_errors_name_the_folder_and_the_tensor(tmp_path):
    params = init_params(TINY, seed=1)
    tensors = bert_params_to_hf(params, TINY, "question")
    name = "question_encoder.bert_model.encoder.layer.1.output.dense.bias"
    with pytest.raises(KeyError, match=f"dpr_q: tensor '{name}' is missing"):
        bert_params_from_hf({k: v for k, v in tensors.items() if k != name}, TINY, "dpr_q")
    wrong = {**tensors, name: np.zeros((3,), np.float32)}
    with pytest.raises(ValueError, match=rf"dpr_q: tensor '{name}' has shape \(3,\), expected \(16,\)"):
        bert_params_from_hf(wrong, TINY, "dpr_q")
    extra = {**tensors, "question_encoder.encode_proj.weight": np.zeros((6, 16), np.float32)}
    with pytest.raises(ValueError, match="not part of a BERT encoder.*projection_dim 0"):
        bert_params_from_hf(extra, TINY, "dpr_q")
    with pytest.raises(ValueError, match="dpr_q: no 'ctx' encoder in this folder"):
        bert_params_from_hf(tensors, TINY, "dpr_q", "ctx")
    with pytest.raises(ValueError, match="a DPRReader checkpoint"):
        bert_params_from_hf({"span_predictor.qa_outputs.weight": np.zeros(2)}, TINY, "reader")

    folder = tmp_path / "encoder"
    save_bert_encoder(folder, TINY, params, "ctx", WordPieceTokenizer.from_vocab(VOCAB))
    config, loaded, role = load_bert_encoder(folder)
    assert (config, role) == (TINY, "ctx")
    np.testing.assert_array_equal(loaded["word_embeddings"]["embedding"],
                                  params["word_embeddings"]["embedding"])
    hf_config = json.loads((folder / "config.json").read_text())
    assert hf_config["architectures"] == ["DPRContextEncoder"] and hf_config["projection_dim"] == 0
    write_folder(tmp_path / "gpt", {"model_type": "gpt2"}, {"x": np.zeros(1, np.float32)})
    with pytest.raises(ValueError, match="not a BERT or DPR config"):
        load_bert_encoder(tmp_path / "gpt")


@pytest.fixture
def vocab_folder(tmp_path):
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "vocab.txt").write_text("".join(f"{t}\n" for t in VOCAB), encoding="utf-8")
    return folder


def test_tokenizer_encodes_questions_and_titled_passages_as_dpr(vocab_folder):
    tokenizer = WordPieceTokenizer.from_folder(vocab_folder, max_length=8)
    question = tokenizer.encode(["  Paris is the capital of France? "])
    assert question.ids == [[2, 10, 9, 5, 6, 7, 8, 3]]  # "?" cut at 8 tokens, [SEP] kept last
    full = WordPieceTokenizer.from_folder(vocab_folder, max_length=32)
    assert full.encode(["Rivers of XYZ"]).ids == [[2, 12, 11, 7, 1, 3]]
    # "[CLS] title [SEP] text [SEP]", segment 1 on the text; longest first: the text is cut.
    passage = tokenizer.encode(["Paris is the capital of rivers XYZ?"], ["Paris"])
    assert passage.ids == [[2, 10, 3, 10, 9, 5, 6, 3]]
    assert passage.type_ids == [[0, 0, 0, 1, 1, 1, 1, 1]]
    untitled = full.encode(["the river"], [""])  # no title: the text alone, as DPR's `if title:`
    assert untitled.ids == [[2, 5, 12, 3]] and untitled.type_ids == [[0, 0, 0, 0]]
    with pytest.raises(ValueError, match="1 titles for 2 texts"):
        full.encode(["a", "b"], ["t"])


def test_tokenizer_reads_config_and_round_trips_through_tokenizer_json(vocab_folder, tmp_path):
    (vocab_folder / "tokenizer_config.json").write_text('{"do_lower_case": false}')
    cased = WordPieceTokenizer.from_folder(vocab_folder, max_length=16)
    assert cased.encode(["Paris paris"]).ids == [[2, 1, 10, 3]]
    saved = tmp_path / "saved"
    cased.save(saved)
    again = WordPieceTokenizer.from_folder(saved, max_length=16)  # from tokenizer.json now
    assert again.encode(["Paris paris"]).ids == [[2, 1, 10, 3]]
    assert (saved / "vocab.txt").read_text().split("\n")[:3] == ["[PAD]", "[UNK]", "[CLS]"]


def test_tokenizer_errors_name_the_file(tmp_path, vocab_folder):
    with pytest.raises(FileNotFoundError, match="no tokenizer.json or vocab.txt in .*empty"):
        WordPieceTokenizer.from_folder(tmp_path / "empty")
    (vocab_folder / "vocab.txt").write_text("[PAD]\n[UNK]\n[SEP]\nthe\n")
    with pytest.raises(ValueError, match=r"tok/vocab.txt: the vocabulary has no \[CLS\] token"):
        WordPieceTokenizer.from_folder(vocab_folder)
    (vocab_folder / "tokenizer.json").write_text("{not json")
    with pytest.raises(ValueError, match="tokenizer.json: not a tokenizers file"):
        WordPieceTokenizer.from_folder(vocab_folder)
