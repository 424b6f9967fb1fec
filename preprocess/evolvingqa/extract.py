"""``tw-jax evolvingqa build``: Changed sets, their SSM corpus, and the QA-generation inputs.

For snapshots ``m_1 < … < m_n`` (Wikipedia dumps) this runs, per month pair, the existing stages
(layout: :mod:`.layout`):

1. the DiffSet stage with ``--min-changed-chars 500`` (paper §2.1: an article enters the Changed
   set when its new text is at least 500 characters), into ``<MMMM>/diffset``;
2. the SSM stage on that Changed set, into ``<MMMM>/ssm`` (continual pretraining corpus);

then extracts, as JSON lines with the entities spaCy finds (:mod:`.entities`):

- ``<MMMM>/evolvingqa/edited.jsonl``: revised passages of the Changed set's changed articles,
  each with its old version read from the old dump (:func:`.passages.revisions`);
- ``<MMMM>/evolvingqa/new.jsonl``: passages of the Changed-set text that is not the new side of a
  revision;
- ``evolvingqa/unchanged.jsonl``: passages of articles unchanged over the whole window
  (:mod:`.unchanged`), the first ``passages_per_article`` chunks of each.

A stage folder that is already complete with the same options is reused (``force`` redoes it).
Every output is written atomically and ``stats.json`` last; ``evolvingqa/build.json`` (written
last of all) records months, pairs, options and counts. Dumps and the output folder may be local
or ``gs://`` URLs (dumps and stage outputs are read streaming); the indexes and the checked
Unchanged passages are scratch in the local temporary folder.
"""

from __future__ import annotations

import json
import os
import time
import zlib
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import jsonl, paths
from tw_jax.io.atomic import atomic_open, discard, write_json
from tw_jax.io.output_claim import scratch_dir
from tw_jax.io.progress import progress as progress_bar
from tw_jax.preprocess.diffset.local import OldIndex, build_diffset
from tw_jax.preprocess.diffset.outputs import json_line
from tw_jax.preprocess.dumps.wikipedia import iter_articles, iter_dump_pages, paragraphs_of
from tw_jax.preprocess.evolvingqa import layout
from tw_jax.preprocess.evolvingqa.entities import EntityTagger
from tw_jax.preprocess.evolvingqa.passages import passages, revisions, without_sentences
from tw_jax.preprocess.evolvingqa.unchanged import (
    Candidates,
    digest,
    sample_key,
    select,
)
from tw_jax.preprocess.runners.accounting import Skips
from tw_jax.preprocess.ssm.local import build_ssm
from tw_jax.text.spacy_pipeline import DEFAULT_MODEL

PAPER_MIN_CHANGED_CHARS = 500
PAPER_UNCHANGED_ARTICLES = 200_000
_TAG_BATCH = 1024


@dataclass(frozen=True)
class BuildOptions:
    """What decides the outputs; recorded in ``build.json``."""

    min_changed_chars: int = PAPER_MIN_CHANGED_CHARS
    spacy_model: str = DEFAULT_MODEL
    unchanged_articles: int | None = PAPER_UNCHANGED_ARTICLES  # None: every unchanged article
    passages_per_article: int = 1
    chunk_words: int = 200
    seed: int = 0
    workers: int = 1
    force: bool = False

    def check(self) -> None:
        if self.min_changed_chars < 0:
            raise layout.LayoutError("--min-changed-chars must be >= 0")
        if self.unchanged_articles is not None and self.unchanged_articles < 0:
            raise layout.LayoutError("--unchanged-articles must be >= 0")
        if self.passages_per_article < 1 or self.chunk_words < 1 or self.workers < 1:
            raise layout.LayoutError("passages per article, chunk words and workers must be >= 1")


