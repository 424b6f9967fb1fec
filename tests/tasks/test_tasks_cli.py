"""`tw-jax tasks` lists what a data folder registers, and says so when no folder is set."""

from __future__ import annotations

from tw_jax.cli import main


def test_lists_tasks_and_mixtures_with_their_files(train_data, capsys):
    data = train_data["data_dir"]
    assert main(["tasks", "--data", str(data), "--match", "0809_lm"]) == 0
    out, err = capsys.readouterr()
    lines = out.splitlines()
    assert f"twiki_diffset_0809_lm  task  train: {data}/0809/diffset/diffset.tfrecord-*-of-*; " \
           f"validation: {data}/0809/diffset/diffset.tfrecord-*-of-*" in lines
    assert "twiki_mixreview_0809_lm  mixture of twiki_diffset_0809_lm (1), twiki_full_08_lm (2)" \
        in lines
    assert err.strip().startswith(f"{len(lines)} of ")
    assert err.strip().endswith(f"tasks and mixtures registered from {data}")


def test_no_data_folder_is_one_line(monkeypatch, capsys):
    monkeypatch.delenv("TW_JAX_DATA_DIR", raising=False)
    assert main(["tasks"]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "tw-jax tasks: error: no data folder: pass --data DIR or set $TW_JAX_DATA_DIR (and/or "
        "--published for the released files)"
    ]


def test_importing_the_tasks_without_a_data_folder_logs_why():
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TW_JAX_DATA_DIR"}
    code = "import logging; logging.basicConfig(level=logging.DEBUG); import tw_jax.tasks"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                          check=True)
    assert ("tw_jax.tasks: $TW_JAX_DATA_DIR is not set, so no data folder's tasks were "
            "registered at import; `tw-jax tasks --data DIR` lists a folder's") in done.stderr
