"""Kept probes on disk (``KeptStore``): the category-wide steps in SQL keep exactly the probes
that the in-memory rules (``rules.finalise``) keep, in the same order, whatever the batch size
and page cache, and the stage run with a tiny batch writes the very folder of the default one.

The store's batch is forced to 3 probes and its page cache to its minimum, so every run goes
through many INSERT batches (interleaved with the workers' chunks); in the store's own test the
probes are also long enough that SQLite's sorts outgrow memory and spill their sorted runs to
temporary files, which are then merged (seen in ``/proc/self/fd`` while the steps run).
"""

import os
import random
import sys
from pathlib import Path

import pytest

from tw_jax.preprocess.diffset.local import build_diffset
from tw_jax.preprocess.probes import kept as kept_module
from tw_jax.preprocess.probes import local
from tw_jax.preprocess.probes.categorise import CATEGORIES
from tw_jax.preprocess.probes.finish import ProbeOptions
from tw_jax.preprocess.probes.kept import KeptStore
from tw_jax.preprocess.probes.local import build_probes
from tw_jax.preprocess.probes.records import Probe, csv_text
from tw_jax.preprocess.probes.rules import finalise
from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump

FRACTIONS = [(1.0, 1.0, 1.0), (0.01, 0.05, 0.05), (0.001, 0.01, 0.3), (0.2, 1.0, 0.02)]


def _probes(rng: random.Random, n: int, pad: int = 0) -> list[Probe]:
    """Probes with what the steps must tell apart: one text for several subjects (duplicates),
    subjects, objects and relations frequent enough to be capped, non-ASCII text (code-point
    order), and exact sort-key ties (one entity twice in a dump), broken by the order found.
    ``pad`` characters lengthen each subject label (and so each row SQLite sorts)."""
    probes = []
    for i in range(n):
        subject_id = f"Q{rng.randint(1, n // 8 + 1)}"
        label = f"S{rng.randint(1, n // 10 + 1)}" + rng.choice(["", "é", "\U0001f600", "z", "Z"])
        label += " " + "x" * pad if pad else ""
        relation = rng.randint(1, 6)
        obj = rng.randint(1, 40)
        key = f"Q{obj}" if rng.random() < 0.8 else f"time:+{obj}"
        probes.append(Probe(
            label, f"rel {relation}", rng.choice([f"O{obj}", f"o{obj}", f"Ö{obj}"]), subject_id,
            f"P{relation}", key, "", f"text {i}", "", rng.choice(CATEGORIES), key,
        ))
    ties = [p._replace(text=p.text + " again") for p in rng.sample(probes, n // 20)]
    probes += ties
    rng.shuffle(probes)
    return probes


def _spilled_files(store: KeptStore) -> set[str]:
    """The temporary files SQLite opens while the store's statements run (its sorts' spilled
    runs; unlinked at once, so seen only as open descriptors)."""
    seen: set[str] = set()

    def look() -> int:
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue
            if "etilqs" in target:  # SQLite's prefix for temporary files
                seen.add(target)
        return 0

    store._db.set_progress_handler(look, 1000)
    return seen


@pytest.mark.parametrize("fractions", FRACTIONS)
def test_the_store_keeps_what_the_in_memory_rules_keep(tmp_path, fractions):
    rng = random.Random(str(fractions))
    probes = _probes(rng, 6000, pad=1000)
    store = KeptStore(str(tmp_path / "kept.sqlite"), batch=3, cache_kib=1)
    try:
        for probe in probes:
            store.add(probe)
            assert len(store._pending) < 3  # never more than one batch in memory
        assert len(store) == len(probes)
        spilled = _spilled_files(store)
        for category in CATEGORIES:
            expected, counts = finalise([p for p in probes if p.category == category], *fractions)
            assert store.finalise(category, *fractions) == counts
            assert list(store.final(category)) == expected
            assert list(store.final(category)) == expected  # re-read: the writers read twice
            assert sorted(store.final_texts(category)) == sorted(
                (p.subject, p.relation, p.object) for p in expected
            )
        assert counts["after_duplicates"] < counts["aligned"]  # duplicates were there to drop
        if sys.platform == "linux":
            assert spilled, "no sort outgrew SQLite's memory: the on-disk merge was not run"
    finally:
        store.close()


def test_an_empty_category_finalises_to_nothing(tmp_path):
    store = KeptStore(str(tmp_path / "kept.sqlite"))
    try:
        assert store.finalise("new", 0.01, 0.05, 0.05) == {
            "aligned": 0, "after_duplicates": 0, "after_subject_cap": 0,
            "after_object_cap": 0, "after_relation_cap": 0,
        }
        assert list(store.final("new")) == []
        with pytest.raises(RuntimeError):
            store.add(_probes(random.Random(0), 20)[0])
    finally:
        store.close()


OPTIONS = ProbeOptions(
    unchanged_rate=0.5, max_subject_frac=0.05, max_object_frac=0.1, max_relation_frac=0.3,
    seed=5, lighttuning_size=4,
)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def pair(sample_world, tmp_path_factory):
    root, _ = sample_world
    diffset = tmp_path_factory.mktemp("probes_kept") / "diffset"
    build_diffset(wikipedia_dump(root, "2021-08"), wikipedia_dump(root, "2021-09"), diffset)
    return (wikidata_dump(root, "2021-08"), wikidata_dump(root, "2021-09"),
            wikipedia_dump(root, "2021-09"), diffset), wikipedia_dump(root, "2021-08")


@pytest.mark.parametrize("workers", [1, 2])
def test_a_tiny_batch_writes_the_folder_of_the_in_memory_rules(pair, tmp_path, monkeypatch,
                                                               workers):
    """The stage with a 3-probe batch, a minimal page cache (and, with 2 workers, 3-line jobs)
    writes the default run's folder byte for byte, and its final probes are those of
    ``rules.finalise`` over every probe it kept, in the order it kept them."""
    args, old_wikipedia = pair
    reference = tmp_path / "reference"
    build_probes(*args, reference, options=OPTIONS, old_wikipedia=old_wikipedia)

    found: list[Probe] = []
    pending: list[int] = []
    add = KeptStore.add

    def spying_add(self, probe):  # noqa: ANN001, ANN202
        found.append(probe)
        add(self, probe)
        pending.append(len(self._pending))

    monkeypatch.setattr(KeptStore, "add", spying_add)
    monkeypatch.setattr(kept_module, "BATCH", 3)
    monkeypatch.setattr(kept_module, "CACHE_KIB", 1)
    monkeypatch.setattr(local, "_CHUNK_LINES", 3)
    tiny = tmp_path / "tiny"
    stats = build_probes(*args, tiny, options=OPTIONS, old_wikipedia=old_wikipedia,
                         workers=workers)

    assert _files(tiny) == _files(reference)
    assert len(found) > 50 and max(pending) < 3
    for category in CATEGORIES:
        expected, counts = finalise(
            [p for p in found if p.category == category],
            OPTIONS.max_subject_frac, OPTIONS.max_object_frac, OPTIONS.max_relation_frac,
        )
        got = (tiny / f"{category}.csv").read_text(encoding="utf-8").splitlines()[1:]
        assert got == csv_text(expected).splitlines()[1:], category
        figures = stats["categories"][category]
        assert figures["after_rules"] == counts["aligned"]
        assert figures["final"] == counts["after_relation_cap"] == len(expected)
