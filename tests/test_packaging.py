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
    for command in ("diffset", "sample-world", "demo"):
        assert command in out
