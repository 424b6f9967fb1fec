"""The Probes stage as an Apache Beam pipeline: the local path's steps, joined by key.

- old and new entities meet by subject id (CoGroupByKey) and are categorised; an entity skipped
  as malformed on one side (a None side) is not, and is counted, as locally;
- each candidate meets the labels it needs by entity id (CoGroupByKey on object ids, never a
  dict of the dump), then is rendered;
- Wikipedia titles resolve redirects by a join on the target title; subjects meet their page id
  by title, and their texts by page id; probes meet their subject's texts by subject id;
- the probes that pass the checks are written by Beam's text sink, one JSON line each, to
  sharded files in ``OUT/.beam-kept/`` (by as many workers as checked them); only the
  light-tuning candidates and tallies are combined into one result, which is small
  (relations × ``lighttuning_size`` candidates and the counts);
- the last step, on one worker, gets that result and the shards' names, runs the skipped-share
  check of each dump (before anything is written), then streams the shards line by line into
  the local path's :class:`~tw_jax.preprocess.probes.kept.KeptStore` (a scratch SQLite file) and
  ends as the local runner does: :func:`finish` and the writer, which read the store back row
  by row, so both runners write the same bytes. The launcher removes ``OUT/.beam-kept/``.

No worker holds the kept probes: the checking workers write them as they go, and the last step
holds one line, one store batch (:data:`~tw_jax.preprocess.probes.kept.BATCH` probes) and
SQLite's page cache, plus the combined samplers and tallies, whatever the number of probes. The
shards must be where every worker can read them, which ``--out`` already is (a ``gs://`` URL on
Dataflow).
"""
from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterable, Iterator
from typing import Any

from tw_jax.io import paths
from tw_jax.preprocess.probes.align import SubjectTexts
from tw_jax.preprocess.probes.articles import DIFF, FULL, iter_titles, normalise_title
from tw_jax.preprocess.probes.categorise import CATEGORIES, DELETED
from tw_jax.preprocess.probes.facts import subject_side
from tw_jax.preprocess.probes.finish import ProbeOptions, finish
from tw_jax.preprocess.probes.lighttuning import Sampler
from tw_jax.preprocess.probes.records import Probe
from tw_jax.preprocess.probes.stats import ProbeStats
from tw_jax.preprocess.probes.steps import candidates_for, check_probe, label_ids, render_candidate
from tw_jax.preprocess.runners.accounting import Skips, dump_error_in

KEPT_PARTS = ".beam-kept"  # OUT/.beam-kept/: the kept probes' shards, until the last step


def kept_line(probe: Probe) -> str:
    """One kept probe as a line of its shard: its fields as a JSON array (ASCII, so any str,
    a lone surrogate included, reads back the same, and no field's newline splits the line)."""
    return json.dumps(list(probe))


def kept_probes(files: Iterable[str]) -> Iterator[Probe]:
    """The probes of the shards, read one line at a time (shards in name order)."""
    for name in sorted(files):
        with paths.open_file(name, "rb") as handle:
            for line in handle:
                yield Probe(*json.loads(line))


class _Collect:
    """Stands in for a Sampler inside one element: the real samplers live in the combiner."""

    def __init__(self) -> None:
        self.items: list = []

    def add(self, probe, fact_hash: int) -> None:  # noqa: ANN001
        self.items.append((probe, fact_hash))


def _read_wikidata(path: str, side: str) -> Iterator[Any]:
    import apache_beam as beam

    from tw_jax.preprocess.dumps.wikidata import iter_entities

    stats = ProbeStats()
    bad: list[str] = []
    for entity in iter_entities(path, stats.skips[f"{side}_wikidata"], bad):
        stats.entities[side] += 1
        yield entity.id, subject_side(entity)
        yield beam.pvalue.TaggedOutput("labels", (entity.id, entity.label))
    for entity_id in bad:  # malformed: a None side, which keeps the entity from categorisation
        yield entity_id, None
    yield beam.pvalue.TaggedOutput("stats", stats)


def _side(values: list) -> tuple[object, bool]:
    """The first well-formed side of an entity in one dump, and whether it was only malformed
    there (the local store's rule: a well-formed record wins over a malformed one)."""
    whole = [v for v in values if v is not None]
    return (whole[0] if whole else None), (not whole and bool(values))


