"""Byte ranges of a multistream dump hold every page exactly once, and readers can split on them."""

import bz2
import json
from pathlib import Path

import pytest

from tw_jax.errors import DumpError
from tw_jax.preprocess.dumps.mediawiki import iter_pages
from tw_jax.preprocess.dumps.multistream import (
    index_for,
    iter_range_pages,
    plan_ranges,
    repack_multistream,
    stream_offsets,
)
from tw_jax.preprocess.runners.accounting import Skips
from tw_jax.sample_world.build import wikipedia_dump


@pytest.fixture(scope="module")
def multistream(sample_world, tmp_path_factory):
    root, _ = sample_world
    out = tmp_path_factory.mktemp("multistream")
    paths = {}
    for month in ("2021-08", "2021-09"):
        dump = out / f"enwiki-{month}-pages-articles-multistream.xml.bz2"
        repack_multistream(wikipedia_dump(root, month), dump, pages_per_stream=7)
        paths[month] = dump
    return paths


def test_repacked_dump_has_the_same_pages_and_an_enwiki_style_index(multistream, sample_world):
    root, _ = sample_world
    dump = multistream["2021-08"]
    assert index_for(dump) == str(dump).replace(".xml.bz2", "-index.txt.bz2")
    original = list(iter_pages(wikipedia_dump(root, "2021-08"), Skips()))
    assert list(iter_pages(dump, Skips())) == original
    lines = bz2.decompress(Path(index_for(dump)).read_bytes()).decode().splitlines()
    assert [line.split(":", 2)[1:] for line in lines] == [[str(p.id), p.title] for p in original]
    offsets = stream_offsets(index_for(dump))
    assert len(offsets) == -(-len(original) // 7)
    with open(dump, "rb") as raw:  # every indexed offset starts a bz2 stream
        for offset in offsets:
            raw.seek(offset)
            assert raw.read(3) == b"BZh"


@pytest.mark.parametrize("splits", [1, 2, 5, 1000])
def test_ranges_partition_the_pages(multistream, splits):
    dump = multistream["2021-08"]
    whole = list(iter_pages(dump, Skips()))
    ranges = plan_ranges(dump, index_for(dump), splits)
    assert ranges[0][0] == 0 and ranges[-1][1] == dump.stat().st_size
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert len(ranges) == min(splits, len(stream_offsets(index_for(dump))) + 1)
    pieces = [page for start, end in ranges for page in iter_range_pages(dump, start, end, Skips())]
    assert pieces == whole


def test_a_range_that_is_not_on_a_stream_boundary_is_a_clear_error(multistream):
    dump = multistream["2021-08"]
    (start, end), *_ = plan_ranges(dump, index_for(dump), 3)
    with pytest.raises(DumpError, match="multistream.xml.bz2"):
        list(iter_range_pages(dump, start + 5, end, Skips()))
    with pytest.raises(DumpError, match="truncated bz2 stream"):
        list(iter_range_pages(dump, start, end - 5, Skips()))


def test_beam_reads_split_multistream_dumps_like_the_local_path(multistream, tmp_path):
    pytest.importorskip("apache_beam")
    from tw_jax.preprocess.diffset.beam import build_diffset_beam
    from tw_jax.preprocess.diffset.local import build_diffset

    old, new = multistream["2021-08"], multistream["2021-09"]
    local = build_diffset(old, new, tmp_path / "local")
    split = build_diffset_beam(old, new, tmp_path / "beam", splits=4)
    assert split == local
    for name in ("diffset.jsonl", "full.jsonl", "unchanged.jsonl"):
        beam_lines, local_lines = (
            sorted((tmp_path / run / name).read_text().splitlines()) for run in ("beam", "local")
        )
        assert beam_lines == local_lines, name
    assert json.loads((tmp_path / "beam" / "stats.json").read_text()) == local


def test_local_workers_read_multistream_ranges_and_write_the_same_files(multistream, tmp_path):
    from tw_jax.preprocess.diffset import local

    old, new = multistream["2021-08"], multistream["2021-09"]
    serial = local.build_diffset(old, new, tmp_path / "serial", workers=1)
    ranges = local._byte_ranges(str(new), 2)
    assert ranges is not None and len(ranges) >= 8  # the parallel path really splits
    parallel = local.build_diffset(old, new, tmp_path / "parallel", workers=2)
    assert parallel == serial
    for name in ("diffset.jsonl", "full.jsonl", "unchanged.jsonl", "stats.json"):
        assert (tmp_path / "parallel" / name).read_bytes() == (
            tmp_path / "serial" / name
        ).read_bytes()


def test_a_duplicate_id_in_two_ranges_is_skipped_like_with_one_reader(tmp_path):
    from tw_jax.preprocess.diffset.local import build_diffset

    def export(pages: list[tuple[int, str]]) -> str:
        body = "".join(
            f"<page><title>T{i}</title><ns>0</ns><id>{i}</id><revision><id>1</id>"
            f'<text xml:space="preserve">{text}</text></revision></page>\n'
            for i, text in pages
        )
        return (
            f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">\n{body}</mediawiki>\n'
        )

    old_pages = [(i, f"Old text {i}.") for i in range(1, 41)]
    new_pages = [(i, f"Old text {i}.") for i in range(1, 41)] + [
        (3, "Again three."),
        (50, "Fifty."),
    ]
    for name, pages in (("old", old_pages), ("new", new_pages)):
        (tmp_path / f"{name}.xml").write_text(export(pages))
        repack_multistream(tmp_path / f"{name}.xml", tmp_path / f"{name}-multistream.xml.bz2", 3)
    one = build_diffset(tmp_path / "old.xml", tmp_path / "new.xml", tmp_path / "one", workers=1)
    two = build_diffset(
        tmp_path / "old-multistream.xml.bz2",
        tmp_path / "new-multistream.xml.bz2",
        tmp_path / "two",
        workers=2,
    )
    assert two["new_dump"]["skipped"]["by_reason"] == {"duplicate_id": 1}
    assert (
        two["articles"]
        == one["articles"]
        == {
            "new": 1,
            "changed": 0,
            "unchanged": 40,
            "below_min_changed_chars": 0,
            "deleted": 0,
        }
    )
    assert (tmp_path / "two" / "diffset.jsonl").read_text() == (
        tmp_path / "one" / "diffset.jsonl"
    ).read_text()


def test_a_broken_range_read_by_a_worker_is_a_clear_error(multistream, tmp_path):
    from tw_jax.preprocess.diffset.local import build_diffset

    old, new = multistream["2021-08"], multistream["2021-09"]
    broken = tmp_path / new.name
    data = bytearray(new.read_bytes())
    data[len(data) // 2 : len(data) // 2 + 64] = bytes(64)  # zero a stretch inside some stream
    broken.write_bytes(bytes(data))
    (tmp_path / Path(index_for(new)).name).write_bytes(Path(index_for(new)).read_bytes())
    with pytest.raises(DumpError, match=broken.name):
        build_diffset(old, broken, tmp_path / "out", workers=2)
    assert not (tmp_path / "out" / "stats.json").exists()
    assert not list((tmp_path / "out").glob("*.jsonl"))
