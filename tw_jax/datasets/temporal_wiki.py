"""TemporalWiki as a TFDS builder: ``tfds build --imports tw_jax.datasets temporal_wiki/0809``.

One builder, one config per period (or snapshot) and kind, each from one of two sources named by
its config (docs/tfds.md); ``<P>`` is a period's token and ``<S>`` a snapshot's
(:mod:`tw_jax.tasks.names`: ``0809``/``08`` in the 2021 layout, ``202412_202501``/``202412``,
``202402_20240220`` for a 19-day period):

=========================  ======================  ==========================================
config                     splits                  features
=========================  ======================  ==========================================
``<P>``                    diffset, unchanged      id, title, text (Beam)
``<P>_ssm``                diffset                 id, title, inputs, targets
``<P>_probes``             unchanged, updated,     subject, relation, object, previous_object,
                           new, deleted, changed,  text, cloze, subject_id, relation_id,
                           lighttuning_<category>  object_id
``<P>_probes_<retr>``      unchanged, updated,     as ``<P>_probes``, and context (open book:
                           new, deleted            ``probes_bm25/``, ``probes_dpr/``)
``full_<S>``               full                    id, title, text (Beam)
``full_<S>_ssm``           full                    id, title, inputs, targets
``release_<P>``            diffset                 id, title, text
``release_<P>_probes``     changed, unchanged      as ``<P>_probes``
``release_full_<S>``       full                    id, title, text (Beam)
=========================  ======================  ==========================================

A config is made from its name (:func:`tw_jax.tasks.names.parse_config`), so any period a data
folder holds has its configs (``temporal_wiki/202412_202501_probes``) without being listed;
``BUILDER_CONFIGS`` lists the 2021 layout's (every pair of two of its twelve months, as
before, and the release's). The release has TemporalWiki's consecutive 2021 pairs only.
``manual_dir`` is a data folder that tw_jax's stages wrote (:mod:`tw_jax.tasks.layout`) for the
first six, a folder (or zip, or folder of the three zips) of the published release for the
``release_`` ones (:mod:`tw_jax.tasks.published`). Nothing is downloaded. A split holds a
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
from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.preprocess.dumps.released import PublishedFile, index_files
from tw_jax.preprocess.runners.accounting import STATS_FILE
from tw_jax.preprocess.runners.whole import recorded_counts
from tw_jax.tasks import names
from tw_jax.tasks.layout import Layout, Pair, discover, join, shards
from tw_jax.tasks.published import Release, classify
from tw_jax.tasks.sources import TFDS_RETRIEVERS
from tw_jax.tasks.tfds_fingerprint import physical_files
from tw_jax.time import Period, Snapshot

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

# The 2021 layout's months in its order (08 … 07) and TemporalWiki's release (consecutive pairs).
MONTHS = [Snapshot.parse(f"{m:02d}") for m in (*range(8, 13), *range(1, 8))]
RELEASE_PAIRS = [Period.parse(f"{m.legacy}{n.legacy}")
                 for m, n in zip(MONTHS, MONTHS[1:] + MONTHS[:1], strict=True)]
# A 2021 data folder may hold any pair of two of its months (``tw-jax diffset`` of 08 and 10
# is ``0810``, what changed over two months): a listed config for each, consecutive pairs first.
PAIRS = RELEASE_PAIRS + [Period.parse(f"{old.legacy}{new.legacy}") for old in MONTHS
                         for new in MONTHS if old != new
                         and Period.parse(f"{old.legacy}{new.legacy}") not in RELEASE_PAIRS]
CATEGORIES = ("unchanged", "updated", "new", "deleted")
TEXT_FIELDS = {"id": "int", "title": "text", "text": "text"}
SSM_FIELDS = {"id": "int", "title": "text", "inputs": "text", "targets": "text"}


@dataclasses.dataclass
class TemporalWikiConfig(tfds.core.BuilderConfig):
    """``kind``: diffset, ssm, probes, full or full_ssm; ``source``: ``data`` (a data folder)
    or ``release`` (the published files); ``period``: the period, or the snapshot of a full
    snapshot; ``beam``: generated as a Beam pipeline (the configs that are big in a real
    month); ``retriever``: the open-book probes of ``probes_<retriever>/`` (a ``context``
    feature beside the probe's)."""

    kind: str = "diffset"
    source: str = "data"
    period: Period | Snapshot | None = None
    beam: bool = False
    retriever: str = ""


_DESCRIPTIONS = {
    ("data", "diffset"): "TWiki-DiffSet and NON-DiffSet of {what}.",
    ("data", "ssm"): "The DiffSet of {what}, salient spans masked.",
    ("data", "probes"): "TWiki-Probes and light-tuning sets of {what}.",
    ("data", "full"): "The full Wikipedia snapshot of {what}.",
    ("data", "full_ssm"): "The full snapshot of {what}, SSM-masked.",
    ("release", "diffset"): "The published TWiki_Diffsets CSV of {what}.",
    ("release", "probes"): "The published TWiki_Probes CSVs of {what}.",
    ("release", "full"): "The published Wikipedia_Full snapshot of {what}.",
}


def config_of(name: str) -> TemporalWikiConfig | None:
    """The config a name stands for (:func:`tw_jax.tasks.names.parse_config`); None when the
    name is none, or names what neither source has (release configs exist for the 2021
    release's consecutive pairs and their snapshots, open-book ones for the built-in
    retrievers)."""
    found = names.parse_config(name)
    if found is None or (found.source, found.kind) not in _DESCRIPTIONS:
        return None
    if found.retriever and found.retriever not in TFDS_RETRIEVERS:
        return None
    if found.source == names.RELEASE:
        if isinstance(found.period, Period) and found.period not in RELEASE_PAIRS:
            return None
        if isinstance(found.period, Snapshot) and found.period.legacy is None:
            return None
    period = found.period
    what = (f"the period {period.dated().label}" if isinstance(period, Period)
            else f"{period.dated().iso}")
    description = _DESCRIPTIONS[(found.source, found.kind)].format(what=what)
    if found.retriever:
        description = (f"TWiki-Probes of {what} with the passages {found.retriever} retrieved "
                       "for each (open book).")
    beam = found.kind in ("diffset", "full") and not (
        found.source == names.RELEASE and found.kind == "diffset")
    return TemporalWikiConfig(name=name, kind=found.kind, source=found.source, period=period,
                              beam=beam, retriever=found.retriever, description=description)


def _configs() -> list[TemporalWikiConfig]:
    """The listed configs: every kind of every 2021 pair and month, and the release's."""
    listed: list[str] = []
    for pair in PAIRS:
        listed += [names.config(kind, pair) for kind in ("diffset", "ssm", "probes")]
        listed += [names.config("probes", pair, retriever) for retriever in TFDS_RETRIEVERS]
    for pair in RELEASE_PAIRS:
        listed += [names.config(kind, pair, source=names.RELEASE)
                   for kind in ("diffset", "probes")]
    for month in sorted(MONTHS, key=lambda m: int(m.token)):
        listed += [names.config("full", month), names.config("full_ssm", month),
                   names.config("full", month, source=names.RELEASE)]
    return [config for config in map(config_of, listed) if config is not None]


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
    - for the configs <P>, <P>_ssm, <P>_probes, full_<S>, full_<S>_ssm: the data folder that
      tw_jax's stages wrote (DATA/<period>/{diffset,ssm,probes}, DATA/<snapshot>/{full,ssm});
    - for the release_ configs: the published TemporalWiki release, a folder holding
      TWiki_Diffsets.zip, TWiki_Probes.zip and Wikipedia_Full.zip (or their contents).
    """

    @classmethod
    def get_builder_config(cls, name: str, version: str | tfds.core.Version | None = None
                           ) -> TemporalWikiConfig | None:
        """A listed config, else the one its name stands for (any period's: :func:`config_of`);
        None (TFDS's "not found" with the closest names) when it stands for none."""
        listed = super().get_builder_config(name, version)
        return listed if listed is not None else config_of(name)

    def _info(self) -> tfds.core.DatasetInfo:
        config = self.builder_config
        return self.ordered_info(_features(config.kind, config.retriever), HOMEPAGE, CITATION)

    def _splits(self, root: str) -> dict[str, Shards]:
        config = self.builder_config
        if config.source == "release":
            return _release_splits(config, classify(index_files(root)), root)
        return _data_splits(config, discover(root))

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict[str, Any]:
        splits = self._splits(os.fspath(dl_manager.manual_dir))
        return {name: self._generate_examples(make, self.builder_config.beam)
                for name, make in splits.items()}

    def source_files(self, manual_dir: str) -> list[str]:
        """The files of the config's splits: the stage's shards of each split's pattern, the
        probe CSVs, the release files (zips) holding its members; not the stage's
        ``stats.json``, nor the folder's other files."""
        return sorted({f for shards in self._splits(manual_dir).values() for f in shards.files()})

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


Readers = list[Callable[[], Iterable[readers.KeyedExample]]]


@dataclasses.dataclass(frozen=True)
class Shards:
    """A split: ``make`` lists its readers, one a shard (when the split is generated);
    ``files`` lists the files they read (what the dataset's fingerprint hashes)."""

    make: Callable[[], Readers]
    files: Callable[[], list[str]]

    def __call__(self) -> Readers:
        return self.make()


def _tfrecord_shards(pattern: str, fields: dict[str, str]) -> Shards:
    def make() -> Readers:
        files = readers.shard_files(pattern)
        return [(lambda s=s, p=p: readers.tfrecord_examples(s, p, fields))
                for s, p in enumerate(files)]

    return Shards(make, lambda: sorted(paths.glob(pattern)))


def _csv_rows(*files: str, context: bool = False) -> Shards:
    return Shards(lambda: [lambda: readers.probe_csv_examples(files, context=context)],
                  lambda: list(files))


def _data_splits(config: TemporalWikiConfig, layout: Layout) -> dict[str, Shards]:
    where = layout.data_dir
    if config.kind in ("full", "full_ssm"):
        snapshot = layout.snapshots.get(config.period)
        pattern = snapshot and (snapshot.text_pattern if config.kind == "full"
                                else snapshot.ssm_pattern)
        if not pattern:
            raise FileNotFoundError(
                f"{where}: no full snapshot of {config.period.dated().iso} "
                f"({'tw-jax diffset' if config.kind == 'full' else 'tw-jax ssm'} writes it)")
        fields = TEXT_FIELDS if config.kind == "full" else SSM_FIELDS
        return {"full": _tfrecord_shards(pattern, fields)}
    pair = layout.pairs.get(config.period)
    if config.retriever:
        return _open_book_splits(config, pair, where)
    folder = config.kind  # diffset, ssm or probes: the pair's folder of that name
    if pair is None or not layout.has(join(pair.folder, folder)):
        raise FileNotFoundError(
            f"{join(where, config.period.name, folder)}: no such folder; `tw-jax {folder}` "
            "writes it")
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
        missing = join(where, config.period.name, name)
        raise FileNotFoundError(
            f"{missing}: no finished open-book probe folder (its {STATS_FILE} is written last); "
            f"`tw-jax probe-contexts --retriever {config.retriever}` writes it")
    present = set(paths.listdir(folder))
    files = {c: join(folder, f"{c}.csv") for c in CATEGORIES if f"{c}.csv" in present}
    splits = {c: _csv_rows(path, context=True) for c, path in files.items()
              if readers.has_rows(path)}
    if not splits:
        raise FileNotFoundError(f"{folder}: no probe rows ({', '.join(CATEGORIES)}.csv)")
    return splits


def _probe_splits(folder: str) -> dict[str, Shards]:
    present = set(paths.listdir(folder))
    recorded = recorded_counts(folder)  # the stage finished, and what each file holds
    lost = sorted(f"{name}.csv" for name in recorded if f"{name}.csv" not in present)
    if lost:
        raise DumpError(join(folder, lost[0]), None, f"is missing, though {STATS_FILE} records "
                        f"{recorded[lost[0][:-4]]} rows for it; rebuild the folder (tw-jax probes)")
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
    return Shards(lambda: [(lambda s=s, f=f: readers.published_text_examples(s, f))
                           for s, f in enumerate(files)], lambda: physical_files(files))


def _published_probes(file: PublishedFile) -> Shards:
    return Shards(lambda: [lambda: readers.published_probe_examples(file)],
                  lambda: physical_files([file]))


def _release_splits(config: TemporalWikiConfig, release: Release, root: str) -> dict[str, Shards]:
    period = config.period
    if config.kind == "full":
        if period not in release.full:
            raise FileNotFoundError(f"{root}: no Wikipedia_Full parts of month {period.name}")
        return {"full": _published_texts(release.full[period])}
    if config.kind == "probes":
        if period not in release.probes:
            raise FileNotFoundError(
                f"{root}: no TWiki_Probes/{period.old.name}01-{period.new.name}01_*.csv")
        return {category: _published_probes(file)
                for category, file in sorted(release.probes[period].items())}
    if period not in release.diffsets:
        raise FileNotFoundError(f"{root}: no TWiki_Diffsets/wikipedia_{period.name}_*.csv")
    versions = release.diffsets[period]
    # the file the release's task reads (the GPT-2 training text), else the subset
    return {"diffset": _published_texts([versions.get("gpt2") or versions["subset"]])}
