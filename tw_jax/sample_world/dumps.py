"""Writers for the dump formats: MediaWiki XML (export-0.10) and Wikidata JSON.

XML comes as one bz2 stream, as a multistream file with its ``offset:page_id:title`` index
(enwiki's ``pages-articles-multistream`` layout, 100 pages per stream), or uncompressed. JSON
comes as bz2 and as gzip with ``mtime=0``, so equal input gives byte-identical files. Every
file is written under a temporary name and renamed into place.
"""

from __future__ import annotations

import bz2
import contextlib
import gzip
import hashlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from .schema import SITEINFO_NAMESPACES

EXPORT_NS = "http://www.mediawiki.org/xml/export-0.10/"
PAGES_PER_STREAM = 100


class PageLike(Protocol):
    page_id: int
    ns: int
    title: str
    text: str
    target: str | None
    rev_id: int
    parent_id: int | None
    timestamp: str
    contributor: tuple
    comment: str
    minor: bool


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it to ``path`` only if the block succeeds."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        yield Path(tmp)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def escape(text: str) -> str:
    """XML escaping as MediaWiki's exporter does it (htmlspecialchars: & < > ")."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def sha1_base36(text: str) -> str:
    """MediaWiki's revision sha1: base-36 digits of the SHA-1 of the UTF-8 text, 31 wide."""
    n = int(hashlib.sha1(text.encode("utf-8")).hexdigest(), 16)
    digits = ""
    while n:
        n, d = divmod(n, 36)
        digits = "0123456789abcdefghijklmnopqrstuvwxyz"[d] + digits
    return digits.rjust(31, "0")


def xml_header(generator: str = "MediaWiki 1.37.0-wmf.17") -> str:
    ns_lines = []
    for key, name in SITEINFO_NAMESPACES:
        if name:
            ns_lines.append(f'      <namespace key="{key}" case="first-letter">{name}</namespace>')
        else:
            ns_lines.append(f'      <namespace key="{key}" case="first-letter" />')
    return (
        f'<mediawiki xmlns="{EXPORT_NS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" '
        f'xsi:schemaLocation="{EXPORT_NS} http://www.mediawiki.org/xml/export-0.10.xsd" version="0.10" xml:lang="en">\n'
        "  <siteinfo>\n    <sitename>Wikipedia</sitename>\n    <dbname>enwiki</dbname>\n"
        "    <base>https://en.wikipedia.org/wiki/Main_Page</base>\n"
        f"    <generator>{generator}</generator>\n    <case>first-letter</case>\n    <namespaces>\n"
        + "\n".join(ns_lines) + "\n    </namespaces>\n  </siteinfo>\n"
    )


XML_FOOTER = "</mediawiki>\n"


def page_xml(p: PageLike) -> str:
    out = ["  <page>", f"    <title>{escape(p.title)}</title>", f"    <ns>{p.ns}</ns>", f"    <id>{p.page_id}</id>"]
    if p.target is not None:
        out.append(f'    <redirect title="{escape(p.target)}" />')
    out += ["    <revision>", f"      <id>{p.rev_id}</id>"]
    if p.parent_id:
        out.append(f"      <parentid>{p.parent_id}</parentid>")
    out.append(f"      <timestamp>{p.timestamp}</timestamp>")
    if p.contributor and p.contributor[0] == "ip":
        out += ["      <contributor>", f"        <ip>{p.contributor[1]}</ip>", "      </contributor>"]
    else:
        _, user, uid = p.contributor
        out += ["      <contributor>", f"        <username>{escape(user)}</username>", f"        <id>{uid}</id>",
                "      </contributor>"]
    if p.minor:
        out.append("      <minor />")
    if p.comment:
        out.append(f"      <comment>{escape(p.comment)}</comment>")
    out += ["      <model>wikitext</model>", "      <format>text/x-wiki</format>",
            f'      <text bytes="{len(p.text.encode("utf-8"))}" xml:space="preserve">{escape(p.text)}</text>',
            f"      <sha1>{sha1_base36(p.text)}</sha1>", "    </revision>", "  </page>"]
    return "\n".join(out) + "\n"


