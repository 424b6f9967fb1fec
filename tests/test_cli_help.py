"""Every command's --help reads alike: nested commands are SUBCOMMANDs, and each ends with an
example line whose options are that command's own (so the example cannot drift)."""

from __future__ import annotations

import argparse
import shlex

from tw_jax.cli import EXAMPLES, build_parser


def _leaves(parser: argparse.ArgumentParser, name: str = ""):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield name, parser
    for action in subs:
        assert action.metavar == ("SUBCOMMAND" if name else "COMMAND")
        for command, sub in action.choices.items():
            yield from _leaves(sub, f"{name} {command}".strip())


def test_every_command_ends_its_help_with_an_example_of_its_own_options():
    leaves = dict(_leaves(build_parser()))
    assert sorted(leaves) == sorted(EXAMPLES)
    for name, parser in leaves.items():
        example = EXAMPLES[name]
        assert parser.format_help().rstrip().endswith(f"example: {example}".split()[-1])
        assert parser.epilog == f"example: {example}"
        words = shlex.split(example)
        assert words[: 1 + len(name.split())] == ["tw-jax", *name.split()], name
        known = {option for action in parser._actions for option in action.option_strings}
        if name == "lm-eval":  # lm-eval's own options, passed through to its command line
            continue
        for word in words:
            option = word.split("=", 1)[0]
            if word.startswith("--gin."):
                assert "--gin_bindings" in known, name
            elif word.startswith("--"):
                assert option in known, f"{name}: {option} is not an option of it"


def test_options_are_dashed_except_t5x_gin_flags():
    t5x = {"--gin_file", "--gin_bindings", "--gin_search_paths"}
    for name, parser in _leaves(build_parser()):
        for action in parser._actions:
            dashed = [o for o in action.option_strings if o.startswith("--") and "_" not in o]
            underscored = [o for o in action.option_strings if o.startswith("--") and "_" in o]
            for option in underscored:
                # T5X's gin flags, or an underscore alias of a dashed option (--num_slices)
                assert option in t5x or option.replace("_", "-") in dashed, (name, option)
