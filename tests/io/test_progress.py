"""A stage's progress in a log file: a plain line per interval, nothing for a short stage,
nothing when disabled; a bar only on a terminal."""

from __future__ import annotations

import re

from tw_jax.io.progress import PlainProgress, progress


def test_a_long_stage_prints_a_line_per_interval_and_when_it_ends(capsys):
    with PlainProgress(desc="comparing", unit=" articles", interval=0.0) as bar:
        bar.update(1200)
        bar.update(34)
    lines = capsys.readouterr().err.splitlines()
    assert [re.sub(r"\([\d,]+ ", "(N ", line) for line in lines] == [
        "comparing: 1,200 articles (N articles/s)",
        "comparing: 1,234 articles (N articles/s)",
        "comparing: 1,234 articles (N articles/s) done",
    ]


def test_a_short_stage_and_a_failed_one_print_nothing(capsys):
    assert list(PlainProgress(range(3), desc="reading", interval=60.0)) == [0, 1, 2]
    try:
        with PlainProgress(desc="ssm", interval=0.0) as bar:
            raise ValueError
    except ValueError:
        pass
    assert bar.n == 0
    assert capsys.readouterr().err == ""


def test_off_a_terminal_the_plain_form_is_chosen_unless_forced(capsys):
    assert isinstance(progress(desc="x"), PlainProgress)  # pytest's stderr is no terminal
    assert not isinstance(progress(desc="x", disable=True), PlainProgress)
    with progress(range(2), desc="x", disable=True) as bar:
        assert list(bar) == [0, 1]
    assert capsys.readouterr().err == ""
