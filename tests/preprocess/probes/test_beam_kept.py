"""The Beam runner's kept probes: written to shards by the checking workers, then streamed into
the stage's ``KeptStore`` by the last step, which never holds more than one batch of them and
writes the local runner's folder byte for byte (``test_kept.py`` does the same for the local
runner). The store's batch is forced to 3 probes and its page cache to its minimum."""

import json
from pathlib import Path

import pytest

from tw_jax.io import paths
from tw_jax.preprocess.diffset.local import build_diffset
from tw_jax.preprocess.probes import kept as kept_module
from tw_jax.preprocess.probes.categorise import CATEGORIES
from tw_jax.preprocess.probes.finish import ProbeOptions
from tw_jax.preprocess.probes.kept import KeptStore
from tw_jax.preprocess.probes.local import build_probes
from tw_jax.preprocess.probes.records import Probe, csv_text
from tw_jax.preprocess.probes.rules import finalise
from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump

pytest.importorskip("apache_beam")

from tw_jax.preprocess.probes import beam as beam_module  # noqa: E402

OPTIONS = ProbeOptions(
    unchanged_rate=0.5, max_subject_frac=0.05, max_object_frac=0.1, max_relation_frac=0.3,
    seed=5, lighttuning_size=4,
)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def pair(sample_world, tmp_path_factory):
    root, _ = sample_world
    diffset = tmp_path_factory.mktemp("probes_beam_kept") / "diffset"
    build_diffset(wikipedia_dump(root, "2021-08"), wikipedia_dump(root, "2021-09"), diffset)
    return (wikidata_dump(root, "2021-08"), wikidata_dump(root, "2021-09"),
            wikipedia_dump(root, "2021-09"), diffset), wikipedia_dump(root, "2021-08")


def test_the_last_step_holds_one_batch_and_writes_the_local_folder(pair, tmp_path, monkeypatch):
    args, old_wikipedia = pair
    reference = tmp_path / "local"
    build_probes(*args, reference, options=OPTIONS, old_wikipedia=old_wikipedia)

    found: list[Probe] = []
    pending: list[int] = []
    lines: list[bytes] = []  # the shards' lines read so far
    shards: list[str] = []
    add, open_file = KeptStore.add, paths.open_file

    def spying_add(self, probe):  # noqa: ANN001, ANN202
        # Each probe reaches the store as soon as its line is read: none is read ahead.
        assert len(lines) == len(found) + 1 and json.loads(lines[-1]) == list(probe)
        found.append(probe)
        add(self, probe)
        pending.append(len(self._pending))

    class Shard:
        def __init__(self, handle):  # noqa: ANN001
            self.handle = handle

        def __enter__(self):  # noqa: ANN204
            return self

        def __exit__(self, *exc):  # noqa: ANN002, ANN204
            self.handle.close()

        def __iter__(self):  # noqa: ANN204
            for line in self.handle:
                lines.append(line)
                yield line

    def spying_open(path, mode="r", **kwargs):  # noqa: ANN001, ANN003, ANN202
        handle = open_file(path, mode, **kwargs)
        if f"/{beam_module.KEPT_PARTS}/" not in str(path):
            return handle
        assert mode == "rb"
        shards.append(str(path))
        return Shard(handle)

    monkeypatch.setattr(KeptStore, "add", spying_add)
    monkeypatch.setattr(paths, "open_file", spying_open)
    monkeypatch.setattr(kept_module, "BATCH", 3)
    monkeypatch.setattr(kept_module, "CACHE_KIB", 1)
    out = tmp_path / "beam"
    stats = beam_module.build_probes_beam(*args, out, options=OPTIONS,
                                          old_wikipedia=old_wikipedia)

    assert _files(out) == _files(reference)  # the same files, and nothing else (no shards left)
    assert json.loads((reference / "stats.json").read_text()) == stats
    assert shards and all(f"/{beam_module.KEPT_PARTS}/" in name for name in shards)
    assert len(found) == len(lines) > 50 and max(pending) < 3
    for category in CATEGORIES:
        expected, counts = finalise(
            [p for p in found if p.category == category],
            OPTIONS.max_subject_frac, OPTIONS.max_object_frac, OPTIONS.max_relation_frac,
        )
        got = (out / f"{category}.csv").read_text(encoding="utf-8").splitlines()[1:]
        assert got == csv_text(expected).splitlines()[1:], category
        figures = stats["categories"][category]
        assert figures["after_rules"] == counts["aligned"]
        assert figures["final"] == counts["after_relation_cap"] == len(expected)


def test_shards_are_read_one_line_at_a_time(tmp_path):
    """A probe, with a newline, a quote, non-ASCII text and a lone surrogate, reads back the same;
    a broken line or a missing shard is met only when the stream gets there."""
    probe = Probe("Zoë \"x\"\nnext", "rel", "\udc80 ø \U0001f600", "Q1", "P1", "Q2", "a | b",
                  "text", "", "new", "Q2")
    first, broken = tmp_path / "kept-00000-of-00002.jsonl", tmp_path / "kept-00001-of-00002.jsonl"
    first.write_text(beam_module.kept_line(probe) + "\n" + beam_module.kept_line(probe) + "\n")
    broken.write_text(beam_module.kept_line(probe) + "\n{not json\n")
    assert "\n" not in beam_module.kept_line(probe)

    stream = beam_module.kept_probes([str(broken), str(first)])  # read in name order
    assert [next(stream) for _ in range(3)] == [probe] * 3
    with pytest.raises(json.JSONDecodeError):
        next(stream)
    stream = beam_module.kept_probes([str(first), str(tmp_path / "missing.jsonl")])
    assert [next(stream), next(stream)] == [probe, probe]
    with pytest.raises(FileNotFoundError):
        next(stream)
