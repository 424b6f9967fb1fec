"""Readers the sample-world tests share: XML pages, JSON dump lines, truth files."""

from __future__ import annotations

import bz2
import json
import xml.etree.ElementTree as ET
from pathlib import Path

NS = "{http://www.mediawiki.org/xml/export-0.10/}"
MONTHS = ("2021-08", "2021-09", "2021-10", "2021-11")
PAIRS = (("0809", "2021-08", "2021-09"), ("0910", "2021-09", "2021-10"), ("1011", "2021-10", "2021-11"))


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def xml_pages(path: Path) -> list[dict]:
    """Every page of a dump as a dict (title, ns, id, redirect, text, bytes attribute, sha1)."""
    opener = bz2.open if str(path).endswith(".bz2") else open
    with opener(path, "rb") as f:
        root = ET.parse(f).getroot()
    pages = []
    for page in root.iter(f"{NS}page"):
        rev = page.find(f"{NS}revision")
        text = rev.find(f"{NS}text")
        redirect = page.find(f"{NS}redirect")
        pages.append({
            "title": page.find(f"{NS}title").text, "ns": int(page.find(f"{NS}ns").text),
            "id": int(page.find(f"{NS}id").text), "redirect": None if redirect is None else redirect.get("title"),
            "text": text.text or "", "bytes": int(text.get("bytes")), "sha1": rev.find(f"{NS}sha1").text,
            "rev": int(rev.find(f"{NS}id").text),
        })
    return pages


def json_entities(path: Path) -> list[dict]:
    """Entities of a Wikidata JSON dump, checking the one-entity-per-line framing on the way."""
    opener = bz2.open if str(path).endswith(".bz2") else __import__("gzip").open
    with opener(path, "rt", encoding="utf-8") as f:
        lines = f.read().split("\n")
    assert lines[0] == "[" and lines[-2] == "]" and lines[-1] == ""
    body = lines[1:-2]
    assert all(line.endswith(",") for line in body[:-1]) and not body[-1].endswith(",")
    return [json.loads(line.rstrip(",")) for line in body]


def month_files(root: Path, month: str) -> dict[str, Path]:
    d = month.replace("-", "") + "01"
    return {
        "wikipedia": root / "wikipedia" / f"enwiki-{d}-pages-articles.xml.bz2",
        "wikidata_bz2": root / "wikidata" / f"wikidata-{d}-all.json.bz2",
        "wikidata_gz": root / "wikidata" / f"wikidata-{d}-all.json.gz",
        "articles": root / "truth" / f"articles-{month}.jsonl",
        "redirects": root / "truth" / f"redirects-{month}.jsonl",
    }
