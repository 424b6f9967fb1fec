"""``tw-jax ckl build-lama`` on the sample world, exact against the generator's ground truth.

The expected probes are computed here from ``truth/facts-0809.jsonl`` (the facts of 2021-09) with
CKL Table 4's templates written out literally and a small independent version of the quality
rules (subject and object inside one another, objects of more than five words, duplicates).
"""

from __future__ import annotations

import bz2
import csv
import json
from pathlib import Path

import pytest

from tw_jax.benchmarks import ckl_cli
from tw_jax.cli_parser import OneLineErrorParser
from tw_jax.errors import DumpError
from tw_jax.preprocess.ckl.lama import LamaOptions, build_invariant_lama
from tw_jax.preprocess.ckl.release import INVARIANT, join_answers, read_answers_json, read_lama_csv
from tw_jax.preprocess.facts.relation_templates import CKL_INVARIANT, TEMPLATES
from tw_jax.sample_world.build import truth_file, wikidata_dump

# CKL Table 4, in the paper's order: the 28 time-invariant relations of InvariantLAMA.
TABLE_4 = {
    "P19": "[X] was born in [Y] .", "P20": "[X] died in [Y] .",
    "P279": "[X] is a subclass of [Y] .", "P37": "The official language of [X] is [Y] .",
    "P449": "[X] was originally aired on [Y] .", "P47": "[X] shares border with [Y] .",
    "P138": "[X] is named after [Y] .", "P364": "The original language of [X] is [Y] .",
    "P527": "[X] consists of [Y] .", "P176": "[X] is produced by [Y] .",
    "P27": "[X] is [Y] citizen .", "P407": "[X] was written in [Y] .",
    "P30": "[X] is located in [Y] .", "P178": "[X] is developed by [Y] .",
    "P1376": "[X] is the capital of [Y] .", "P131": "[X] is located in [Y] .",
    "P1412": "[X] used to communicate in [Y] .", "P17": "[X] is located in [Y] .",
    "P276": "[X] is located in [Y] .", "P937": "[X] used to work in [Y] .",
    "P140": "[X] is affiliated with the [Y] religion .",
    "P103": "The native language of [X] is [Y] .", "P190": "[X] and [Y] are twin cities .",
    "P1001": "[X] is a legal term in [Y] .", "P495": "[X] was created in [Y] .",
    "P36": "The capital of [X] is [Y] .", "P740": "[X] was founded in [Y] .",
    "P361": "[X] is part of [Y] .",
}
NO_CAPS = LamaOptions(max_per_relation=None)


def test_the_28_relations_are_those_of_table_4():
    assert list(CKL_INVARIANT) == list(TABLE_4) and len(CKL_INVARIANT) == 28
    for pid, template in TABLE_4.items():
        assert TEMPLATES[pid].source == "ckl"
        assert TEMPLATES[pid].template == template


def _read_csv(path: Path) -> list[dict]:
    with open(path, encoding="utf-8", newline="") as handle:
        return list(csv.DictReader(handle))


def expected_probes(root: Path) -> list[tuple[str, str]]:
    """(input, output) of every fact of 2021-09 the rules keep, from the truth files."""
    facts = [json.loads(line) for line in
             truth_file(root, "facts", "0809").read_text(encoding="utf-8").splitlines()]
    seen, out = set(), []
    for fact in facts:
        if fact["category"] == "deleted" or fact["relation_id"] not in TABLE_4:
            continue
        s, o = fact["subject"], fact["object"]
        if s.casefold() in o.casefold() or o.casefold() in s.casefold() or len(o.split()) > 5:
            continue
        if (s, fact["relation"], o) in seen:
            continue
        seen.add((s, fact["relation"], o))
        template = TABLE_4[fact["relation_id"]]
        out.append((template.replace("[X]", s).replace("[Y]", "<extra_id_0>"), o))
    return out


@pytest.fixture(scope="module")
def built(sample_world, tmp_path_factory):
    root, _ = sample_world
    out = tmp_path_factory.mktemp("invariant_lama")
    stats = build_invariant_lama(wikidata_dump(root, "2021-09"), out, NO_CAPS, progress=False)
    return root, out, stats


