"""The retrievers' settings and command-line options, one definition for every command that
retrieves (``tw-jax evolvingqa retrieve`` and ``eval --method``, ``tw-jax probe-contexts``): the
same flags build the same :class:`RetrieverSettings`, and the same settings build the same
retriever, so they find the same stored index."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from tw_jax.io.cli_paths import input_path

BM25_K1 = 1.5
BM25_B = 0.75


@dataclass(frozen=True)
class RetrieverSettings:
    """Which retriever, with its settings: what a Python caller gives where the command line
    gives ``--retriever`` (or ``--method``) and the options of :func:`add_retriever_options`."""

    name: str = "bm25"
    bm25_k1: float = BM25_K1
    bm25_b: float = BM25_B
    question_encoder: str | None = None  # dpr: Hugging Face folder
    ctx_encoder: str | None = None  # dpr: Hugging Face folder

    def build(self) -> Any:
        """The retriever; its module is imported on use (dpr needs the dense encoders)."""
        from tw_jax.errors import UsageError
        from tw_jax.retrieval import retriever_class

        cls = retriever_class(self.name)
        if self.name == "bm25":
            return cls(k1=self.bm25_k1, b=self.bm25_b)
        if self.name == "dpr":
            if not (self.question_encoder and self.ctx_encoder):
                raise UsageError("--retriever dpr needs --question-encoder DIR and "
                                 "--ctx-encoder DIR")
            try:
                return cls(question_encoder=self.question_encoder, ctx_encoder=self.ctx_encoder)
            except (ValueError, KeyError, FileNotFoundError) as error:  # names the folder already
                message = error.args[0] if isinstance(error, KeyError) and error.args else error
                raise UsageError(f"--question-encoder {self.question_encoder} / --ctx-encoder "
                                 f"{self.ctx_encoder}: {message} (two DPR encoder folders, "
                                 "question first)") from None
        return cls()


def add_retriever_options(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--question-encoder``, ``--ctx-encoder`` (dpr) and ``--bm25-k1``, ``--bm25-b``."""
    parser.add_argument("--question-encoder", default=None, type=input_path, metavar="DIR",
                        help="dpr: the question encoder (Hugging Face folder)")
    parser.add_argument("--ctx-encoder", default=None, type=input_path, metavar="DIR",
                        help="dpr: the passage (context) encoder (Hugging Face folder)")
    parser.add_argument("--bm25-k1", type=float, default=BM25_K1,
                        help=f"bm25: k1 (default {BM25_K1})")
    parser.add_argument("--bm25-b", type=float, default=BM25_B, help=f"bm25: b (default {BM25_B})")


def settings_from_args(args: argparse.Namespace, name: str | None = None) -> RetrieverSettings:
    """The settings the options give for retriever ``name`` (default ``args.retriever``)."""
    return RetrieverSettings(name or args.retriever, bm25_k1=args.bm25_k1, bm25_b=args.bm25_b,
                             question_encoder=args.question_encoder,
                             ctx_encoder=args.ctx_encoder)


def retriever_from_args(args: argparse.Namespace, name: str | None = None) -> Any:
    """The retriever the options give for ``name`` (default ``args.retriever``)."""
    return settings_from_args(args, name).build()
