"""The XML and JSON writers: single stream, multistream with index, uncompressed, parallel."""

from __future__ import annotations

import bz2
import gzip

import pytest
from sw_helpers import month_files, xml_pages

from tw_jax.sample_world.build import initial_world
from tw_jax.sample_world.dumps import sha1_base36, write_json_dump, write_mediawiki_xml


@pytest.fixture(scope="module")
def store():
    w, store = initial_world(0, 150)
    store.sync(0)
    return store


def test_sha1_is_mediawiki_base36():
    assert sha1_base36("") == "phoiac9h4m842xq45sp7s6u21eteeq1"


def test_multistream_equals_single_stream_and_index_points_at_streams(store, tmp_path):
    single = write_mediawiki_xml(store.pages, tmp_path / "single.xml.bz2")
    multi = write_mediawiki_xml(store.pages, tmp_path / "multi.xml.bz2", compression="multistream",
                                index_path=tmp_path / "index.txt.bz2")
    plain = write_mediawiki_xml(store.pages, tmp_path / "plain.xml", compression="none")
    parallel = write_mediawiki_xml(store.pages, tmp_path / "par.xml.bz2", threads=3)
    xml = bz2.decompress(single.read_bytes())
    assert bz2.decompress(multi.read_bytes()) == xml == plain.read_bytes() == bz2.decompress(parallel.read_bytes())
    assert len(store.pages) > 200  # several streams of 100 pages
    index = bz2.decompress((tmp_path / "index.txt.bz2").read_bytes()).decode().splitlines()
    assert len(index) == len(store.pages)
    data = multi.read_bytes()
    offsets = []
    for line, page in zip(index, store.pages, strict=True):
        offset, page_id, title = line.split(":", 2)
        assert (int(page_id), title) == (page.page_id, page.title)
        offsets.append(int(offset))
    assert sorted(set(offsets)) == sorted(set(offsets), key=int)
    starts = sorted(set(offsets))
    assert len(starts) == -(-len(store.pages) // 100)
    for start in starts:
        assert data[start:start + 3] == b"BZh"
        chunk = bz2.BZ2Decompressor().decompress(data[start:])
        assert chunk.startswith(b"  <page>\n")
        ids = [int(line.split(":")[1]) for line in index if int(line.split(":")[0]) == start]
        assert f"<id>{ids[0]}</id>".encode() in chunk and f"<id>{ids[-1]}</id>".encode() in chunk
    assert xml_pages(plain)[0]["id"] == store.pages[0].page_id


def test_escaping_round_trips(tmp_path, store):
    page = store.pages[0]
    from dataclasses import replace

    tricky = replace(page, title="A & B <c>", text='x < y && "z" > w\n&nbsp;', comment="c & d")
    path = write_mediawiki_xml([tricky], tmp_path / "t.xml", compression="none")
    (got,) = xml_pages(path)
    assert got["title"] == "A & B <c>" and got["text"] == tricky.text


def test_json_dump_is_byte_deterministic(tmp_path):
    lines = ['{"type":"item","id":"Q1"}', '{"type":"item","id":"Q2"}']
    write_json_dump(lines, tmp_path / "a.json.bz2", tmp_path / "a.json.gz")
    write_json_dump(lines, tmp_path / "b.json.bz2", tmp_path / "b.json.gz")
    assert (tmp_path / "a.json.gz").read_bytes() == (tmp_path / "b.json.gz").read_bytes()
    assert gzip.decompress((tmp_path / "a.json.gz").read_bytes()) == b'[\n{"type":"item","id":"Q1"},\n{"type":"item","id":"Q2"}\n]\n'


def test_written_files_are_complete_or_absent(sample_world):
    root, _ = sample_world
    assert not list(root.rglob(".*"))  # no temporary files left behind
    assert month_files(root, "2021-08")["wikipedia"].stat().st_size > 10_000
