"""The DiffSet stage end to end on the sample world: exact against the generator's ground truth."""

import bz2
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tw_jax.io.tfrecord import read_records
from tw_jax.preprocess.diffset.local import build_diffset
from tw_jax.preprocess.diffset.score import score
from tw_jax.sample_world.build import wikipedia_dump

PAIRS = [
    ("2021-08", "2021-09", "0809"),
    ("2021-09", "2021-10", "0910"),
    ("2021-10", "2021-11", "1011"),
]


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def built(sample_world, tmp_path_factory):
    root, _ = sample_world
    out = tmp_path_factory.mktemp("diffsets")
    results = {}
    for old, new, pair in PAIRS:
        target = out / pair
        stats = build_diffset(wikipedia_dump(root, old), wikipedia_dump(root, new), target)
        results[pair] = (target, stats)
    return root, results


@pytest.mark.parametrize("pair", [p for _, _, p in PAIRS])
def test_diffset_equals_ground_truth(built, pair):
    root, results = built
    target, _ = results[pair]
    quality = score(target / "diffset.jsonl", root / "truth" / f"diffset-{pair}.jsonl")
    assert quality["missing"] == [] and quality["extra"] == []
    assert quality["precision"] == 1.0 and quality["recall"] == 1.0
    assert quality["sentences"] > 50
    truth = {r["id"]: r for r in read_jsonl(root / "truth" / f"diffset-{pair}.jsonl")}
    diffset = {r["id"]: r for r in read_jsonl(target / "diffset.jsonl")}
    assert diffset.keys() == truth.keys()
    assert {i: r["kind"] for i, r in diffset.items()} == {i: r["kind"] for i, r in truth.items()}


@pytest.mark.parametrize("pair", [p for _, _, p in PAIRS])
def test_full_and_unchanged_partition_the_new_snapshot(built, pair):
    root, results = built
    target, stats = results[pair]
    new_month = next(new for _, new, p in PAIRS if p == pair)
    truth_articles = {
        r["id"]: r for r in read_jsonl(root / "truth" / f"articles-{new_month}.jsonl")
    }
    full = {r["id"]: r for r in read_jsonl(target / "full.jsonl")}
    assert full.keys() == truth_articles.keys()
    for page_id, record in full.items():
        expected = "\n".join(" ".join(p) for p in truth_articles[page_id]["paragraphs"])
        assert record["text"] == expected, record["title"]
    diff_ids = {r["id"] for r in read_jsonl(target / "diffset.jsonl")}
    unchanged_ids = {r["id"] for r in read_jsonl(target / "unchanged.jsonl")}
    assert diff_ids | unchanged_ids == full.keys() and not diff_ids & unchanged_ids
    assert stats["full"]["articles"] == len(full)
    assert stats["accounting"]["balanced"]


def test_stats_account_for_every_page(built, sample_world):
    root, results = built
    _, world = sample_world
    _, stats = results["0809"]
    skipped = stats["new_dump"]["skipped"]["by_reason"]
    assert skipped.get("redirect", 0) > 0 and skipped.get("namespace", 0) > 0
    articles = stats["articles"]
    truth = read_jsonl(root / "truth" / "diffset-0809.jsonl")
    assert articles["new"] == sum(r["kind"] == "new" for r in truth)
    assert articles["changed"] == sum(r["kind"] == "changed" for r in truth)
    assert articles["deleted"] >= 1
    assert stats["diffset"]["sentences"] == sum(len(r["sentences"]) for r in truth)
    assert stats["accounting"]["new_pages"] == stats["accounting"]["new_pages_accounted"]


def test_tfrecords_hold_the_same_records_as_jsonl(built):
    tf = pytest.importorskip("tensorflow")
    _, results = built
    target, _ = results["0910"]
    for name in ("diffset", "full", "unchanged"):
        shards = sorted(target.glob(f"{name}.tfrecord-*-of-*"))
        assert shards
        from_tf = []
        for record in tf.data.TFRecordDataset([str(s) for s in shards]):
            feature = tf.train.Example.FromString(record.numpy()).features.feature
            from_tf.append(
                {
                    "id": feature["id"].int64_list.value[0],
                    "title": feature["title"].bytes_list.value[0].decode(),
                    "text": feature["text"].bytes_list.value[0].decode(),
                }
            )
        expected = [
            {k: r[k] for k in ("id", "title", "text")} for r in read_jsonl(target / f"{name}.jsonl")
        ]
        assert from_tf == expected


