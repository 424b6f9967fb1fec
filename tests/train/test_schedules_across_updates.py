"""TiC-LM's schedules across the updates of a lifelong run, and schedule-free AdamW.

The expected rates are TiC-LM's and open_lm's formulas written out again here in float64
(apple/ml-tic-lm ``training/utils.py`` ``cosine_decay`` / ``cosine_plus_ar_max_lr``, the loop
of ``training/continual_run.py``, open_lm's ``cosine_lr`` and the patch's ``rsqrt_lr``), not
calls of the schedules under test. Schedule-free AdamW is checked against optax's own
``schedule_free_adamw`` run directly, with the optimizer rebuilt at a constant rate every step
as the train step does.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest

from tw_jax.errors import UsageError
from tw_jax.train import schedules
from tw_jax.train.optimizers import AdamWConfig, ScheduleFreeAdamWConfig
from tw_jax.train.schedule_free import eval_params, schedule_free_states
from tw_jax.train.schedules import ar_peak_lr, make_schedule


def values(schedule, steps) -> np.ndarray:
    return np.asarray(schedule(jnp.asarray(list(steps))), np.float64)


# --- TiC-LM's and open_lm's formulas, as written there ----------------------------------------


def tic_lm_cosine_decay(current_step, max_lr, total_steps, end_lr, warmup):
    """training/utils.py cosine_decay."""
    if current_step < warmup:
        return max_lr * (current_step + 1) / warmup
    cosine_decay = 0.5 * (1 + math.cos(math.pi * (current_step - warmup) / (total_steps - warmup)))
    return (max_lr - end_lr) * cosine_decay + end_lr


def tic_lm_peaks(months, steps_per_month, warmup, max_lr, end_lr):
    """training/continual_run.py's loop with --use-ar-schedule --warmup-usage all: config['lr']
    for each month, through training/utils.py cosine_plus_ar_max_lr."""
    peaks, warmup_init = [], 0
    for i in range(months):
        warmup_init = warmup if i == 0 else warmup_init + warmup
        steps_prev, steps_new = steps_per_month * i, steps_per_month
        maxlr_step, total_steps = steps_prev + warmup, steps_prev + steps_new
        peaks.append(tic_lm_cosine_decay(maxlr_step, max_lr, total_steps, end_lr, warmup_init))
    return peaks


def open_lm_cosine_lr(step, base_lr, warmup_length, steps, min_lr, force_min_lr=0.0):
    """open_lm/scheduler.py cosine_lr's _lr_adjuster."""
    if step < warmup_length:
        return base_lr * (step + 1) / warmup_length
    e, es = step - warmup_length, steps - warmup_length
    return max(min_lr + 0.5 * (1 + np.cos(np.pi * e / es)) * (base_lr - min_lr), force_min_lr)


def open_lm_rsqrt_lr(step, base_lr, warmup_length, cooldown_length, steps, min_lr):
    """rsqrt_lr of training/open_lm.patch (starting_step 0, force_min_lr 0)."""
    if step < warmup_length:
        return base_lr * (step + 1) / warmup_length
    if cooldown_length == 0 or step < steps - cooldown_length:
        return (base_lr - min_lr) * np.sqrt(warmup_length) / np.sqrt(step) + min_lr
    start_cooldown_step = steps - cooldown_length
    start_cooldown_lr = ((base_lr - min_lr) * np.sqrt(warmup_length)
                         / np.sqrt(start_cooldown_step) + min_lr)
    decay = 1 - (step - start_cooldown_step) / cooldown_length
    return max(decay * (start_cooldown_lr - min_lr) + min_lr, 0.0)


# --- schedules ---------------------------------------------------------------------------------

BASE, END, WARMUP, STEPS = 3e-4, 3e-5, 5, 20


