"""The parser every command shares: one-line usage errors and T5X's gin flags."""

import argparse

import pytest

from tw_jax.cli import build_parser
from tw_jax.cli_parser import (
    OneLineErrorParser,
    add_gin_flags,
    expand_gin_flags,
    gin_search_paths,
)


def test_gin_dot_flags_become_bindings_in_order():
    assert expand_gin_flags(["--gin.A=1", "x", "--gin.B", "2", "--gin_file=f.gin"]) == [
        "--gin_bindings", "A=1", "x", "--gin_bindings", "B=2", "--gin_file=f.gin"]


@pytest.mark.parametrize("command", [
    ["train"], ["eval"], ["infer"], ["compile", "--topology", "v5e:2x2"],
    ["lifelong", "--months", "0809", "--out", "/tmp/o"],
    ["ckl", "train", "--data", "/tmp"],
    ["ecbd", "eval", "--data", "/tmp", "--out", "/tmp/o", "--model-dir", "/tmp"],
])
def test_every_gin_command_reads_gin_flags(command):
    parser = build_parser()
    args = parser.parse_args([*command, "--gin_file=a.gin", "--gin.MODEL_DIR='/m'",
                              "--gin.TRAIN_STEPS", "3", "--gin_bindings=X=1",
                              "--gin_search_paths=/p,/q", "--gin_search_paths=/r"])
    assert args.gin_file == ["a.gin"]
    assert args.gin_bindings == ["MODEL_DIR='/m'", "TRAIN_STEPS=3", "X=1"]
    assert gin_search_paths(args) == ["/p", "/q", "/r"]


def test_parsers_without_gin_flags_leave_gin_dot_arguments_alone(capsys):
    parser = OneLineErrorParser(prog="tw-jax x")
    parser.add_argument("--gin_bindings", action="append", default=[])
    with pytest.raises(SystemExit) as error:
        parser.parse_args(["--gin.A=1"])
    assert error.value.code == 2
    assert capsys.readouterr().err == "tw-jax x: error: unrecognized arguments: --gin.A=1\n"


def test_gin_flags_need_the_shared_parser():
    with pytest.raises(TypeError, match="OneLineErrorParser"):
        add_gin_flags(argparse.ArgumentParser(prog="plain"))


def test_a_missing_required_gin_file_is_one_line(capsys):
    parser = OneLineErrorParser(prog="tw-jax y")
    add_gin_flags(parser, required=True)
    with pytest.raises(SystemExit):
        parser.parse_args([])
    assert capsys.readouterr().err == (
        "tw-jax y: error: the following arguments are required: --gin_file\n")


def test_building_the_command_line_loads_no_heavy_package():
    """`tw-jax --help` and argument errors answer at once: each command's work is imported only
    when it runs (the CLI's deliberate lazy loading)."""
    import subprocess
    import sys

    heavy = ["tensorflow", "seqio", "jax", "flax", "apache_beam", "spacy", "torch"]
    code = ("import sys; from tw_jax.cli import build_parser; build_parser(); "
            f"print([m for m in {heavy!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "[]"


# (command, the old spelling of --rebuild it had)
REBUILD_COMMANDS = [
    (["evolvingqa", "build", "--dumps", "/", "--out", "/tmp/o"], "--force"),
    (["evolvingqa", "retrieve", "--data", "/", "--month", "0809", "--out", "/tmp/o"], "--force"),
    (["evolvingqa", "eval", "--checkpoint", "/", "--month", "0809", "--out", "/tmp/o"],
     "--rebuild-index"),
    (["probe-contexts", "--data", "/", "--month", "0809"], "--rebuild-index"),
]


def _leaf(parser, words):
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


@pytest.mark.parametrize(("command", "old"), REBUILD_COMMANDS)
def test_one_rebuild_flag_and_its_old_spelling_still_works(command, old, capsys):
    parser = build_parser()
    assert parser.parse_args(command).rebuild is False
    assert parser.parse_args([*command, "--rebuild"]).rebuild is True
    assert capsys.readouterr().err == ""
    assert parser.parse_args([*command, old]).rebuild is True
    leaf = " ".join(["tw-jax", *(w for w in command[:2] if not w.startswith("-"))])
    assert capsys.readouterr().err == f"{leaf}: {old} is deprecated: use --rebuild\n"
    words = [w for w in command[:2] if not w.startswith("-")]
    help_text = _leaf(parser, words).format_help()
    assert "--rebuild " in help_text and old not in help_text


def test_no_command_spells_rebuilding_the_old_ways():
    def options(parser):
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in action.choices.values():
                    yield from options(sub)
            elif action.help is not argparse.SUPPRESS:
                yield from action.option_strings

    shown = set(options(build_parser()))
    assert "--rebuild" in shown
    assert not shown & {"--force", "--rebuild-index"}
