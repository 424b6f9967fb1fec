"""``tw-jax evolvingqa``: EvolvingQA (Kim et al., 2023) — build, generate, train, evaluate.

    tw-jax evolvingqa build --dumps enwiki-20230201-….xml.bz2 enwiki-20230301-….xml.bz2 … \\
        --out DIR [--min-changed-chars 500] [--unchanged-articles 200000] [--workers N]
    tw-jax evolvingqa generate --data DIR --endpoint https://api.openai.com/v1 \\
        --model gpt-3.5-turbo --api-key-env OPENAI_API_KEY [--concurrency 8]
    tw-jax evolvingqa generate --data DIR --probes DATA_DIR          # offline, from the probes
    tw-jax evolvingqa train --stage continual --data DIR --month 0203 --model-dir M/full/0203 \\
        --initial-checkpoint t5-large-ssm/ --t5-vocab t5-large-ssm/spiece.model
    tw-jax evolvingqa train --stage qa --data DIR --model-dir M/full/0203-qa \\
        --initial-checkpoint M/full/0203 --t5-vocab t5-large-ssm/spiece.model
    tw-jax evolvingqa eval --qa DIR/qa --checkpoint M/full/0203-qa --month 0203 \\
        --method full --out RESULTS [--t5-vocab …]
    tw-jax evolvingqa eval --data DIR --checkpoint M/initial-qa --month 0203 --method bm25|dpr \\
        [--k 5] [--input-length 512] [--reader initial] --out RESULTS
    tw-jax evolvingqa retrieve --data DIR --month 0203 --retriever bm25|dpr \\
        [--question-encoder Q --ctx-encoder C] [--k 20] --out OUT

The folder layout is :mod:`tw_jax.preprocess.evolvingqa.layout`'s. ``train`` puts the stage's gin
file first (``evolvingqa.gin`` or ``evolvingqa_qa.gin``: the paper's settings) and then the
``--gin_file`` files given (a method, ``models/t5_tiny.gin``, ``runs/cpu_smoke.gin`` …); TRAIN_STEPS
is ``--epochs`` passes over the data at BATCH_SIZE unless ``--gin.TRAIN_STEPS`` is given. ``eval``
appends ``results.jsonl`` (Unchanged → unchanged, New → new, Edited → updated) and prints the
paper's Table 1 rows and Table 5's multiple-choice split; with ``--method bm25`` or ``dpr`` it
answers open book (:mod:`tw_jax.evaluate.open_book`): the month's index is built or reused as
``retrieve`` does it, each question is followed by its top ``--k`` passages, and the results are
method ``bm25``/``dpr`` (``<reader>-bm25`` for a reader other than ``initial``), beside the
closed-book rows in ``tw-jax report``. ``retrieve`` indexes the month's
snapshot (:mod:`tw_jax.retrieval.index`, reused while its inputs are unchanged),
retrieves for the month's QA sets and reports answer recall@1/5/20 (the last line of stdout is
one JSON object); see :mod:`tw_jax.retrieval.run`. Offline ``generate`` keeps New and Edited
questions to the build's New articles and Edited pairs (:mod:`tw_jax.preprocess.evolvingqa.sources`)
and prints one line per set that lost some; ``retrieve`` and open-book ``eval`` report that count
beside the set's recall. Bad input is an error naming the file
and line, exit status 2. Every path may be local or a ``gs://`` URL, resolved once here
(``type=input_path``: it must exist; ``type=output_path``: its bucket must).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
from typing import Any

from tw_jax.cli_parser import (
    OneLineErrorParser,
    add_gin_flags,
    add_rebuild_flag,
    gin_search_paths,
)
from tw_jax.io import paths
from tw_jax.io.cli_paths import input_path, output_path
from tw_jax.preprocess.evolvingqa import layout
from tw_jax.retrieval.options import add_retriever_options, settings_from_args

PREFIX = "tw-jax evolvingqa"


def _error(command: str, message: Any) -> int:
    print(f"{PREFIX} {command}: error: {message}", file=sys.stderr)
    return 2


def _gin_arguments(parser: argparse.ArgumentParser) -> None:
    add_gin_flags(parser, file_help="gin file after the stage's own (repeatable): a method, "
                                    "models/t5_tiny.gin, runs/cpu_smoke.gin …")
    parser.add_argument("--t5-vocab", default=None, type=input_path,
                        help="T5 SentencePiece model (default: "
                        "$TW_JAX_T5_VOCAB, else DATA/vocab/t5/spiece.model)")


def _count(text: str) -> int | None:
    return None if text == "all" else int(text)


def _folder(text: str) -> str:
    """A folder that may not exist yet (``generate --data`` when the probes are elsewhere):
    resolved, and its bucket checked, as an output folder is."""
    return output_path(text)


def _output_file(text: str) -> str:
    """A file to write or extend (the reply cache): resolved, its folder checked as an output
    folder is (a bucket must exist)."""
    resolved = paths.resolve(text)
    return paths.join(output_path(paths.parent(resolved)), paths.as_path(resolved).name)


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "evolvingqa", help="EvolvingQA: Changed sets, QA generation, QA fine-tuning, EM/F1",
        description="EvolvingQA (Kim et al., 2023): Changed sets and their SSM corpus, "
                    "QA-generation inputs, QA generation, training and evaluation.")
    commands = parser.add_subparsers(dest="evolvingqa_command", required=True, metavar="STEP")

    build = commands.add_parser(
        "build", help="Changed sets + SSM corpus + Unchanged/New/Edited passages",
        description="Per month pair: the DiffSet stage with --min-changed-chars (the Changed "
                    "set), the SSM stage on it, New passages and Edited pairs; over the window: "
                    "Unchanged passages. evolvingqa/build.json is written last.")
    build.add_argument("--dumps", nargs="+", required=True, metavar="DUMP", type=input_path,
                       help="Wikipedia dumps (XML or WikiExtractor JSON lines), oldest first; "
                            "local or gs://")
    build.add_argument("--out", required=True, type=output_path,
                       help="output folder (a tw_jax data folder), local or gs://")
    build.add_argument("--months", default=None, metavar="YYYY-MM,…",
                       help="the dumps' months (default: from names such as enwiki-20230201-…)")
    build.add_argument("--min-changed-chars", type=int, default=500,
                       help="new text an article needs to enter the Changed set (paper: 500)")
    build.add_argument("--unchanged-articles", type=_count, default=200_000, metavar="N|all",
                       help="Unchanged articles sampled (paper: 200K topics)")
    build.add_argument("--passages-per-article", type=int, default=1,
                       help="Unchanged passages per article: its first chunks (default 1)")
    build.add_argument("--chunk-words", type=int, default=200, help="words per passage at most")
    build.add_argument("--spacy-model", default="en_core_web_sm",
                       help="spaCy pipeline for SSM and entities (paper: en_core_web_trf)")
    build.add_argument("--seed", type=int, default=0)
    build.add_argument("--workers", type=int, default=1, help="worker processes per stage")
    add_rebuild_flag(build, "redo stage folders a previous run completed", old=["--force"])
    build.add_argument("--progress", action="store_true", help="show progress bars")
    build.set_defaults(func=run_build)

    generate = commands.add_parser(
        "generate", help="QA sets from the passages (LLM endpoint) or from the probes (offline)",
        description="With --endpoint: the paper's prompts and filters against any "
                    "OpenAI-compatible chat endpoint. Without: questions from the Wikidata "
                    "probes' UNCHANGED/NEW/UPDATED facts through relation templates.")
    generate.add_argument("--data", required=True, type=_folder, help="the build folder")
    generate.add_argument("--out", default=None, type=output_path,
                          help="QA folder (default DATA/qa)")
    generate.add_argument("--endpoint", default=None, help="e.g. https://api.openai.com/v1")
    generate.add_argument("--model", default=None, help="the endpoint's model name")
    generate.add_argument("--api-key-env", default=None, metavar="VAR",
                          help="environment variable holding the API key (never printed)")
    generate.add_argument("--concurrency", type=int, default=4, help="requests in flight")
    generate.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    generate.add_argument("--max-retries", type=int, default=5, help="retries on 429/5xx")
    generate.add_argument("--no-llm-filters", action="store_true",
                          help="skip the LLM equivalence/hallucination checks (A.2.2-A.2.3)")
    generate.add_argument("--limit", type=int, default=None, metavar="N",
                          help="passages per file at most (a trial run)")
    generate.add_argument("--cache", default=None, type=_output_file,
                          help="reply cache (default QA/llm_cache.jsonl)")
    generate.add_argument("--probes", default=None, metavar="DATA_DIR", type=input_path,
                          help="offline: the folder with <MMMM>/probes/ (default --data)")
    generate.add_argument("--finetune-fraction", type=float, default=0.62,
                          help="Unchanged pairs for QA fine-tuning (paper: 80K of 129.5K)")
    generate.add_argument("--seed", type=int, default=0)
    generate.set_defaults(func=run_generate)

    train = commands.add_parser(
        "train", help="continual SSM pretraining on a Changed set, or QA fine-tuning",
        description="Runs the trainer with the stage's gin file first, then --gin_file files.")
    _gin_arguments(train)
    train.add_argument("--stage", choices=sorted(layout.STAGE_GIN), required=True)
    train.add_argument("--data", required=True, type=input_path,
                       help="the build folder (DATA_DIR)")
    train.add_argument("--model-dir", required=True, type=output_path,
                       help="MODEL_DIR of this run")
    train.add_argument("--month", default=None, metavar="PERIOD", help="continual: the month pair")
    train.add_argument("--qa", default=None, type=input_path,
                       help="qa: the QA folder (default DATA/qa)")
    train.add_argument("--initial-checkpoint", default=None, type=input_path,
                       help="start from this checkpoint (orbax MODEL_DIR or Hugging Face folder)")
    train.add_argument("--epochs", type=float, default=1.0,
                       help="passes over the data (qa: 1 as the paper; continual: unstated in "
                            "the paper, the authors' configs use 4)")
    train.set_defaults(func=run_train)

    evaluate = commands.add_parser(
        "eval", help="EM/F1 on Unchanged, New, Edited and the Edited multiple choice",
        description="Scores a QA fine-tuned checkpoint; appends OUT/results.jsonl. With "
                    "--method bm25 or dpr the reader answers open book: each question is "
                    "followed by its top --k passages of the month's index (built or reused "
                    "as `retrieve` does), cut from the end to --input-length tokens.")
    _gin_arguments(evaluate)
    evaluate.add_argument("--qa", default=None, type=input_path,
                          help="QA folder or zip, released or generated (default DATA/qa)")
    evaluate.add_argument("--checkpoint", required=True, type=input_path,
                          help="MODEL_DIR, step or HF folder")
    evaluate.add_argument("--month", required=True, metavar="PERIOD",
                          help="the time step (results' eval_month)")
    evaluate.add_argument("--label", default=None,
                          help="the sets' file label, new_<LABEL>.csv (default --month)")
    evaluate.add_argument("--method", default="initial",
                          help="method name in the results; bm25 or dpr: open book with that "
                               "retriever")
    evaluate.add_argument("--trained-through", default=None, metavar="base|MMMM",
                          help="default: base for --method initial (open book: --reader "
                               "initial), else --month")
    evaluate.add_argument("--out", required=True, type=output_path,
                          help="results.jsonl goes here")
    evaluate.add_argument("--sets", default="unchanged,new,edited", help="sets to score")
    evaluate.add_argument("--max-questions", type=int, default=None, metavar="N")
    evaluate.add_argument("--batch-size", type=int, default=32)
    evaluate.add_argument("--max-answer-tokens", type=int, default=25)
    book = evaluate.add_argument_group("open book (--method bm25|dpr)")
    book.add_argument("--data", default=None, type=input_path,
                      help="the build folder whose month index is searched "
                           "(tw-jax evolvingqa build --out)")
    book.add_argument("--k", type=int, default=5,
                      help="passages retrieved per question (default 5; the paper gives none)")
    book.add_argument("--input-length", type=int, default=512, metavar="TOKENS",
                      help="the reader's input: question + passages, cut from the end of the "
                           "passages (default 512)")
    book.add_argument("--reader", default="initial", metavar="METHOD",
                      help="the reader checkpoint's method: results name initial's run bm25 "
                           "(dpr), another's <reader>-bm25 (default initial)")
    add_retriever_options(book)
    add_rebuild_flag(book, "rebuild the month's index", old=["--rebuild-index"])
    evaluate.set_defaults(func=run_eval)

    retrieve = commands.add_parser(
        "retrieve", help="retrieve passages for a month's QA sets; answer recall@1/5/20",
        description="Indexes the month's snapshot (Unchanged + New + the current side of "
                    "Edited passages) under DATA/MMMM/evolvingqa/index/<retriever>/, rebuilt "
                    "only when its inputs change; retrieves for the Unchanged, New and Edited "
                    "sets; writes OUT/retrieval.json and OUT/retrieved_<set>.jsonl. The last "
                    "line of stdout is one JSON object of the recalls.")
    retrieve.add_argument("--data", required=True, type=input_path,
                          help="the build folder (tw-jax evolvingqa build --out)")
    retrieve.add_argument("--qa", default=None, type=input_path,
                          help="QA folder or zip (default DATA/qa)")
    retrieve.add_argument("--month", required=True, metavar="PERIOD",
                          help="the month pair whose snapshot is searched (e.g. 0809)")
    retrieve.add_argument("--label", default=None,
                          help="the sets' file label, new_<LABEL>.csv (default --month)")
    retrieve.add_argument("--retriever", default="bm25", metavar="bm25|dpr",
                          help="retriever (default bm25)")
    add_retriever_options(retrieve)
    retrieve.add_argument("--k", type=int, default=20,
                          help="passages kept per question in retrieved_<set>.jsonl")
    retrieve.add_argument("--sets", default="unchanged,new,edited", help="sets to retrieve for")
    retrieve.add_argument("--max-questions", type=int, default=None, metavar="N")
    add_rebuild_flag(retrieve, "rebuild the month's index", old=["--force"])
    retrieve.add_argument("--out", required=True, type=output_path,
                          help="retrieval.json and retrieved_<set>.jsonl go here")
    retrieve.set_defaults(func=run_retrieve)


# --- build and generate -------------------------------------------------------------------


def run_build(args: argparse.Namespace) -> int:
    from tw_jax.preprocess.evolvingqa.extract import BuildOptions, build_evolvingqa
    from tw_jax.preprocess.evolvingqa.layout import LayoutError
    from tw_jax.text.spacy_pipeline import SpacyModelError

    options = BuildOptions(
        min_changed_chars=args.min_changed_chars, spacy_model=args.spacy_model,
        unchanged_articles=args.unchanged_articles,
        passages_per_article=args.passages_per_article, chunk_words=args.chunk_words,
        seed=args.seed, workers=args.workers, force=args.rebuild,
    )
    months = [m.strip() for m in args.months.split(",")] if args.months else None
    try:
        summary = build_evolvingqa(args.dumps, args.out, months=months, options=options,
                                   progress=args.progress or None)
    except (LayoutError, SpacyModelError) as error:
        return _error("build", error)
    for pair, figures in summary["pairs"].items():
        changed, extraction = figures["changed_set"], figures["extraction"]
        print(f"{pair}: Changed set {changed['new']} new + {changed['changed']} changed "
              f"articles ({figures['below_min_changed_chars']} below {args.min_changed_chars} "
              f"chars), {figures['ssm_examples']} SSM examples; "
              f"{extraction['new_passages']} New passages, {extraction['edited_pairs']} "
              f"Edited pairs")
    unchanged = summary["unchanged"]
    print(f"Unchanged over {summary['months'][0]}..{summary['months'][-1]}: "
          f"{unchanged['selected_articles']} articles of {unchanged['candidates']} candidates, "
          f"{unchanged['passages']} passages")
    print(f"done in {summary['seconds']} s; "
          f"{paths.join(layout.window_dir(args.out), layout.BUILD_FILE)}")
    return 0


def run_generate(args: argparse.Namespace) -> int:
    from tw_jax.preprocess.evolvingqa.client import ChatClient, ChatError
    from tw_jax.preprocess.evolvingqa.generate import generate_with_llm, pairs_with_passages

    data = args.data
    qa_dir = args.out or layout.qa_dir(data)
    try:
        if args.endpoint:
            if not args.model:
                return _error("generate", "--endpoint needs --model")
            with ChatClient(args.endpoint, args.model, api_key_env=args.api_key_env,
                            timeout=args.timeout, max_retries=args.max_retries,
                            cache=args.cache or paths.join(qa_dir, "llm_cache.jsonl")) as client:
                summary = generate_with_llm(
                    data, client, qa_dir=qa_dir, llm_filters=not args.no_llm_filters,
                    limit=args.limit, concurrency=args.concurrency,
                    finetune_fraction=args.finetune_fraction, seed=args.seed)
        else:
            from tw_jax.preprocess.evolvingqa.offline import generate_offline, probe_pairs

            probes = args.probes or args.data
            built = pairs_with_passages(data)
            summary = generate_offline(probes, built or probe_pairs(probes), qa_dir,
                                       build=data if built else None,
                                       finetune_fraction=args.finetune_fraction, seed=args.seed)
    except (ChatError, ValueError) as error:
        return _error("generate", error)
    _print_generated(summary, data)
    print(f"QA sets in {qa_dir} ({summary['generator']} generator)")
    return 0


def _print_generated(summary: dict[str, Any], data: str) -> None:
    """Each set's counts, then one line per set that lost questions for want of a source
    article (offline), or a line saying the sources could not be checked (no build)."""
    from tw_jax.preprocess.evolvingqa.sources import NO_SOURCE, dropped_line

    for name, counts in summary["sets"].items():
        print(f"{name}: {json.dumps(counts)}")
    for name, counts in summary["sets"].items():
        if counts.get(NO_SOURCE):
            print(dropped_line(name, counts[NO_SOURCE]))
    if summary.get("sources_checked") is False:
        print(f"sources not checked: {data} has no EvolvingQA build, so New and Edited "
              "questions are kept whatever their subject's article")
    if "reasons" in summary:
        print(f"reasons: {json.dumps(summary['reasons'])}")


# --- train --------------------------------------------------------------------------------


def _absolute(path: str | None) -> str | None:
    """Local paths made absolute (orbax refuses relative ones); URLs (gs://…) kept."""
    return None if path is None else paths.resolve(path)


def _explicit(bindings: list[str], macro: str) -> bool:
    from tw_jax.runtime.gin_setup import binding_key

    return any(binding_key(b) == macro for b in bindings)


def _training_data(args: argparse.Namespace) -> tuple[str, int]:
    """(task, examples in one epoch), registering the task."""
    from tw_jax.tasks.evolvingqa import FINETUNE, read_qa_csv, register_evolvingqa, task_name

    if args.stage == "qa":
        qa_dir = args.qa or layout.qa_dir(args.data)
        register_evolvingqa(qa_dir, t5_vocab=args.t5_vocab, data_dir=args.data)
        return task_name(FINETUNE), len(read_qa_csv(paths.join(qa_dir, layout.UNCHANGED_TRAIN)))
    import tw_jax.tasks
    from tw_jax.tasks import names
    from tw_jax.tasks.layout import spelled
    from tw_jax.time import Period

    if not args.month:
        raise ValueError("--stage continual needs --month PERIOD")
    period = spelled(args.data, Period.parse(args.month))  # the build's own folder name
    stats = paths.join(layout.ssm_dir(args.data, period.name), layout.STATS_FILE)
    if not paths.exists(stats):
        raise ValueError(f"{stats}: no SSM corpus for {period.label} (run tw-jax evolvingqa "
                         "build)")
    tw_jax.tasks.register_all(args.data, t5_vocab=args.t5_vocab)
    return names.diffset(period, "ssm"), int(json.loads(paths.read_text(stats))["examples"])


def run_train(args: argparse.Namespace) -> int:
    import gin

    from tw_jax.runtime import checkpoints, gin_setup
    from tw_jax.train import trainer
    from tw_jax.train.gin_config import train_config

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    files = [layout.STAGE_GIN[args.stage], *args.gin_file]
    search = gin_search_paths(args)
    try:
        task, examples = _training_data(args)
        bindings = [*args.gin_bindings, f"MODEL_DIR={_absolute(args.model_dir)!r}",
                    f"MIXTURE_OR_TASK_NAME={task!r}", f"DATA_DIR={_absolute(args.data)!r}",
                    f"INITIAL_CHECKPOINT_PATH={_absolute(args.initial_checkpoint)!r}"]
        if args.t5_vocab:
            bindings.append(f"tw_jax.tasks.register_all.t5_vocab={str(args.t5_vocab)!r}")
        if not _explicit(args.gin_bindings, "TRAIN_STEPS"):
            gin_setup.parse(files, bindings, search)
            batch = int(gin.query_parameter("%BATCH_SIZE"))
            steps = max(1, math.ceil(args.epochs * examples / batch))
            print(f"{task}: {args.epochs:g} epoch(s) of {examples} examples at batch {batch}: "
                  f"{steps} steps")
            bindings.append(f"TRAIN_STEPS={steps}")
        gin_setup.parse(files, bindings, search, gin_setup.MACROS_TRAIN)
        result = trainer.train(train_config())
    except (gin_setup.GinConfigError, ValueError, FileNotFoundError) as error:
        return _error("train", error)
    except (trainer.TrainingDivergedError, checkpoints.CheckpointError) as error:
        print(f"{PREFIX} train: error: {error}", file=sys.stderr)
        return 1
    print(f"trained {task} to step {result.step} (started at step {result.start_step}) "
          f"in {args.model_dir}")
    return 0


# --- eval ---------------------------------------------------------------------------------


def eval_config(args: argparse.Namespace) -> Any:
    """The :class:`~tw_jax.benchmarks.evolvingqa_eval.EvalConfig` of ``eval``'s arguments:
    ``--method bm25`` or ``dpr`` (a retriever's name) reads open book."""
    from tw_jax.benchmarks.evolvingqa_eval import EvalConfig, OpenBook
    from tw_jax.retrieval import known_retrievers

    book = None
    if args.method in known_retrievers():
        book = OpenBook(data=args.data, retriever=settings_from_args(args, args.method),
                        k=args.k, input_length=args.input_length, reader=args.reader,
                        rebuild=args.rebuild)
    return EvalConfig(
        checkpoint=args.checkpoint, month=args.month, out=args.out, method=args.method,
        qa=args.qa, data=args.data, label=args.label, trained_through=args.trained_through,
        sets=tuple(s.strip() for s in args.sets.split(",") if s.strip()),
        max_questions=args.max_questions, batch_size=args.batch_size,
        max_answer_tokens=args.max_answer_tokens, gin_files=tuple(args.gin_file),
        gin_bindings=tuple(args.gin_bindings), gin_search_paths=tuple(gin_search_paths(args)),
        t5_vocab=args.t5_vocab, open_book=book)


def run_eval(args: argparse.Namespace) -> int:
    from tw_jax.benchmarks.evolvingqa_eval import evaluate
    from tw_jax.errors import DumpError, UsageError
    from tw_jax.runtime import checkpoints, gin_setup

    logging.basicConfig(level=logging.WARNING)
    try:
        outcome = evaluate(eval_config(args))
    except (gin_setup.GinConfigError, checkpoints.CheckpointError, FileNotFoundError,
            ValueError, DumpError, UsageError) as error:
        return _error("eval", error)
    print("\n".join(outcome.lines()))
    return 0


# --- retrieve -----------------------------------------------------------------------------


def run_retrieve(args: argparse.Namespace) -> int:
    from tw_jax.benchmarks.evolvingqa_eval import RetrieveConfig, retrieve
    from tw_jax.errors import DumpError, UsageError
    from tw_jax.retrieval import run

    config = RetrieveConfig(
        data=args.data, month=args.month, out=args.out,
        retriever=settings_from_args(args), qa=args.qa, label=args.label, k=args.k,
        sets=tuple(s.strip() for s in args.sets.split(",") if s.strip()),
        max_questions=args.max_questions, rebuild=args.rebuild)
    try:
        report = retrieve(config)
    except (DumpError, UsageError) as error:
        return _error("retrieve", error)
    for name, figures in report["sets"].items():
        recalls = ", ".join(f"@{key.rsplit('@', 1)[1]} "
                            + ("n/a" if value is None else f"{value:.3f}")
                            for key, value in figures.items() if key.startswith("answer_recall@"))
        dropped = figures.get("no_source_article")
        kept = "" if not dropped else f" ({dropped} dropped at generation: no source article)"
        print(f"{name}: {figures['questions']} questions{kept}, answer recall {recalls}")
    print(f"{report['questions']} questions in {report['search_seconds']:.3f} s; "
          f"{paths.join(args.out, run.REPORT)}")
    print(run.summary_line(report))
    return 0


def main(argv: list[str] | None = None) -> int:
    """Run ``tw-jax evolvingqa`` alone (``python -m tw_jax.benchmarks.evolvingqa_cli …``)."""
    from tw_jax.errors import DumpError

    parser = OneLineErrorParser(prog="tw-jax")
    add_parser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except DumpError as error:
        return _error(args.evolvingqa_command, error)


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
