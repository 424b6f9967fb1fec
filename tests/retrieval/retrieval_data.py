"""A hand-made EvolvingQA build folder (the layout of ``tw-jax evolvingqa build``) for the
retrieval tests: two month pairs, a few passages whose words the questions reuse."""

from __future__ import annotations

import json
from pathlib import Path

UNCHANGED = [
    {"id": "7:0", "article_id": 7, "title": "Varnholt", "month": "2021-08",
     "text": "Varnholt is a country. Its capital is Trurhollow.", "entities": []},
    {"id": "8:0", "article_id": 8, "title": "Corvania", "month": "2021-08",
     "text": "Corvania is a country. Its capital is Rostport.", "entities": []},
]
NEW = {
    "0809": [{"id": "21:0", "article_id": 21, "title": "Cien Bordling", "pair": "0809",
              "month": "2021-09", "kind": "new", "text": "Cien Bordling married Meel Dreirdstad.",
              "entities": []}],
    "0910": [{"id": "22:0", "article_id": 22, "title": "Zuar Bramley", "pair": "0910",
              "month": "2021-10", "kind": "new",
              "text": "Zuar Bramley received the Order of Merit of Telmoria.", "entities": []}],
}
EDITED = {
    "0809": [{"id": "30:2:0", "article_id": 30, "title": "Grol Textiles", "pair": "0809",
              "old_month": "2021-08", "new_month": "2021-09",
              "old_text": "Its chief executive officer is L. J. Kulric.",
              "new_text": "Its chief executive officer is Granette Naunsberg.",
              "old_paragraph": "", "new_paragraph": "", "old_entities": [], "new_entities": []}],
    "0910": [],
}


def write_jsonl(path: Path, records: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")


def write_build_folder(root: Path) -> Path:
    """``root`` laid out as ``tw-jax evolvingqa build`` writes it (layout.py), two month pairs."""
    write_jsonl(root / "evolvingqa" / "unchanged.jsonl", UNCHANGED)
    (root / "evolvingqa" / "stats.json").write_text("{}\n")
    for pair in ("0809", "0910"):
        write_jsonl(root / pair / "evolvingqa" / "new.jsonl", NEW[pair])
        write_jsonl(root / pair / "evolvingqa" / "edited.jsonl", EDITED[pair])
        (root / pair / "evolvingqa" / "stats.json").write_text("{}\n")
    return root
