"""The Probes stage on one machine: three on-disk indexes, then one pass over the new dump.

1. The new Wikidata dump's labels go to a :class:`~tw_jax.preprocess.facts.labels.LabelIndex`.
2. The old dump's subjects (label, enwiki, facts) go to an :class:`OldSnapshot` store.
3. Wikipedia titles and redirects, the DiffSet folder's texts and (optionally) the old
   snapshot's cleaned articles go to an :class:`ArticleStore`.
4. The new dump is streamed; each entity is categorised against its old self, rendered, aligned
   with its article and checked; survivors go to a :class:`~tw_jax.preprocess.probes.kept.KeptStore`
   on disk, in dump order, for :func:`finish` (duplicates and caps, in the store) and the writers,
   which read them back row by row.

An entity skipped as malformed in either dump is not categorised (it is marked in the old store,
or met as a None side in the new pass) and is counted in ``skipped_one_side``; once each dump
has been read, :func:`~tw_jax.preprocess.dumps.wikidata.check_skipped_share` fails the run if too
many of its lines were malformed (``ProbeOptions.max_skipped_share``).

All indexes and the kept probes are SQLite files in a scratch folder, so memory holds no
per-entity or per-probe state: a few chunks of dump lines and their probes in flight, one batch
of probes before each INSERT, SQLite's page caches, and the light-tuning samplers (relations ×
``lighttuning_size`` candidates). Peak memory does not grow with the dump or ``--unchanged-rate``.

With ``workers > 1`` the main process only reads the dumps, as raw lines in chunks; forked
workers parse them (and, for the new dump, categorise, render, align and check against their own
read-only connections to the indexes) and send back their entities or their chunk's kept
probes, sampler state and stats deltas, which are merged in dump order (the main process appends
the probes to the store as each chunk's result arrives). Skip examples, kept-probe order and the
samplers' contents (an order-free choice) are therefore those of one process, and so are the
output files, byte for byte.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from multiprocessing.pool import Pool
from typing import Any

from tw_jax.io.output_claim import scratch_dir
from tw_jax.io.progress import progress as progress_bar
from tw_jax.preprocess.dumps.wikidata import (
    check_skipped_share,
    entities_from_lines,
    iter_entities,
    iter_lines,
)
from tw_jax.preprocess.facts.labels import LabelIndex
from tw_jax.preprocess.probes.align import SubjectTexts
from tw_jax.preprocess.probes.articles import (
    DIFF,
    FULL,
    NEW,
    OLD,
    ArticleStore,
    diffset_files,
    read_jsonl_texts,
)
from tw_jax.preprocess.probes.categorise import CATEGORIES, DELETED
from tw_jax.preprocess.probes.facts import SubjectSide, subject_side
from tw_jax.preprocess.probes.finish import ProbeOptions, finish
from tw_jax.preprocess.probes.kept import KeptStore
from tw_jax.preprocess.probes.lighttuning import Sampler
from tw_jax.preprocess.probes.outputs import clear_stats, write_probes_folder
from tw_jax.preprocess.probes.records import Probe
from tw_jax.preprocess.probes.stats import ProbeStats
from tw_jax.preprocess.probes.steps import candidates_for, check_probe, render_candidate
from tw_jax.preprocess.probes.store import MALFORMED, OldSnapshot
from tw_jax.preprocess.runners.accounting import Skips
from tw_jax.preprocess.runners.process_pools import fork_pool, ordered_map


def iter_sides(
    path: str, skips: Skips, stats: ProbeStats, side: str
) -> Iterator[tuple[str, SubjectSide | None]]:
    """(entity id, (label, enwiki, facts)) of every entity of a Wikidata dump, counted, and
    (entity id, None) for each entity skipped as malformed whose id could be read."""

    bad: list[str] = []
    for entity in iter_entities(path, skips, bad):
        if bad:
            yield from ((entity_id, None) for entity_id in bad)
            bad.clear()
        stats.entities[side] += 1
        yield entity.id, subject_side(entity)
    yield from ((entity_id, None) for entity_id in bad)


def check_dump(path: str, stats: ProbeStats, side: str, options: ProbeOptions) -> None:
    """The skipped-share check of one side's dump, once it has been read completely."""
    check_skipped_share(
        path, stats.skips[f"{side}_wikidata"], stats.entities[side], options.max_skipped_share
    )


