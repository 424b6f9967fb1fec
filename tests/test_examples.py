"""Every ``tw-jax`` example in the --help epilogs, README.md, gin/README.md and docs/*.md is
checked against the real command line, so an example cannot drift from the code.

Running each one end to end would take the whole suite's time; the bar is what makes a new user's
first try fail:

- every example names a real command and only its options, and every ``--gin_file`` it gives is
  a shipped gin file (or a ``config.gin`` a run wrote);
- every complete example (the --help ones, and every command of a code block in README.md and
  gin/README.md) is accepted by the parser as written, in a folder where the paths it reads are
  what the sample world, the demo or another example writes there: argparse checks that each
  input exists, so ``world/dumps/enwiki-2021-08.xml.bz2`` (not what ``tw-jax sample-world``
  writes) fails here;
- an example that reads a cloud bucket (``gs://``), a shell variable or an elided part (``...``)
  cannot be parsed as written; it is held to the first check only.
"""

from __future__ import annotations

import argparse
import contextlib
import glob
import io
import os
import re
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest

from tw_jax.cli import EXAMPLES, build_parser

ROOT = Path(__file__).resolve().parents[1]
GIN = ROOT / "gin"
DOCS = [ROOT / "README.md", ROOT / "gin" / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# Where a complete example must parse as written (the others may elide or use buckets).
COMPLETE_IN = {ROOT / "README.md", ROOT / "gin" / "README.md"}

# What `tw-jax demo --out demo_out` leaves that examples read (tw_jax/demo.py's docstring):
# the data folder the tasks read, its vocabularies, one month pair's stages, and the runs.
DEMO_LAYOUT = (
    "sample_world/", "data/vocab/t5/spiece.model", "data/vocab/gpt2/vocab.json",
    "data/08/full/", "data/0809/diffset/", "data/0809/probes/", "data/0809/ssm/", "report/",
    *(f"runs/checkpoints/{method}/0809/config.gin"
      for method in ("diff", "kadapter", "lora", "mixreview")),
    "runs/checkpoints/initial/08/config.gin",
)

# Data folders built from the sample world (by the demo, the stages, evolvingqa build): what
# trains or scores on them uses a tiny model (the shipped experiment files are paper-sized).
SAMPLE_DATA = ("demo_out", "data", "eqa")
# Gin files the docs tell a user to write (docs/architecture.md: adding a model family).
USERS_OWN = ("my_model.gin",)
# Inputs no tw-jax example writes, named so that a new one is a decision, not an accident:
# CKL's released files (ckl_cli's CKL_DIR), a checkpoint of the real T5X (docs/t5x.md), the
# Wikimedia dumps of docs/your_own_months.md, a Hugging Face model folder (docs/open_llms.md).
DOWNLOADED = ("ckl/", "t5x_runs/kadapter/checkpoint_4/", "models/Llama-3.2-1B/",
              *(f"dumps/enwiki-{day}-pages-articles-multistream.xml.bz2"
                for day in ("20241101", "20241201")),
              *(f"dumps/wikidata-{day}-all.json.bz2" for day in ("20241104", "20241202")))


def _commands(line: str) -> list[list[str]]:
    """The ``tw-jax`` commands of one shell line: the words after ``tw-jax`` (or
    ``.venv/bin/tw-jax``) of each part that starts with it (after ``VAR=value`` prefixes), parts
    split at ``&&``, ``;`` or ``|``; comments dropped."""
    if "tw-jax" not in line:
        return []
    try:
        words = shlex.split(line, comments=True)
    except ValueError as error:
        raise ValueError(f"{line!r}: {error}") from error
    parts: list[list[str]] = [[]]
    for word in words:
        if word in ("&&", ";", "|", "||"):
            parts.append([])
        else:
            parts[-1].append(word)
    commands = []
    for part in parts:
        while part and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", part[0]):
            part = part[1:]
        if part and (part[0] == "tw-jax" or part[0].endswith("/tw-jax")):
            commands.append(part[1:])
    return commands


def _code_lines(text: str) -> list[str]:
    """The shell lines of every fenced code block, ``\\`` continuations joined."""
    lines, fenced, pending = [], False, ""
    for raw in text.splitlines():
        if raw.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            continue
        if raw.rstrip().endswith("\\"):
            pending += raw.rstrip()[:-1] + " "
            continue
        lines.append(pending + raw)
        pending = ""
    return lines


def _examples() -> list[tuple[str, list[str], bool]]:
    """(where, words after tw-jax, complete-as-written expected) of every example."""
    found = [(f"--help of {name}", shlex.split(example)[1:], True)
             for name, example in EXAMPLES.items()]
    for doc in DOCS:
        text = doc.read_text(encoding="utf-8")
        where = doc.relative_to(ROOT)
        for line in _code_lines(text):
            for words in _commands(line):
                found.append((f"{where}: {line.strip()}", words, doc in COMPLETE_IN))
        for span in re.findall(r"`(tw-jax [^`]*)`", text):
            words = shlex.split(span)[1:]
            found.append((f"{where}: `{span}`", words, False))
    return found


EXAMPLE_LIST = _examples()


def _leaf(parser: argparse.ArgumentParser, words: list[str]) -> tuple[argparse.ArgumentParser,
                                                                       list[str]]:
    """The (sub)command parser the words name, and the words after its name."""
    words = list(words)
    while True:
        subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        if not subs or not words or words[0] not in subs[0].choices:
            return parser, words
        parser = subs[0].choices[words.pop(0)]


def _gin_files(words: list[str]) -> list[str]:
    files = []
    for index, word in enumerate(words):
        if word.startswith("--gin_file="):
            files.append(word.split("=", 1)[1])
        elif word == "--gin_file" and index + 1 < len(words):
            files.append(words[index + 1])
    return files


def _placeholder(word: str) -> bool:
    """``DIR``, ``OUT_DIR/``, ``--data=DATA``: an upper-case name standing for a value."""
    value = word.split("=", 1)[1] if word.startswith("--") and "=" in word else word
    if word.startswith("--") and "=" not in word:
        return False
    return any(re.fullmatch(r"[A-Z][A-Z0-9_]+", part) for part in value.split("/"))


def _complete(words: list[str]) -> bool:
    """No bucket, shell variable, elision or placeholder (``[--k 5]``, ``bm25|dpr``, ``DIR``)."""
    return not any(mark in word for word in words
                   for mark in ("gs://", "$", "...", "…", "[", "|")) and not any(
        _placeholder(word) for word in words)


def test_examples_were_found_in_every_source():
    wheres = {where.split(":")[0] for where, _, _ in EXAMPLE_LIST}
    assert {"README.md", "gin/README.md", "docs/t5x.md", "docs/tpu.md"} <= wheres
    assert sum(where.startswith("--help") for where in wheres) == len(EXAMPLES)
    assert len(EXAMPLE_LIST) > 150


@pytest.mark.parametrize(("where", "words", "complete"), EXAMPLE_LIST,
                         ids=[where[:80] for where, _, _ in EXAMPLE_LIST])
def test_every_example_names_a_command_its_options_and_shipped_gin_files(where, words,
                                                                         complete):
    leaf, rest = _leaf(build_parser(), [w for w in words if w not in ("--debug", "--verbose")])
    assert not any(isinstance(a, argparse._SubParsersAction) for a in leaf._actions) or (
        rest and rest[0] in ("...", "…")), f"{where}: no such command"
    known = {option for action in leaf._actions for option in action.option_strings
             if action.help is not argparse.SUPPRESS}  # not the deprecated spellings
    passed_through = leaf.prog.endswith("lm-eval")  # lm-eval's own options, its CLI checks them
    for before, word in zip(["", *rest], rest, strict=False):
        option = word.split("=", 1)[0]
        if passed_through:
            break
        if before == "--beam-options":  # Beam's flags, one argument: not the command's options
            continue
        if word.startswith("--gin."):
            assert "--gin_bindings" in known, where
        elif word.startswith("--") and option != "--debug":
            assert option in known, f"{where}: {option} is not an option of {leaf.prog}"
    for gin_file in _gin_files(words):
        shipped = (GIN / gin_file).is_file() or gin_file in USERS_OWN
        written = gin_file.endswith("/config.gin")  # every run writes MODEL_DIR/config.gin
        assert shipped or written or not _complete([gin_file]), (
            f"{where}: --gin_file={gin_file} is not in {GIN}")
    if complete and not any("gs://" in word for word in words):
        assert _complete(words), f"{where}: not complete as written"


def _create(path: Path, folder: bool) -> None:
    if folder:
        path.mkdir(parents=True, exist_ok=True)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()


def _outputs(args: argparse.Namespace) -> list[str]:
    """The folders a parsed command writes: --out, --model-dir and gin's MODEL_DIR (with its
    config.gin); ``evolvingqa generate`` writes DATA/qa unless given --out."""
    found = [getattr(args, name) for name in ("out", "model_dir")
             if isinstance(getattr(args, name, None), str)]
    if getattr(args, "evolvingqa_command", None) == "generate" and not args.out:
        found.append(os.path.join(args.data, "qa"))
    found += _named_by_dates(args)
    for binding in getattr(args, "gin_bindings", []):
        key, _, value = binding.partition("=")
        if key == "MODEL_DIR":
            found.append(value.strip("'\""))
    return found


def _named_by_dates(args: argparse.Namespace) -> list[str]:
    """The stage folders a command names under ``--data`` from its dumps' dates, as the
    command itself names them (``tw-jax diffset --data``, ``probes --data``, ``build``)."""
    from tw_jax.preprocess.build.dumps import find_dumps
    from tw_jax.preprocess.build.plan import plan
    from tw_jax.preprocess.diffset.cli import output_of
    from tw_jax.preprocess.probes.cli import folders_of

    if args.command == "build":
        return [stage.folder for stage in plan(args.data, find_dumps(args.dumps).snapshots)]
    if args.command in ("diffset", "probes") and getattr(args, "data", None):
        return [output_of(args) if args.command == "diffset" else folders_of(args)[1]]
    return []


def _parsed(parser: argparse.ArgumentParser, words: list[str]) -> argparse.Namespace | str:
    """The parsed arguments (``*`` expanded as a shell would), or why not: argparse's error, or
    a gin file that is neither shipped nor written by a run there."""
    argv = [match for word in words
            for match in (sorted(glob.glob(word)) if "*" in word else [word]) or [word]]
    errors = io.StringIO()
    try:
        with contextlib.redirect_stderr(errors):
            args = parser.parse_args(argv)
    except SystemExit:
        return errors.getvalue().strip()
    gin_files = _gin_files(words)
    missing = [name for name in gin_files
               if not (GIN / name).is_file() and not Path(name).is_file()]
    if missing:
        return f"--gin_file {missing[0]}: no such file"
    # evolvingqa's --t5-vocab, and --vocab of ckl / ecbd eval of a MODEL_DIR: DATA/vocab/t5
    unset = [flag for flag, dest in (("--t5-vocab", "t5_vocab"), ("--vocab", "vocab"))
             if getattr(args, dest, "given") is None
             and (dest == "t5_vocab" or getattr(args, "model_dir", None))]
    default = os.path.join(getattr(args, "data", None) or ".", "vocab/t5/spiece.model")
    if unset and not os.path.isfile(default):
        return f"no {unset[0]}, and no {default}"
    bindings = dict(b.split("=", 1) for b in getattr(args, "gin_bindings", []))
    data = str(getattr(args, "data", None) or bindings.get("DATA_DIR", "")).strip("'\"")
    shipped = [name for name in gin_files if (GIN / name).is_file()]
    if shipped and data and os.path.relpath(data).split(os.sep)[0] in SAMPLE_DATA and not any(
            re.fullmatch(r"models/\w+_tiny\.gin", name) for name in shipped):
        return f"trains a paper-sized model on the sample world's {data}: add models/*_tiny.gin"
    return args


def test_every_complete_example_parses_where_the_sample_world_and_the_other_examples_wrote(
        sample_world, tmp_path, monkeypatch):
    """In an empty folder, as a new user would: `sample-world --out world/` leaves the real
    sample world, `demo --out demo_out` the demo's layout, and every other command its output
    folders; an example whose inputs nothing writes fails to parse (argparse checks them)."""
    root, _ = sample_world
    monkeypatch.chdir(tmp_path)
    for path in DOWNLOADED:
        _create(tmp_path / path, path.endswith("/"))
    pending = [(where, words) for where, words, _ in EXAMPLE_LIST
               if _complete(words) and "`" not in where]
    written: set[str] = set()
    parser = build_parser()
    while pending:
        progress, still = False, []
        for where, words in pending:
            args = _parsed(parser, words)
            if isinstance(args, str):
                still.append((where, words))
                continue
            progress = True
            for out in _outputs(args):
                out = os.path.relpath(out, tmp_path)
                if out.startswith(".."):  # an absolute path elsewhere: nothing is made there
                    continue
                written.add(out.split(os.sep)[0])
                if words[0] == "sample-world" and not (tmp_path / out).exists():
                    (tmp_path / out.rstrip("/")).symlink_to(root, target_is_directory=True)
                elif words[0] == "demo":
                    for path in DEMO_LAYOUT:
                        _create(tmp_path / out / path, path.endswith("/"))
                else:
                    _create(tmp_path / out, folder=True)
                    _create(tmp_path / out / "config.gin", folder=False)
        pending = still
        if not progress:
            break
    failures = [f"{where}: {_parsed(parser, words)}" for where, words in pending]
    assert failures == [], "\n".join(failures)
    _assert_ignored_by_git(written)


def _assert_ignored_by_git(folders: set[str]) -> None:
    """What the examples write into a checkout (`runs/`, `world/` ...) is no change to commit."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        return  # not a checkout (an installed copy): nothing to ignore
    assert {"world", "runs", "demo_out", "data"} <= folders
    result = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "--no-index",
                             *(f"{folder}/x" for folder in sorted(folders))],
                            capture_output=True, text=True, check=False)
    ignored = {line.split("/")[0] for line in result.stdout.split()}
    assert sorted(folders - ignored) == []
