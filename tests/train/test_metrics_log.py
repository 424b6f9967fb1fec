"""The plain progress lines of a run whose stderr is a file: what a TPU VM's nohup.out or a CI
log shows per LOG_PERIOD."""

from tw_jax.train import metrics_log


def test_the_eta_counts_from_the_first_logged_step_not_the_compilation(monkeypatch, capsys):
    clock = iter([100.0, 110.0, 112.0, 120.0])  # step 1 after a 100 s compile, then 0.2 s/step
    monkeypatch.setattr(metrics_log.time, "monotonic", lambda: next(clock))
    lines = metrics_log._PlainLines(total_steps=100, start_step=0)
    for step in (1, 51, 61, 100):
        lines.write(step, {"loss": 2.5, "tokens_per_second": 1234.0})
    assert capsys.readouterr().err.splitlines() == [
        "step 1/100 loss 2.5 tokens/s 1,234",  # no ETA from a step that compiled
        "step 51/100 loss 2.5 tokens/s 1,234 ETA 0:00:10",  # 0.2 s a step, 49 to go
        "step 61/100 loss 2.5 tokens/s 1,234 ETA 0:00:08",  # 12 s for 60 steps, 39 to go
        "step 100/100 loss 2.5 tokens/s 1,234 ETA 0:00:00",
    ]
