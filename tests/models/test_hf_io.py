"""Export and import of Hugging Face GPT-2 folders without PyTorch: exact both ways."""

from __future__ import annotations

import json

import jax
import numpy as np
import pytest
from safetensors.numpy import load_file

from tw_jax.models import forward_logits, load_pretrained
from tw_jax.models.hf_io import load_gpt2, save_gpt2


def _assert_trees_equal(a, b) -> None:
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def test_export_import_round_trip_is_exact(tmp_path, tiny_config, tiny_model):
    _, params = tiny_model
    save_gpt2(tmp_path / "a", tiny_config, params)
    config, loaded = load_gpt2(tmp_path / "a")
    assert config == tiny_config
    _assert_trees_equal(loaded, params)
    save_gpt2(tmp_path / "b", config, loaded)
    for name in ("model.safetensors", "config.json"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    tensors = load_file(tmp_path / "a" / "model.safetensors")
    assert tensors["transformer.h.0.attn.c_attn.weight"].shape == (32, 96)  # Conv1D (in, out)
    assert "lm_head.weight" not in tensors  # tied


def test_sharded_export_loads_the_same(tmp_path, tiny_config, tiny_model):
    model, params = tiny_model
    save_gpt2(tmp_path, tiny_config, params, max_shard_bytes=20_000)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) > 1
    assert not (tmp_path / "model.safetensors").exists()
    loaded_model, loaded = load_pretrained(tmp_path)
    _assert_trees_equal(loaded, params)
    ids = np.arange(12)[None] % 100
    np.testing.assert_array_equal(
        forward_logits(loaded_model, loaded, ids), forward_logits(model, params, ids)
    )


def test_clear_errors(tmp_path, tiny_config, tiny_model):
    _, params = tiny_model
    (tmp_path / "bert").mkdir()
    (tmp_path / "bert" / "config.json").write_text(json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError, match=r"bert[/\\]config\.json.*'bert'"):
        load_pretrained(tmp_path / "bert")
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_pretrained(tmp_path / "nowhere")
    save_gpt2(tmp_path / "m", tiny_config, params)
    (tmp_path / "m" / "model.safetensors").unlink()
    with pytest.raises(FileNotFoundError, match="model.safetensors"):
        load_pretrained(tmp_path / "m")


def test_a_tensor_stored_transposed_or_as_integers_is_refused(tmp_path, tiny_config, tiny_model):
    """Same element count, other layout: refused by shape, naming the tensor (never reshaped)."""
    from safetensors.numpy import save_file

    _, params = tiny_model
    save_gpt2(tmp_path / "m", tiny_config, params)
    weights = tmp_path / "m" / "model.safetensors"
    tensors = load_file(weights)
    name = next(n for n in tensors if n.endswith("h.0.mlp.c_fc.weight"))
    e, mlp = tensors[name].shape
    assert e != mlp  # a square matrix transposed cannot be told by its shape
    save_file({**tensors, name: np.ascontiguousarray(tensors[name].T)}, weights)
    with pytest.raises(ValueError, match=rf"tensor 'h\.0\.mlp\.c_fc\.weight' has shape "
                                         rf"\({mlp}, {e}\), expected \({e}, {mlp}\)"):
        load_gpt2(tmp_path / "m")
    save_file({**tensors, name: tensors[name].astype(np.int32)}, weights)
    with pytest.raises(ValueError, match=r"'h\.0\.mlp\.c_fc\.weight' has dtype int32, expected a float"):
        load_gpt2(tmp_path / "m")