def test_ar_schedule_rates_per_step_across_two_updates():
    """Update 0 peaks at the initial rate, update 1 at the mean of it and the end rate (the
    meta-cosine read half-way: (S + w - 2w) / (2S - 2w) = 1/2), each a warm-up then a cosine."""
    peaks = tic_lm_peaks(2, STEPS, WARMUP, BASE, END)
    assert peaks[0] == pytest.approx(BASE, rel=1e-15)
    assert peaks[1] == pytest.approx((BASE + END) / 2, rel=1e-15)
    for update, peak in enumerate(peaks):
        schedule = make_schedule("cosine_ar", BASE, STEPS, warmup_steps=WARMUP, cooldown_end=END,
                                 steps_before=STEPS * update, updates_before=update)
        expected = [open_lm_cosine_lr(s, peak, WARMUP, STEPS, END) for s in range(STEPS)]
        np.testing.assert_allclose(values(schedule, range(STEPS)), expected, rtol=2e-6)
        # The first step of each warm-up already has peak / warmup (open_lm's _warmup_lr), the
        # peak itself is reached at the last warm-up step, and past the end the rate holds.
        np.testing.assert_allclose(values(schedule, [0, WARMUP - 1, STEPS + 7]),
                                   [peak / WARMUP, peak, expected[-1]], rtol=2e-6)


def test_ar_peak_follows_continual_runs_loop():
    """Five months of TiC-LM's 3b_2x scale (1887 steps a month, warm-up 50, lr 3e-4, end 3e-5):
    peak i is end + (max - end) * (1 + cos(pi * i / (i + 1))) / 2."""
    steps = 1887
    expected = tic_lm_peaks(5, steps, 50, BASE, END)
    for i, peak in enumerate(expected):
        assert ar_peak_lr(BASE, steps_before=steps * i, total_steps=steps, updates_before=i,
                          warmup_steps=50, end_lr=END) == peak  # the same float64 operations
        closed = END + (BASE - END) * (1 + math.cos(math.pi * i / (i + 1))) / 2
        assert peak == pytest.approx(closed, rel=1e-12)


def test_ar_peak_of_an_update_shorter_than_its_warmup_is_the_warmups_rate():
    """utils.py cosine_decay's first branch: step steps_prev + w < (i + 1) w when S < w."""
    peak = ar_peak_lr(1e-3, steps_before=3, total_steps=3, updates_before=1, warmup_steps=10,
                      end_lr=0.0)
    assert peak == pytest.approx(tic_lm_cosine_decay(13, 1e-3, 6, 0.0, 20), rel=1e-15)
    assert peak == pytest.approx(1e-3 * 14 / 20, rel=1e-15)


def test_cyclic_cosine_is_open_lms_cosine_at_the_base_rate_every_update():
    schedule = make_schedule("cyclic_cosine", 1e-4, STEPS, warmup_steps=WARMUP, cooldown_end=END,
                             steps_before=999, updates_before=3)  # ignored
    expected = [open_lm_cosine_lr(s, 1e-4, WARMUP, STEPS, END) for s in range(STEPS)]
    np.testing.assert_allclose(values(schedule, range(STEPS)), expected, rtol=2e-6)


def test_warmup_fraction_applies_when_warmup_steps_is_not_given():
    schedule = make_schedule("cyclic_cosine", 1e-4, 40, warmup_fraction=0.25, cooldown_end=END)
    expected = [open_lm_cosine_lr(s, 1e-4, 10, 40, END) for s in range(40)]
    np.testing.assert_allclose(values(schedule, range(40)), expected, rtol=2e-6)


def test_rsqrt_with_cooldown_exact_values():
    """TiC-LM's README run: lr 1e-3, --lr-rsqrt-cooldown 400, warm-up 50, end 3e-5; an update
    of 1000 steps cools down over steps 600-999."""
    base, end, warmup, cooldown, total = 1e-3, 3e-5, 50, 400, 1000
    schedule = make_schedule("rsqrt", base, total, warmup_steps=warmup, cooldown_steps=cooldown,
                             cooldown_end=end)
    start_lr = (base - end) * math.sqrt(warmup / 600) + end
    by_hand = {
        0: base / warmup, 24: base * 25 / warmup, 49: base, 50: base,
        200: (base - end) * 0.5 + end,  # sqrt(50 / 200) = 1/2
        599: (base - end) * math.sqrt(warmup / 599) + end,
        600: start_lr,  # the cooldown starts at the rsqrt rate
        800: 0.5 * (start_lr - end) + end,
        999: (start_lr - end) / cooldown + end,
        5000: (start_lr - end) / cooldown + end,  # held after the last step
    }
    np.testing.assert_allclose(values(schedule, by_hand), list(by_hand.values()), rtol=2e-6)
    steps = range(0, total, 7)
    expected = [open_lm_rsqrt_lr(s, base, warmup, cooldown, total, end) for s in steps]
    np.testing.assert_allclose(values(schedule, steps), expected, rtol=2e-6)