def _categorise(item: tuple[str, dict], options: ProbeOptions) -> Iterator[Any]:
    import apache_beam as beam

    subject_id, sides = item
    new, new_malformed = _side(sides["new"])
    old, old_malformed = _side(sides["old"])
    stats = ProbeStats()
    if (old_malformed and new is not None) or (new_malformed and old is not None):
        stats.one_sided.add("old" if old_malformed else "new", subject_id)
        yield beam.pvalue.TaggedOutput("stats", stats)
        return
    if old_malformed:
        old = None
    for n, candidate in enumerate(
        candidates_for(
            subject_id,
            new,
            old,
            seed=options.seed,
            unchanged_rate=options.unchanged_rate,
            stats=stats,
        )
    ):
        ck = (subject_id, n)
        yield ck, (candidate, new[0])
        for entity_id in label_ids(candidate):
            yield beam.pvalue.TaggedOutput("refs", (entity_id, ck))
    if new is not None and new[1]:
        yield beam.pvalue.TaggedOutput("enwiki", ("new", normalise_title(new[1]), subject_id))
    if old is not None and old[1]:
        yield beam.pvalue.TaggedOutput("enwiki", ("old", normalise_title(old[1]), subject_id))
    yield beam.pvalue.TaggedOutput("stats", stats)


def _label_refs(item: tuple[str, dict]) -> Iterator[tuple[Any, tuple]]:
    entity_id, joined = item
    new = joined["new"][0] if joined["new"] else None
    old = joined["old"][0] if joined["old"] else None
    for ck in joined["refs"]:
        yield ck, (entity_id, new, old)


def _render(item: tuple[Any, dict]) -> Iterator[Any]:
    import apache_beam as beam

    ck, joined = item
    stats = ProbeStats()
    new = {i: n for i, n, _ in joined["labels"]}
    either = {i: n or o for i, n, o in joined["labels"]}  # DELETED: old label if the item went
    for candidate, subject in joined["candidate"]:
        label_of = either.get if candidate.category == DELETED else new.get
        probe = render_candidate(candidate, subject, label_of, stats)
        if probe is not None:
            yield candidate.subject_id, probe
    yield beam.pvalue.TaggedOutput("stats", stats)


def _read_titles(path: str, side: str) -> Iterator[Any]:
    import apache_beam as beam

    stats = ProbeStats()
    name = "wikipedia" if side == "new" else "old_wikipedia"
    skips = stats.skips[name] if side == "new" else Skips()
    for title, page_id, target in iter_titles(path, skips):
        stats.entities["wikipedia_pages"] += side == "new"
        if page_id is not None:
            yield (side, normalise_title(title)), ("id", page_id)
        else:
            yield (side, normalise_title(target)), ("redirect", normalise_title(title))
    yield beam.pvalue.TaggedOutput("stats", stats)


def _resolve(item: tuple[tuple[str, str], list]) -> Iterator[tuple[tuple[str, str], int]]:
    """(side, title) → page id for each article title and each redirect to it (first wins)."""
    (side, title), entries = item
    ids = sorted(v for kind, v in entries if kind == "id")
    if not ids:
        return
    yield (side, title), ids[0]
    for kind, value in entries:
        if kind == "redirect" and value != title:
            yield (side, value), ids[0]


def _read_texts(path: str, kind: str) -> Iterator[tuple[tuple[str, int], tuple[str, str]]]:
    from tw_jax.preprocess.probes.articles import read_jsonl_texts

    for page_id, text in read_jsonl_texts(path):
        yield ("new", page_id), (kind, text)


def _old_texts(path: str) -> Iterator[Any]:
    import apache_beam as beam

    from tw_jax.preprocess.dumps.wikipedia import iter_articles, iter_dump_pages, paragraphs_of

    stats = ProbeStats()
    skips = stats.skips["old_wikipedia"]
    for page in iter_articles(iter_dump_pages(path, skips), skips):
        yield ("old", page.id), (FULL, "\n".join(paragraphs_of(page)))
    yield beam.pvalue.TaggedOutput("stats", stats)


def _subject_pages(item: tuple[tuple[str, str], dict]) -> Iterator[tuple[tuple[str, int], str]]:
    (side, _), joined = item
    ids = sorted(set(joined["id"]))
    if ids:
        for subject_id in joined["subject"]:
            yield (side, ids[0]), subject_id