def build_article_store(
    path: str,
    wikipedia: str,
    diffset_dir: str,
    old_wikipedia: str | None,
    stats: ProbeStats,
) -> ArticleStore:
    diff_path, full_path = diffset_files(diffset_dir)
    store = ArticleStore(path, create=True)
    stats.entities["wikipedia_pages"] = store.add_titles(NEW, wikipedia, stats.skips["wikipedia"])
    store.add_texts(NEW, DIFF, read_jsonl_texts(diff_path))
    store.add_texts(NEW, FULL, read_jsonl_texts(full_path))
    if old_wikipedia is not None:
        store.add_dump_texts(OLD, old_wikipedia, stats.skips["old_wikipedia"])
    return store


class Categoriser:
    """Steps 4 of the module doc for one entity at a time (what the bench times).

    Each probe that passes goes to ``keep`` (the stage's :meth:`KeptStore.add`) as it is found;
    without one it is appended to :attr:`kept`, in that order (a worker's chunk).
    """

    def __init__(
        self,
        old: OldSnapshot,
        labels: Any,
        articles: ArticleStore | None,
        options: ProbeOptions,
        stats: ProbeStats,
        have_old_dump: bool,
        keep: Callable[[Probe], None] | None = None,
    ) -> None:
        self.old, self.labels, self.articles = old, labels, articles
        self.options, self.stats, self.have_old_dump = options, stats, have_old_dump
        self.kept: list[Probe] = []
        self.keep = keep if keep is not None else self.kept.append
        self.samplers = {c: Sampler(options.lighttuning_size) for c in CATEGORIES}

    def _label_of_deleted(self, entity_id: str) -> str | None:
        return self.labels.label(entity_id) or self.old.label(entity_id)

    def texts_for(self, new: SubjectSide, old: SubjectSide | None) -> SubjectTexts:
        store = self.articles
        new_id = store.article_id(NEW, new[1])
        old_id = store.article_id(OLD, old[1]) if old is not None and self.have_old_dump else None
        return SubjectTexts(
            new_article=new_id,
            diff=store.text(NEW, DIFF, new_id),
            full=store.text(NEW, FULL, new_id),
            old_article=old_id,
            old=store.text(OLD, FULL, old_id),
            have_old_dump=self.have_old_dump,
        )

    def categorise(self, entity_id: str, new: SubjectSide) -> tuple[list, SubjectSide | None]:
        """Algorithm 2 and down-sampling for one entity (no labels, no text); none for an
        entity the old dump had malformed (counted), whose facts would all look NEW."""
        old = self.old.get(entity_id)
        if old is MALFORMED:
            self.stats.one_sided.add("old", entity_id)
            return [], None
        o = self.options
        return list(
            candidates_for(
                entity_id, new, old, seed=o.seed, unchanged_rate=o.unchanged_rate, stats=self.stats
            )
        ), old

    def add(self, entity_id: str, new: SubjectSide | None) -> None:
        """Categorises one entity of the new dump; ``new=None``: it was malformed there, so
        nothing is categorised, and it is counted if the old dump had it whole."""
        if new is None:
            old = self.old.get(entity_id)
            if old is not None and old is not MALFORMED:
                self.stats.one_sided.add("new", entity_id)
            return
        candidates, old = self.categorise(entity_id, new)
        if not candidates or self.articles is None:
            return
        texts = None
        for candidate in candidates:
            label_of = (
                self._label_of_deleted if candidate.category == DELETED else self.labels.label
            )
            probe = render_candidate(candidate, new[0], label_of, self.stats)
            if probe is None:
                continue
            if texts is None:
                texts = self.texts_for(new, old)
            sampler = self.samplers[probe.category]
            if check_probe(probe, texts, seed=self.options.seed, stats=self.stats, sampler=sampler):
                self.keep(probe)