def write_mediawiki_xml(
    pages: Iterable[PageLike],
    path: str | Path,
    *,
    compression: str = "bz2",
    index_path: str | Path | None = None,
    threads: int = 1,
) -> Path:
    """Write pages (already in ascending id order) as an export-0.10 dump.

    ``compression``: "bz2" (one stream), "multistream" (bz2 streams of 100 pages, with the
    bz2-compressed ``offset:page_id:title`` index written to ``index_path``), or "none".
    With ``threads`` > 1, "bz2" output is compressed in parallel as consecutive streams of
    about 4 MB of XML each (still one valid .bz2 file; every bz2 reader concatenates them).
    """
    path = Path(path)
    if compression == "bz2" and threads > 1:
        return write_parallel_bz2(pages, path, threads)
    if compression == "none":
        with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(xml_header())
            for p in pages:
                f.write(page_xml(p))
            f.write(XML_FOOTER)
        return path
    if compression == "bz2":
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            comp = bz2.BZ2Compressor(9)
            f.write(comp.compress(xml_header().encode("utf-8")))
            for p in pages:
                f.write(comp.compress(page_xml(p).encode("utf-8")))
            f.write(comp.compress(XML_FOOTER.encode("utf-8")))
            f.write(comp.flush())
        return path
    if compression != "multistream":
        raise ValueError(f"unknown compression {compression!r}")
    if index_path is None:
        raise ValueError("multistream output needs index_path")
    index_lines: list[str] = []
    with atomic_path(path) as tmp, open(tmp, "wb") as f:
        f.write(bz2.compress(xml_header().encode("utf-8"), 9))
        batch: list[PageLike] = []

        def flush() -> None:
            offset = f.tell()
            f.write(bz2.compress("".join(page_xml(p) for p in batch).encode("utf-8"), 9))
            index_lines.extend(f"{offset}:{p.page_id}:{p.title}\n" for p in batch)
            batch.clear()

        for p in pages:
            batch.append(p)
            if len(batch) == PAGES_PER_STREAM:
                flush()
        if batch:
            flush()
        f.write(bz2.compress(XML_FOOTER.encode("utf-8"), 9))
    with atomic_path(index_path) as tmp:
        Path(tmp).write_bytes(bz2.compress("".join(index_lines).encode("utf-8"), 9))
    return path


def write_parallel_bz2(pages: Iterable[PageLike], path: str | Path, threads: int, chunk: int = 4 << 20) -> Path:
    """bz2 XML compressed by ``threads`` worker threads, as consecutive streams of ~``chunk`` bytes.

    Pages are serialised in the calling thread as they come (``pages`` may be a generator that
    is still producing them), so generation and compression overlap.
    """
    path = Path(path)
    def chunks() -> Iterator[bytes]:
        buf, size = [xml_header()], 0
        for p in pages:
            buf.append(page_xml(p))
            size += len(buf[-1])
            if size >= chunk:
                yield "".join(buf).encode("utf-8")
                buf, size = [], 0
        buf.append(XML_FOOTER)
        yield "".join(buf).encode("utf-8")

    with atomic_path(path) as tmp, open(tmp, "wb") as f, ThreadPoolExecutor(threads) as pool:
        pending: list = []
        for data in chunks():
            pending.append(pool.submit(bz2.compress, data, 9))
            while len(pending) > 2 * threads:
                f.write(pending.pop(0).result())
        for fut in pending:
            f.write(fut.result())
    return path


def write_json_dump(lines: list[str], bz2_path: str | Path | None, gz_path: str | Path | None) -> None:
    """A Wikidata JSON dump: ``[``, one entity per line with a trailing comma but the last, ``]``."""
    data = ("[\n" + ",\n".join(lines) + "\n]\n").encode("utf-8")
    if bz2_path is not None:
        with atomic_path(bz2_path) as tmp:
            Path(tmp).write_bytes(bz2.compress(data, 9))
    if gz_path is not None:
        with atomic_path(gz_path) as tmp, open(tmp, "wb") as raw, \
                gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as gz:
            gz.write(data)


def write_jsonl(records: Iterable[dict], path: str | Path) -> int:
    n = 0
    with atomic_path(path) as tmp, open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for rec in records:
            f.write(json.dumps(rec, ensure_ascii=False) + "\n")
            n += 1
    return n
