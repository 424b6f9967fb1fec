"""Loss terms (EWC, LwF): their values and gradients against direct formulas, weight 0 trains
exactly as DIFF, the state resumes exactly, online EWC carries its precision over an update."""

from __future__ import annotations

import shutil

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from train_helpers import read_metrics

from tw_jax.runtime import checkpoints, gin_setup
from tw_jax.train import trainer
from tw_jax.train.ewc import EWC, penalty
from tw_jax.train.gin_config import train_config
from tw_jax.train.loss_terms import TermContext, saved_states
from tw_jax.train.lwf import LwF, argmax_cross_entropy, kl_mean

RNG = np.random.default_rng(0)


def test_ewc_penalty_and_gradient_match_the_formula():
    """weight / N · Σ ½ F (θ − θ*)², gradient weight / N · F (θ − θ*) (TiC-LM's add_grad)."""
    shapes = {"a": (3, 2), "b": (4,)}
    theta = {k: RNG.normal(size=s).astype(np.float32) for k, s in shapes.items()}
    anchor = {k: RNG.normal(size=s).astype(np.float32) for k, s in shapes.items()}
    fisher = {k: RNG.uniform(size=s).astype(np.float32) for k, s in shapes.items()}
    term = EWC(weight=3.0, batches=4)
    state = {"fisher": fisher, "anchor": anchor}

    value, grad = jax.value_and_grad(
        lambda p: term(None, p, state, {}, None, None))(jax.tree.map(jnp.asarray, theta))
    t, a, f = ({k: d[k].astype(np.float64) for k in shapes} for d in (theta, anchor, fisher))
    expected = 3.0 / 4 * sum(np.sum(0.5 * f[k] * (t[k] - a[k]) ** 2) for k in shapes)
    np.testing.assert_allclose(float(value), expected, rtol=1e-6)
    for k in shapes:
        np.testing.assert_allclose(np.asarray(grad[k]), 3.0 / 4 * f[k] * (t[k] - a[k]),
                                   rtol=1e-6, atol=1e-7)
    assert float(penalty(theta, fisher, theta)) == 0.0
    assert EWC(batches=100).summed_batches == 100
    assert EWC(batches=100, count="code").summed_batches == 101  # the reference loop's `>`


class _Softmax:
    """A tiny model: logits = one-hot(inputs) @ W, W of (vocabulary, vocabulary)."""

    @staticmethod
    def logits(params, batch, *, deterministic, rng):
        return jax.nn.one_hot(batch["decoder_input_tokens"], 5) @ params["w"]


def test_ewc_precision_is_the_sum_of_squared_gradients_on_a_tiny_model():
    """F = Σ_b g_b², g_b the gradient of the mean token loss on batch b at θ*, against the
    softmax regression's gradient written out in NumPy: X^T (softmax(XW) − Y) / tokens."""
    w = RNG.normal(size=(5, 5)).astype(np.float32)
    batches = []
    for _ in range(3):
        inputs = RNG.integers(0, 5, size=(2, 4))
        targets = RNG.integers(0, 5, size=(2, 4))
        weights = (RNG.uniform(size=(2, 4)) > 0.3).astype(np.float32)
        batches.append({"decoder_input_tokens": inputs, "decoder_target_tokens": targets,
                        "decoder_loss_weights": weights})
    context = TermContext(model=_Softmax, params={"w": jnp.asarray(w)},
                          trainable={"w": True}, batches=lambda seed: iter(batches),
                          param_shardings=None, seed=0)
    state = EWC(weight=1.0, batches=3).init_state(context)

    expected = np.zeros((5, 5))
    for batch in batches:
        x = np.eye(5)[batch["decoder_input_tokens"].reshape(-1)]
        y = np.eye(5)[batch["decoder_target_tokens"].reshape(-1)]
        k = batch["decoder_loss_weights"].reshape(-1, 1).astype(np.float64)
        logits = x @ w.astype(np.float64)
        p = np.exp(logits - logits.max(1, keepdims=True))
        p /= p.sum(1, keepdims=True)
        grad = x.T @ (k * (p - y)) / max(k.sum(), 1.0)
        expected += grad ** 2
    np.testing.assert_allclose(np.asarray(state["fisher"]["w"]), expected, rtol=1e-4, atol=1e-9)
    np.testing.assert_array_equal(np.asarray(state["anchor"]["w"]), w)
    frozen = TermContext(model=_Softmax, params={"w": jnp.asarray(w)}, trainable={"w": False},
                         batches=lambda seed: iter(batches), param_shardings=None, seed=0)
    assert not np.any(np.asarray(EWC(batches=3).init_state(frozen)["fisher"]["w"]))