def test_build_is_exactly_what_the_world_holds(built):
    root, out, stats = built
    rows = _read_csv(out / "invariantLAMA.csv")
    assert list(rows[0]) == ["id", "input", "output"]  # the released columns
    expected = expected_probes(root)
    assert sorted((r["input"], r["output"]) for r in rows) == sorted(expected)
    assert len(rows) == 338 and [r["id"] for r in rows] == [str(i) for i in range(338)]
    assert all(r["input"].count("<extra_id_0>") == 1 for r in rows)
    # rows are grouped by relation in Table 4's order
    facts = _read_csv(out / "invariantLAMA_facts.csv")
    order = [CKL_INVARIANT.index(f["relation_id"]) for f in facts]
    assert order == sorted(order) and [f["id"] for f in facts] == [r["id"] for r in rows]
    assert stats["facts"]["of_invariant_relations"] == 417
    assert stats["facts"]["dropped_by_reason"] == {"subject_object_substring": 79}
    assert stats["per_relation"]["P131"] == {"facts": 74, "passed_rules": 41, "final": 41}
    assert json.loads((out / "stats.json").read_text())["facts"]["final"] == 338


def test_the_release_reader_loads_the_build(built):
    _, out, _ = built
    with open(out / "invariantLAMA.csv", encoding="utf-8", newline="") as handle:
        rows = read_lama_csv(handle, "invariantLAMA.csv", INVARIANT)
    with open(out / "invariantLAMA_answers.json", encoding="utf-8") as handle:
        answers = read_answers_json(handle, "invariantLAMA_answers.json")
    joined = join_answers(rows, "invariantLAMA.csv", answers, "invariantLAMA_answers.json")
    assert [(r.id, r.statement, r.answers) for r in joined][:1] == [
        (rows[0][1], rows[0][2], (rows[0][3],))]
    assert len(joined) == 338 and all(r.answers == (a,) for r, (_, _, _, a) in zip(joined, rows,
                                                                                  strict=True))


def test_per_relation_sample_is_seeded(built, tmp_path):
    root, full, _ = built
    dump = wikidata_dump(root, "2021-09")
    runs = {}
    for name, seed in (("a", 0), ("b", 0), ("c", 1)):
        build_invariant_lama(dump, tmp_path / name, LamaOptions(seed=seed, max_per_relation=5))
        runs[name] = _read_csv(tmp_path / name / "invariantLAMA_facts.csv")
    assert (tmp_path / "a" / "invariantLAMA.csv").read_bytes() == (
        tmp_path / "b" / "invariantLAMA.csv").read_bytes()
    everything = {tuple(f.values())[1:] for f in _read_csv(full / "invariantLAMA_facts.csv")}
    for facts in runs.values():
        counts = {}
        for fact in facts:
            counts[fact["relation_id"]] = counts.get(fact["relation_id"], 0) + 1
            assert tuple(fact.values())[1:] in everything
        assert counts == {"P19": 5, "P27": 5, "P131": 5, "P17": 5, "P276": 5, "P495": 5, "P36": 5}
    assert runs["a"] != runs["c"]


def _cli(argv: list[str]) -> int:
    parser = OneLineErrorParser(prog="tw-jax")
    ckl_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


def test_cli_and_bad_input(sample_world, tmp_path, capsys):
    root, _ = sample_world
    dump = str(wikidata_dump(root, "2021-09"))
    assert _cli(["ckl", "build-lama", "--wikidata", dump, "--out", str(tmp_path / "il"),
                 "--max-per-relation", "3"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["probes"] == 21 and set(summary["per_relation"].values()) == {3}
    assert summary["dropped"] == {"subject_object_substring": 79}

    with pytest.raises(SystemExit) as stopped:  # the path type's one-line argparse error
        _cli(["ckl", "build-lama", "--wikidata", str(tmp_path / "nope.json"),
              "--out", str(tmp_path / "x")])
    assert stopped.value.code == 2
    assert "nope.json: no such file" in capsys.readouterr().err
    assert _cli(["ckl", "build-lama", "--wikidata", dump, "--out", str(tmp_path / "x"),
                 "--max-object-frac", "0"]) == 2
    assert "max_object_frac must be in (0, 1]" in capsys.readouterr().err

    broken = tmp_path / "broken.json.bz2"
    broken.write_bytes(bz2.compress(b"[\n" + b'{"id": "Q1", "type": "item"},\n' * 50)[:-20])
    with pytest.raises(DumpError, match="broken.json.bz2"):
        _cli(["ckl", "build-lama", "--wikidata", str(broken), "--out", str(tmp_path / "y")])
    assert not (tmp_path / "y" / "stats.json").exists()
