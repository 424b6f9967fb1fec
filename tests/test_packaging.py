"""The distribution installs `tasks` and `preprocess` under tw_jax, never as top-level names."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _package_folders() -> set[str]:
    mapping = {"tw_jax": "tw_jax", "preprocess": "tw_jax.preprocess", "tasks": "tw_jax.tasks"}
    found = set()
    for top, dotted in mapping.items():
        for init in (ROOT / top).rglob("__init__.py"):
            relative = init.parent.relative_to(ROOT / top)
            found.add(".".join([dotted, *relative.parts]))
    # The repository's gin/ folder ships as data (no __init__.py: a top-level `gin` package in the
    # repository would shadow gin-config), so `--gin_file=kadapter.gin` works from any folder.
    found.add("tw_jax.gin_files")
    return found


def test_every_package_folder_is_listed_in_pyproject():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    listed = set(config["tool"]["setuptools"]["packages"])
    assert _package_folders() == listed


def test_tasks_and_preprocess_import_under_tw_jax():
    import tw_jax.preprocess
    import tw_jax.tasks

    assert Path(tw_jax.preprocess.__file__).parent == ROOT / "preprocess"
    assert Path(tw_jax.tasks.__file__).parent == ROOT / "tasks"
    assert tw_jax.__version__


def test_console_script_lists_the_stages(capsys):
    from tw_jax.cli import main

    try:
        main(["--help"])
    except SystemExit as exit_:
        assert exit_.code == 0
    out = capsys.readouterr().out
    for command in ("diffset", "sample-world", "demo", "ssm", "train", "eval", "infer", "report"):
        assert command in out


def test_gin_files_ship_with_the_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert config["tool"]["setuptools"]["package-dir"]["tw_jax.gin_files"] == "gin"
    assert (ROOT / "gin" / "kadapter.gin").exists() and not (ROOT / "gin" / "__init__.py").exists()