def build_evolvingqa(
    dumps: Sequence[str | os.PathLike[str]],
    out: str | os.PathLike[str],
    *,
    months: Sequence[str] | None = None,
    options: BuildOptions | None = None,
    progress: bool | None = None,
) -> dict[str, Any]:
    """Runs the whole build (see the module docstring); returns the ``build.json`` contents."""
    options = options or BuildOptions()
    options.check()
    dumps = [os.fspath(d) for d in dumps]
    for dump in dumps:
        if not paths.isfile(dump):
            raise DumpError(dump, None, "no such file")
    months = list(months) if months else [layout.month_of_dump(d) for d in dumps]
    if len(months) != len(dumps):
        raise layout.LayoutError(f"{len(dumps)} dumps but {len(months)} months")
    pairs = layout.pairs_of(months)
    out = os.fspath(out)
    started = time.perf_counter()
    discard(paths.join(layout.window_dir(out), layout.BUILD_FILE))
    summary: dict[str, Any] = {
        "months": months, "dumps": dumps, "options": asdict(options), "pairs": {},
    }
    for (_, _, pair), old_dump, new_dump in zip(pairs, dumps, dumps[1:], strict=False):
        summary["pairs"][pair] = _stages(out, pair, old_dump, new_dump, options, progress)
    tagger = EntityTagger(options.spacy_model, workers=options.workers)
    summary["spacy"] = tagger.info.as_dict()
    with scratch_dir("evolvingqa") as scratch:
        candidates = Candidates(scratch, options.seed)
        for _, _, pair in pairs:
            candidates.add_pair(paths.join(layout.diffset_dir(out, pair), "unchanged.jsonl"))
        unchanged = {"candidates": candidates.count()}
        sampled = candidates.sample(options.unchanged_articles)
        candidates.close()
        checked_path = os.path.join(scratch, "checked.jsonl")
        checked: dict[int, bytes] = {}
        for index, ((old_m, new_m, pair), old_dump) in enumerate(zip(pairs, dumps, strict=False)):
            check = sampled if index == 0 else {}
            old_index = os.path.join(scratch, f"old-{pair}.sqlite")
            changed = _changed_ids(paths.join(layout.diffset_dir(out, pair), "diffset.jsonl"))
            with open(checked_path, "a", encoding="utf-8") as sink:
                _index_old(old_dump, old_index, changed, check, checked, sink, old_m, options,
                           progress)
            summary["pairs"][pair]["extraction"] = _extract_pair(
                out, pair, old_m, new_m, OldIndex(old_index), tagger, options
            )
        selected = select(checked, options.unchanged_articles)
        unchanged.update(sampled=len(sampled), unchanged_in_first_snapshot=len(checked),
                         selected_articles=len(selected))
        unchanged["passages"] = _write_unchanged(out, checked_path, selected, tagger, unchanged)
    summary["unchanged"] = unchanged
    summary["seconds"] = round(time.perf_counter() - started, 2)
    write_json(paths.join(layout.window_dir(out), layout.BUILD_FILE), summary)
    return summary


# --- the existing stages ------------------------------------------------------------------


def _complete(folder: str) -> dict[str, Any] | None:
    path = paths.join(folder, layout.STATS_FILE)
    if not paths.exists(path):
        return None
    return json.loads(paths.read_text(path))


def _stages(out: str, pair: str, old_dump: str, new_dump: str, options: BuildOptions,
            progress: bool | None) -> dict[str, Any]:
    """The Changed set and its SSM corpus of one pair, reusing complete folders."""
    target = layout.diffset_dir(out, pair)
    stats = None if options.force else _complete(target)
    same = stats is not None and (
        stats.get("options", {}).get("min_changed_chars") == options.min_changed_chars
        and (stats.get("old"), stats.get("new")) == (old_dump, new_dump)
    )
    if not same:
        stats = build_diffset(
            old_dump, new_dump, target, min_changed_chars=options.min_changed_chars,
            workers=options.workers, progress=progress,
        )
    ssm_target = layout.ssm_dir(out, pair)
    ssm = None if options.force or not same else _complete(ssm_target)
    if ssm is None or ssm.get("spacy", {}).get("requested") != options.spacy_model:
        ssm = build_ssm(target, ssm_target, inputs=("diffset",), spacy_model=options.spacy_model,
                        workers=options.workers, progress=progress)
    return {
        "changed_set": {k: stats["articles"][k] for k in ("new", "changed")},
        "below_min_changed_chars": stats["articles"]["below_min_changed_chars"],
        "changed_set_chars": stats["diffset"]["chars"],
        "ssm_examples": ssm["examples"],
        "reused": same,
    }


# --- reading the old snapshot -------------------------------------------------------------


def _changed_ids(diffset_jsonl: str) -> set[int]:
    return {int(r["id"]) for r in jsonl.records(diffset_jsonl, ("id", "text"))
            if r.get("kind") == "changed"}


def _index_old(
    dump: str, index_path: str, changed: set[int], check: dict[int, tuple[bytes, bytes]],
    checked: dict[int, bytes], sink: Any, month: str, options: BuildOptions,
    progress: bool | None,
) -> None:
    """One pass over the old dump: changed articles into an on-disk index (for Edited pairs),
    sampled Unchanged candidates checked against their text (passages appended to ``sink``)."""
    index = OldIndex(index_path, create=True)
    rows: list[tuple[int, str, str, bytes]] = []
    quiet = None if progress is None else not progress
    try:
        pages = iter_articles(iter_dump_pages(dump, Skips()), Skips())
        for page in progress_bar(pages, desc=f"reading {paths.as_path(dump).name}", unit=" articles",
                         disable=quiet):
            if page.id in changed:
                rows.append((page.id, page.title, page.markup,
                             zlib.compress(page.text.encode("utf-8"), 1)))
                if len(rows) >= 2000:
                    index.insert(rows)
                    rows = []
            if page.id in check:
                text = "\n".join(paragraphs_of(page))
                if digest(text) != check[page.id][0]:
                    continue  # changed in the first month, below the Changed-set filter
                checked[page.id] = sample_key(options.seed, page.id)
                for number, passage in enumerate(
                    passages(text, options.chunk_words)[: options.passages_per_article]
                ):
                    sink.write(json_line({
                        "id": f"{page.id}:{number}", "article_id": page.id, "title": page.title,
                        "month": month, "text": passage,
                    }) + "\n")
        index.insert(rows)
        index.commit()
    finally:
        index.close()


