"""Hugging Face folders in a bucket (the local GCS server): export there, load back exactly, the
same bytes as a local export, and folders uploaded by someone else load too."""

from __future__ import annotations

import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gcs_upload import upload_tree

from tw_jax.io import paths
from tw_jax.models import T5, T5Config, forward_logits, load_pretrained
from tw_jax.models.hf_io import load_gpt2, save_gpt2
from tw_jax.models.t5_io import load_t5, save_t5

T5_TINY = T5Config(vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4,
                   relative_attention_num_buckets=8, relative_attention_max_distance=20,
                   dropout_rate=0.0, feed_forward_proj="gated-gelu", tie_word_embeddings=False)


def _assert_trees_equal(a, b) -> None:
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True):
        assert np.asarray(x).dtype == np.asarray(y).dtype
        np.testing.assert_array_equal(np.asarray(x), np.asarray(y))


def _objects(gcs_server, url: str) -> list[str]:
    bucket, prefix = url[len("gs://"):].split("/", 1)
    return [name[len(prefix) + 1:] for name in gcs_server.objects(bucket, prefix + "/")]


@pytest.fixture(scope="module")
def t5_model() -> tuple[T5, dict]:
    import flax.linen as nn

    model = T5(T5_TINY)
    dummy = jnp.zeros((1, 8), jnp.int32)
    return model, nn.unbox(jax.jit(model.init)(jax.random.key(3), dummy, dummy)["params"])


def test_gpt2_export_to_a_bucket_loads_back_exactly(gcs_bucket, gcs_server, tmp_path,
                                                     tiny_config, tiny_model):
    model, params = tiny_model
    url = f"{gcs_bucket}/hf/gpt2"
    save_gpt2(url, tiny_config, params)
    save_gpt2(tmp_path / "gpt2", tiny_config, params)
    assert _objects(gcs_server, url) == ["config.json", "model.safetensors"]  # no temporaries
    for name in ("config.json", "model.safetensors"):
        assert paths.read_bytes(f"{url}/{name}") == (tmp_path / "gpt2" / name).read_bytes()
    config, loaded = load_gpt2(url)
    assert config == tiny_config
    _assert_trees_equal(loaded, params)
    loaded_model, again = load_pretrained(url + "/")
    ids = np.arange(12)[None] % 100
    np.testing.assert_array_equal(forward_logits(loaded_model, again, ids),
                                  forward_logits(model, params, ids))


def test_t5_sharded_export_to_a_bucket_loads_back_exactly(gcs_bucket, gcs_server, tmp_path,
                                                          t5_model):
    model, params = t5_model
    url = f"{gcs_bucket}/hf/t5"
    save_t5(url, T5_TINY, params, max_shard_bytes=20_000)
    save_t5(tmp_path / "t5", T5_TINY, params, max_shard_bytes=20_000)
    names = _objects(gcs_server, url)
    local_names = sorted(p.name for p in (tmp_path / "t5").iterdir())
    assert names == local_names and "model.safetensors.index.json" in names
    assert len([n for n in names if n.startswith("model-0")]) > 1
    for name in names:
        assert paths.read_bytes(f"{url}/{name}") == (tmp_path / "t5" / name).read_bytes(), name
    config, loaded = load_t5(url)
    assert config == T5_TINY
    _assert_trees_equal(loaded, params)
    loaded_model, again = load_pretrained(url)
    ids, dec = np.arange(2, 12)[None], np.arange(3, 7)[None]
    np.testing.assert_array_equal(forward_logits(loaded_model, again, ids, dec),
                                  forward_logits(model, params, ids, dec))


def test_a_folder_uploaded_to_a_bucket_loads(gcs_bucket, tmp_path, tiny_config, tiny_model,
                                             t5_model):
    _, gpt2_params = tiny_model
    save_gpt2(tmp_path / "gpt2", tiny_config, gpt2_params)
    save_t5(tmp_path / "t5", T5_TINY, t5_model[1])
    assert upload_tree(tmp_path / "gpt2", f"{gcs_bucket}/up/gpt2") == ["config.json",
                                                                       "model.safetensors"]
    upload_tree(tmp_path / "t5", f"{gcs_bucket}/up/t5")
    _assert_trees_equal(load_pretrained(f"{gcs_bucket}/up/gpt2")[1],
                        load_pretrained(tmp_path / "gpt2")[1])
    _assert_trees_equal(load_t5(f"{gcs_bucket}/up/t5")[1], t5_model[1])


def test_missing_files_in_a_bucket_are_clear_errors(gcs_bucket, tiny_config, tiny_model):
    with pytest.raises(FileNotFoundError, match=f"no config.json in {gcs_bucket}/nothing$"):
        load_pretrained(f"{gcs_bucket}/nothing")
    url = f"{gcs_bucket}/bert"
    paths.write_text(f"{url}/config.json", json.dumps({"model_type": "bert"}))
    with pytest.raises(ValueError, match=f"^{url}/config.json: model_type 'bert'"):
        load_pretrained(url)
    save_gpt2(f"{gcs_bucket}/m", tiny_config, tiny_model[1])
    paths.remove(f"{gcs_bucket}/m/model.safetensors")
    with pytest.raises(FileNotFoundError, match=f"no model.safetensors .* in {gcs_bucket}/m "):
        load_pretrained(f"{gcs_bucket}/m")
