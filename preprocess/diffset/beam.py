"""The DiffSet stage as an Apache Beam pipeline: the same comparison, keyed by page id.

Each dump is streamed by one reader (a bz2 stream cannot be split without its multistream index),
articles are joined by id with CoGroupByKey, compared in parallel, and written as sharded files.
Records and ``stats.json`` equal the local path's; only the order of lines may differ. Run it on
the DirectRunner locally or on Dataflow, Flink or Spark with ``--beam-options`` (docs/beam.md).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tw_jax.io import paths
from tw_jax.io.atomic import write_json
from tw_jax.io.tfrecord import encode_example
from tw_jax.preprocess.diffset.algorithm import ArticleDiff, compare
from tw_jax.preprocess.diffset.outputs import OUTPUTS, STATS_FILE, json_line, records_for
from tw_jax.preprocess.diffset.stats import DiffsetStats
from tw_jax.preprocess.dumps.mediawiki import Page, describe_page
from tw_jax.preprocess.dumps.multistream import index_for, plan_ranges
from tw_jax.preprocess.runners.accounting import dump_error_in

_PARTIAL_STATS = ".beam-stats.json"


def _sources(path: str, splits: int) -> list[tuple[str, tuple[int, int] | None]]:
    """What the readers of one dump read: byte ranges of a multistream dump that has its index
    beside it (when ``splits`` > 1), else the whole file."""
    index = index_for(path) if splits > 1 else None
    if index is None:
        return [(path, None)]
    return [(path, byte_range) for byte_range in plan_ranges(path, index, splits)]


def _read_source(source: tuple[str, tuple[int, int] | None], side: str) -> Iterator[Any]:
    """(id, (range start, position, page)) for each article, then the reader's tallies."""
    import apache_beam as beam

    from tw_jax.preprocess.diffset.local import read_articles

    path, byte_range = source
    stats = DiffsetStats()
    start = byte_range[0] if byte_range else 0
    count = 0
    for count, page in enumerate(read_articles(path, stats, side, byte_range), 1):
        yield page.id, (start, count, page)
    if side == "old":
        stats.old_articles = count
    yield beam.pvalue.TaggedOutput("stats", stats)


def _first_of(versions: list[tuple[int, int, Page]], stats: DiffsetStats, side: str) -> Page | None:
    """The first version of an id in file order; later ones (possible only when two readers
    share a dump) are counted as duplicates, as the single reader of the local path does."""
    if not versions:
        return None
    first, *rest = sorted(versions, key=lambda version: version[:2])
    for _, _, page in rest:
        stats.skips[side].add("duplicate_id", describe_page(page.id, page.title))
        if side == "old":
            stats.old_articles -= 1
    return first[2]


def _compare_joined(
    item: tuple[int, dict[str, list[Any]]], min_changed_chars: int
) -> Iterator[ArticleDiff | DiffsetStats]:
    _, sides = item
    duplicates = DiffsetStats()
    old = _first_of(sides["old"], duplicates, "old")
    new = _first_of(sides["new"], duplicates, "new")
    if new is not None:
        yield compare(new, old, min_changed_chars)
    if duplicates.skips["old"].total or duplicates.skips["new"].total:
        yield duplicates


def _stats_combine_fn() -> Any:
    import apache_beam as beam

    class CombineStats(beam.CombineFn):
        def create_accumulator(self) -> DiffsetStats:
            return DiffsetStats()

        def add_input(self, stats: DiffsetStats, item: Any) -> DiffsetStats:
            if isinstance(item, DiffsetStats):
                return stats.merge(item)
            stats.add_result(item)
            return stats

        def merge_accumulators(self, accumulators: Any) -> DiffsetStats:
            merged = DiffsetStats()
            for stats in accumulators:
                merged.merge(stats)
            return merged

        def extract_output(self, stats: DiffsetStats) -> DiffsetStats:
            return stats

    return CombineStats()