def test_ewc_and_lwf_refuse_bad_settings():
    with pytest.raises(ValueError, match="EWC batches"):
        EWC(batches=0)
    with pytest.raises(ValueError, match="EWC count"):
        EWC(count="other")
    with pytest.raises(ValueError, match="LwF temperature"):
        LwF(temperature=0.0)
    with pytest.raises(ValueError, match="LwF kind"):
        LwF(kind="mse")
    with pytest.raises(ValueError, match="LwF reduction"):
        LwF(reduction="sum")


def test_lwf_kl_is_pytorch_kl_div_mean():
    """kl_div(log_softmax(out/T), log_softmax(prev/T), log_target=True), reduction 'mean'
    (over tokens × vocabulary), on the weighted tokens; the argmax variant is cross_entropy."""
    torch = pytest.importorskip("torch")
    import warnings
    functional = torch.nn.functional
    out = RNG.normal(size=(2, 5, 7)).astype(np.float32)
    prev = RNG.normal(size=(2, 5, 7)).astype(np.float32)
    weights = np.ones((2, 5), np.float32)
    weights[1, 3:] = 0.0  # padding: left out of both means
    kept = weights.reshape(-1) > 0

    flat_out = torch.tensor(out.reshape(-1, 7)[kept])
    flat_prev = torch.tensor(prev.reshape(-1, 7)[kept])
    with warnings.catch_warnings():  # 'mean' is what the reference uses, warned about or not
        warnings.simplefilter("ignore", UserWarning)
        expected = functional.kl_div(functional.log_softmax(flat_out / 2.0, dim=1),
                                     functional.log_softmax(flat_prev / 2.0, dim=1),
                                     log_target=True).item()
    np.testing.assert_allclose(float(kl_mean(out, prev, weights, 2.0)), expected, rtol=1e-5)
    state = {"teacher": None}

    class Teacher:  # the previous model's logits, whatever params it is given
        @staticmethod
        def logits(params, batch, *, deterministic, rng):
            return jnp.asarray(prev)

    for reduction, scale in (("mean", 1.0), ("batchmean", 7.0)):  # batchmean: the KL itself
        term = LwF(weight=0.5, reduction=reduction)
        np.testing.assert_allclose(float(term(Teacher, None, state, {}, out, weights)),
                                   0.5 * scale * expected, rtol=1e-5)

    expected = functional.cross_entropy(flat_out, flat_prev.argmax(1)).item()
    np.testing.assert_allclose(float(argmax_cross_entropy(out, prev, weights)), expected,
                               rtol=1e-5)


def _train(gin_file: str, model_dir, bindings, steps: int, extra=()):
    gin_setup.parse(
        [gin_file, "models/gpt2_tiny.gin", "runs/cpu_smoke.gin"],
        [*bindings, f"MODEL_DIR='{model_dir}'", f"TRAIN_STEPS={steps}", "CHECKPOINT_PERIOD=2",
         "SCHEDULE='constant'", *extra],
        required_macros=gin_setup.MACROS_TRAIN,
    )
    return trainer.train(train_config())


_DIFF: dict[str, tuple] = {}


@pytest.fixture
def diff_run(tmp_path_factory, data_bindings):
    """DIFF's 4 steps, trained once for the module's tests."""
    if "run" not in _DIFF:
        model_dir = tmp_path_factory.mktemp("diff")
        summary = _train("diff.gin", model_dir, data_bindings, 4)
        _DIFF["run"] = model_dir, jax.device_get(summary.params)
    return _DIFF["run"]


@pytest.mark.parametrize("gin_file,zero", [("ewc.gin", ["EWC_WEIGHT=0.0", "EWC_BATCHES=2"]),
                                           ("lwf.gin", ["LWF_WEIGHT=0.0"])])
def test_weight_zero_trains_as_diff(gin_file, zero, diff_run, tmp_path, data_bindings):
    diff_dir, diff_params = diff_run
    summary = _train(gin_file, tmp_path / "run", data_bindings, 4, zero)
    name = gin_file.split(".")[0]
    got = read_metrics(tmp_path / "run")
    want = read_metrics(diff_dir)
    np.testing.assert_allclose([m["loss"] for m in got], [m["loss"] for m in want], rtol=1e-6)
    assert all(m[f"{name}_loss"] == 0.0 for m in got)
    for a, b in zip(jax.tree.leaves(jax.device_get(summary.params)), jax.tree.leaves(diff_params),
                    strict=True):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("gin_file,settings", [
    ("ewc.gin", ["EWC_WEIGHT=1e4", "EWC_BATCHES=2"]), ("lwf.gin", ["LWF_WEIGHT=1.0"])])