def build_probes(
    old_wikidata: str | os.PathLike[str],
    new_wikidata: str | os.PathLike[str],
    wikipedia: str | os.PathLike[str],
    diffset_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    options: ProbeOptions | None = None,
    old_wikipedia: str | os.PathLike[str] | None = None,
    progress: bool | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """Writes the Probes folder for one month pair and returns its stats.

    ``workers > 1`` parses and categorises in that many forked processes; one worker runs
    inline. The folder is the same either way, and so is the memory it takes: kept probes live
    in a scratch :class:`KeptStore`, not in this process.
    """
    options = options or ProbeOptions()
    options.check()
    old_wd, new_wd = os.fspath(old_wikidata), os.fspath(new_wikidata)
    old_wp = os.fspath(old_wikipedia) if old_wikipedia is not None else None
    quiet = None if progress is None else not progress
    stats = ProbeStats()
    clear_stats(out_dir)

    with scratch_dir("probes") as scratch:
        paths = StorePaths(
            old=os.path.join(scratch, "old.sqlite"),
            labels=os.path.join(scratch, "labels.sqlite"),
            articles=os.path.join(scratch, "articles.sqlite"),
        )
        # Forked before any index is opened: workers inherit no SQLite connection and open
        # their own, read-only, on their first categorising job (after the indexes are built).
        config = WorkerConfig(paths, new_wd, options, old_wp is not None)
        pool = start_pool(workers, config) if workers > 1 else None
        kept = KeptStore(os.path.join(scratch, "kept.sqlite"))
        try:
            try:
                labels = LabelIndex.build(new_wd, paths.labels, Skips())
                old = OldSnapshot(paths.old, create=True)
                articles = build_article_store(
                    paths.articles,
                    os.fspath(wikipedia),
                    os.fspath(diffset_dir),
                    old_wp,
                    stats,
                )
                try:
                    with progress_bar(
                        desc="indexing old Wikidata", unit=" entities", disable=quiet
                    ) as bar:
                        if pool is None:
                            old.add_all(
                                _ticked(
                                    iter_sides(old_wd, stats.skips["old_wikidata"], stats, "old"),
                                    bar,
                                )
                            )
                        else:
                            old.add_all(index_sides(old_wd, stats, pool, workers, bar))
                    check_dump(old_wd, stats, "old", options)
                    with progress_bar(desc="categorising", unit=" entities", disable=quiet) as bar:
                        if pool is None:
                            work = Categoriser(
                                old, labels, articles, options, stats, old_wp is not None,
                                keep=kept.add,
                            )
                            for entity_id, side in _ticked(
                                iter_sides(new_wd, stats.skips["new_wikidata"], stats, "new"), bar
                            ):
                                work.add(entity_id, side)
                            samplers = work.samplers
                        else:
                            samplers = categorise_dump(
                                new_wd, options, stats, pool, workers, kept.extend, bar
                            )
                    check_dump(new_wd, stats, "new", options)
                finally:
                    old.close()
                    labels.close()
                    articles.close()
            finally:
                if pool is not None:
                    pool.terminate()
                    pool.join()
            # The category-wide steps run in the store, and the writers read its probes back
            # row by row: the store stays open (its scratch folder in place) until they are done.
            probes, lighttuning = finish(kept, samplers, stats, options)
            report = stats.as_dict(
                **_header(old_wd, new_wd, wikipedia, diffset_dir, old_wp, options)
            )
            write_probes_folder(out_dir, probes, lighttuning, report)
        finally:
            kept.close()
    return report


# --- the parallel path: module-level jobs, run in forked workers ---------------------------------

_CHUNK_LINES = 512  # entity lines per job: amortises pickling and queue round trips
_CHUNK_BYTES = 8 << 20  # ...or fewer, when lines are long (real entities average a few KiB)

Lines = list[tuple[int, bytes]]


@dataclass(frozen=True)
class StorePaths:
    """Where the three scratch indexes live; a None store is not opened (the bench)."""

    old: str
    labels: str | None
    articles: str | None


@dataclass(frozen=True)
class WorkerConfig:
    """What every worker needs besides its chunk: set once per process, not sent per job."""

    paths: StorePaths
    new_wikidata: str
    options: ProbeOptions
    have_old_dump: bool


_config: WorkerConfig | None = None
_stores: tuple[OldSnapshot, Any, ArticleStore | None] | None = None


def _set_config(config: WorkerConfig) -> None:
    global _config, _stores
    _config, _stores = config, None


def start_pool(workers: int, config: WorkerConfig) -> Pool:
    """A forked pool whose workers categorise against the indexes named in ``config``."""
    return fork_pool(workers, _set_config, (config,))


def _open_stores() -> tuple[OldSnapshot, Any, ArticleStore | None]:
    global _stores
    if _stores is None:  # opened on first use: the pool starts before the indexes are written
        from tw_jax.preprocess.facts.labels import LabelIndex

        paths = _config.paths
        _stores = (
            OldSnapshot(paths.old),
            LabelIndex(paths.labels) if paths.labels is not None else None,
            ArticleStore(paths.articles) if paths.articles is not None else None,
        )
    return _stores


def _chunked(lines: Iterable[tuple[int, bytes]]) -> Iterator[Lines]:
    chunk: Lines = []
    size = 0
    for item in lines:
        chunk.append(item)
        size += len(item[1])
        if len(chunk) >= _CHUNK_LINES or size >= _CHUNK_BYTES:
            yield chunk
            chunk, size = [], 0
    if chunk:
        yield chunk


def _sides_job(
    job: tuple[str, Lines],
) -> tuple[ProbeStats, list[tuple[str, SubjectSide | None]]]:
    """Parses a chunk of the old dump: its subjects (None for a malformed one), with its entity
    count and skips."""

    path, lines = job
    stats = ProbeStats()
    sides: list[tuple[str, SubjectSide | None]] = []
    bad: list[str] = []
    for entity in entities_from_lines(path, lines, stats.skips["old_wikidata"], bad):
        stats.entities["old"] += 1
        sides.append((entity.id, subject_side(entity)))
    sides.extend((entity_id, None) for entity_id in bad)
    return stats, sides


Categorised = tuple[ProbeStats, list[Probe], dict[str, Sampler]]


def _categorise_job(lines: Lines) -> Categorised:
    """Step 4 of the module doc for a chunk of the new dump: what it adds to one pass (its kept
    probes in the order found, every category together)."""

    config = _config
    old, labels, articles = _open_stores()
    stats = ProbeStats()
    work = Categoriser(old, labels, articles, config.options, stats, config.have_old_dump)
    skips = stats.skips["new_wikidata"]
    bad: list[str] = []
    for entity in entities_from_lines(config.new_wikidata, lines, skips, bad):
        stats.entities["new"] += 1
        work.add(entity.id, subject_side(entity))
    for entity_id in bad:
        work.add(entity_id, None)
    return stats, work.kept, work.samplers


def index_sides(
    path: str, stats: ProbeStats, pool: Pool, workers: int, bar: Any = None
) -> Iterator[tuple[str, SubjectSide]]:
    """:func:`iter_sides` of the old dump, parsed by the pool; counts merge in dump order."""

    jobs = ((path, chunk) for chunk in _chunked(iter_lines(path)))
    for delta, sides in ordered_map(_sides_job, jobs, pool, workers):
        stats.merge(delta)
        if bar is not None:
            bar.update(len(sides))
        yield from sides


def categorise_dump(
    path: str,
    options: ProbeOptions,
    stats: ProbeStats,
    pool: Pool,
    workers: int,
    keep: Callable[[list[Probe]], None],
    bar: Any = None,
) -> dict[str, Sampler]:
    """The new dump categorised by the pool (``path`` must be the dump its
    :class:`WorkerConfig` names): each chunk's kept probes go to ``keep`` (the stage's
    :meth:`KeptStore.extend`) as its result arrives, and the samplers are returned. Merged in
    dump order, they equal one pass."""

    samplers = {c: Sampler(options.lighttuning_size) for c in CATEGORIES}
    for delta, chunk_kept, chunk_samplers in ordered_map(
        _categorise_job, _chunked(iter_lines(path)), pool, workers
    ):
        stats.merge(delta)
        keep(chunk_kept)
        for category in CATEGORIES:
            samplers[category].merge(chunk_samplers[category])
        if bar is not None:
            bar.update(delta.entities["new"])
    return samplers


def _header(old_wd, new_wd, wikipedia, diffset_dir, old_wp, options) -> dict[str, Any]:  # noqa: ANN001
    return {
        "inputs": {
            "old_wikidata": old_wd,
            "new_wikidata": new_wd,
            "wikipedia": os.fspath(wikipedia),
            "old_wikipedia": old_wp,
            "diffset": os.fspath(diffset_dir),
        },
        "options": options.as_dict(),
        "deleted_check": (
            "object in the old article and not in the new one"
            if old_wp is not None
            else "no --old-wikipedia: object not in the new article only"
        ),
    }


def _ticked(items: Iterator, bar: Any) -> Iterator:
    for item in items:
        bar.update(1)
        yield item
