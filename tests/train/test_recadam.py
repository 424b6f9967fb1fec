"""RecAdam: one and two updates against a hand computation, annealing, and freezing."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tw_jax.train.freezing import freeze, labels_from_predicate, optimizer_state_bytes
from tw_jax.train.recadam import anneal_lambda, recadam

THETA0 = {"w": np.array([[0.5, -1.0], [2.0, 0.25]], np.float32),
          "b": np.array([0.1, -0.3, 0.7], np.float32)}
GRADS = [
    {"w": np.array([[0.2, -0.1], [0.05, 0.4]], np.float32),
     "b": np.array([-0.3, 0.0, 0.6], np.float32)},
    {"w": np.array([[-0.1, 0.3], [0.2, -0.05]], np.float32),
     "b": np.array([0.1, 0.2, -0.4], np.float32)},
]
# Betas that float32 holds exactly (0.875 and 1 - 2^-10), so that the float32 optimizer and the
# float64 hand computation agree to rounding; Adam's usual 0.9 and 0.999 are not representable and
# their bias corrections 1 - b^t differ by ~1e-5 relative between the two precisions.
LR, B1, B2, EPS, GAMMA = 0.1, 0.875, 1.0 - 2.0**-10, 1e-8, 2.0


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + np.exp(-x))


def by_hand(lam, lrs, weight_decay=0.0):
    """The paper's update, in float64 numpy, for len(lam) steps from THETA0."""
    theta = {name: value.astype(np.float64) for name, value in THETA0.items()}
    anchor = {name: value.copy() for name, value in theta.items()}
    m = {name: np.zeros_like(value) for name, value in theta.items()}
    v = {name: np.zeros_like(value) for name, value in theta.items()}
    for step, (grads, lam_t, lr) in enumerate(zip(GRADS, lam, lrs, strict=False), start=1):
        for name in theta:
            g = grads[name].astype(np.float64)
            m[name] = B1 * m[name] + (1 - B1) * g
            v[name] = B2 * v[name] + (1 - B2) * g * g
            m_hat = m[name] / (1 - B1**step)
            v_hat = v[name] / (1 - B2**step)
            direction = (
                lam_t * m_hat / (np.sqrt(v_hat) + EPS)
                + (1 - lam_t) * GAMMA * (theta[name] - anchor[name])
                + weight_decay * theta[name]
            )
            theta[name] = theta[name] - lr * direction
    return theta


def run(tx, steps):
    params = jax.tree.map(jnp.asarray, THETA0)
    state = tx.init(params)
    update = jax.jit(tx.update)
    for grads in GRADS[:steps]:
        updates, state = update(jax.tree.map(jnp.asarray, grads), state, params)
        params = optax.apply_updates(params, updates)
    return params, state


@pytest.mark.parametrize("steps", [1, 2])
def test_matches_hand_computation(steps):
    # k = 1, t0 = 1.5: lambda(1) = sigmoid(-0.5) ~ 0.378, lambda(2) = sigmoid(0.5) ~ 0.622.
    tx = recadam(LR, b1=B1, b2=B2, eps=EPS, gamma=GAMMA, k=1.0, t0=1.5)
    params, _ = run(tx, steps)
    expected = by_hand([sigmoid(-0.5), sigmoid(0.5)][:steps], [LR] * steps)
    for name in THETA0:
        np.testing.assert_allclose(params[name], expected[name], rtol=1e-6, atol=1e-7)


def test_first_step_is_lambda_scaled_adam_and_second_is_pulled_back():
    # Step 1: theta = theta*, so no pull, and Adam's first direction is sign(g) (up to eps).
    tx = recadam(LR, gamma=GAMMA, k=1.0, t0=1.5)
    params, _ = run(tx, 1)
    lam1 = sigmoid(-0.5)
    g = GRADS[0]["w"]
    np.testing.assert_allclose(
        params["w"], THETA0["w"] - LR * lam1 * np.sign(g), rtol=1e-6, atol=1e-7
    )
    # With gamma = 0 the second step is a plain lambda-weighted Adam step; the pull makes it differ.
    no_pull, _ = run(recadam(LR, gamma=0.0, k=1.0, t0=1.5), 2)
    pulled, _ = run(tx, 2)
    moved = np.abs(np.asarray(pulled["w"]) - THETA0["w"])
    assert np.all(moved < np.abs(np.asarray(no_pull["w"]) - THETA0["w"]))


def test_schedule_and_weight_decay_follow_the_update_count():
    # optax schedules are indexed by the 0-based update count: 0.1, then 0.2.
    tx = recadam(lambda count: 0.1 * (count + 1), b1=B1, b2=B2, gamma=GAMMA, k=1.0, t0=1.5, weight_decay=0.01)
    params, _ = run(tx, 2)
    expected = by_hand([sigmoid(-0.5), sigmoid(0.5)], [0.1, 0.2], weight_decay=0.01)
    for name in THETA0:
        np.testing.assert_allclose(params[name], expected[name], rtol=1e-6, atol=1e-7)