def test_rsqrt_without_cooldown_keeps_decaying():
    schedule = make_schedule("rsqrt", 1e-3, 100, warmup_steps=4, cooldown_end=0.0)
    np.testing.assert_allclose(values(schedule, [3, 4, 16, 64, 99]),
                               [1e-3, 1e-3, 5e-4, 2.5e-4, 1e-3 * 2 / math.sqrt(99)], rtol=2e-6)


def test_constant_warmup_is_open_lms_const_lr():
    schedule = make_schedule("constant_warmup", 1e-4, 100, warmup_steps=50)
    np.testing.assert_allclose(values(schedule, [0, 1, 49, 50, 99, 500]),
                               [2e-6, 4e-6, 1e-4, 1e-4, 1e-4, 1e-4], rtol=2e-6)


def test_the_new_schedules_jit_and_take_int32_counts():
    """The trainer jits the schedule and evaluates it at an int32 update count."""
    for name in schedules.OPEN_LM_SCHEDULES:
        schedule = make_schedule(name, 1e-3, 30, warmup_steps=3, cooldown_steps=10,
                                 cooldown_end=1e-5, steps_before=30, updates_before=1)
        rates = [float(jax.jit(schedule)(jnp.int32(s))) for s in (0, 5, 29)]
        np.testing.assert_allclose(rates, values(schedule, [0, 5, 29]), rtol=2e-6)
        assert jax.jit(schedule)(jnp.int32(0)).dtype == jnp.float32


@pytest.mark.parametrize("name", ["constant", "warmup_linear", "one_cycle", "cosine"])
def test_new_arguments_leave_existing_schedules_unchanged(name):
    """The existing schedules ignore the chain's place and the cooldown, bit for bit, and
    equal their old definitions (the helpers they called before)."""
    total = 50
    old = {
        "constant": optax.constant_schedule(1e-3),
        "warmup_linear": schedules.warmup_linear(1e-3, total, int(0.1 * total), 0.5e-3),
        "one_cycle": schedules.one_cycle(1e-3, total),
        "cosine": schedules.warmup_cosine(1e-3, total, int(0.1 * total), 0.5e-3),
    }[name]
    steps = range(0, 2 * total, 3)
    plain = values(make_schedule(name, 1e-3, total), steps)
    placed = values(make_schedule(name, 1e-3, total, steps_before=1234, updates_before=5,
                                  cooldown_steps=7, cooldown_end=1e-5), steps)
    np.testing.assert_array_equal(plain, values(old, steps))
    np.testing.assert_array_equal(placed, plain)
    if name in ("warmup_linear", "cosine"):  # warmup_steps = the fraction's count: the same
        np.testing.assert_array_equal(
            values(make_schedule(name, 1e-3, total, warmup_steps=5), steps), plain)


@pytest.mark.parametrize(("name", "kwargs", "error", "message"), [
    ("rsqrt", {"warmup_steps": 0}, UsageError, "warmup_steps >= 1"),
    ("rsqrt", {"warmup_steps": 5, "cooldown_steps": 20}, UsageError, "cooldown of 20 steps"),
    ("rsqrt", {"warmup_steps": 5, "cooldown_steps": -1}, ValueError, "cooldown_steps"),
    ("cosine_ar", {"warmup_steps": 20}, UsageError, "divides by zero"),
    ("cosine_ar", {"steps_before": -1}, ValueError, "steps_before"),
    ("cyclic_cosine", {"cooldown_end": -1.0}, ValueError, "cooldown_end"),
    ("cosine", {"warmup_steps": 20}, ValueError, "warmup_steps must be < total_steps"),
    ("constant_warmup", {"warmup_steps": -2}, ValueError, "warmup_steps"),
])
def test_bad_settings_are_refused(name, kwargs, error, message):
    with pytest.raises(error, match=message):
        make_schedule(name, 1e-3, 20, **kwargs)


