"""open_binary: compression told by magic bytes; broken archives become DumpError."""

from __future__ import annotations

import bz2
import gzip
import lzma

import pytest

from tw_jax.errors import DumpError
from tw_jax.preprocess.dumps.compressed import iter_chunks, open_binary, sniff_compression

PAYLOAD = b"line one\nline two\n" * 1000


def _write(path, data: bytes):
    path.write_bytes(data)
    return path


def _read_all(path) -> bytes:
    with open_binary(path) as stream:
        return stream.read()


@pytest.mark.parametrize(
    ("name", "data", "compression"),
    [
        ("plain.txt", PAYLOAD, "plain"),
        ("stream.bz2", bz2.compress(PAYLOAD), "bz2"),
        # multistream: independent bz2 streams laid end to end, as Wikipedia ships them
        (
            "multi.bz2",
            b"".join(bz2.compress(PAYLOAD[i : i + 3000]) for i in range(0, len(PAYLOAD), 3000)),
            "bz2",
        ),
        ("one.gz", gzip.compress(PAYLOAD, mtime=0), "gzip"),
        (
            "members.gz",
            gzip.compress(PAYLOAD[:5000], mtime=0) + gzip.compress(PAYLOAD[5000:], mtime=0),
            "gzip",
        ),
    ],
    ids=["plain", "bz2", "multistream-bz2", "gzip", "multimember-gzip"],
)
def test_reads_every_supported_format(tmp_path, name, data, compression):
    path = _write(tmp_path / name, data)
    with open_binary(path) as stream:
        assert stream.compression == compression
        assert stream.read() == PAYLOAD
        assert stream.position == len(PAYLOAD)


def test_format_comes_from_magic_bytes_not_the_name(tmp_path):
    assert _read_all(_write(tmp_path / "looks_plain.xml", bz2.compress(PAYLOAD))) == PAYLOAD
    assert _read_all(_write(tmp_path / "looks.bz2", PAYLOAD)) == PAYLOAD
    assert _read_all(_write(tmp_path / "looks.json", gzip.compress(PAYLOAD))) == PAYLOAD


def test_sniff_compression():
    assert sniff_compression(b"BZh91AY&SY") == "bz2"
    assert sniff_compression(b"\x1f\x8b\x08") == "gzip"
    assert sniff_compression(b"<mediawiki") == "plain"
    assert sniff_compression(b"BZh0") == "plain"  # not a valid block size
    assert sniff_compression(b"") == "plain"
    with pytest.raises(ValueError, match="xz"):
        sniff_compression(lzma.compress(b"x"))


def test_lines_iterate(tmp_path):
    path = _write(tmp_path / "lines.bz2", bz2.compress(b"a\nb\n\nc"))
    with open_binary(path) as stream:
        assert list(stream) == [b"a\n", b"b\n", b"\n", b"c"]


def test_truncated_bz2_names_file_and_position(tmp_path):
    path = _write(tmp_path / "cut.xml.bz2", bz2.compress(PAYLOAD)[:-20])
    with pytest.raises(DumpError) as info:
        _read_all(path)
    err = info.value
    assert err.path == str(path)
    assert err.record == "decompressed byte 0"
    assert "truncated bz2 archive" in err.message
    assert str(err).startswith(f"{path}, decompressed byte 0: truncated bz2 archive")


def test_corrupt_bz2_bytes(tmp_path):
    data = bytearray(bz2.compress(PAYLOAD))
    data[60] ^= 0xFF
    path = _write(tmp_path / "bad.bz2", bytes(data))
    with pytest.raises(DumpError, match=r"bad\.bz2.*corrupt bz2 archive"):
        _read_all(path)


def test_error_after_good_streams_reports_offset_and_context(tmp_path):
    good = bz2.compress(b"x" * 100)
    path = _write(tmp_path / "multi.bz2", good + bz2.compress(b"y" * 100)[:-20])
    with open_binary(path) as stream:
        stream.context = lambda: "after record 7"
        assert stream.read(100) == b"x" * 100
        with pytest.raises(DumpError) as info:
            stream.read()
    assert info.value.record == "decompressed byte 100, after record 7"


def test_truncated_and_corrupt_gzip(tmp_path):
    data = gzip.compress(PAYLOAD)
    cut = _write(tmp_path / "cut.gz", data[: len(data) // 2])
    with pytest.raises(DumpError, match="truncated gzip archive"):
        _read_all(cut)
    flipped = bytearray(data)
    flipped[-6] ^= 0xFF  # inside the CRC32 trailer
    bad = _write(tmp_path / "bad.gz", bytes(flipped))
    with pytest.raises(DumpError, match=r"bad\.gz.*corrupt gzip archive"):
        _read_all(bad)


def test_missing_file_and_unsupported_format(tmp_path):
    with pytest.raises(DumpError, match="cannot open"):
        open_binary(tmp_path / "nope.bz2")
    path = _write(tmp_path / "dump.xz", lzma.compress(PAYLOAD))
    with pytest.raises(DumpError, match="xz archives are not supported"):
        open_binary(path)


def test_close_closes_underlying_file(tmp_path):
    path = _write(tmp_path / "a.bz2", bz2.compress(PAYLOAD))
    stream = open_binary(path)
    fileobj = stream._fileobj
    stream.close()
    assert stream.closed
    assert fileobj is not None and fileobj.closed


@pytest.mark.parametrize("prefetch", [0, 3])
def test_iter_chunks_hands_out_good_bytes_then_the_error(tmp_path, prefetch):
    good = bz2.compress(b"x" * 5000)
    path = _write(tmp_path / "multi.bz2", good + bz2.compress(b"y" * 5000)[:-20])
    got = bytearray()
    with open_binary(path) as stream:
        stream.context = lambda: f"after {len(got)} bytes read"
        with pytest.raises(DumpError) as info:
            for chunk in iter_chunks(stream, 1000, prefetch):
                got += chunk
    assert bytes(got[:5000]) == b"x" * 5000
    assert info.value.record.endswith(f"after {len(got)} bytes read")
    assert "truncated bz2 archive" in info.value.message
