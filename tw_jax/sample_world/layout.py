"""Where the sample world's files live, for the stages and tests that read them."""

from __future__ import annotations

import os
from pathlib import Path


def _stamp(month: str) -> str:
    """"2021-08" → "20210801", the dump date in enwiki/wikidata file names."""
    year, mm = month.split("-")
    return f"{year}{mm}01"


def wikipedia_dump(root: str | os.PathLike[str], month: str) -> Path:
    return Path(root) / "wikipedia" / f"enwiki-{_stamp(month)}-pages-articles.xml.bz2"


def wikidata_dump(root: str | os.PathLike[str], month: str, compression: str = "bz2") -> Path:
    return Path(root) / "wikidata" / f"wikidata-{_stamp(month)}-all.json.{compression}"


def pair_name(old_month: str, new_month: str) -> str:
    """("2021-08", "2021-09") → "0809", the folder name of a month pair."""
    return old_month[-2:] + new_month[-2:]
