"""TemporalWiki as a TFDS builder: ``tfds build --imports tw_jax.datasets temporal_wiki/0809``.

One builder, one config per month pair (or month) and kind, each from one of two sources named
by its config (docs/tfds.md):

=========================  ======================  ==========================================
config                     splits                  features
=========================  ======================  ==========================================
``MMMM``                   diffset, unchanged      id, title, text (Beam)
``MMMM_ssm``               diffset                 id, title, inputs, targets
``MMMM_probes``            unchanged, updated,     subject, relation, object, previous_object,
                           new, deleted, changed,  text, cloze, subject_id, relation_id,
                           lighttuning_<category>  object_id
``MMMM_probes_<retr>``     unchanged, updated,     as ``MMMM_probes``, and context (open book:
                           new, deleted            ``probes_bm25/``, ``probes_dpr/``)
``full_MM``                full                    id, title, text (Beam)
``full_MM_ssm``            full                    id, title, inputs, targets
``release_MMMM``           diffset                 id, title, text
``release_MMMM_probes``    changed, unchanged      as ``MMMM_probes``
``release_full_MM``        full                    id, title, text (Beam)
=========================  ======================  ==========================================

``MMMM`` is any pair of two months a data folder may hold (``0809``, or ``0810`` over two
months); the release has consecutive pairs only. ``manual_dir`` is a data folder that tw_jax's
stages wrote (:mod:`tw_jax.tasks.layout`) for the first six, a folder (or zip, or folder of
the three zips) of the published release for the ``release_`` ones
(:mod:`tw_jax.tasks.published`). Nothing is downloaded. A split holds a
stage's examples in file order (:mod:`tw_jax.datasets.readers`), which is what lets a seqio
task read it in place of the files (:func:`tw_jax.tasks.sources.use_tfds`).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np
import tensorflow_datasets as tfds

from tw_jax.datasets import readers
from tw_jax.datasets.base import Builder
from tw_jax.preprocess.dumps.released import PublishedFile, index_files
from tw_jax.preprocess.runners.accounting import STATS_FILE
from tw_jax.tasks.layout import Layout, Pair, discover, join, shards
from tw_jax.tasks.published import Release, classify
from tw_jax.tasks.sources import TFDS_RETRIEVERS

CITATION = """\
@inproceedings{jang-etal-2022-temporalwiki,
    title = "{T}emporal{W}iki: A Lifelong Benchmark for Training and Evaluating Ever-Evolving
             Language Models",
    author = "Jang, Joel and Ye, Seonghyeon and Lee, Changho and Yang, Sohee and
              Shin, Joongbo and Han, Janghoon and Kim, Gyeonghun and Seo, Minjoon",
    booktitle = "Proceedings of the 2022 Conference on Empirical Methods in Natural Language
                 Processing",
    year = "2022",
    publisher = "Association for Computational Linguistics",
    pages = "6237--6250",
}
"""
HOMEPAGE = "https://github.com/joeljang/temporalwiki"

MONTHS = [f"{m:02d}" for m in range(1, 13)]
# The published pairs are consecutive months (0809 … 1112; December is followed by January).
RELEASE_PAIRS = [f"{m}{MONTHS[(i + 1) % 12]}" for i, m in enumerate(MONTHS)]
# A data folder may hold any pair of two months (``tw-jax diffset`` of 08 and 10 is ``0810``,
# what changed over two months): a config for each, consecutive pairs first.
PAIRS = RELEASE_PAIRS + [f"{old}{new}" for old in MONTHS for new in MONTHS
                         if old != new and f"{old}{new}" not in RELEASE_PAIRS]
CATEGORIES = ("unchanged", "updated", "new", "deleted")
TEXT_FIELDS = {"id": "int", "title": "text", "text": "text"}
SSM_FIELDS = {"id": "int", "title": "text", "inputs": "text", "targets": "text"}


@dataclasses.dataclass
class TemporalWikiConfig(tfds.core.BuilderConfig):
    """``kind``: diffset, ssm, probes, full or full_ssm; ``source``: ``data`` (a data folder)
    or ``release`` (the published files); ``period``: the month pair, or the month of a full
    snapshot; ``beam``: generated as a Beam pipeline (the configs that are big in a real
    month); ``retriever``: the open-book probes of ``probes_<retriever>/`` (a ``context``
    feature beside the probe's)."""

    kind: str = "diffset"
    source: str = "data"
    period: str = ""
    beam: bool = False
    retriever: str = ""


def _configs() -> list[TemporalWikiConfig]:
    made = []
    for pair in PAIRS:
        what = f"the month pair {pair[:2]}→{pair[2:]}"
        made += [
            TemporalWikiConfig(name=pair, kind="diffset", period=pair, beam=True,
                               description=f"TWiki-DiffSet and NON-DiffSet of {what}."),
            TemporalWikiConfig(name=f"{pair}_ssm", kind="ssm", period=pair,
                               description=f"The DiffSet of {what}, salient spans masked."),
            TemporalWikiConfig(name=f"{pair}_probes", kind="probes", period=pair,
                               description=f"TWiki-Probes and light-tuning sets of {what}."),
        ]
        made += [
            TemporalWikiConfig(name=f"{pair}_probes_{retriever}", kind="probes",
                               period=pair, retriever=retriever,
                               description=f"TWiki-Probes of {what} with the passages "
                                           f"{retriever} retrieved for each (open book).")
            for retriever in TFDS_RETRIEVERS  # the open-book folders of the built-in retrievers
        ]
    for pair in RELEASE_PAIRS:
        what = f"the month pair {pair[:2]}→{pair[2:]}"
        made += [
            TemporalWikiConfig(name=f"release_{pair}", kind="diffset", source="release",
                               period=pair,
                               description=f"The published TWiki_Diffsets CSV of {what}."),
            TemporalWikiConfig(name=f"release_{pair}_probes", kind="probes", source="release",
                               period=pair,
                               description=f"The published TWiki_Probes CSVs of {what}."),
        ]
    for month in MONTHS:
        made += [
            TemporalWikiConfig(name=f"full_{month}", kind="full", period=month, beam=True,
                               description=f"The full Wikipedia snapshot of month {month}."),
            TemporalWikiConfig(name=f"full_{month}_ssm", kind="full_ssm", period=month,
                               description=f"The full snapshot of month {month}, SSM-masked."),
            TemporalWikiConfig(name=f"release_full_{month}", kind="full", source="release",
                               period=month, beam=True,
                               description=f"The published Wikipedia_Full snapshot of {month}."),
        ]
    return made


def _features(kind: str, retriever: str = "") -> tfds.features.FeaturesDict:
    if kind == "probes":
        columns = readers.PROBE_COLUMNS + ((readers.CONTEXT,) if retriever else ())
        return tfds.features.FeaturesDict({c: tfds.features.Text() for c in columns})
    fields = SSM_FIELDS if kind.endswith("ssm") else TEXT_FIELDS
    return tfds.features.FeaturesDict({
        f: tfds.features.Scalar(dtype=np.int64) if kind_ == "int" else tfds.features.Text()
        for f, kind_ in fields.items()
    })


class TemporalWiki(Builder):
    """TemporalWiki (Jang et al., EMNLP 2022): a lifelong benchmark of monthly Wikipedia and
    Wikidata snapshots. TWiki-DiffSets hold what changed between two consecutive snapshots,
    TWiki-Probes the Wikidata facts that stayed, were updated, are new or were deleted; a
    language model trained month by month on the DiffSets is evaluated on the probes."""

    VERSION = tfds.core.Version("1.1.0")
    RELEASE_NOTES = {
        "1.0.0": "First release: DiffSets, SSM DiffSets, probes and light-tuning sets per month "
                 "pair, full snapshots, from a tw_jax data folder or the published release.",
        "1.1.0": "Configs for every pair of two months (not only consecutive ones) and for the "
                 "open-book probe folders (MMMM_probes_bm25, MMMM_probes_dpr: a context "
                 "feature). Existing configs yield the same examples.",
    }
    BUILDER_CONFIGS = _configs()
    MANUAL_DOWNLOAD_INSTRUCTIONS = """\
    Nothing is downloaded. Pass --manual_dir as
    - for the configs MMMM, MMMM_ssm, MMMM_probes, full_MM, full_MM_ssm: the data folder that
      tw_jax's stages wrote (DATA/<MMMM>/{diffset,ssm,probes}, DATA/<MM>/{full,ssm});
    - for the release_ configs: the published TemporalWiki release, a folder holding
      TWiki_Diffsets.zip, TWiki_Probes.zip and Wikipedia_Full.zip (or their contents).
    """

    def _info(self) -> tfds.core.DatasetInfo:
        config = self.builder_config
        return self.ordered_info(_features(config.kind, config.retriever), HOMEPAGE, CITATION)

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict[str, Any]:
        config = self.builder_config
        root = os.fspath(dl_manager.manual_dir)
        if config.source == "release":
            splits = _release_splits(config, classify(index_files(root)), root)
        else:
            splits = _data_splits(config, discover(root))
        return {name: self._generate_examples(make, config.beam)
                for name, make in splits.items()}

    def _generate_examples(self, make: Callable[[], list[Callable[[], Iterable]]],
                           beam: bool) -> Any:
        """Examples of one split: ``make`` lists its readers, one a shard (the files are
        listed when the split is generated); on Beam each shard is read by one worker."""
        if beam:
            apache_beam = tfds.core.lazy_imports.apache_beam
            return (apache_beam.Create(list(range(len(make()))))
                    | apache_beam.FlatMap(lambda shard: make()[shard]()))
        return (example for read in make() for example in read())


# --- the data folder ---------------------------------------------------------------------------


Shards = Callable[[], list[Callable[[], Iterable[readers.KeyedExample]]]]


def _tfrecord_shards(pattern: str, fields: dict[str, str]) -> Shards:
    def make() -> list[Callable[[], Iterable[readers.KeyedExample]]]:
        files = readers.shard_files(pattern)
        return [(lambda s=s, p=p: readers.tfrecord_examples(s, p, fields))
                for s, p in enumerate(files)]

    return make


def _csv_rows(*files: str, context: bool = False) -> Shards:
    return lambda: [lambda: readers.probe_csv_examples(files, context=context)]


def _data_splits(config: TemporalWikiConfig, layout: Layout) -> dict[str, Shards]:
    where = layout.data_dir
    if config.kind in ("full", "full_ssm"):
        snapshot = layout.snapshots.get(config.period)
        pattern = snapshot and (snapshot.text_pattern if config.kind == "full"
                                else snapshot.ssm_pattern)
        if not pattern:
            raise FileNotFoundError(
                f"{where}: no full snapshot of month {config.period} "
                f"({'tw-jax diffset' if config.kind == 'full' else 'tw-jax ssm'} writes it)")
        fields = TEXT_FIELDS if config.kind == "full" else SSM_FIELDS
        return {"full": _tfrecord_shards(pattern, fields)}
    pair = layout.pairs.get(config.period)
    if config.retriever:
        return _open_book_splits(config, pair, where)
    folder = config.kind  # diffset, ssm or probes: the pair's folder of that name
    if pair is None or not layout.has(join(pair.folder, folder)):
        raise FileNotFoundError(
            f"{join(where, config.period, folder)}: no such folder; `tw-jax {folder}` writes it")
    if config.kind == "diffset":
        # a split without examples is left out (TFDS refuses one): a month may change nothing
        return {name: _tfrecord_shards(shards(pair.diffset, name), TEXT_FIELDS)
                for name in ("diffset", "unchanged")
                if readers.has_records(shards(pair.diffset, name))}
    if config.kind == "ssm":
        return {"diffset": _tfrecord_shards(shards(pair.ssm, "diffset"), SSM_FIELDS)}
    return _probe_splits(pair.probes)


def _open_book_splits(config: TemporalWikiConfig, pair: Pair | None,
                      where: str) -> dict[str, Shards]:
    """The categories of ``probes_<retriever>/``, finished (its ``stats.json``, written last,
    is there): a folder cut short is an error, not fewer probes."""
    name = f"probes_{config.retriever}"
    folder = pair.context_folders().get(config.retriever) if pair else None
    if folder is None:
        missing = join(where, config.period, name)
        raise FileNotFoundError(
            f"{missing}: no finished open-book probe folder (its {STATS_FILE} is written last); "
            f"`tw-jax probe-contexts --retriever {config.retriever}` writes it")
    from tw_jax.io import paths

    present = set(paths.listdir(folder))
    files = {c: join(folder, f"{c}.csv") for c in CATEGORIES if f"{c}.csv" in present}
    splits = {c: _csv_rows(path, context=True) for c, path in files.items()
              if readers.has_rows(path)}
    if not splits:
        raise FileNotFoundError(f"{folder}: no probe rows ({', '.join(CATEGORIES)}.csv)")
    return splits


def _probe_splits(folder: str) -> dict[str, Shards]:
    from tw_jax.io import paths

    present = set(paths.listdir(folder))
    splits: dict[str, Shards] = {}
    for stem, prefix in (("{}.csv", ""), ("lighttuning_{}.csv", "lighttuning_")):
        found = {c: join(folder, stem.format(c)) for c in CATEGORIES
                 if stem.format(c) in present}
        # a category without rows (a month may delete no fact) is no split: TFDS refuses one
        changed = [found[c] for c in ("updated", "new") if c in found]
        found = {c: path for c, path in found.items() if readers.has_rows(path)}
        splits.update({prefix + c: _csv_rows(path) for c, path in found.items()})
        if not prefix and len(changed) == 2 and ("updated" in found or "new" in found):
            splits["changed"] = _csv_rows(*changed)  # the tasks' CHANGED: UPDATED then NEW
    if not splits:
        raise FileNotFoundError(f"{folder}: no probe CSVs ({', '.join(CATEGORIES)}.csv)")
    return splits


# --- the published release ---------------------------------------------------------------------


def _published_texts(files: list[PublishedFile]) -> Shards:
    return lambda: [(lambda s=s, f=f: readers.published_text_examples(s, f))
                    for s, f in enumerate(files)]


def _release_splits(config: TemporalWikiConfig, release: Release, root: str) -> dict[str, Shards]:
    period = config.period
    if config.kind == "full":
        if period not in release.full:
            raise FileNotFoundError(f"{root}: no Wikipedia_Full parts of month {period}")
        return {"full": _published_texts(release.full[period])}
    if config.kind == "probes":
        if period not in release.probes:
            raise FileNotFoundError(
                f"{root}: no TWiki_Probes/{period[:2]}01-{period[2:]}01_*.csv")
        return {category: (lambda f=file: [lambda: readers.published_probe_examples(f)])
                for category, file in sorted(release.probes[period].items())}
    if period not in release.diffsets:
        raise FileNotFoundError(f"{root}: no TWiki_Diffsets/wikipedia_{period}_*.csv")
    versions = release.diffsets[period]
    # the file the release's task reads (the GPT-2 training text), else the subset
    return {"diffset": _published_texts([versions.get("gpt2") or versions["subset"]])}
