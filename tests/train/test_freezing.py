"""Freezing by labels: frozen leaves never move and hold no optimizer state; boxed params too."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tw_jax.train.freezing import (
    FROZEN,
    TRAINABLE,
    freeze,
    labels_from_predicate,
    optimizer_state_bytes,
    parameter_counts,
    path_name,
    trainable_mask,
)


def make_params():
    keys = jax.random.split(jax.random.key(0), 3)
    return {
        "encoder": {"layers_0": {"kernel": jax.random.normal(keys[0], (4, 3)),
                                 "bias": jnp.zeros((3,))}},
        "decoder": {"kernel": jax.random.normal(keys[1], (3, 2))},
        "lm_head": jax.random.normal(keys[2], (2, 5)),
    }


def not_encoder(path: str) -> bool:
    return not path.startswith("encoder/")


def train(tx, params, steps=3):
    state = tx.init(params)

    @jax.jit
    def step(params, state, key):
        grads = jax.tree.map(lambda p: jax.random.normal(key, p.shape), params)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    for key in jax.random.split(jax.random.key(1), steps):
        params, state = step(params, state, key)
    return params, state


def test_labels_from_predicate_uses_slash_paths():
    labels = labels_from_predicate(make_params(), not_encoder)
    assert labels == {
        "encoder": {"layers_0": {"kernel": FROZEN, "bias": FROZEN}},
        "decoder": {"kernel": TRAINABLE},
        "lm_head": TRAINABLE,
    }
    seen = []
    labels_from_predicate(make_params(), lambda path: seen.append(path) or True)
    assert sorted(seen) == ["decoder/kernel", "encoder/layers_0/bias", "encoder/layers_0/kernel",
                            "lm_head"]


def test_path_name_of_lists_and_attributes():
    paths = [path_name(p) for p, _ in jax.tree_util.tree_flatten_with_path({"a": [1, (2, 3)]})[0]]
    assert paths == ["a/0", "a/1/0", "a/1/1"]


def test_frozen_leaves_are_bitwise_unchanged_and_trainable_ones_move():
    params = make_params()
    labels = labels_from_predicate(params, not_encoder)
    new, _ = train(freeze(optax.adamw(1e-2, weight_decay=0.1), labels), params)
    for name in ("kernel", "bias"):
        np.testing.assert_array_equal(new["encoder"]["layers_0"][name],
                                      params["encoder"]["layers_0"][name])
    assert not np.allclose(new["decoder"]["kernel"], params["decoder"]["kernel"])
    assert not np.allclose(new["lm_head"], params["lm_head"])


def test_frozen_leaves_hold_no_state():
    params = make_params()
    labels = labels_from_predicate(params, not_encoder)
    tx = freeze(optax.adam(1e-2), labels)
    trainable = {"decoder": params["decoder"], "lm_head": params["lm_head"]}
    # Adam on the trainable 6 + 10 floats: count (int32) + mu + nu.
    assert optimizer_state_bytes(tx, params) == 4 + 2 * 16 * 4
    assert optimizer_state_bytes(tx, params) == optimizer_state_bytes(optax.adam(1e-2), trainable)
    assert optimizer_state_bytes(optax.adam(1e-2), params) == 4 + 2 * 31 * 4
    _, state = train(tx, params, steps=1)
    mu = optax.tree_utils.tree_get(state, "mu")
    assert isinstance(mu["encoder"]["layers_0"]["kernel"], optax.MaskedNode)
    assert mu["lm_head"].shape == (2, 5)


def test_state_bytes_from_shapes_only():
    params = make_params()
    abstract = jax.tree.map(lambda p: jax.ShapeDtypeStruct(p.shape, jnp.bfloat16), params)
    tx = freeze(optax.adam(1e-2, mu_dtype=jnp.float32), labels_from_predicate(params, not_encoder))
    # mu in float32 as asked, nu in the params' bfloat16.
    assert optimizer_state_bytes(tx, abstract) == 4 + 16 * 4 + 16 * 2


def test_boxed_params_freeze_like_unboxed_ones():
    class Tiny(nn.Module):
        @nn.compact
        def __call__(self, x):
            x = nn.Dense(3, kernel_init=nn.with_logical_partitioning(
                nn.initializers.normal(1.0), ("embed", "mlp")), name="encoder")(x)
            return nn.Dense(2, kernel_init=nn.with_logical_partitioning(
                nn.initializers.normal(1.0), ("mlp", "embed")), name="decoder")(x)

    boxed = Tiny().init(jax.random.key(0), jnp.ones((1, 4)))["params"]
    assert isinstance(boxed["encoder"]["kernel"], nn.Partitioned)
    unboxed = nn.unbox(boxed)
    labels_boxed = labels_from_predicate(boxed, not_encoder)
    assert labels_boxed == labels_from_predicate(unboxed, not_encoder)
    assert labels_boxed["encoder"] == {"kernel": FROZEN, "bias": FROZEN}

    tx = freeze(optax.adam(1e-2), labels_boxed)
    assert optimizer_state_bytes(tx, boxed) == optimizer_state_bytes(tx, unboxed) == 4 + 2 * 8 * 4
    for params in (boxed, unboxed):
        new, _ = train(tx, params)
        new, params = nn.unbox(new), nn.unbox(params)
        np.testing.assert_array_equal(new["encoder"]["kernel"], params["encoder"]["kernel"])
        assert not np.allclose(new["decoder"]["kernel"], params["decoder"]["kernel"])


def test_prefix_labels_freeze_whole_subtrees():
    params = make_params()
    labels = {"encoder": FROZEN, "decoder": TRAINABLE, "lm_head": TRAINABLE}
    tx = freeze(optax.sgd(0.1), labels)
    new, _ = train(tx, params)
    np.testing.assert_array_equal(new["encoder"]["layers_0"]["kernel"],
                                  params["encoder"]["layers_0"]["kernel"])
    assert parameter_counts(params, labels) == (16, 31)


def test_parameter_counts_and_mask():
    params = make_params()
    labels = labels_from_predicate(params, lambda path: path == "lm_head")
    assert parameter_counts(params, labels) == (10, 31)
    abstract = jax.eval_shape(lambda: params)
    assert parameter_counts(abstract, labels) == (10, 31)
    assert trainable_mask(labels)["lm_head"] is True
    assert trainable_mask(labels)["decoder"]["kernel"] is False


def test_unknown_label_is_refused():
    with pytest.raises(ValueError, match="'frozn'"):
        freeze(optax.sgd(0.1), {"a": "frozn"})


def test_labels_that_do_not_match_params_name_the_paths():
    params = make_params()
    labels = labels_from_predicate(params, not_encoder)
    del labels["lm_head"]
    labels["head"] = TRAINABLE
    tx = freeze(optax.sgd(0.1), labels)
    with pytest.raises(ValueError, match=r"labels without params: \['head'\]; "
                                         r"params without labels: \['lm_head'\]"):
        tx.init(params)


def test_tree_map_params_reaches_the_trainable_state():
    # The trainer maps param shardings onto the optimizer state this way; frozen leaves stay empty.
    params = make_params()
    tx = freeze(optax.adam(1e-2), labels_from_predicate(params, not_encoder))
    mapped = optax.tree_map_params(
        tx,
        lambda p: p if isinstance(p, optax.MaskedNode) else p.shape,
        tx.init(params),
        transform_non_params=lambda _: None,
        is_leaf=lambda v: isinstance(v, optax.MaskedNode),
    )
    nu = optax.tree_utils.tree_get(mapped, "nu")
    assert nu["lm_head"] == (2, 5)
    assert isinstance(nu["encoder"]["layers_0"]["bias"], optax.MaskedNode)
