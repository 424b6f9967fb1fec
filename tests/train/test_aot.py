"""`tw-jax compile`: the trainer's step, the scoring step and greedy decoding compiled for TPU
topologies on this CPU machine (libtpu describes the chips; nothing runs, no data is read).

Checked: the JSON report's fields, memory per chip within 2x of a hand count (parameters,
optimizer state, gathered parameters and gradients, logits), positive estimates, the mesh of several slices, a batch
padded to the batch shards, exit 1 with a one-line reason when the step does not fit, and exit
2 with one line for an unknown topology, a mesh that does not divide the chips, and no libtpu.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("libtpu", reason="tw-jax compile needs libtpu (the tpu and test extras)")

TINY_GPT2 = ["--gin_file=diff.gin", "--gin_file=models/gpt2_tiny.gin"]
TINY_T5 = ["--gin_file=kadapter.gin", "--gin_file=models/t5_tiny.gin"]
FIELDS = {
    "topology", "chips", "mesh", "fits", "memory_per_chip_bytes", "hbm_per_chip_bytes",
    "flops_per_step", "model_flops_per_step", "est_step_seconds", "est_tokens_per_second",
    "est_mfu", "compile_seconds",
}
MIB = 1024**2


def _env() -> dict[str, str]:
    env = dict(os.environ, JAX_PLATFORMS="cpu", TPU_SKIP_MDS_QUERY="1", TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    env.pop("XLA_FLAGS", None)  # the tests' fast CPU compiles (xla_flags.py): not for TPU
    env.pop("TPU_LIBRARY_PATH", None)  # jax in this process may have set it from libtpu
    return env


def _compile(*args: str, prefix: str = "") -> subprocess.CompletedProcess:
    code = f"import sys; {prefix}from tw_jax.cli import main; sys.exit(main(sys.argv[1:]))"
    return subprocess.run(
        [sys.executable, "-c", code, "compile", *args], env=_env(), capture_output=True,
        text=True, timeout=600,
    )


def _report(result: subprocess.CompletedProcess) -> dict:
    return json.loads(result.stdout.strip().splitlines()[-1])


def _tw_jax_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tw-jax")]


def _hand_count(config, batch: int, positions: int, chips: int, optimizer_copies: float) -> float:
    """Bytes per chip of a step with FSDP over ``chips``: float32 parameters and optimizer
    state sharded over the chips (in and out, the output reusing the input); inside the step
    the whole parameters gathered and their whole gradient before it is scattered; the
    float32 logits and their gradient for the chip's rows."""
    from tw_jax.models import count_params

    params = count_params(config).total * 4
    logits = batch * positions * config.vocab_size * 4 / chips
    return params * (1 + optimizer_copies) / chips + 2 * params + 2 * logits


def _measured(report: dict) -> int:
    """Memory per chip without XLA's generated code, which no hand count can know."""
    return report["memory_per_chip_bytes"] - report["memory_breakdown_bytes"]["code"]


def test_tiny_gpt2_train_step_compiles_for_v5e_with_plausible_memory():
    from tw_jax.models import GPT2Config

    result = _compile("--topology", "v5e:2x2", *TINY_GPT2)
    assert result.returncode == 0, result.stderr[-3000:]
    report = _report(result)
    assert set(report) >= FIELDS
    assert report["chips"] == 4 and report["mesh"] == {"data": 1, "fsdp": 4, "model": 1}
    assert report["fits"] is True and report["hbm_per_chip_bytes"] == 16 * 1024**3
    config = GPT2Config(vocab_size=50257, n_positions=256, n_embd=64, n_layer=3, n_head=4)
    hand = _hand_count(config, batch=4, positions=64, chips=4, optimizer_copies=2)  # AdamW
    assert hand / 2 <= _measured(report) <= hand * 2
    assert report["flops_per_step"] > 0 and report["est_step_seconds"] > 0
    assert 0 < report["est_mfu"] < 1
    # The model FLOPs of 4 rows of 64 tokens (tw_jax.train.flops) and XLA's count agree roughly.
    assert 0.5 < report["flops_per_step"] / report["model_flops_per_step"] < 2
    assert report["tokens_per_step"] == 4 * 64
    assert "train step of gpt2 on v5e:2x2 (4 chips" in result.stdout


