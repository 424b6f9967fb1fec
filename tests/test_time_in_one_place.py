"""Time is parsed, formatted and ordered in one module (tw_jax/time.py) and TemporalWiki's task
names are built in one (tasks/names.py): a month regular expression, a slice of a month string
or a task name written by hand anywhere else in the code fails here, naming the line."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SOURCES = ("tw_jax", "tasks", "preprocess", "tools")
TIME_MODULE = REPO / "tw_jax" / "time.py"
NAMES_MODULE = REPO / "tasks" / "names.py"

# Fixed-width digit groups are how a month, a year or a dump date is matched: \d{2}, \d{4},
# \d{6}, \d{8}, \d\d, [0-9]{2} ... (a count of digits such as \d+ or \d{1,3} is not).
_DATE_PATTERN = re.compile(r"\\d\{[2468]\}|\\d\\d|\[0-9\]\{[2468]\}|\[0-9\]\[0-9\]")
# A slice of something named as a month, pair, period, snapshot or date (or a pair's old and
# new month): months[0][:2], pair[2:], old[-2:], date_v[1][6:8]; not a list's neighbours
# (months[1:], months[:-1]).
_MONTH_SLICE = re.compile(
    r"(?:\b\w*(?:month|pair|period|snapshot|date)\w*|\bold|\bnew)(?P<index>(?:\[[^\[\]:]*\])*)"
    r"\[(?!1:\]|:-1\]|-1:\]|:1\])-?\d*:-?\d*\]")


def _month_slice(code: str) -> bool:
    """A slice of a month's string; a plural sliced whole (``periods[:2]``: the first two
    periods) is a list, not a string."""
    for match in _MONTH_SLICE.finditer(code):
        name = match.group(0).split("[", 1)[0]
        if not (name.endswith("s") and not match.group("index")):
            return True
    return False
_TASK_NAME = re.compile(r"twiki_[a-z0-9_]*\{")


def _python_files() -> list[Path]:
    return sorted(p for folder in SOURCES for p in (REPO / folder).rglob("*.py"))


def _strings(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string literal, f-strings' literal parts included."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            found.append((node.lineno, node.value))
    return found


def _fstring_sources(tree: ast.AST, source: str) -> list[tuple[int, str]]:
    return [(node.lineno, ast.get_source_segment(source, node) or "")
            for node in ast.walk(tree) if isinstance(node, ast.JoinedStr)]


def _docstrings(tree: ast.AST) -> set[int]:
    """Line numbers of docstrings (prose may show a pattern)."""
    lines = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = getattr(node, "body", [])
            if body and isinstance(body[0], ast.Expr) and isinstance(
                    getattr(body[0], "value", None), ast.Constant):
                lines.add(body[0].value.lineno)
    return lines


def test_month_patterns_and_slices_live_in_the_time_module_only():
    found = []
    for path in _python_files():
        if path == TIME_MODULE:
            continue
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        docs = _docstrings(tree)
        where = path.relative_to(REPO)
        for line, text in _strings(tree):
            if line not in docs and _DATE_PATTERN.search(text):
                found.append(f"{where}:{line}: a date pattern {text!r}")
        for number, line in enumerate(source.splitlines(), start=1):
            code = line.split("#", 1)[0]
            if _month_slice(code):
                found.append(f"{where}:{number}: a month slice {line.strip()!r}")
    assert found == [], "ask tw_jax.time instead:\n" + "\n".join(found)


def test_task_names_are_built_in_the_names_module_only():
    found = []
    for path in _python_files():
        if path == NAMES_MODULE:
            continue
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        for line, text in _fstring_sources(tree, source):
            if _TASK_NAME.search(text):
                found.append(f"{path.relative_to(REPO)}:{line}: {text}")
    assert found == [], "build them with tw_jax.tasks.names:\n" + "\n".join(found)


def test_the_checks_catch_what_they_look_for(tmp_path):
    """The patterns find the forms that were everywhere before the time module."""
    assert _DATE_PATTERN.search(r"^(\d{2})(\d{2})$") and _DATE_PATTERN.search(r"^[0-9]{4}$")
    assert _DATE_PATTERN.search(r"-(\d\d)T") and not _DATE_PATTERN.search(r"\d+|\d{1,3}")
    for code in ("first = months[0][:2]", "pair[2:]", "old[-2:] + new[-2:]",
                 "int(date_v[1][6:8])", "settings.months[0][:2]"):
        assert _month_slice(code), code
    for code in ("x.shape[:2]", "cells[2:]", "words[-2:]", "table.headers[:2]",
                 "zip(months, months[1:])", "newest[:-1]", "span.periods[:2]"):
        assert not _month_slice(code), code
    source = 'name = f"twiki_diffset_{pair}_lm"\n'
    assert any(_TASK_NAME.search(t) for _, t in _fstring_sources(ast.parse(source), source))
    assert not _TASK_NAME.search('f"{x}: the probes (twiki_probes_<period>_new)"')