# --- schedule-free AdamW -------------------------------------------------------------------


def tree() -> dict:
    return {"b": jnp.asarray([0.5, -0.25], jnp.float32),
            "w": jnp.asarray([[1.0, -2.0], [0.5, 3.0], [-1.5, 0.25]], jnp.float32)}


def quadratic(params: dict, step: int) -> jax.Array:
    target = jnp.float32(0.1 * (step + 1))
    return (jnp.sum(jnp.square(params["w"] - target) * jnp.arange(1.0, 7.0).reshape(3, 2))
            + jnp.sum(jnp.square(params["b"] + target)))


SF = {"b1": 0.9, "b2": 0.95, "eps": 1e-8, "weight_decay": 0.01}


def run_fixed(tx, params, steps):
    """``tx`` built once (its schedule inside), one update per step."""

    @jax.jit
    def step_fn(params, state, step):
        grads = jax.grad(quadratic)(params, step)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    state = tx.init(params)
    for step in range(steps):
        params, state = step_fn(params, state, step)
    return params, state


def run_rebuilt(config, params, steps, rate, **call):
    """As tw_jax/train/steps.py: the optimizer rebuilt inside the step at the constant
    schedule of the rate argument."""

    @jax.jit
    def step_fn(params, state, step, learning_rate):
        tx = config(lambda count: learning_rate, **call)
        grads = jax.grad(quadratic)(params, step)
        updates, state = tx.update(grads, state, params)
        return optax.apply_updates(params, updates), state

    state = config(lambda count: jnp.float32(rate), **call).init(params)  # as the trainer
    for step in range(steps):
        params, state = step_fn(params, state, step, jnp.float32(rate))
    return params, state


def assert_trees_close(actual, expected, atol=1e-7, rtol=0.0):
    for a, e in zip(jax.tree.leaves(actual), jax.tree.leaves(expected), strict=True):
        np.testing.assert_allclose(np.asarray(a), np.asarray(e), rtol=rtol, atol=atol)


def averaging_state(opt_state):
    """The schedule-free state's own fields and its base optimizer's second moments (the
    learning-rate stage of the base chain holds a count for a schedule and nothing for a
    number: optax's own at a float rate differs from any schedule there, and only there)."""
    (state,) = schedule_free_states(opt_state)
    return state._replace(base_optimizer_state=state.base_optimizer_state[0])


@pytest.mark.parametrize("warmup", [None, 2])
def test_schedule_free_against_optaxs_own(warmup):
    """Five updates on a quadratic: the config at a constant rate passed each step, and built
    once with the constant schedule, give optax's schedule_free_adamw's params (y), state and
    evaluation params (x)."""
    rate, steps = 5e-2, 5
    own_params, own_state = run_fixed(
        optax.contrib.schedule_free_adamw(rate, warmup_steps=warmup, **SF), tree(), steps)
    own_eval = optax.contrib.schedule_free_eval_params(own_state, own_params)
    config = ScheduleFreeAdamWConfig(warmup_steps=warmup, **SF)
    rebuilt_params, rebuilt_state = run_rebuilt(config, tree(), steps, rate)
    fixed_params, fixed_state = run_fixed(config(make_schedule("constant", rate, steps)),
                                          tree(), steps)
    for params, state in ((rebuilt_params, rebuilt_state), (fixed_params, fixed_state)):
        assert_trees_close(params, own_params)
        assert_trees_close(averaging_state(state), averaging_state(own_state))
        assert_trees_close(eval_params(state, params), own_eval)
    assert_trees_close(rebuilt_state, fixed_state)  # the trainer's per-step build: the same
    moved = np.abs(np.asarray(own_eval["w"]) - np.asarray(own_params["w"])).max()
    assert moved > 1e-3  # x and y differ: evaluating y would be wrong