def test_tiny_t5_train_score_and_decode_steps_compile():
    from tw_jax.models import T5Config

    train = _compile("--topology", "v5e:2x2", *TINY_T5)
    assert train.returncode == 0, train.stderr[-3000:]
    report = _report(train)
    config = T5Config(vocab_size=32128, d_model=64, d_kv=16, d_ff=128, num_layers=3,
                      num_heads=4)
    # models/t5_tiny.gin: batch 4, lengths 64 in / 16 out. Adafactor keeps factored
    # statistics: about no optimizer copies of the parameters.
    hand = _hand_count(config, batch=4, positions=16, chips=4, optimizer_copies=0)
    assert hand / 2 <= _measured(report) <= hand * 2
    for step in ("score", "decode"):
        result = _compile("--topology", "v5e:2x2", "--step", step, *TINY_T5)
        assert result.returncode == 0, result.stderr[-3000:]
        scored = _report(result)
        assert scored["step"] == step and scored["fits"] is True
        assert 0 < scored["memory_per_chip_bytes"] < report["memory_per_chip_bytes"]
        assert scored["est_step_seconds"] > 0
    assert scored["tokens_per_step"] == 4 * 16  # decode: BATCH_SIZE x targets length


def test_several_slices_repeat_the_data_axis_and_a_batch_is_padded_to_the_shards():
    result = _compile("--topology", "v5e:2x2", "--num-slices", "2", *TINY_GPT2,
                      "--gin.BATCH_SIZE=6")
    assert result.returncode == 0, result.stderr[-3000:]
    report = _report(result)
    assert report["chips"] == 8 and report["num_slices"] == 2
    assert report["mesh"] == {"data": 2, "fsdp": 4, "model": 1}
    assert report["batch_size"] == 6 and report["padded_batch_size"] == 8
    assert report["tokens_per_step"] == 6 * 64


def test_a_step_that_does_not_fit_exits_1_and_says_what_to_change():
    result = _compile("--topology", "v5e:2x2", *TINY_GPT2, "--gin.BATCH_SIZE=100000")
    assert result.returncode == 1, result.stderr[-3000:]
    report = _report(result)
    assert report["fits"] is False
    assert report["memory_per_chip_bytes"] > 16 * 1024**3
    lines = _tw_jax_lines(result.stderr)
    assert len(lines) == 1 and lines[0].startswith("tw-jax compile: does not fit: needs ")
    assert "BATCH_SIZE (now 100000)" in lines[0] and "fsdp axis is 4" in lines[0]


def test_hbm_override_decides_the_fit():
    result = _compile("--topology", "v5e:2x2", *TINY_GPT2, "--hbm-gib", "0.001")
    assert result.returncode == 1
    report = _report(result)
    assert report["fits"] is False and report["hbm_per_chip_bytes"] == int(0.001 * 1024**3)
    assert report["est_step_seconds"] > 0  # it compiled; only the budget is smaller


@pytest.mark.parametrize(
    ("args", "prefix", "message"),
    [
        (["--topology", "v9:2x2"], "", "unknown TPU generation 'v9' in 'v9:2x2'; known: v4"),
        (["--topology", "v5e-16"], "", "topology 'v5e-16' is not GENERATION:AxB[xC]"),
        (["--topology", "v5e:3x3"], "", "libtpu cannot describe topology 'v5e:3x3'"),
        (["--topology", "v5e:2x2", "--gin.MESH_SHAPE=(3, -1, 1)"], "",
         "MESH_SHAPE=(3, -1, 1) on v5e:2x2: the 4 devices do not divide into mesh shape"),
        (["--topology", "v5e:2x2"], "sys.modules['libtpu'] = None; ",  # import libtpu fails
         "libtpu is not installed: install the tpu extra"),
    ],
)
def test_bad_topology_mesh_or_installation_is_one_line_and_exit_2(args, prefix, message):
    result = _compile(*args, *TINY_GPT2, prefix=prefix)
    assert result.returncode == 2, result.stderr[-3000:]
    lines = _tw_jax_lines(result.stderr)
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("tw-jax compile: error: ") and message in lines[0]