def _subject_texts(item: tuple[tuple[str, int], dict]) -> Iterator[tuple[str, tuple]]:
    (side, page_id), joined = item
    texts = dict(sorted(joined["text"]))
    for subject_id in joined["subject"]:
        yield subject_id, (side, page_id, texts.get(DIFF), texts.get(FULL))


def _check(item: tuple[str, dict], options: ProbeOptions, have_old: bool) -> Iterator[Any]:
    import apache_beam as beam

    _, joined = item
    if not joined["probe"]:
        return
    new = old = (None, None, None)
    for side, page_id, diff, full in joined["texts"]:
        if side == "new":
            new = (page_id, diff, full)
        else:
            old = (page_id, diff, full)
    texts = SubjectTexts(new[0], new[1], new[2], old[0], old[2], have_old)
    stats = ProbeStats()
    collect = _Collect()
    for probe in joined["probe"]:
        if check_probe(probe, texts, seed=options.seed, stats=stats, sampler=collect):
            yield beam.pvalue.TaggedOutput("kept", kept_line(probe))
    for probe, fact_hash in collect.items:
        yield ("lighttuning", probe, fact_hash)
    yield ("stats", stats)


def _combiner(options: ProbeOptions) -> Any:
    import apache_beam as beam

    class Combine(beam.CombineFn):
        """The light-tuning samplers and the tallies (no kept probe: those go to the shards)."""

        def create_accumulator(self) -> tuple:
            return ({c: Sampler(options.lighttuning_size) for c in CATEGORIES}, ProbeStats())

        def add_input(self, acc: tuple, item: Any) -> tuple:
            if isinstance(item, ProbeStats):
                acc[1].merge(item)
            elif item[0] == "lighttuning":
                acc[0][item[1].category].add(item[1], item[2])
            else:
                acc[1].merge(item[1])
            return acc

        def merge_accumulators(self, accumulators: Any) -> tuple:
            merged = self.create_accumulator()
            for samplers, stats in accumulators:
                for c in CATEGORIES:
                    merged[0][c].merge(samplers[c])
                merged[1].merge(stats)
            return merged

        def extract_output(self, acc: tuple) -> tuple:
            return acc

    return Combine()


