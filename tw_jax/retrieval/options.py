"""The retrievers' command-line options, one definition for every command that retrieves
(``tw-jax evolvingqa retrieve`` and ``eval --method``, ``tw-jax probe-contexts``): the same
flags build the same retriever, so the same settings find the same stored index."""

from __future__ import annotations

import argparse
from typing import Any

from tw_jax.io.cli_paths import input_path


def add_retriever_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--question-encoder``, ``--ctx-encoder`` (dpr) and ``--bm25-k1``, ``--bm25-b``."""
    parser.add_argument("--question-encoder", default=None, type=input_path, metavar="DIR",
                        help="dpr: the question encoder (Hugging Face folder)")
    parser.add_argument("--ctx-encoder", default=None, type=input_path, metavar="DIR",
                        help="dpr: the passage (context) encoder (Hugging Face folder)")
    parser.add_argument("--bm25-k1", type=float, default=1.5, help="bm25: k1 (default 1.5)")
    parser.add_argument("--bm25-b", type=float, default=0.75, help="bm25: b (default 0.75)")


def retriever_from_args(args: argparse.Namespace, name: str | None = None) -> Any:
    """The retriever ``name`` (default ``args.retriever``) with the options' settings; its
    module is imported on use (dpr needs the dense encoders)."""
    from tw_jax.errors import UsageError
    from tw_jax.retrieval import retriever_class

    name = name or args.retriever
    cls = retriever_class(name)
    if name == "bm25":
        return cls(k1=args.bm25_k1, b=args.bm25_b)
    if name == "dpr":
        if not (args.question_encoder and args.ctx_encoder):
            raise UsageError("--retriever dpr needs --question-encoder DIR and --ctx-encoder DIR")
        try:
            return cls(question_encoder=args.question_encoder, ctx_encoder=args.ctx_encoder)
        except (ValueError, KeyError, FileNotFoundError) as error:  # names the folder already
            message = error.args[0] if isinstance(error, KeyError) and error.args else error
            raise UsageError(f"--question-encoder {args.question_encoder} / --ctx-encoder "
                             f"{args.ctx_encoder}: {message} (two DPR encoder folders, "
                             "question first)") from None
    return cls()
