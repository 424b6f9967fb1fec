"""The docs name real things: every repository path README.md and docs/ cite exists (not only
through the worktree's package links), and gin/README.md names every shipped gin file."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GIN = ROOT / "gin"
DOCS = [ROOT / "README.md", GIN / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
_TOP = r"(?:tw_jax|tests|tools|gin|docs|preprocess|tasks|requirements)"
# Files the docs tell a user to write (docs/architecture.md: adding a method).
USERS_OWN = {"gin/my_method.gin"}


def _cited(doc: Path) -> set[tuple[Path, str]]:
    """(the file it names, as written) for each `tw_jax/...`-like path and relative link."""
    text = doc.read_text(encoding="utf-8")
    cited = {(ROOT / path, path)
             for path in re.findall(r"`(" + _TOP + r"/[\w./-]*[\w/])(?=[`:( ])", text)}
    cited |= {(doc.parent / link, link) for link in re.findall(r"\]\(([^)#\s]+)", text)
              if "://" not in link}
    return cited


def _really_there(path: Path) -> bool:
    """There, and not only through a symbolic link (tw_jax/tasks is one in a worktree; the
    files are tasks/...)."""
    return path.exists() and os.path.realpath(path) == os.path.normpath(os.path.abspath(path))


def test_every_path_the_docs_cite_exists():
    cited = {(doc.relative_to(ROOT).as_posix(), written) for doc in DOCS
             for path, written in _cited(doc)
             if not _really_there(path) and written not in USERS_OWN}
    assert sorted(cited) == []
    assert sum(len(_cited(doc)) for doc in DOCS) > 100


def test_the_path_check_sees_a_package_link_and_a_moved_file(tmp_path):
    assert not _really_there(ROOT / "tests/train/test_checkpoint_saves.py")  # moved to runtime/
    assert _really_there(ROOT / "tasks/probes.py")
    link = tmp_path / "link"
    link.symlink_to(ROOT / "tasks")
    assert not _really_there(link / "probes.py")


def _bullets(text: str) -> list[str]:
    """gin/README.md's list items, each with its continuation lines."""
    items: list[str] = []
    for line in text.splitlines():
        if line.startswith("- "):
            items.append(line)
        elif items and line.startswith("  "):
            items[-1] += " " + line.strip()
    return items


def test_gin_readme_names_every_gin_file():
    """A file of a subfolder is named as `models/bart_tiny.gin` or by its stem in the folder's
    item (`models/`: `t5_tiny`, ...); a top-level one as `ckl.gin`."""
    text = (GIN / "README.md").read_text(encoding="utf-8")
    items = _bullets(text)
    missing = []
    for path in sorted(GIN.rglob("*.gin")):
        rel = path.relative_to(GIN).as_posix()
        folder = rel.rpartition("/")[0]
        if f"`{rel}`" in text:
            continue
        if folder:
            item = next((i for i in items if i.startswith(f"- `{folder}/`")), "")
            if f"`{path.stem}`" in item or f"`{path.name}`" in item:
                continue
        missing.append(rel)
    assert missing == []
    assert len(list(GIN.rglob("*.gin"))) > 40