def test_two_workers_give_identical_files(built, sample_world, tmp_path):
    root, _ = sample_world
    _, results = built
    one, _ = results["0809"]
    build_diffset(
        wikipedia_dump(root, "2021-08"), wikipedia_dump(root, "2021-09"), tmp_path, workers=2
    )
    for name in ("diffset.jsonl", "full.jsonl", "unchanged.jsonl", "stats.json"):
        assert (tmp_path / name).read_bytes() == (one / name).read_bytes(), name


def test_min_changed_chars_keeps_only_large_changes(sample_world, tmp_path):
    root, _ = sample_world
    stats = build_diffset(
        wikipedia_dump(root, "2021-08"),
        wikipedia_dump(root, "2021-09"),
        tmp_path,
        min_changed_chars=500,
    )
    for record in read_jsonl(tmp_path / "diffset.jsonl"):
        assert len(record["text"]) >= 500
    assert stats["articles"]["below_min_changed_chars"] > 0
    assert stats["accounting"]["balanced"]


def test_wikiextractor_input_gives_the_same_diffset(sample_world, tmp_path):
    """WikiExtractor JSON lines (plain paragraphs per line) made from the truth articles."""
    root, _ = sample_world
    for month in ("2021-08", "2021-09"):
        with open(tmp_path / f"{month}.jsonl", "w", encoding="utf-8") as out:
            for r in read_jsonl(root / "truth" / f"articles-{month}.jsonl"):
                text = "\n".join(" ".join(p) for p in r["paragraphs"])
                url = f"https://en.wikipedia.org/wiki?curid={r['id']}"
                out.write(
                    json.dumps({"id": str(r["id"]), "url": url, "title": r["title"], "text": text})
                    + "\n"
                )
    build_diffset(tmp_path / "2021-08.jsonl", tmp_path / "2021-09.jsonl", tmp_path / "out")
    quality = score(tmp_path / "out" / "diffset.jsonl", root / "truth" / "diffset-0809.jsonl")
    assert (quality["precision"], quality["recall"]) == (1.0, 1.0)


def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "tw_jax.cli", *args], capture_output=True, text=True, timeout=300
    )


