"""The argument parser every ``tw-jax`` command uses: a usage error is one line.

argparse prints the whole usage block above its error; a command with twenty options buries
the one thing that went wrong (``--in gs://b/x: no such object or folder``). Here the error is
the line (``--help`` still shows the usage); the exit status stays argparse's 2.
"""

from __future__ import annotations

import argparse
from typing import NoReturn


class OneLineErrorParser(argparse.ArgumentParser):
    """``argparse.ArgumentParser`` whose usage errors are one line on stderr, exit status 2.

    Subcommand parsers inherit it (``add_subparsers`` makes parsers of the parent's class).
    """

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message}\n")
