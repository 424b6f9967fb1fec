"""The optimizer configs: accumulation, clipping, Adafactor's T5 settings by hand, freezing inside."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tw_jax.train.freezing import labels_from_predicate, optimizer_state_bytes
from tw_jax.train.optimizers import (
    AdafactorConfig,
    AdamWConfig,
    RecAdamConfig,
    SGDConfig,
    matrix_shape,
)


def regression_problem(batch: int):
    keys = jax.random.split(jax.random.key(0), 4)
    params = {"w": jax.random.normal(keys[0], (3, 2)), "b": jax.random.normal(keys[1], (2,))}
    x = jax.random.normal(keys[2], (batch, 3))
    y = jax.random.normal(keys[3], (batch, 2))
    return params, x, y


def loss(params, x, y):
    return jnp.mean(jnp.sum((x @ params["w"] + params["b"] - y) ** 2, axis=-1))


def run(tx, params, batches):
    """Apply one ``tx.update`` per batch; return params after every call."""
    state = tx.init(params)

    @jax.jit
    def step(params, state, x, y):
        grads = jax.grad(loss)(params, x, y)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    history = []
    for x, y in batches:
        params, state = step(params, state, x, y)
        history.append(params)
    return history


OPTIONS = {
    "sgd": SGDConfig(),
    "adamw": AdamWConfig(weight_decay=0.0),
    "recadam": RecAdamConfig(gamma=50.0, k=1.0, t0=1.0),
    "adafactor": AdafactorConfig(min_dim_size_to_factor=2),
}


@pytest.mark.parametrize("name", sorted(OPTIONS))
def test_k_microbatches_equal_one_batch_of_k_times_the_size(name):
    k, micro = 4, 3
    params, x, y = regression_problem(2 * k * micro)
    full = OPTIONS[name](1e-2)
    accumulated = OPTIONS[name](1e-2, accumulate_steps=k)

    big = [(x[i * k * micro:(i + 1) * k * micro], y[i * k * micro:(i + 1) * k * micro])
           for i in range(2)]
    small = [(x[i * micro:(i + 1) * micro], y[i * micro:(i + 1) * micro]) for i in range(2 * k)]
    reference = run(full, params, big)
    history = run(accumulated, params, small)

    for update in range(2):
        before = params if update == 0 else reference[update - 1]
        for micro_step in range(k - 1):  # nothing moves until the k-th microbatch
            current = history[update * k + micro_step]
            for leaf, expected in zip(jax.tree.leaves(current), jax.tree.leaves(before),
                                      strict=True):
                np.testing.assert_array_equal(leaf, expected)
        after = history[update * k + k - 1]
        for leaf, expected in zip(jax.tree.leaves(after), jax.tree.leaves(reference[update]),
                                  strict=True):
            np.testing.assert_allclose(leaf, expected, rtol=1e-5, atol=1e-6)
        assert not np.allclose(after["w"], before["w"])


def test_clipping_uses_the_global_norm_of_trainable_leaves_only():
    params = {"a": jnp.zeros(2), "frozen": jnp.zeros(3)}
    labels = labels_from_predicate(params, lambda path: path == "a")
    tx = SGDConfig(clip_norm=1.0)(1.0, labels=labels)
    grads = {"a": jnp.array([3.0, 4.0]), "frozen": jnp.full(3, 100.0)}
    updates, _ = tx.update(grads, tx.init(params), params)
    np.testing.assert_allclose(updates["a"], [-0.6, -0.8], rtol=1e-6)
    np.testing.assert_array_equal(updates["frozen"], np.zeros(3))
    small, _ = tx.update({"a": jnp.array([0.3, 0.4]), "frozen": jnp.zeros(3)},
                         tx.init(params), params)
    np.testing.assert_allclose(small["a"], [-0.3, -0.4], rtol=1e-6)


def adafactor_by_hand(params, grads_list, lr, decay=0.8, threshold=1.0, eps=1e-30, min_scale=1e-3):
    """T5's Adafactor in float64: factored v for matrices, update clipping, parameter scale."""
    params = {name: np.asarray(value, np.float64) for name, value in params.items()}
    v = {}
    for step, grads in enumerate(grads_list, start=1):
        beta2 = 1.0 - step**-decay
        for name, p in params.items():
            g2 = np.asarray(grads[name], np.float64) ** 2 + eps
            if p.ndim == 2:
                rows, cols = g2.mean(axis=1), g2.mean(axis=0)
                old_rows, old_cols = v.get(name, (0.0, 0.0))
                rows = beta2 * old_rows + (1 - beta2) * rows
                cols = beta2 * old_cols + (1 - beta2) * cols
                v[name] = (rows, cols)
                v_hat = np.outer(rows, cols) / rows.mean()
            else:
                v[name] = beta2 * v.get(name, 0.0) + (1 - beta2) * g2
                v_hat = v[name]
            u = grads[name] / np.sqrt(v_hat)
            u = u / max(1.0, np.sqrt(np.mean(u**2)) / threshold)
            scale = max(np.sqrt(np.mean(p**2)), min_scale)
            params[name] = p - lr * scale * u
    return params


