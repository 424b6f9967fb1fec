"""Checks the layer contract of pyproject.toml (``[tool.importlinter]``) with import-linter.

    python tools/lint_imports.py          # exit 0 when every contract is kept

import-linter reads a package from one folder, but tw_jax installs three folders of this
repository under one import name (``preprocess/`` as ``tw_jax.preprocess``, ``tasks/`` as
``tw_jax.tasks``: ``package-dir`` in pyproject.toml). So the package is first laid out as it
installs, with symbolic links in a temporary folder, and the linter runs in a child process
that imports ``tw_jax`` from there (never the installed copy). ``tests/test_layers.py`` runs it,
and checks that an upward import breaks it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Mapping
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def package_dirs(repo: Path = REPO) -> dict[str, Path]:
    """Import name → folder, from pyproject.toml's ``[tool.setuptools] package-dir``."""
    config = tomllib.loads((repo / "pyproject.toml").read_text())
    mapping = config["tool"]["setuptools"]["package-dir"]
    return {name: repo / folder for name, folder in mapping.items()
            if (repo / folder / "__init__.py").exists()}


def lay_out(target: Path, repo: Path = REPO, replace: Mapping[str, str] | None = None) -> Path:
    """``target/tw_jax``: the package as it installs, its files linked to the repository's.

    ``replace`` maps a path inside the package (``preprocess/dumps/wikipedia.py``) to text that
    stands in for that file (what a test uses to add an import).
    """
    replace = dict(replace or {})
    folders = package_dirs(repo)
    mapped = {folder.resolve() for folder in folders.values()}
    for name, folder in sorted(folders.items(), key=lambda item: item[0].count(".")):
        place = target.joinpath(*name.split("."))
        place.mkdir(parents=True, exist_ok=True)
        for source in folder.rglob("*.py"):
            relative = source.relative_to(folder)
            destination = place / relative
            inside_other = any((folder / parent).resolve() in mapped
                               for parent in list(relative.parents)[:-1])
            if destination.exists() or inside_other:  # a folder mapped to another name
                continue
            destination.parent.mkdir(parents=True, exist_ok=True)
            key = destination.relative_to(target / "tw_jax").as_posix()
            if key in replace:
                destination.write_text(replace.pop(key))
            else:
                destination.symlink_to(source)
    if replace:
        raise KeyError(f"no such module to replace: {sorted(replace)}")
    return target


def lint(tree: Path, config: Path = REPO / "pyproject.toml") -> subprocess.CompletedProcess:
    """import-linter's report on the package laid out under ``tree``."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    script = ("import sys; from importlinter.cli import lint_imports; "
              "sys.exit(lint_imports(config_filename=sys.argv[1], no_cache=True))")
    return subprocess.run([sys.executable, "-c", script, str(config)], env=env, cwd=tree,
                          capture_output=True, text=True, check=False)


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tw_jax_layers_") as folder:
        result = lint(lay_out(Path(folder)))
    sys.stdout.write(result.stdout)
    sys.stderr.write(result.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