def test_term_state_resumes_exactly(gin_file, settings, tmp_path, data_bindings, diff_run):
    """4 steps in one go = 2 steps, then a resume to 4 (the state comes back from the
    checkpoint, not made again); and the term changes training (it is not DIFF)."""
    whole = _train(gin_file, tmp_path / "whole", data_bindings, 4, settings)
    # the run as if killed after its step-2 checkpoint
    shutil.copytree(tmp_path / "whole", tmp_path / "split")
    shutil.rmtree(tmp_path / "split" / "checkpoints" / "4")
    resumed = _train(gin_file, tmp_path / "split", data_bindings, 4, settings)
    assert resumed.resumed and resumed.start_step == 2
    for a, b in zip(jax.tree.leaves(jax.device_get(whole.params)),
                    jax.tree.leaves(jax.device_get(resumed.params)), strict=True):
        np.testing.assert_array_equal(a, b)
    name = gin_file.split(".")[0]
    losses = [m[f"{name}_loss"] for m in read_metrics(tmp_path / "whole")]
    # At the first step θ = θ* (EWC: exactly 0) and the teacher reads the batch as the model
    # does (LwF: the train and eval forward passes agree to rounding); then the term grows.
    assert losses[0] < 1e-6 and losses[-1] > losses[0]
    _, diff_params = diff_run
    assert not all(np.array_equal(a, b) for a, b in zip(
        jax.tree.leaves(jax.device_get(whole.params)), jax.tree.leaves(diff_params), strict=True))


def test_online_ewc_carries_the_precision(tmp_path, data_bindings):
    """A second update from the first's checkpoint: F = F_new + decay · F_prev (the online
    preset), the anchor the second update's start; decay 0 (TiC-LM) forgets F_prev."""
    settings = ["EWC_WEIGHT=1e4", "EWC_BATCHES=2"]
    _train("ewc.gin", tmp_path / "first", data_bindings, 2, settings)
    first = saved_states(str(tmp_path / "first"))("ewc")
    second_bindings = [f"INITIAL_CHECKPOINT_PATH='{tmp_path / 'first'}'", *settings]
    _train("ewc_online.gin", tmp_path / "online", data_bindings, 2, second_bindings)
    _train("ewc.gin", tmp_path / "plain", data_bindings, 2, second_bindings)
    online = saved_states(str(tmp_path / "online"))("ewc")
    plain = saved_states(str(tmp_path / "plain"))("ewc")
    start = checkpoints.read_tree(str(checkpoints.step_folder(tmp_path / "first")) + "/params")
    for new, old, carried, anchor, begun in zip(
            jax.tree.leaves(plain["fisher"]), jax.tree.leaves(first["fisher"]),
            jax.tree.leaves(online["fisher"]), jax.tree.leaves(plain["anchor"]),
            jax.tree.leaves(start), strict=True):
        np.testing.assert_allclose(carried, new + 0.9 * old, rtol=1e-6, atol=1e-12)
        np.testing.assert_array_equal(anchor, begun)
    assert any(np.any(f > 0) for f in jax.tree.leaves(plain["fisher"]))


def test_an_update_counts_what_its_terms_cost():
    """EWC's precision batches are a train step's forward and backward each; LwF reads every
    batch once more forward (a third of a step)."""
    from tw_jax.train.loss_terms import extra_flops

    assert extra_flops([], 6e9, 10) == 0.0
    assert extra_flops([EWC(batches=100)], 6e9, 10) == 100 * 6e9
    assert extra_flops([EWC(batches=100, count="code")], 6e9, 10) == 101 * 6e9
    assert extra_flops([LwF()], 6e9, 10) == 10 * 2e9


def test_term_states_are_sharded_like_the_parameters_they_mirror():
    """The step's opt_state is (optimizer state, {term: state}); every leaf of a term's state
    that mirrors a parameter lands where that parameter does (its PartitionSpec), so a Fisher
    or a frozen teacher of a big model is split over the mesh as the model is."""
    import functools

    from tw_jax.models.gpt2 import GPT2Config
    from tw_jax.runtime.run_model import build_run_model
    from tw_jax.train.optimizers import AdamWConfig
    from tw_jax.train.schedules import make_schedule
    from tw_jax.train.trainer import build_train_step

    config = GPT2Config(vocab_size=64, n_positions=16, n_embd=16, n_layer=1, n_head=2)
    run = build_run_model(config, (1, 1, 1), devices=jax.devices()[:1])
    step = build_train_step(
        run, config, optimizer=AdamWConfig(clip_norm=1.0),
        schedule_fn=functools.partial(make_schedule, "constant", 1e-3), train_steps=2,
        accumulate_steps=1, seed=0, loss_terms=[EWC(batches=1), LwF()])
    specs = [s.spec for s in jax.tree.leaves(run.param_shardings)]
    assert any(spec != jax.sharding.PartitionSpec() for spec in specs)  # a real layout
    terms = step.opt_shardings[1]
    for state in (terms["ewc"]["fisher"], terms["ewc"]["anchor"], terms["lwf"]["teacher"]):
        assert [s.spec for s in jax.tree.leaves(state)] == specs