def _remove_previous_outputs(out: str) -> None:
    """An earlier run's files: its stats.json would mark the folder complete too early, and its
    shards with another count would still match the file patterns."""
    paths.remove_matching(paths.join(out, STATS_FILE))
    for name in OUTPUTS:
        paths.remove_matching(paths.join(out, f"{name}.jsonl"))
        paths.remove_matching(paths.join(out, f"{name}.tfrecord-?????-of-?????"))


def build_diffset_beam(
    old_path: str | os.PathLike[str],
    new_path: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    min_changed_chars: int = 0,
    beam_options: str | list[str] = "",
    splits: int = 64,
) -> dict[str, Any]:
    """Runs the pipeline (DirectRunner unless ``beam_options`` names another) and returns stats.

    A multistream dump with its index beside it is read by up to ``splits`` readers in parallel.
    """
    import apache_beam as beam

    from tw_jax.preprocess.runners.beam_options import pipeline_options

    old_path, new_path, out = os.fspath(old_path), os.fspath(new_path), os.fspath(out_dir)
    options = pipeline_options(beam_options, (old_path, new_path, out))
    if not paths.is_url(out):
        Path(out).mkdir(parents=True, exist_ok=True)
    _remove_previous_outputs(out)

    try:
        with beam.Pipeline(options=options) as pipeline:
            sides = {}
            reader_stats = []
            for side, path in (("old", old_path), ("new", new_path)):
                read = (
                    pipeline
                    | f"Sources{side}" >> beam.Create(_sources(path, splits))
                    | f"Spread{side}" >> beam.Reshuffle()
                    | f"Read{side}"
                    >> beam.FlatMap(_read_source, side).with_outputs("stats", main="articles")
                )
                sides[side] = read.articles
                reader_stats.append(read.stats)
            results = (
                sides
                | "JoinById" >> beam.CoGroupByKey()
                | "Compare" >> beam.FlatMap(_compare_joined, min_changed_chars)
            )
            (
                (results, *reader_stats)
                | "AllTallies" >> beam.Flatten()
                | "Tally" >> beam.CombineGlobally(_stats_combine_fn())
                | "StatsJson"
                >> beam.Map(
                    lambda stats: json.dumps(
                        stats.as_dict(
                            old=old_path, new=new_path, options={"min_changed_chars": min_changed_chars}
                        )
                    )
                )
                | "WriteStats"
                >> beam.io.WriteToText(
                    paths.join(out, _PARTIAL_STATS), num_shards=1, shard_name_template=""
                )
            )
            records = results | "Records" >> beam.FlatMap(records_for)
            for name in OUTPUTS:
                selected = records | f"Only{name}" >> beam.Filter(lambda kv, n=name: kv[0] == n)
                (
                    selected
                    | f"Json{name}" >> beam.Map(lambda kv: json_line(kv[1]))
                    | f"WriteJson{name}"
                    >> beam.io.WriteToText(
                        paths.join(out, name),
                        file_name_suffix=".jsonl",
                        num_shards=1,
                        shard_name_template="",
                    )
                )
                (
                    selected
                    | f"Example{name}" >> beam.Map(lambda kv: encode_example(kv[1]))
                    | f"WriteTFRecord{name}"
                    >> beam.io.WriteToTFRecord(paths.join(out, f"{name}.tfrecord"))
                )
    except Exception as error:
        found = dump_error_in(error)  # a bad dump: one line, as from the local path
        if found is None:
            raise
        raise found from error

    partial = paths.join(out, _PARTIAL_STATS)
    with paths.open_file(partial, "rb") as handle:
        report = json.loads(handle.read().decode("utf-8"))
    if paths.is_url(out):
        with paths.open_file(paths.join(out, STATS_FILE), "wb") as handle:
            handle.write(json.dumps(report, indent=2, sort_keys=True).encode("utf-8") + b"\n")
    else:
        write_json(paths.join(out, STATS_FILE), report)
    paths.remove_matching(partial)
    return report