def test_adafactor_t5_settings_by_hand():
    params = {"w": jnp.array([[0.5, -1.0, 0.2], [2.0, 0.25, -0.4], [0.1, 0.3, 0.9],
                              [-0.6, 0.0, 1.2]]),
              "b": jnp.zeros(3)}  # RMS 0: its steps use the 1e-3 floor
    grads = [
        {"w": jnp.array([[0.2, -0.1, 0.0], [0.05, 0.4, -0.3], [1.0, 0.1, 0.1],
                         [-0.2, 0.2, 0.6]]), "b": jnp.array([0.3, -0.1, 0.2])},
        {"w": jnp.array([[-0.1, 0.3, 0.2], [0.2, -0.05, 0.1], [0.4, 0.4, -0.4],
                         [0.0, 0.1, 0.1]]), "b": jnp.array([3.0, 0.1, -0.2])},
    ]
    tx = AdafactorConfig(min_dim_size_to_factor=2)(0.5)
    state = tx.init(params)
    current = params
    for g in grads:
        updates, state = jax.jit(tx.update)(g, state, current)
        current = optax.apply_updates(current, updates)
    expected = adafactor_by_hand(params, grads, lr=0.5)
    for name in params:
        np.testing.assert_allclose(current[name], expected[name], rtol=1e-5, atol=1e-7)


def test_adafactor_factors_large_matrices_only_and_keeps_no_momentum():
    params = {"big": jax.ShapeDtypeStruct((256, 130), jnp.float32),
              "small": jax.ShapeDtypeStruct((3, 5), jnp.float32)}
    tx = AdafactorConfig()(1e-3)
    state = jax.eval_shape(tx.init, params)
    rows = optax.tree_utils.tree_get(state, "v_row")
    cols = optax.tree_utils.tree_get(state, "v_col")
    full = optax.tree_utils.tree_get(state, "v")
    assert rows["big"].shape == (130,) and cols["big"].shape == (256,)
    assert full["big"].shape == (1,)
    assert full["small"].shape == (3, 5)
    # count + factored big (130 + 256 + 1) + small (1 + 1 + 15), all float32; nothing else.
    assert optimizer_state_bytes(tx, params) == 4 + 4 * (130 + 256 + 1) + 4 * (1 + 1 + 15)


def test_matrix_shape_matches_mesh_tf_kernels():
    assert matrix_shape((1024, 16, 64)) == (1024, 1024)  # (embed, heads, kv) → (d_model, h·d_kv)
    assert matrix_shape((16, 64, 1024)) == (1024, 1024)  # (heads, kv, embed) → (h·d_kv, d_model)
    assert matrix_shape((2, 3, 4, 5)) == (6, 20)
    assert matrix_shape((1024, 4096)) is None
    assert matrix_shape((7,)) is None


