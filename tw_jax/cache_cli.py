"""``tw-jax cache``: SeqIO's own offline cache job on a data folder's tasks, with the stages'
``--beam-options``.

The job is SeqIO's (``python -m seqio.scripts.cache_tasks_main``), run as a process of its own
exactly as a T5X user runs it; this command is the front a tw_jax user expects:

- the tasks are the data folder's, registered here first: names or regular expressions, a
  mixture standing for its tasks; none matching is an error naming ``tw-jax tasks`` (SeqIO's
  job would log a warning and exit 0 with nothing written);
- Beam's flags come as the stages take them, ``--beam-options "--runner=DataflowRunner
  --project=P …"``, checked the same way (a cluster runner gets ``--setup_file``, Dataflow its
  required flags; docs/beam.md) and handed to SeqIO's comma-separated ``--pipeline_options``;
- the cache goes where the runs look for it (``DATA/seqio_cache`` or ``$TW_JAX_CACHE_DIR``)
  unless ``--out`` says otherwise, and the command ends by checking that every task it asked
  for has its ``COMPLETED`` file there;
- every cache the job completes records what it was made from (``tw_jax_fingerprint.json``:
  the source files' sizes and SHA-256, the vocabularies, the task's settings), so a run reuses
  it only for the same (:mod:`tw_jax.tasks.cache`). The job records it itself, as it imports
  ``tw_jax.tasks``; this command records any it did not, and names the tasks cached earlier
  without one (checked by modification time only until rebuilt with ``--overwrite``).
"""

from __future__ import annotations

import argparse
import csv
import io
import os
import re
import shlex
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence

from tw_jax.io.cli_paths import input_path
from tw_jax.preprocess.runners.cli_options import add_beam_options

DEFAULT_RUNNER_FLAGS = ["--runner=DirectRunner"]
# a COMPLETED file written by this run may carry a time a little before the run's start (file
# systems that keep whole seconds, a bucket's clock)
_MTIME_SLACK_NS = 2_000_000_000


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "cache",
        help="cache a data folder's tasks with SeqIO's Beam job (for USE_CACHED_TASKS=True)",
        description="Registers the tasks of DATA and runs SeqIO's cache job "
        "(python -m seqio.scripts.cache_tasks_main) on those --tasks names, on any Beam "
        "runner; the runs read the cache with --gin.USE_CACHED_TASKS=True (docs/caching.md).",
    )
    parser.add_argument("--data", type=input_path, default=None, metavar="DIR",
                        help="a tw_jax data folder, local or gs:// (default: $TW_JAX_DATA_DIR)")
    parser.add_argument("--tasks", required=True, metavar="NAMES",
                        help="comma-separated task or mixture names or regular expressions, "
                        "each matching a whole name (a mixture caches its tasks)")
    parser.add_argument("--out", default=None, metavar="DIR",
                        help="the cache folder, local or gs:// (default: $TW_JAX_CACHE_DIR, else "
                        "DATA/seqio_cache, where the runs look)")
    parser.add_argument("--overwrite", action="store_true",
                        help="rebuild a task's cache that is already complete")
    parser.add_argument("--min-shards", type=int, default=64, metavar="N",
                        help="at least N output shards per split (SeqIO's --min_shards)")
    parser.add_argument("--t5-vocab", default=None, metavar="FILE",
                        help="the T5 SentencePiece model (default: $TW_JAX_T5_VOCAB, else "
                        "DATA/vocab/t5/spiece.model)")
    parser.add_argument("--gpt2-vocab", default=None, metavar="DIR",
                        help="the GPT-2 tokenizer folder (default: $TW_JAX_GPT2_VOCAB, else "
                        "DATA/vocab/gpt2)")
    add_beam_options(parser, help='Beam pipeline flags in one argument, as the stages take '
                     'them (default --runner=DirectRunner), e.g. --beam-options '
                     '"--runner=DataflowRunner --project=P --region=R '
                     '--temp_location=gs://B/tmp" (docs/caching.md)')
    parser.set_defaults(func=run)