def build_probes_beam(
    old_wikidata: str | os.PathLike[str],
    new_wikidata: str | os.PathLike[str],
    wikipedia: str | os.PathLike[str],
    diffset_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    options: ProbeOptions | None = None,
    old_wikipedia: str | os.PathLike[str] | None = None,
    beam_options: str | list[str] = "",
) -> dict[str, Any]:
    """Runs the pipeline (DirectRunner unless ``beam_options`` names another); returns stats."""
    import apache_beam as beam

    from tw_jax.io.output_claim import scratch_dir
    from tw_jax.preprocess.probes.articles import diffset_files
    from tw_jax.preprocess.probes.kept import KeptStore
    from tw_jax.preprocess.probes.local import _header, check_dump
    from tw_jax.preprocess.probes.outputs import clear_stats, write_probes_folder
    from tw_jax.preprocess.runners.beam_options import pipeline_options

    options = options or ProbeOptions()
    options.check()
    old_wd, new_wd, wiki = map(os.fspath, (old_wikidata, new_wikidata, wikipedia))
    old_wp = os.fspath(old_wikipedia) if old_wikipedia is not None else None
    pipeline_opts = pipeline_options(
        beam_options, (old_wd, new_wd, wiki, old_wp, os.fspath(diffset_dir), os.fspath(out_dir))
    )
    diff_path, full_path = diffset_files(os.fspath(diffset_dir))
    clear_stats(out_dir)
    result: dict[str, Any] = {}

    parts = paths.join(paths.resolve(out_dir), KEPT_PARTS)
    paths.rmtree(parts)  # an earlier run's shards, left by a launcher that did not finish

    def _write(acc: tuple, files: list[str]) -> None:
        samplers, stats = acc
        check_dump(old_wd, stats, "old", options)
        check_dump(new_wd, stats, "new", options)
        with scratch_dir("probes") as scratch:
            store = KeptStore(os.path.join(scratch, "kept.sqlite"))
            try:
                store.extend(kept_probes(files))
                probes, lighttuning = finish(store, samplers, stats, options)
                report = stats.as_dict(
                    **_header(old_wd, new_wd, wiki, diffset_dir, old_wp, options)
                )
                write_probes_folder(out_dir, probes, lighttuning, report)
            finally:
                store.close()
        result["report"] = report

    try:
        with beam.Pipeline(options=pipeline_opts) as p:
            tallies = []
            read = {}
            for side, path in (("old", old_wd), ("new", new_wd)):
                read[side] = (
                    p
                    | f"Path{side}" >> beam.Create([path])
                    | f"Read{side}"
                    >> beam.FlatMap(_read_wikidata, side).with_outputs(
                        "labels", "stats", main="subjects"
                    )
                )
                tallies.append(read[side].stats)
            cat = (
                {"new": read["new"].subjects, "old": read["old"].subjects}
                | "BySubject" >> beam.CoGroupByKey()
                | "Categorise"
                >> beam.FlatMap(_categorise, options).with_outputs(
                    "refs", "enwiki", "stats", main="candidates"
                )
            )
            tallies.append(cat.stats)
            labels = (
                {"refs": cat.refs, "new": read["new"].labels, "old": read["old"].labels}
                | "ByEntity" >> beam.CoGroupByKey()
                | "LabelRefs" >> beam.FlatMap(_label_refs)
            )
            rendered = (
                {"candidate": cat.candidates, "labels": labels}
                | "ByCandidate" >> beam.CoGroupByKey()
                | "Render" >> beam.FlatMap(_render).with_outputs("stats", main="probes")
            )
            tallies.append(rendered.stats)
            wikis = [("new", wiki)] + ([("old", old_wp)] if old_wp else [])
            titles, texts = (
                [],
                [
                    p
                    | "Diff" >> beam.Create([diff_path])
                    | "DiffTexts" >> beam.FlatMap(_read_texts, DIFF),
                    p
                    | "Full" >> beam.Create([full_path])
                    | "FullTexts" >> beam.FlatMap(_read_texts, FULL),
                ],
            )
            for side, path in wikis:
                t = (
                    p
                    | f"Wiki{side}" >> beam.Create([path])
                    | f"Titles{side}"
                    >> beam.FlatMap(_read_titles, side).with_outputs("stats", main="titles")
                )
                titles.append(t.titles)
                tallies.append(t.stats)
            if old_wp:
                old_texts = (
                    p
                    | "OldWiki" >> beam.Create([old_wp])
                    | "OldTexts" >> beam.FlatMap(_old_texts).with_outputs("stats", main="t")
                )
                texts.append(old_texts.t)
                tallies.append(old_texts.stats)
            page_of = (
                titles
                | "AllTitles" >> beam.Flatten()
                | "ByTitle" >> beam.GroupByKey()
                | "Resolve" >> beam.FlatMap(_resolve)
            )
            wanted = cat.enwiki | "SubjectTitles" >> beam.Map(lambda e: ((e[0], e[1]), e[2]))
            subject_pages = (
                {"id": page_of, "subject": wanted}
                | "JoinTitles" >> beam.CoGroupByKey()
                | "SubjectPages" >> beam.FlatMap(_subject_pages)
            )
            subject_texts = (
                {"subject": subject_pages, "text": texts | "AllTexts" >> beam.Flatten()}
                | "ByPage" >> beam.CoGroupByKey()
                | "SubjectTexts" >> beam.FlatMap(_subject_texts)
            )
            checked = (
                {"probe": rendered.probes, "texts": subject_texts}
                | "ProbesBySubject" >> beam.CoGroupByKey()
                | "Check"
                >> beam.FlatMap(_check, options, old_wp is not None).with_outputs(
                    "kept", main="checked"
                )
            )
            shards = checked.kept | "WriteKept" >> beam.io.WriteToText(
                paths.join(parts, "kept"), file_name_suffix=".jsonl"
            )
            (
                (checked.checked, tallies | "AllTallies" >> beam.Flatten())
                | "Everything" >> beam.Flatten()
                | "Combine" >> beam.CombineGlobally(_combiner(options))
                | "Write" >> beam.Map(_write, beam.pvalue.AsList(shards))
            )
    except Exception as error:
        with contextlib.suppress(OSError):  # the run's own error is the one to report
            paths.rmtree(parts)
        found = dump_error_in(error)
        if found is None:
            raise
        raise found from error
    paths.rmtree(parts)
    if "report" not in result:  # the pipeline ran elsewhere: read what it wrote
        with paths.open_file(paths.join(out_dir, "stats.json"), "rb") as handle:
            result["report"] = json.loads(handle.read().decode("utf-8"))
    return result["report"]
