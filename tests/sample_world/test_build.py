"""The sample world as a whole: determinism, size, kinds, and every change type in every pair."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from sw_helpers import MONTHS, json_entities, month_files

from tw_jax.sample_world.build import build_sample_world, truth_file, wikidata_dump, wikipedia_dump

CHANGE_TYPES = (
    "transfer", "ceo_change", "coach_change", "mayor_change", "population_update", "new_award",
    "new_entity", "new_relation", "deleted_statement", "deprecated_statement", "deleted_article",
    "renamed_article", "prose_start", "prose_middle", "prose_end", "prose_delete", "prose_reword",
    "prose_number",
)


def all_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_same_seed_gives_identical_bytes_and_builds_fast(sample_world, tmp_path):
    root, _ = sample_world
    # CPU time of this process (its threads included), not wall time: what other work on the
    # machine takes does not count against the build
    start = time.process_time()
    build_sample_world(tmp_path, seed=0)
    elapsed = time.process_time() - start
    assert all_files(tmp_path) == all_files(root)
    assert elapsed < 20, f"default world took {elapsed:.1f} CPU s (budget 10 s on one core)"


def test_another_seed_gives_another_world(sample_world, tmp_path):
    root, world = sample_world
    other = build_sample_world(tmp_path, seed=1)
    for month in MONTHS:
        assert wikipedia_dump(tmp_path, month).read_bytes() != wikipedia_dump(root, month).read_bytes()
    titles = {json.loads(x)["title"] for x in truth_file(root, "articles", "2021-08").read_text().splitlines()}
    other_titles = {json.loads(x)["title"] for x in truth_file(tmp_path, "articles", "2021-08").read_text().splitlines()}
    assert len(titles & other_titles) < len(titles) // 4  # countries may repeat, little else
    assert other["counts"]["2021-08"]["main_entities"] >= 150


def test_world_json_lists_files_that_exist(sample_world):
    root, world = sample_world
    assert json.loads((root / "world.json").read_text()) == world
    assert world["months"] == list(MONTHS) and world["pairs"] == ["0809", "0910", "1011"]
    for month, paths in world["files"]["months"].items():
        assert month in MONTHS
        for rel in paths.values():
            assert (root / rel).is_file(), rel
        assert paths == {k: str(v.relative_to(root)) for k, v in month_files(root, month).items()}
    for paths in world["files"]["pairs"].values():
        for rel in paths.values():
            assert (root / rel).is_file(), rel
    assert wikidata_dump(root, "2021-10", "gz") == month_files(root, "2021-10")["wikidata_gz"]


def test_size_and_kinds(sample_world):
    root, world = sample_world
    counts = world["counts"]
    assert counts["2021-08"]["main_entities"] >= 150
    for month in MONTHS:
        c = counts[month]
        assert c["articles"] >= 150 and c["redirects"] > 20 and c["other_namespace_pages"] > 20
        assert c["entities"] > c["articles"] and c["facts"] > 1000
    entities = json_entities(month_files(root, "2021-08")["wikidata_bz2"])
    items = {e["id"]: e for e in entities if e["type"] == "item"}

    def values(e, prop):
        return [s["mainsnak"]["datavalue"]["value"] for s in e["claims"].get(prop, [])
                if s["mainsnak"]["snaktype"] == "value" and s["rank"] != "deprecated"]

    classes = {v["id"] for e in items.values() if e["sitelinks"] for v in values(e, "P31")}
    assert {"Q5", "Q515", "Q11424", "Q4830453", "Q476028", "Q6256"} <= classes
    assert any(items[c]["labels"]["en"]["value"] == "association football tournament" for c in classes if c in items)
    occupations = {v["id"] for e in items.values() for v in values(e, "P106")}
    assert {"Q937857", "Q82955", "Q43845", "Q33999"} <= occupations
    for qid in ("Q712226", "Q4917", "Q5", "Q515"):
        assert qid in items
    synthetic = [int(q[1:]) for q in items if int(q[1:]) >= 100000001]
    assert min(synthetic) == 100000001 and len(synthetic) > 200
    labels = [e["labels"]["en"]["value"] for e in items.values()]
    assert len(labels) == len(set(labels)), "labels must be unique"


@pytest.mark.parametrize("pair", ["0809", "0910", "1011"])
def test_every_change_type_happens_in_every_pair(sample_world, pair):
    _, world = sample_world
    c = world["pair_counts"][pair]
    for change in CHANGE_TYPES:
        assert c["changes"].get(change, 0) >= 1, change
    assert c["deleted_articles"] >= 1 and c["renamed_articles"] == 1
    assert c["diffset_articles"]["new"] >= 3 and c["diffset_articles"]["changed"] >= 10
    assert all(c["facts"][k] > 0 for k in ("new", "updated", "unchanged", "deleted"))
    articles = world["counts"][dict(zip(["0809", "0910", "1011"], MONTHS[1:], strict=True))[pair]]["articles"]
    assert 0.08 <= c["plain_changed_articles"] / articles <= 0.25


def test_too_small_a_world_is_refused(tmp_path):
    with pytest.raises(ValueError):
        build_sample_world(tmp_path, n_entities=10)