def selected_tasks(patterns: Iterable[str], names: Sequence[str]) -> list[str]:
    """The registered tasks that ``patterns`` name, in registration order: each pattern must
    match a whole name; a mixture it matches stands for its tasks."""
    import seqio

    wanted = [re.compile(p) for p in patterns]
    tasks: list[str] = []
    for name in names:
        if not any(p.fullmatch(name) for p in wanted):
            continue
        if name in seqio.MixtureRegistry.names():
            leaves = [t.name for t in seqio.get_mixture_or_task(name).tasks]
        else:
            leaves = [name] if name in seqio.TaskRegistry.names() else []
        tasks += [t for t in leaves if t not in tasks]
    return tasks


def pipeline_options_flag(flags: Sequence[str]) -> str:
    """Beam's flags as SeqIO's ``--pipeline_options`` (an absl list flag: comma-separated,
    CSV-quoted, so a flag whose value holds a comma stays one flag)."""
    line = io.StringIO()
    csv.writer(line, lineterminator="").writerow(flags)
    return f"--pipeline_options={line.getvalue()}"


def cache_command(tasks: Sequence[str], out: str, flags: Sequence[str], *, min_shards: int,
                  overwrite: bool) -> list[str]:
    """SeqIO's cache job on ``tasks`` (their exact names), as a process to run."""
    command = [sys.executable, "-m", "seqio.scripts.cache_tasks_main",
               "--module_import=tw_jax.tasks", f"--tasks={','.join(map(re.escape, tasks))}",
               f"--output_cache_dir={out}", f"--min_shards={min_shards}",
               pipeline_options_flag(flags or DEFAULT_RUNNER_FLAGS)]
    return command + (["--overwrite"] if overwrite else [])


def run(args: argparse.Namespace) -> int:
    import tw_jax.tasks as tasks
    from tw_jax.io import paths
    from tw_jax.tasks.cache import cache_dir_of, fingerprint_new_caches
    from tw_jax.tasks.layout import DATA_DIR_ENV, GPT2_VOCAB_ENV, T5_VOCAB_ENV, resolve_data_dir

    data = resolve_data_dir(args.data)
    if data is None:
        print(f"tw-jax cache: error: no data folder: pass --data DIR or set ${DATA_DIR_ENV}",
              file=sys.stderr)
        return 2
    names = tasks.register_all(data, t5_vocab=args.t5_vocab, gpt2_vocab=args.gpt2_vocab)
    patterns = [p.strip() for p in args.tasks.split(",") if p.strip()]
    chosen = selected_tasks(patterns, names)
    if not chosen:
        print(f"tw-jax cache: error: no task of {data} matches --tasks {args.tasks}; "
              f"`tw-jax tasks --data {data}` lists them", file=sys.stderr)
        return 2
    out = args.out or cache_dir_of(data)
    env = {**os.environ, DATA_DIR_ENV: data}  # what the job's `import tw_jax.tasks` registers
    env.update({k: v for k, v in ((T5_VOCAB_ENV, args.t5_vocab),
                                  (GPT2_VOCAB_ENV, args.gpt2_vocab)) if v})
    command = cache_command(chosen, out, args.beam_options, min_shards=args.min_shards,
                            overwrite=args.overwrite)
    print(f"tw-jax cache: {len(chosen)} tasks: {' '.join(shlex.quote(c) for c in command[1:])}",
          file=sys.stderr)
    started = time.time_ns() - _MTIME_SLACK_NS
    done = subprocess.run(command, env=env, check=False)
    if done.returncode != 0:
        print(f"tw-jax cache: error: SeqIO's cache job exited with {done.returncode}",
              file=sys.stderr)
        return 1
    missing = [t for t in chosen if not paths.isfile(paths.join(out, t, "COMPLETED"))]
    if missing:
        print(f"tw-jax cache: error: the job ended without caching {', '.join(missing)} in "
              f"{out} (no COMPLETED file)", file=sys.stderr)
        return 1
    _, unchecked = fingerprint_new_caches(chosen, out, started)
    if unchecked:
        print(f"tw-jax cache: warning: {', '.join(unchecked)} were cached earlier without a "
              f"fingerprint (their sources are checked by modification time only, not by "
              f"content); rebuild them with --overwrite", file=sys.stderr)
    print(f"cached {len(chosen)} tasks in {out}: {', '.join(chosen)}")
    return 0
