"""The rules table and mesh helpers; sharded init and forward on 8 forced-host CPU devices."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import jax
import pytest
from jax.sharding import PartitionSpec
from xla_flags import forced_devices

from tw_jax.models import abstract_variables
from tw_jax.models.sharding import axis_rules, batch_sharding, make_mesh, mesh_shardings


def test_make_mesh_fills_the_minus_one():
    mesh = make_mesh((-1, 1, 1))
    assert mesh.axis_names == ("data", "fsdp", "model")
    assert mesh.devices.shape == (len(jax.devices()), 1, 1)
    with pytest.raises(ValueError, match="at most one -1"):
        make_mesh((-1, -1, 1))


def test_shardings_follow_the_rules_table(tiny_config):
    shardings = mesh_shardings(abstract_variables(tiny_config), make_mesh((-1, 1, 1)))["params"]
    assert shardings["wte"]["embedding"].spec == PartitionSpec("model", "fsdp")
    assert shardings["h_0"]["attn"]["query"]["kernel"].spec == PartitionSpec("fsdp", "model", None)
    assert shardings["h_0"]["mlp"]["c_proj"]["kernel"].spec == PartitionSpec("model", "fsdp")
    assert shardings["ln_f"]["scale"].spec == PartitionSpec(None)


def test_gin_replaces_the_rules_table(tiny_config):
    import gin

    from tw_jax.runtime import gin_setup

    gin_setup.register_configurables()
    mesh = make_mesh((-1, 1, 1))
    try:
        gin.parse_config("axis_rules.rules = [('batch', ['data', 'fsdp']), ('vocab', None), "
                         "('embed', 'model'), ('mlp', 'fsdp')]")
        assert batch_sharding(mesh, 2).spec == PartitionSpec(("data", "fsdp"), None)
        shardings = mesh_shardings(abstract_variables(tiny_config), mesh)["params"]
        assert shardings["wte"]["embedding"].spec == PartitionSpec(None, "model")
        assert shardings["h_0"]["mlp"]["c_proj"]["kernel"].spec == PartitionSpec("fsdp", "model")
        gin.parse_config("axis_rules.rules = [('batch', 'dta')]")
        with pytest.raises(ValueError, match="'batch' -> 'dta', which is not a mesh axis"):
            axis_rules()
    finally:
        gin.clear_config()
    shardings = mesh_shardings(abstract_variables(tiny_config), mesh)["params"]
    assert shardings["wte"]["embedding"].spec == PartitionSpec("model", "fsdp")  # the default


# Runs in a fresh interpreter: the device count is fixed when jax first initialises its backend.
_EIGHT_DEVICES = textwrap.dedent(
    """
    import flax.linen as nn, jax, jax.numpy as jnp, numpy as np
    from jax.sharding import PartitionSpec
    from tw_jax.models import abstract_variables
    from tw_jax.models.gpt2 import GPT2, GPT2Config
    from tw_jax.models.sharding import activate, batch_sharding, make_mesh, mesh_shardings

    assert len(jax.devices()) == 8
    config = GPT2Config(vocab_size=100, n_positions=64, n_embd=32, n_layer=2, n_head=4,
                        initializer_range=0.2, dropout_rate=0.0)
    model = GPT2(config)
    tokens = jnp.asarray(np.random.RandomState(0).randint(0, 100, (4, 16)), jnp.int32)
    init = lambda rng: model.init(rng, tokens[:1, :8])
    apply = lambda variables, x: model.apply(variables, x)

    one = jax.jit(init)(jax.random.key(0))
    reference = np.asarray(jax.jit(apply)(one, tokens))

    mesh = make_mesh((2, 2, 2))
    shardings = mesh_shardings(abstract_variables(config), mesh)
    with activate(mesh):
        sharded = jax.jit(init, out_shardings=shardings)(jax.random.key(0))
        x = jax.device_put(tokens, batch_sharding(mesh, 2))
        logits = jax.jit(apply)(sharded, x)
    wte = sharded["params"]["wte"]["embedding"].value
    assert wte.sharding.spec == PartitionSpec("model", "fsdp"), wte.sharding
    assert len(wte.addressable_shards) == 8 and wte.addressable_shards[0].data.shape == (50, 16)
    for a, b in zip(jax.tree.leaves(nn.unbox(one)), jax.tree.leaves(nn.unbox(sharded))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    diff = float(np.max(np.abs(np.asarray(logits) - reference)))
    assert diff <= 1e-5, diff
    print("OK", diff)
    """
)


def test_sharded_init_and_forward_on_eight_devices_match_one_device():
    env = dict(os.environ, XLA_FLAGS=forced_devices(8), JAX_PLATFORMS="cpu")
    result = subprocess.run([sys.executable, "-c", _EIGHT_DEVICES], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK" in result.stdout
