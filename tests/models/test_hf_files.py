"""Hugging Face folders whose files are damaged: a ``model.safetensors`` cut short (a copy that
stopped early), a ``config.json`` or shard index that is not JSON. Every family's reader and
``tw-jax`` itself say so in one line naming the file, never with safetensors' or json's
traceback."""

from __future__ import annotations

import json
from pathlib import Path

import flax.linen as nn
import jax
import numpy as np
import pytest

from tw_jax.cli import main
from tw_jax.errors import UsageError
from tw_jax.models import BARTConfig, GPT2Config, T5Config, load_pretrained, model_for
from tw_jax.models.gemma import GemmaConfig
from tw_jax.models.hf_io import UnreadableFileError
from tw_jax.models.llama import LlamaConfig

TINY = {
    "gpt2": GPT2Config(vocab_size=64, n_positions=32, n_embd=16, n_layer=1, n_head=2),
    "t5": T5Config(vocab_size=64, d_model=16, d_kv=8, d_ff=32, num_layers=1, num_heads=2),
    "bart": BARTConfig(vocab_size=64, max_position_embeddings=32, d_model=16, encoder_layers=1,
                       decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                       encoder_ffn_dim=32, decoder_ffn_dim=32),
    "llama": LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=8,
                         rope_scaling=None, max_position_embeddings=64, bos_token_id=1,
                         eos_token_id=2),
    "gemma": GemmaConfig(vocab_size=64, hidden_size=16, intermediate_size=32,
                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                         head_dim=8, query_pre_attn_scalar=8, sliding_window=8,
                         max_position_embeddings=64),
}


def _save(config, folder: Path, max_shard_bytes: int | None = None) -> Path:
    """A Hugging Face folder of ``config`` with random weights (shapes from an abstract
    initialisation: nothing compiled)."""
    shapes = nn.unbox(model_for(config).abstract_variables(1, 8)["params"])
    rng = np.random.default_rng(0)
    params = jax.tree.map(lambda x: rng.standard_normal(x.shape).astype(x.dtype), shapes)
    if max_shard_bytes is None:
        model_for(config).save_hf(str(folder), params)
    else:  # a decoder family's sharded writer: shards and their index
        from tw_jax.models import gemma_io, llama_io
        from tw_jax.models.decoder_io import write_checkpoint

        slots = gemma_io.tensor_slots if isinstance(config, GemmaConfig) else llama_io.tensor_slots
        write_checkpoint(folder, config, params, slots, max_shard_bytes)
    return folder


def _cut(file: Path, keep: float = 0.5) -> None:
    data = file.read_bytes()
    file.write_bytes(data[: int(len(data) * keep)])


def _one_line(error: BaseException, file: Path, *words: str) -> str:
    message = str(error)
    assert "\n" not in message
    assert message.startswith(f"{file}: "), message
    for word in words:
        assert word in message, message
    return message


@pytest.mark.parametrize("family", sorted(TINY))
def test_a_cut_safetensors_file_is_one_line_naming_it(family, tmp_path):
    folder = _save(TINY[family], tmp_path / family)
    load_pretrained(folder)  # whole, it loads
    weights = folder / "model.safetensors"
    for keep in (0.5, 0.999, 0.0):  # mid-data, the last bytes, an empty file
        _cut(weights, keep) if keep else weights.write_bytes(b"")
        with pytest.raises(UnreadableFileError) as error:
            load_pretrained(folder)
        _one_line(error.value, weights, "not a readable safetensors file", "cut short")
        folder = _save(TINY[family], tmp_path / f"{family}-{keep}")
        weights = folder / "model.safetensors"


@pytest.mark.parametrize("family", sorted(TINY))
def test_a_config_json_that_is_not_json_is_one_line_naming_it(family, tmp_path):
    folder = _save(TINY[family], tmp_path / family)
    config = folder / "config.json"
    _cut(config)
    with pytest.raises(UnreadableFileError) as error:
        load_pretrained(folder)
    _one_line(error.value, config, "not JSON at line ", "column ", "cut short")
    config.write_text("[1, 2]")
    with pytest.raises(UnreadableFileError, match="holds a JSON list, not an object"):
        load_pretrained(folder)
    config.write_bytes(b"\xff\xfe{")
    with pytest.raises(UnreadableFileError, match="not UTF-8 text at byte 0"):
        load_pretrained(folder)


@pytest.mark.parametrize("family", ["gpt2", "llama"])  # both readers of sharded folders
def test_a_cut_shard_or_index_is_one_line_naming_it(family, tmp_path):
    if family == "gpt2":
        from tw_jax.models.hf_io import save_gpt2

        shapes = nn.unbox(model_for(TINY[family]).abstract_variables(1, 8)["params"])
        params = jax.tree.map(lambda x: np.ones(x.shape, x.dtype), shapes)
        folder = tmp_path / family
        save_gpt2(folder, TINY[family], params, max_shard_bytes=4_000)
    else:
        folder = _save(TINY[family], tmp_path / family, max_shard_bytes=4_000)
    index = folder / "model.safetensors.index.json"
    shards = sorted(json.loads(index.read_text())["weight_map"].values())
    assert len(set(shards)) > 1
    last = folder / shards[-1]
    _cut(last)
    with pytest.raises(UnreadableFileError) as error:
        load_pretrained(folder)
    _one_line(error.value, last, "not a readable safetensors file")
    _cut(index)
    with pytest.raises(UnreadableFileError) as error:
        load_pretrained(folder)
    _one_line(error.value, index, "not JSON at line ")
    index.write_text("{}")
    with pytest.raises(UnreadableFileError, match='has no "weight_map" object'):
        load_pretrained(folder)


def test_tw_jax_says_it_in_one_line_for_a_transformers_folder(tmp_path, capsys):
    """A GPT-2 that transformers saved (save_pretrained, safetensors), cut short, read by a
    command (``t5x-checkpoint to-t5x`` reads a Hugging Face folder whole): exit 2, one line
    naming the file, nothing written."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    torch.manual_seed(0)
    hf_config = transformers.GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64,
                                        n_positions=32, bos_token_id=0, eos_token_id=0)
    folder = tmp_path / "gpt2"
    transformers.GPT2LMHeadModel(hf_config).save_pretrained(folder, safe_serialization=True)
    weights, config = folder / "model.safetensors", folder / "config.json"
    load_pretrained(folder)
    _cut(weights)
    argv = ["t5x-checkpoint", "to-t5x", "--from", str(folder), "--out", str(tmp_path / "t5x")]
    capsys.readouterr()
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert err[0].startswith(f"tw-jax t5x-checkpoint: error: {weights}: not a readable "
                             "safetensors file ("), err[0]
    assert not (tmp_path / "t5x").exists()
    config.write_text(config.read_text()[:40])
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(
        f"tw-jax t5x-checkpoint: error: {config}: not JSON at line "), err


def test_the_error_is_a_usage_error_and_a_value_error():
    """The CLI prints a UsageError as one line; callers that caught the loaders' ValueErrors
    keep catching this one."""
    assert issubclass(UnreadableFileError, UsageError)
    assert issubclass(UnreadableFileError, ValueError)