def test_cli_writes_the_folder_and_a_summary(sample_world, tmp_path):
    root, _ = sample_world
    out = tmp_path / "0809" / "diffset"
    done = _cli(
        "diffset",
        "--old",
        str(wikipedia_dump(root, "2021-08")),
        "--new",
        str(wikipedia_dump(root, "2021-09")),
        "--out",
        str(out),
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["articles"]["changed"] > 0
    assert sorted(p.name for p in out.iterdir() if not p.name.endswith(tuple("0123456789"))) == [
        "diffset.jsonl",
        "full.jsonl",
        "stats.json",
        "unchanged.jsonl",
    ]


def test_truncated_dump_is_a_clear_error_and_leaves_no_complete_looking_output(
    sample_world, tmp_path
):
    root, _ = sample_world
    data = wikipedia_dump(root, "2021-09").read_bytes()
    truncated = tmp_path / "truncated.xml.bz2"
    truncated.write_bytes(data[: len(data) // 2])
    out = tmp_path / "out"
    done = _cli(
        "diffset",
        "--old",
        str(wikipedia_dump(root, "2021-08")),
        "--new",
        str(truncated),
        "--out",
        str(out),
    )
    assert done.returncode == 2
    assert "truncated.xml.bz2" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (out / "stats.json").exists()
    assert not list(out.glob("*.jsonl")) and not list(out.glob("*.tfrecord-*"))


def test_missing_input_file_is_a_clear_error(tmp_path):
    done = _cli(
        "diffset",
        "--old",
        str(tmp_path / "nope.xml.bz2"),
        "--new",
        str(tmp_path / "x"),
        "--out",
        str(tmp_path),
    )
    assert done.returncode == 2
    assert "nope.xml.bz2" in done.stderr and "Traceback" not in done.stderr


def test_duplicate_ids_and_bad_pages_are_counted(tmp_path):
    def dump(pages: str) -> str:
        return (
            '<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/" version="0.10">'
            f"{pages}</mediawiki>"
        )

    def page(id_: str, title: str, text: str | None, ns: int = 0) -> str:
        body = "" if text is None else f'<text xml:space="preserve">{text}</text>'
        return f"<page><title>{title}</title><ns>{ns}</ns><id>{id_}</id><revision><id>1</id>{body}</revision></page>"

    old = tmp_path / "old.xml.bz2"
    new = tmp_path / "new.xml.bz2"
    old.write_bytes(bz2.compress(dump(page("1", "A", "Alpha is old.")).encode()))
    new.write_bytes(
        bz2.compress(
            dump(
                page("1", "A", "Alpha is old. Alpha is new.")
                + page("1", "A again", "Duplicate id.")
                + page("x", "Bad id", "Text.")
                + page("2", "B", None)
                + page("3", "Talk:A", "Chat.", ns=1)
                + page("4", "C", "Gamma arrives.")
            ).encode()
        )
    )
    stats = build_diffset(old, new, tmp_path / "out")
    assert stats["new_dump"]["skipped"]["by_reason"] == {
        "bad_id": 1,
        "duplicate_id": 1,
        "missing_text": 1,
        "namespace": 1,
    }
    assert stats["articles"]["changed"] == 1 and stats["articles"]["new"] == 1
    assert stats["accounting"]["new_pages"] == 6 and stats["accounting"]["balanced"]
    records = read_jsonl(tmp_path / "out" / "diffset.jsonl")
    assert [(r["id"], r["text"], r["kind"]) for r in records] == [
        (1, "Alpha is new.", "changed"),
        (4, "Gamma arrives.", "new"),
    ]


def test_beam_output_equals_local_output(built, sample_world, tmp_path):
    pytest.importorskip("apache_beam")
    from tw_jax.preprocess.diffset.beam import build_diffset_beam

    root, _ = sample_world
    local, local_stats = built[1]["0809"]
    stats = build_diffset_beam(
        wikipedia_dump(root, "2021-08"), wikipedia_dump(root, "2021-09"), tmp_path
    )
    assert stats == json.loads((local / "stats.json").read_text())
    for name in ("diffset", "full", "unchanged"):
        beam_lines = sorted((tmp_path / f"{name}.jsonl").read_text(encoding="utf-8").splitlines())
        local_lines = sorted((local / f"{name}.jsonl").read_text(encoding="utf-8").splitlines())
        assert beam_lines == local_lines, name
        beam_records = sorted(
            r for s in tmp_path.glob(f"{name}.tfrecord-*") for r in read_records(s)
        )
        local_records = sorted(r for s in local.glob(f"{name}.tfrecord-*") for r in read_records(s))
        assert beam_records == local_records, name
    assert not (tmp_path / ".beam-stats.json").exists()
    shutil.rmtree(tmp_path)


def test_without_old_dump_the_folder_exports_one_snapshot(sample_world, tmp_path):
    """The initial month has no pair ending in it: ``--old`` omitted gives its ``full.*``."""
    root, _ = sample_world
    out = tmp_path / "08" / "full"
    done = _cli("diffset", "--new", str(wikipedia_dump(root, "2021-08")), "--out", str(out))
    assert done.returncode == 0, done.stderr
    truth = {r["id"]: r for r in read_jsonl(root / "truth" / "articles-2021-08.jsonl")}
    full = {r["id"]: r for r in read_jsonl(out / "full.jsonl")}
    assert full.keys() == truth.keys()
    for page_id, record in full.items():
        assert record["text"] == "\n".join(" ".join(p) for p in truth[page_id]["paragraphs"])
    kinds = {r["kind"] for r in read_jsonl(out / "diffset.jsonl")}
    assert kinds == {"new"} and read_jsonl(out / "unchanged.jsonl") == []
    stats = json.loads((out / "stats.json").read_text())
    assert stats["old"] is None and stats["accounting"]["balanced"]
    assert len(list(read_records(next(out.glob("full.tfrecord-*"))))) == len(full)