# --- extraction of one pair ---------------------------------------------------------------


def _joined(diffset_jsonl: str, full_jsonl: str) -> Iterator[tuple[dict, dict]]:
    """(DiffSet record, the article's full record): diffset.jsonl is full.jsonl's subsequence."""
    full = jsonl.records(full_jsonl, ("id", "text"))
    for record in jsonl.records(diffset_jsonl, ("id", "text")):
        for whole in full:
            if whole["id"] == record["id"]:
                yield record, whole
                break
        else:
            raise DumpError(diffset_jsonl, f"id {record['id']}", f"not in {full_jsonl}")


def _pair_records(
    out: str, pair: str, old_m: str, new_m: str, old_index: OldIndex, tally: Counter,
    edited: list[dict], chunk_words: int,
) -> Iterator[dict]:
    """New passages of a pair (yielded) and its Edited pairs (appended to ``edited``)."""
    folder = layout.diffset_dir(out, pair)
    for record, whole in _joined(paths.join(folder, "diffset.jsonl"),
                                 paths.join(folder, "full.jsonl")):
        article_id, kind, text = int(record["id"]), record.get("kind", "new"), record["text"]
        tally[f"changed_set_{kind}"] += 1
        if kind == "changed":
            old = old_index.get(article_id)
            if old is None:
                tally["old_article_missing"] += 1
            else:
                found = revisions(paragraphs_of(old), whole["text"].split("\n"))
                tally["articles_with_revisions"] += bool(found)
                for revision in found:
                    edited.append({
                        "id": f"{article_id}:{revision.paragraph}:{revision.block}",
                        "article_id": article_id, "title": record["title"], "pair": pair,
                        "old_month": old_m, "new_month": new_m,
                        "old_text": revision.old_text, "new_text": revision.new_text,
                        "old_paragraph": revision.old_paragraph,
                        "new_paragraph": revision.new_paragraph,
                    })
                text = without_sentences(text, {s for r in found for s in r.new_sentences})
        for number, passage in enumerate(passages(text, chunk_words)):
            yield {"id": f"{article_id}:{number}", "article_id": article_id,
                   "title": record["title"], "pair": pair, "month": new_m, "kind": kind,
                   "text": passage}


def _write_tagged(path: str, records: Iterable[dict], fields: dict[str, str],
                  tagger: EntityTagger) -> tuple[int, int]:
    """Writes ``records`` with the entities of each ``text field`` under its ``entity field``;
    returns (records, records with a text without entities: no answer candidate there)."""
    count = bare = 0
    with atomic_open(path, "w", encoding="utf-8") as handle:
        batch: list[dict] = []
        for record in [*records, None]:
            if record is not None:
                batch.append(record)
            if batch and (record is None or len(batch) >= _TAG_BATCH):
                found = iter(tagger([r[f] for r in batch for f in fields]))
                for r in batch:
                    for entity_field in fields.values():
                        r[entity_field] = next(found)
                    bare += not all(r[e] for e in fields.values())
                    handle.write(json_line(r) + "\n")
                count += len(batch)
                batch = []
    return count, bare


def _extract_pair(out: str, pair: str, old_m: str, new_m: str, old_index: OldIndex,
                  tagger: EntityTagger, options: BuildOptions) -> dict[str, Any]:
    folder = layout.extraction_dir(out, pair)
    discard(paths.join(folder, layout.STATS_FILE))
    tally: Counter = Counter()
    edited: list[dict] = []
    try:
        new_records = _pair_records(out, pair, old_m, new_m, old_index, tally, edited,
                                    options.chunk_words)
        new_count, new_bare = _write_tagged(
            paths.join(folder, layout.NEW_PASSAGES), new_records, {"text": "entities"}, tagger
        )
    finally:
        old_index.close()
    edited_count, edited_bare = _write_tagged(
        paths.join(folder, layout.EDITED_PAIRS), edited,
        {"old_text": "old_entities", "new_text": "new_entities"}, tagger,
    )
    stats = {"pair": pair, "old_month": old_m, "new_month": new_m,
             "new_passages": new_count, "edited_pairs": edited_count,
             "without_entities": {"new": new_bare, "edited": edited_bare},
             **{k: tally[k] for k in ("changed_set_new", "changed_set_changed",
                                      "articles_with_revisions", "old_article_missing")}}
    write_json(paths.join(folder, layout.STATS_FILE), stats)
    return stats


def _write_unchanged(out: str, checked_path: str, selected: set[int], tagger: EntityTagger,
                     summary: dict[str, Any]) -> int:
    folder = layout.window_dir(out)
    discard(paths.join(folder, layout.STATS_FILE))
    records = (r for r in jsonl.records(checked_path, ("id", "text"))
               if int(r["article_id"]) in selected)
    count, bare = _write_tagged(
        paths.join(folder, layout.UNCHANGED_PASSAGES), records, {"text": "entities"}, tagger
    )
    write_json(paths.join(folder, layout.STATS_FILE),
               {**summary, "passages": count, "without_entities": bare})
    return count
