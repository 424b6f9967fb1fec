"""The layer contract of docs/architecture.md holds, and breaks when someone imports upwards."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import lint_imports  # noqa: E402

pytest.importorskip("importlinter")


def test_the_repository_keeps_every_contract(tmp_path):
    result = lint_imports.lint(lint_imports.lay_out(tmp_path))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Contracts: 3 kept, 0 broken." in result.stdout


def test_the_layout_is_the_installed_package(tmp_path):
    tree = lint_imports.lay_out(tmp_path) / "tw_jax"
    assert (tree / "preprocess" / "dumps" / "wikipedia.py").resolve() == (
        lint_imports.REPO / "preprocess" / "dumps" / "wikipedia.py")
    assert (tree / "tasks" / "twiki.py").resolve() == lint_imports.REPO / "tasks" / "twiki.py"
    assert (tree / "models" / "t5.py").is_symlink()
    assert not (tree / "gin_files").exists()  # data, not a package


@pytest.mark.parametrize(
    ("module", "line", "broken"),
    [
        # a stage reaching up into training
        ("preprocess/dumps/wikipedia.py", "import tw_jax.train.trainer",
         "- tw_jax.preprocess.dumps.wikipedia -> tw_jax.train.trainer"),
        # the ground floor reaching up into a stage, even inside a function
        ("tw_jax/io/paths.py", "def f():\n    from tw_jax.tasks import twiki",
         "- tw_jax.io.paths -> tw_jax.tasks.twiki"),
        # evaluation reaching into training: they share the runtime below both, never each other
        ("tw_jax/evaluate/runs.py", "def h():\n    from tw_jax.train import trainer",
         "- tw_jax.evaluate.runs -> tw_jax.train.trainer"),
        ("tw_jax/train/trainer.py", "from tw_jax.evaluate import results",
         "- tw_jax.train.trainer -> tw_jax.evaluate.results"),
        # the runtime reaching up into the lifelong runner
        ("tw_jax/runtime/checkpoints.py", "import tw_jax.lifelong.runner",
         "- tw_jax.runtime.checkpoints -> tw_jax.lifelong.runner"),
        # models' shared pieces importing the package that imports them back
        ("tw_jax/models/variants.py", "def g():\n    from tw_jax.models import abstract_variables",
         "tw_jax.models.variants is not allowed to import tw_jax.models.families"),
    ],
)
def test_an_upward_import_breaks_the_contract(tmp_path, module, line, broken):
    key = module.split("/", 1)[1] if module.startswith("tw_jax/") else module
    tree = lint_imports.lay_out(tmp_path, replace={
        key: (lint_imports.REPO / module).read_text() + "\n" + line + "\n"})
    result = lint_imports.lint(tree)
    assert result.returncode == 1
    assert "BROKEN" in result.stdout
    assert broken in result.stdout


def test_a_replacement_must_name_a_module(tmp_path):
    with pytest.raises(KeyError, match="no such module"):
        lint_imports.lay_out(tmp_path, replace={"preprocess/nowhere.py": ""})