def test_eval_params_through_accumulation_clipping_and_freezing():
    """Two updates of two microbatches with a frozen subtree (a prefix label) and clipping:
    the trainable leaves are optax's own MultiSteps(chain(clip, schedule_free_adamw)) on them
    alone, their evaluation params optax's; frozen leaves stay as they were in both."""
    rate = 5e-2
    params = {"dec": tree(), "enc": {"w": jnp.ones((2, 2), jnp.float32)}}
    labels = {"dec": "trainable", "enc": "frozen"}
    config = ScheduleFreeAdamWConfig(clip_norm=1.0, **SF)

    def loss(params, step):
        return quadratic(params["dec"], step) + jnp.sum(params["enc"]["w"] ** 2)

    own = optax.MultiSteps(optax.chain(optax.clip_by_global_norm(1.0),
                                       optax.contrib.schedule_free_adamw(rate, **SF)), 2)
    ours = config(rate, accumulate_steps=2, labels=labels)
    own_params, own_state = tree(), own.init(tree())
    ours_params, ours_state = params, ours.init(params)
    for step in range(4):
        grads = jax.grad(loss)(ours_params, step // 2)
        updates, ours_state = ours.update(grads, ours_state, ours_params)
        ours_params = optax.apply_updates(ours_params, updates)
        updates, own_state = own.update(grads["dec"], own_state, own_params)
        own_params = optax.apply_updates(own_params, updates)
    (sf_state,) = schedule_free_states(ours_state)
    own_eval = optax.contrib.schedule_free_eval_params(own_state.inner_opt_state[1], own_params)
    evaluated = jax.jit(eval_params)(ours_state, ours_params)
    assert int(sf_state.step_count) == 3  # two updates applied
    # The partition's masking reorders float32 operations: a last-bit difference.
    assert_trees_close(ours_params["dec"], own_params, rtol=2e-7)
    assert_trees_close(evaluated["dec"], own_eval, rtol=2e-7)
    np.testing.assert_array_equal(evaluated["enc"]["w"], params["enc"]["w"])
    # Beside loss-term states ((tx state, {name: state}), as the trainer keeps them).
    with_terms = (ours_state, {"ewc": {"anchor": ours_params}})
    assert_trees_close(jax.jit(eval_params)(with_terms, ours_params), evaluated, atol=0)


def test_eval_params_without_schedule_free_is_the_params():
    params = tree()
    tx = AdamWConfig()(1e-2, accumulate_steps=2, labels={"b": "frozen", "w": "trainable"})
    assert schedule_free_states(tx.init(params)) == []
    assert eval_params(tx.init(params), params) is params


def test_schedule_free_settings_are_checked():
    with pytest.raises(ValueError, match="b1"):
        ScheduleFreeAdamWConfig(b1=0.0)
    with pytest.raises(ValueError, match="warmup_steps"):
        ScheduleFreeAdamWConfig(warmup_steps=0)


def test_the_trainers_step_trains_schedule_free():
    """build_train_step (what train runs and tw-jax compile lowers) with the new config: one
    step of a tiny GPT-2 at the schedule's rate, finite, and its evaluation params are
    optax's."""
    from tw_jax.models.gpt2 import GPT2Config
    from tw_jax.models.sharding import activate
    from tw_jax.runtime.run_model import build_run_model
    from tw_jax.train.trainer import build_train_step

    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    tokens = np.arange(16, dtype=np.int32).reshape(2, 8) % 64
    batch = {"decoder_target_tokens": tokens, "decoder_input_tokens": np.roll(tokens, 1, axis=1),
             "decoder_loss_weights": np.ones((2, 8), np.float32),
             "decoder_mask": np.ones((2, 8), np.float32)}
    run = build_run_model(config, (1, 1, 1), devices=jax.devices()[:1])
    step = build_train_step(
        run, config, optimizer=ScheduleFreeAdamWConfig(clip_norm=1.0, **SF),
        schedule_fn=functools.partial(make_schedule, "constant_warmup", 1e-3, warmup_steps=2),
        train_steps=4, accumulate_steps=1, seed=0)
    assert float(step.learning_rate(0)) == pytest.approx(1e-3 / 2)
    with activate(run.mesh):
        params = run.init_params(0)
        opt_state = jax.jit(step.tx.init)(params)
        for index in range(2):
            params, opt_state, metrics = step(params, opt_state, index, batch)
            assert bool(metrics["grads_finite"]) and bool(metrics["params_finite"])
    (state,) = schedule_free_states(opt_state)
    assert int(state.step_count) == 3
    evaluated = eval_params(opt_state, params)
    assert_trees_close(evaluated, optax.contrib.schedule_free_eval_params(state, params))
    # The first update leaves x = y = z (its average weight is 1); the second separates them.
    moved = max(float(np.abs(np.asarray(x) - np.asarray(y)).max())
                for x, y in zip(jax.tree.leaves(evaluated), jax.tree.leaves(params), strict=True))
    assert moved > 1e-6


# --- gin -----------------------------------------------------------------------------------

GIN = Path(__file__).resolve().parents[2] / "gin"
# base.gin's lines that the schedule files feed (parsed without base.gin's evaluation import).
BASE_LINES = """
tw_jax.train.make_schedule.name = %SCHEDULE
tw_jax.train.make_schedule.base_lr = %LEARNING_RATE
CLIP_NORM = 1.0
tw_jax.train.ScheduleFreeAdamWConfig.clip_norm = %CLIP_NORM
OPTIMIZER = None
"""


@pytest.fixture
def parsed():
    import gin

    import tw_jax.train.gin_config  # noqa: F401  (registers make_schedule and the configs)

    def parse(gin_file: str):
        gin.clear_config()
        gin.parse_config(BASE_LINES)
        gin.parse_config_file(str(GIN / gin_file))
        return gin

    yield parse
    gin.clear_config()


@pytest.mark.parametrize(("gin_file", "name", "rate", "expected"), [
    ("schedules/ar.gin", "cosine_ar", 3e-4,
     lambda s: open_lm_cosine_lr(s, tic_lm_peaks(2, 100, 50, 3e-4, 3e-5)[1], 50, 100, 3e-5)),
    ("schedules/cyclic_cosine.gin", "cyclic_cosine", 1e-4,
     lambda s: open_lm_cosine_lr(s, 1e-4, 50, 100, 3e-5)),
    ("schedules/rsqrt.gin", "rsqrt", 1e-3,
     lambda s: open_lm_rsqrt_lr(s, 1e-3, 50, 400, 1000, 3e-5)),
    ("schedules/schedule_free.gin", "constant_warmup", 1e-4,
     lambda s: 1e-4 * min(s + 1, 50) / 50),
])
def test_gin_files_bind_tic_lms_settings(parsed, gin_file, name, rate, expected):
    gin = parsed(gin_file)
    make = gin.get_configurable("tw_jax.train.make_schedule")
    assert gin.query_parameter("tw_jax.train.make_schedule.name") is not None
    assert (gin.query_parameter("%SCHEDULE"), gin.query_parameter("%LEARNING_RATE")) == (name, rate)
    if name == "cosine_ar":  # the second update of 100 steps, as the lifelong runner places it
        schedule = make(total_steps=100, steps_before=100, updates_before=1)
    else:
        schedule = make(total_steps=1000 if name == "rsqrt" else 100)
    steps = [0, 10, 49, 50, 70, 99]
    np.testing.assert_allclose(values(schedule, steps), [expected(s) for s in steps], rtol=2e-6)
    optimizer = gin.query_parameter("%OPTIMIZER")
    if name == "constant_warmup":
        built = optimizer.scoped_configurable_fn()
        assert type(built).__name__ == "ScheduleFreeAdamWConfig"
        assert dataclasses.asdict(built) == dataclasses.asdict(ScheduleFreeAdamWConfig(
            clip_norm=1.0, b1=0.9, b2=0.95, eps=1e-8, weight_decay=0.01))
    else:
        assert optimizer is None  # a schedule file leaves the model file's optimizer