def test_adafactor_factors_attention_kernels_as_t5_matrices():
    params = {"query": jnp.reshape(jnp.arange(16.0) / 7 - 1, (4, 2, 2)),
              "out": jnp.reshape(jnp.arange(16.0) / 5 - 1.5, (2, 2, 4))}
    grads = [jax.tree.map(lambda p, s=s: jnp.sin(s * p + 0.3), params) for s in (1.0, 2.5)]
    tx = AdafactorConfig(min_dim_size_to_factor=2)(0.5)
    state = tx.init(params)
    assert optax.tree_utils.tree_get(state, "v_row")["query"].shape == (4,)
    current = params
    for g in grads:
        updates, state = jax.jit(tx.update)(g, state, current)
        assert updates["query"].shape == (4, 2, 2)
        current = optax.apply_updates(current, updates)
    as_2d = {name: np.reshape(value, (4, 4)) for name, value in params.items()}
    grads_2d = [{name: np.reshape(value, (4, 4)) for name, value in g.items()} for g in grads]
    expected = adafactor_by_hand(as_2d, grads_2d, lr=0.5)
    for name in params:
        np.testing.assert_allclose(np.reshape(current[name], (4, 4)), expected[name], rtol=1e-5,
                                   atol=1e-7)


def test_t5_large_attention_kernel_state_is_two_vectors():
    kernel = {"query": jax.ShapeDtypeStruct((1024, 16, 64), jnp.float32)}
    factored = AdafactorConfig()(1e-3)
    # count + v_row (1024) + v_col (1024) + the unused 1-element v, in float32.
    assert optimizer_state_bytes(factored, kernel) == 4 + 4 * (1024 + 1024 + 1)
    per_axis = AdafactorConfig(as_matrices=False)(1e-3)
    assert optimizer_state_bytes(per_axis, kernel) == 4 + 4 * (2 + 1024 * 16 * 64)


def test_weight_decay_semantics():
    params = {"w": jnp.full((2, 2), 2.0)}
    zero = {"w": jnp.zeros((2, 2))}
    adamw = AdamWConfig(weight_decay=0.5)(0.1)
    updates, _ = adamw.update(zero, adamw.init(params), params)
    np.testing.assert_allclose(updates["w"], -0.1 * 0.5 * 2.0, rtol=1e-6)  # times the LR
    adafactor = AdafactorConfig(weight_decay=0.5)(0.1)
    updates, _ = adafactor.update(zero, adafactor.init(params), params)
    np.testing.assert_allclose(updates["w"], -0.5 * 2.0, rtol=1e-6)  # not times the LR


def test_accumulator_and_state_exist_for_trainable_leaves_only():
    params, _, _ = regression_problem(1)
    labels = labels_from_predicate(params, lambda path: path == "b")
    frozen_w = AdamWConfig()(1e-3, accumulate_steps=4, labels=labels)
    only_b = AdamWConfig()(1e-3, accumulate_steps=4)
    assert optimizer_state_bytes(frozen_w, params) == optimizer_state_bytes(
        only_b, {"b": params["b"]}
    )
    # MultiSteps: mini_step and gradient_step; Adam: count, mu, nu; plus the accumulator.
    assert optimizer_state_bytes(frozen_w, params) == 3 * 4 + 3 * 2 * 4
    state = frozen_w.init(params)
    assert int(optax.tree_utils.tree_get(state, "gradient_step")) == 0


def test_schedule_counts_updates_not_microbatches():
    params = {"w": jnp.zeros(1)}
    lrs = []
    tx = SGDConfig()(lambda count: 1.0 + count, accumulate_steps=2)
    state = tx.init(params)
    for _ in range(4):
        updates, state = tx.update({"w": jnp.ones(1)}, state, params)
        lrs.append(float(-updates["w"][0]))
    assert lrs == [0.0, 1.0, 0.0, 2.0]


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match=r"^accumulate_steps must be >= 1, got 0$"):
        AdamWConfig()(1e-3, accumulate_steps=0)
    with pytest.raises(ValueError, match=r"^clip_norm must be > 0 or None, got 0.0$"):
        AdamWConfig(clip_norm=0.0)
    with pytest.raises(TypeError, match="weight_decay"):  # plain gradient descent: no decay
        SGDConfig(weight_decay=0.1)
