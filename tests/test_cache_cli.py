"""``tw-jax cache``: SeqIO's cache job on a data folder's tasks with the stages' --beam-options,
the cache where the runs look, and one-line errors where SeqIO's job would exit 0 with nothing
written."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

import tw_jax.tasks
from tw_jax.cache_cli import cache_command, pipeline_options_flag, selected_tasks
from tw_jax.cli import main
from tw_jax.tasks.cache import CACHE_DIR_ENV

SSM = "twiki_diffset_0809_ssm"
PROBE_TASKS = [f"twiki_probes_0809_{c}" for c in ("unchanged", "updated", "new", "changed")]


def _cache(data: dict, *argv: str) -> int:
    return main(["cache", "--data", str(data["data_dir"]), "--t5-vocab", str(data["t5"]),
                 "--gpt2-vocab", str(data["gpt2"]), "--min-shards", "2", *argv])


def test_caches_the_tasks_where_the_runs_look(train_data, tmp_path, monkeypatch, capsys):
    out = tmp_path / "cache"
    monkeypatch.setenv(CACHE_DIR_ENV, str(out))  # where register_all (and every run) looks
    assert _cache(train_data, "--tasks", f"{SSM},twiki_probes_0809_up[a-z]+") == 0
    printed = capsys.readouterr()
    assert printed.out.strip() == f"cached 2 tasks in {out}: {SSM}, twiki_probes_0809_updated"
    assert "--pipeline_options=--runner=DirectRunner" in printed.err
    assert sorted(p.name for p in out.iterdir()) == [SSM, "twiki_probes_0809_updated"]
    assert all((out / task / "COMPLETED").is_file() for task in [SSM, "twiki_probes_0809_updated"])


def test_a_mixture_stands_for_its_tasks(train_data):
    names = tw_jax.tasks.register_all(train_data["data_dir"], t5_vocab=str(train_data["t5"]),
                                      gpt2_vocab=str(train_data["gpt2"]))
    chosen = selected_tasks([SSM, "twiki_probes_0809"], names)
    assert chosen[0] == SSM and sorted(chosen[1:]) == sorted(PROBE_TASKS)
    assert selected_tasks(["twiki_diffset_0809"], names) == []  # a whole name, not a prefix


def test_no_matching_task_is_an_error_not_an_empty_cache(train_data, tmp_path, capsys):
    assert _cache(train_data, "--tasks", "twiki_diffset_0101_ssm", "--out", str(tmp_path)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"tw-jax cache: error: no task of {train_data['data_dir']} matches --tasks "
                   f"twiki_diffset_0101_ssm; `tw-jax tasks --data {train_data['data_dir']}` "
                   "lists them"]
    assert not list(tmp_path.iterdir())


def test_beam_options_are_checked_as_the_stages_check_them(train_data, capsys):
    with pytest.raises(SystemExit) as exit_:
        _cache(train_data, "--tasks", SSM, "--beam-options", "--runner=DataflowRunner")
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "tw-jax cache: error: argument --beam-options: DataflowRunner needs --project=PROJECT "
        "(docs/beam.md)")


def test_the_job_gets_beams_flags_as_one_list_flag():
    flags = ["--runner=DataflowRunner", "--project=p", "--experiments=a,b"]
    flag = pipeline_options_flag(flags)
    assert flag == '--pipeline_options=--runner=DataflowRunner,--project=p,"--experiments=a,b"'
    # absl parses a list flag as one CSV row: the flag with a comma stays whole
    assert next(csv.reader([flag.split("=", 1)[1]])) == flags
    command = cache_command([SSM], "gs://b/cache", [], min_shards=8, overwrite=True)
    assert command[1:] == ["-m", "seqio.scripts.cache_tasks_main", "--module_import=tw_jax.tasks",
                           f"--tasks={SSM}", "--output_cache_dir=gs://b/cache", "--min_shards=8",
                           "--pipeline_options=--runner=DirectRunner", "--overwrite"]
    assert Path(command[0]).name.startswith("python")
