"""Each stage records what it was made from (``made_from`` in its ``stats.json``: the dumps', the
DiffSet files' sizes and fingerprints), every reader of the stage refuses it once an input has
other bytes, and ``tw-jax build`` rebuilds exactly the stale stages, saying why. An input that
is gone (dumps deleted after a build, a data folder moved) is not a change."""

from __future__ import annotations

import bz2
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from tw_jax.cli import main
from tw_jax.errors import DumpError
from tw_jax.io.manifest import differences, fingerprint, sampled_digest
from tw_jax.preprocess.probes.probe_csv import read_stage_probes
from tw_jax.sample_world.build import build_sample_world, wikidata_dump, wikipedia_dump
from tw_jax.sample_world.span import Span
from tw_jax.time import Snapshot

OLD, NEW = "2021-11", "2021-12"
PERIOD = "1112"  # two of TemporalWiki's months: the 2021 layout's folder names
OLD_DIR = "11"


def _build(capsys, dumps: Path, data: Path) -> list[str]:
    code = main(["build", "--dumps", str(dumps), "--data", str(data), "--unchanged-rate", "1",
                 "--workers", "1"])
    out, _ = capsys.readouterr()
    assert code == 0, out
    return out.splitlines()[1:-1]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def dumps(tmp_path_factory) -> Path:
    world = tmp_path_factory.mktemp("world")
    build_sample_world(world, seed=0, n_entities=60, span=Span(Snapshot.parse(OLD), 2))
    folder = tmp_path_factory.mktemp("dumps")
    for month in (OLD, NEW):
        for dump in (wikipedia_dump(world, month), wikidata_dump(world, month)):
            shutil.copy(dump, folder / dump.name)
    return folder


def test_a_replaced_dump_makes_what_was_made_from_it_stale(dumps, tmp_path, capsys):
    data = tmp_path / "data"
    assert all("built in" in line for line in _build(capsys, dumps, data))
    new_wikipedia = next(dumps.glob("enwiki-20211201-*"))
    diffset = data / PERIOD / "diffset"

    def made_from(folder: str) -> dict:
        return json.loads((data / folder / "stats.json").read_text())["made_from"]["files"]

    wikipedia = {p.name: str(p) for p in dumps.glob("enwiki-*")}
    wikidata = {p.name: str(p) for p in dumps.glob("wikidata-*")}
    assert set(made_from(f"{OLD_DIR}/full")) == {wikipedia[n] for n in wikipedia if "20211101" in n}
    assert set(made_from(f"{PERIOD}/diffset")) == set(wikipedia.values())
    assert set(made_from(f"{PERIOD}/probes")) == {*wikipedia.values(), *wikidata.values(),
                                                   "diffset/diffset.jsonl", "diffset/full.jsonl"}
    assert made_from(f"{PERIOD}/ssm") == {  # below the period: the data folder can move
        f"diffset/{name}": {"bytes": (diffset / name).stat().st_size,
                            "sha256": _sha256(diffset / name)}
        for name in ("diffset.jsonl", "full.jsonl")}
    assert made_from(f"{OLD_DIR}/ssm") == {"full/full.jsonl": {
        "bytes": (data / OLD_DIR / "full" / "full.jsonl").stat().st_size,
        "sha256": _sha256(data / OLD_DIR / "full" / "full.jsonl")}}
    assert made_from(f"{PERIOD}/diffset")[str(new_wikipedia)] == {
        "bytes": new_wikipedia.stat().st_size, "sha256": _sha256(new_wikipedia)}

    masked = made_from(f"{PERIOD}/ssm")["diffset/diffset.jsonl"]["bytes"]
    # the new month downloaded again, one article's text other than before (its times kept)
    before = new_wikipedia.stat()
    xml = bz2.decompress(new_wikipedia.read_bytes()).decode("utf-8")
    lead = xml.index("'''", xml.index("<ns>0</ns>"))  # the first article's bold title
    new_wikipedia.write_bytes(bz2.compress(
        (xml[:lead] + "Redownloaded text. " + xml[lead:]).encode("utf-8")))
    import os

    os.utime(new_wikipedia, ns=(before.st_atime_ns, before.st_mtime_ns))
    probes = str(data / PERIOD / "probes" / "updated.csv")
    with pytest.raises(DumpError) as caught:
        read_stage_probes(probes)
    assert re.fullmatch(
        rf"{re.escape(str(data / PERIOD / 'probes'))}: is stale: it was made from "
        rf"{re.escape(str(new_wikipedia))}, which has \d+ bytes, \d+ were recorded by tw-jax "
        r"probes; run tw-jax probes again \(or tw-jax build on the dumps: it rebuilds stale "
        r"stages\)", str(caught.value))

    lines = _build(capsys, dumps, data)
    assert [re.sub(r" in \d+\.\d s: .*", "", line.split(": ", 1)[1]) for line in lines] == [  # noqa: E501
        f"[1/5] {OLD_DIR} full: complete, skipped ({data / OLD_DIR / 'full'})",
        f"[2/5] {OLD_DIR} ssm: complete, skipped ({data / OLD_DIR / 'ssm'})",
        *(f"[{n}/5] {PERIOD} {kind}: stale (it was made from {new_wikipedia}, which has "
          f"{new_wikipedia.stat().st_size} bytes, {before.st_size} were recorded by tw-jax "
          f"{kind}), built" for n, kind in ((3, "diffset"), (4, "probes"))),
        f"[5/5] {PERIOD} ssm: stale (it was made from {diffset / 'diffset.jsonl'}, which has "
        f"{(diffset / 'diffset.jsonl').stat().st_size} bytes, {masked} were recorded by tw-jax "
        "ssm), built"]
    assert "Redownloaded text." in (diffset / "full.jsonl").read_text()
    assert read_stage_probes(probes)  # rebuilt: whole and fresh
    assert all("complete, skipped" in line for line in _build(capsys, dumps, data))

    # dumps deleted once the build is done: what the stages hold is still what they made
    moved = tmp_path / "moved"
    shutil.copytree(data, moved)
    shutil.rmtree(dumps)
    assert read_stage_probes(str(moved / PERIOD / "probes" / "updated.csv"))


def test_a_large_input_is_fingerprinted_by_samples_that_see_a_replacement(tmp_path):
    """Above the limit a file is recorded by 16 blocks of 1 MiB spread over it (a dump of tens
    of gigabytes is read by every process that reads its stage): a change inside a sampled
    block or of the size is seen; the whole hash is kept for what is under the limit."""
    big = tmp_path / "dump.xml"
    content = bytearray(hashlib.sha256(bytes([i])).digest()[0] for i in range(256)) * (12 << 12)
    big.write_bytes(content)  # 12 MiB
    assert fingerprint(str(big)) == {"bytes": len(content), "sha256": _sha256(big)}
    entry = fingerprint(str(big), sample_above=1 << 20)
    assert entry == {"bytes": len(content), "sampled_sha256": sampled_digest(str(big))}
    recorded = {"dump.xml": entry}
    assert differences(str(tmp_path), recorded, ["dump.xml"]) == []

    for offset in (0, len(content) // 2, len(content) - 1):  # first, a middle, last block
        changed = bytearray(content)
        changed[offset] ^= 0xFF
        big.write_bytes(changed)
        assert differences(str(tmp_path), recorded, ["dump.xml"], since="recorded") == [
            ("dump.xml", "does not match its checksum (its bytes changed after it was "
                         "recorded)")], offset
    big.write_bytes(content[:-1])
    assert differences(str(tmp_path), recorded, ["dump.xml"])[0][1].startswith("has ")
