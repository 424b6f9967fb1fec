"""``tw-jax t5x-checkpoint``: checkpoints both ways between tw_jax and the real T5X.

    tw-jax t5x-checkpoint to-t5x --from runs/t5/0809 --out t5x_runs/start
    tw-jax t5x-checkpoint to-t5x --from hf/t5-large-ssm --out t5x_runs/start
    tw-jax t5x-checkpoint from-t5x --from t5x_runs/kadapter/checkpoint_100 --out runs/kadapter

The first writes ``OUT/checkpoint_<step>``, which ``python -m t5x.train`` starts from with
``--gin.INITIAL_CHECKPOINT_PATH``; the second writes ``OUT/checkpoints/<step>``, which
``tw-jax eval`` / ``infer`` read as a MODEL_DIR and ``tw-jax train`` or the lifelong runner start
from. Neither needs T5X installed (docs/t5x.md).
"""

from __future__ import annotations

import argparse
import json


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "t5x-checkpoint", help="convert checkpoints between tw_jax and T5X (parameters, bit-exact)",
        description=__doc__.split("\n\n")[0].split(": ", 1)[1])
    directions = parser.add_subparsers(dest="t5x-checkpoint_command", required=True,
                                       metavar="DIRECTION")
    to = directions.add_parser(
        "to-t5x", help="a tw_jax run or a Hugging Face folder as a T5X checkpoint",
        description="Writes OUT/checkpoint_<step>/state ({'target': params}) from a tw_jax "
                    "MODEL_DIR, checkpoint step folder or Hugging Face folder; a T5X run starts "
                    "from it with --gin.INITIAL_CHECKPOINT_PATH (its new adapters and optimizer "
                    "state from scratch).")
    to.add_argument("--from", dest="source", required=True, metavar="PATH",
                    help="a tw_jax MODEL_DIR (its newest intact step), a step folder, or a "
                         "Hugging Face folder (config.json + safetensors); local or gs://")
    to.add_argument("--out", required=True, metavar="DIR", help="the T5X checkpoint folder")
    to.add_argument("--step", type=int, default=None, metavar="N",
                    help="the T5X step number (default: the source's step; 0 for Hugging Face)")
    to.set_defaults(func=_to_t5x)
    back = directions.add_parser(
        "from-t5x", help="a T5X checkpoint as a tw_jax MODEL_DIR checkpoint",
        description="Writes OUT/checkpoints/<step>/ (parameters, sealed) from a T5X checkpoint "
                    "step folder: tw-jax eval and infer read it; tw-jax train and the lifelong "
                    "runner start from it (INITIAL_CHECKPOINT_PATH).")
    back.add_argument("--from", dest="source", required=True, metavar="CHECKPOINT",
                      help="a T5X checkpoint step folder, MODEL_DIR/checkpoint_<step>")
    back.add_argument("--out", required=True, metavar="DIR", help="the tw_jax MODEL_DIR")
    back.set_defaults(func=_from_t5x)


def _to_t5x(args: argparse.Namespace) -> int:
    from tw_jax.runtime.checkpoints import CheckpointError
    from tw_jax.t5x.checkpoints import T5XCheckpointError, to_t5x

    try:
        written = to_t5x(args.source, args.out, args.step)
    except CheckpointError as error:  # the source: not found, unsealed, damaged
        raise T5XCheckpointError(str(error)) from None
    print(json.dumps({"t5x_checkpoint": written}))
    return 0


def _from_t5x(args: argparse.Namespace) -> int:
    from tw_jax.t5x.checkpoints import from_t5x

    print(json.dumps({"checkpoint": from_t5x(args.source, args.out)}))
    return 0
