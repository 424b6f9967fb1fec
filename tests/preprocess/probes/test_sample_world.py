"""The Probes stage end to end on the sample world, exact against the generator's ground truth.

The expected probes are computed here from the truth files (categories, articles, DiffSets) with a
small independent implementation of the quality-control rules; caps are off (fractions 1.0) and
UNCHANGED is not down-sampled, so every rule that remains is checked exactly.
"""

import bz2
import csv
import json
import re
from pathlib import Path

import pytest

from tw_jax.io.tfrecord import read_records
from tw_jax.preprocess.diffset.local import build_diffset
from tw_jax.preprocess.probes.finish import ProbeOptions
from tw_jax.preprocess.probes.local import build_probes
from tw_jax.sample_world.build import truth_file, wikidata_dump, wikipedia_dump

PAIRS = [
    ("2021-08", "2021-09", "0809"),
    ("2021-09", "2021-10", "0910"),
    ("2021-10", "2021-11", "1011"),
]
CATEGORIES = ("unchanged", "updated", "new", "deleted")
NO_CAPS = ProbeOptions(
    unchanged_rate=1.0, max_subject_frac=1.0, max_object_frac=1.0, max_relation_frac=1.0
)


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]


def read_csv(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.fixture(scope="module")
def built(sample_world, tmp_path_factory):
    root, _ = sample_world
    out = tmp_path_factory.mktemp("probes")
    results = {}
    for old, new, pair in PAIRS:
        diffset = out / pair / "diffset"
        build_diffset(wikipedia_dump(root, old), wikipedia_dump(root, new), diffset)
        stats = build_probes(
            wikidata_dump(root, old),
            wikidata_dump(root, new),
            wikipedia_dump(root, new),
            diffset,
            out / pair / "probes",
            options=NO_CAPS,
            old_wikipedia=wikipedia_dump(root, old),
        )
        results[pair] = (out / pair, stats)
    return root, results


# --- the oracle: truth files + the QC rules, written independently of the package -------------


def _sitelinks(dump: Path) -> dict[str, str]:
    links = {}
    with bz2.open(dump, "rt", encoding="utf-8") as handle:
        for line in handle:
            line = line.strip().rstrip(",")
            if line in ("[", "]", ""):
                continue
            entity = json.loads(line)
            enwiki = (entity.get("sitelinks") or {}).get("enwiki")
            if enwiki:
                links[entity["id"]] = enwiki["title"]
    return links


def _article_texts(root: Path, month: str, dump: Path) -> dict[str, str]:
    """Subject QID -> the full plain text of its article that month."""
    by_title = {
        a["title"]: "\n".join(s for p in a["paragraphs"] for s in p)
        for a in read_jsonl(truth_file(root, "articles", month))
    }
    redirects = {r["title"]: r["target"] for r in read_jsonl(truth_file(root, "redirects", month))}
    out = {}
    for qid, title in _sitelinks(dump).items():
        title = redirects.get(title, title)
        if title in by_title:
            out[qid] = by_title[title]
    return out


def _diff_texts(root: Path, pair: str, month: str, dump: Path) -> dict[str, str]:
    by_title = {
        r["title"]: "\n".join(r["sentences"]) for r in read_jsonl(truth_file(root, "diffset", pair))
    }
    return {qid: by_title[t] for qid, t in _sitelinks(dump).items() if t in by_title}


def _in(obj: str, text: str | None) -> bool:
    return bool(text) and re.search(r"(?<!\w)" + re.escape(obj) + r"(?!\w)", text, re.I) is not None


def expected(root: Path, old: str, new: str, pair: str) -> dict[str, set]:
    new_dump, old_dump = wikidata_dump(root, new), wikidata_dump(root, old)
    full_new = _article_texts(root, new, new_dump)
    full_old = _article_texts(root, old, old_dump)
    diff = _diff_texts(root, pair, new, new_dump)
    out: dict[str, set] = {c: set() for c in CATEGORIES}
    seen: dict[str, set] = {c: set() for c in CATEGORIES}
    facts = sorted(
        read_jsonl(truth_file(root, "facts", pair)),
        key=lambda f: (f["subject_id"], f["relation_id"]),
    )
    for f in facts:
        s, o, c = f["subject_id"], f["object"], f["category"]
        if c == "unchanged":
            aligned = s in full_new and _in(o, full_new[s])
        elif c == "deleted":
            aligned = s in full_old and _in(o, full_old[s]) and not _in(o, full_new.get(s))
        else:
            aligned = _in(o, diff.get(s))
        subject, lower_s, lower_o = f["subject"], f["subject"].lower(), o.lower()
        if not aligned or lower_s in lower_o or lower_o in lower_s or len(o.split()) > 5:
            continue
        triple = (subject, f["relation"], o)
        if triple in seen[c]:
            continue
        seen[c].add(triple)
        out[c].add((s, f["relation_id"], f["object_id"] or "", subject, f["relation"], o))
    return out


# --- tests -------------------------------------------------------------------------------------


@pytest.mark.parametrize("pair", [p for _, _, p in PAIRS])
def test_every_category_equals_the_truth(built, pair):
    root, results = built
    old, new = next((a, b) for a, b, p in PAIRS if p == pair)
    folder, _ = results[pair]
    want = expected(root, old, new, pair)
    report = {}
    for category in CATEGORIES:
        rows = read_csv(folder / "probes" / f"{category}.csv")
        got = {
            (
                r["subject_id"],
                r["relation_id"],
                r["object_id"],
                r["subject"],
                r["relation"],
                r["object"],
            )
            for r in rows
        }
        assert len(got) == len(rows), f"{category}: duplicate rows"
        hit = len(got & want[category])
        precision = hit / len(got) if got else 1.0
        recall = hit / len(want[category]) if want[category] else 1.0
        report[category] = (len(got), len(want[category]), round(precision, 4), round(recall, 4))
    print(pair, json.dumps(report))
    for category in CATEGORIES:
        rows = read_csv(folder / "probes" / f"{category}.csv")
        got = {
            (
                r["subject_id"],
                r["relation_id"],
                r["object_id"],
                r["subject"],
                r["relation"],
                r["object"],
            )
            for r in rows
        }
        assert got == want[category], (category, sorted(got ^ want[category])[:10])


@pytest.mark.parametrize("pair", [p for _, _, p in PAIRS])
def test_algorithm_2_counts_equal_the_truth(built, pair):
    root, results = built
    _, stats = results[pair]
    facts = read_jsonl(truth_file(root, "facts", pair))
    for category in CATEGORIES:
        want = sum(1 for f in facts if f["category"] == category)
        assert stats["categories"][category]["categorised"] == want, category


def test_outputs_and_stats(built):
    _, results = built
    folder, stats = results["0809"]
    probes = folder / "probes"
    for category in CATEGORIES:
        with open(probes / f"{category}.csv", encoding="utf-8") as handle:
            header = handle.readline().strip().split(",")
        assert header[:3] == ["subject", "relation", "object"]
        assert header[3:] == [
            "subject_id",
            "relation_id",
            "object_id",
            "previous_object",
            "text",
            "cloze",
        ]
        rows = read_csv(probes / f"{category}.csv")
        records = list(read_records(probes / f"{category}.tfrecord-00000-of-00001"))
        assert len(records) == len(rows)
        for row in rows:
            assert row["text"] == f"{row['subject']} {row['relation']} {row['object']}"
        assert (probes / f"lighttuning_{category}.csv").exists()
    updated = read_csv(probes / "updated.csv")
    assert updated and all(r["previous_object"] for r in updated)
    assert stats["categories"]["unchanged"]["final"] == len(read_csv(probes / "unchanged.csv"))
    assert json.loads((probes / "stats.json").read_text())["table2"] == stats["table2"]


def test_cli_runs_and_reports(built, tmp_path, capsys):
    from tw_jax.cli_parser import OneLineErrorParser
    from tw_jax.preprocess.probes import cli

    root, results = built
    folder, stats = results["0809"]
    parser = OneLineErrorParser(prog="tw-jax")
    cli.add_parser(parser.add_subparsers())
    args = parser.parse_args(
        [
            "probes",
            "--old",
            str(wikidata_dump(root, "2021-08")),
            "--new",
            str(wikidata_dump(root, "2021-09")),
            "--wikipedia",
            str(wikipedia_dump(root, "2021-09")),
            "--old-wikipedia",
            str(wikipedia_dump(root, "2021-08")),
            "--diffset",
            str(folder / "diffset"),
            "--out",
            str(tmp_path / "p"),
            "--unchanged-rate",
            "1",
            "--max-subject-frac",
            "1",
            "--max-object-frac",
            "1",
            "--max-relation-frac",
            "1",
        ]
    )
    assert args.func(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["probes"] == {c: stats["categories"][c]["final"] for c in CATEGORIES}
    for category in CATEGORIES:
        name = f"{category}.csv"
        assert (tmp_path / "p" / name).read_bytes() == (folder / "probes" / name).read_bytes()
    # A missing input stops at the command line: one line naming it, exit status 2.
    with pytest.raises(SystemExit) as stopped:
        parser.parse_args(["probes", "--old", "/nonexistent", "--new", "x", "--wikipedia", "y",
                           "--diffset", str(tmp_path), "--out", str(tmp_path / "q")])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "tw-jax probes: error: argument --old: /nonexistent: no such file or folder"
    ]


def test_bad_wikidata_line_is_counted_not_lost(built, tmp_path):
    root, results = built
    folder, _ = results["0809"]
    with bz2.open(wikidata_dump(root, "2021-09"), "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    lines.insert(2, "{not json,")
    broken = tmp_path / "new.json.bz2"
    with bz2.open(broken, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    stats = build_probes(
        wikidata_dump(root, "2021-08"),
        broken,
        wikipedia_dump(root, "2021-09"),
        folder / "diffset",
        tmp_path / "out",
        options=NO_CAPS,
    )
    assert stats["skipped"]["new_wikidata"]["by_reason"]["bad_json"] == 1
    assert "deleted_check" in stats and "no --old-wikipedia" in stats["deleted_check"]