def test_normalised_time_is_the_same_curve_rescaled():
    # t = step / 4, k = 4, t0 = 0.375 gives k (t - t0) = step - 1.5, as k = 1, t0 = 1.5 in steps.
    in_steps, _ = run(recadam(LR, gamma=GAMMA, k=1.0, t0=1.5), 2)
    normalised, _ = run(recadam(LR, gamma=GAMMA, k=4.0, t0=0.375, total_steps=4), 2)
    for name in THETA0:
        np.testing.assert_allclose(normalised[name], in_steps[name], rtol=1e-6)


def test_anneal_lambda_values():
    assert float(anneal_lambda(250, k=0.5, t0=250)) == pytest.approx(0.5)
    assert float(anneal_lambda(1, k=0.5, t0=250)) == pytest.approx(sigmoid(0.5 * (1 - 250)))
    assert float(anneal_lambda(260, k=0.1, t0=250)) == pytest.approx(sigmoid(1.0))
    assert float(anneal_lambda(50, k=0.0, t0=200, anneal="linear")) == pytest.approx(0.25)
    assert float(anneal_lambda(500, k=0.0, t0=200, anneal="linear")) == 1.0
    assert float(anneal_lambda(3, k=0.0, t0=0.0, anneal="constant")) == 1.0
    assert float(anneal_lambda(500, k=100.0, t0=0.5, total_steps=1000)) == pytest.approx(0.5)


def test_constant_anneal_is_plain_adam():
    params, _ = run(recadam(LR, gamma=GAMMA, k=1.0, t0=1.0, anneal="constant"), 2)
    adam, _ = run(optax.adam(LR), 2)
    for name in THETA0:
        np.testing.assert_allclose(params[name], adam[name], rtol=1e-6)


def test_anchor_is_a_copy_of_the_initial_params():
    params, state = run(recadam(LR, gamma=GAMMA, k=1.0, t0=1.5), 2)
    anchor = optax.tree_utils.tree_get(state, "anchor")
    for name in THETA0:
        np.testing.assert_array_equal(anchor[name], THETA0[name])
        assert not np.array_equal(params[name], THETA0[name])


def test_frozen_leaves_get_no_moments_and_no_anchor():
    labels = labels_from_predicate(THETA0, lambda path: path == "w")
    tx = freeze(recadam(LR, b1=B1, b2=B2, gamma=GAMMA, k=1.0, t0=1.5), labels)
    params, state = run(tx, 2)
    np.testing.assert_array_equal(params["b"], THETA0["b"])
    expected = by_hand([sigmoid(-0.5), sigmoid(0.5)], [LR, LR])
    np.testing.assert_allclose(params["w"], expected["w"], rtol=1e-6, atol=1e-7)
    # Two counts (int32) plus mu, nu and theta* of the four trainable floats.
    assert optimizer_state_bytes(tx, THETA0) == 2 * 4 + 3 * 4 * 4
    assert optimizer_state_bytes(tx, THETA0) == optimizer_state_bytes(
        recadam(LR), {"w": THETA0["w"]}
    )
    assert set(optax.tree_utils.tree_get(state, "anchor")) == {"w", "b"}
    assert isinstance(optax.tree_utils.tree_get(state, "anchor")["b"], optax.MaskedNode)


def test_update_without_params_is_refused():
    tx = recadam(LR)
    state = tx.init(THETA0)
    with pytest.raises(ValueError, match="needs the current params"):
        tx.update(GRADS[0], state)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"anneal": "cosine"}, "unknown anneal"), ({"k": 0.0}, "k > 0"),
     ({"anneal": "linear", "t0": 0.0}, "t0 > 0"), ({"total_steps": 0}, "total_steps")],
)
def test_bad_settings_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        recadam(LR, **kwargs)


def test_the_anchor_is_the_params_of_the_first_update():
    """T5X initialises optimizer state from fresh parameters before it restores a starting
    checkpoint: the anchor follows the weights the first update starts from, then stays."""
    tx = recadam(1e-3, gamma=GAMMA)
    state = tx.init({name: np.zeros_like(v) for name, v in THETA0.items()})
    restored = {name: jnp.asarray(v) for name, v in THETA0.items()}
    grads = {name: jnp.ones_like(v) for name, v in restored.items()}
    _, state = tx.update(grads, state, restored)
    for name, value in optax.tree_utils.tree_get(state, "anchor").items():
        np.testing.assert_array_equal(value, THETA0[name])
    moved = {name: v + 1.0 for name, v in restored.items()}
    _, state = tx.update(grads, state, moved)
    for name, value in optax.tree_utils.tree_get(state, "anchor").items():
        np.testing.assert_array_equal(value, THETA0[name])
