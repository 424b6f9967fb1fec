"""The SSM stage end to end on the sample world's DiffSet: exact spans, exact accounting, and the
same bytes from one worker, two workers and Beam."""

import json
import re
import shutil
from collections import Counter, defaultdict

import pytest
from ssm_helpers import folder_bytes, read_examples, read_jsonl, stats_without_time

from tw_jax.cli import main
from tw_jax.errors import DumpError
from tw_jax.preprocess.ssm.chunks import chunk_spans
from tw_jax.preprocess.ssm.examples import SsmOptions
from tw_jax.preprocess.ssm.local import build_ssm
from tw_jax.preprocess.ssm.masking import restore

# Small jobs and shards, so that two workers, Beam's parts and shard cuts all get exercised.
SMALL = {"job_chars": 5_000, "max_shard_bytes": 40_000}


@pytest.fixture(scope="module")
def built(ssm_diffset, tmp_path_factory):
    out = tmp_path_factory.mktemp("ssm")
    stats = build_ssm(ssm_diffset, out, workers=1, progress=False, **SMALL)
    return out, stats


@pytest.fixture(scope="module")
def sources(ssm_diffset):
    """(input, article id) → the article's text."""
    return {
        (name, r["id"]): r["text"]
        for name in ("diffset", "full")
        for r in read_jsonl(ssm_diffset / f"{name}.jsonl")
    }


def source_chunk(sources, name, example, chunk_words=200):
    text = sources[(name, example["id"])]
    start, end = chunk_spans(text, chunk_words)[example["chunk"]]
    return text[start:end]


def test_targets_are_entities_of_the_source_and_inputs_reconstruct_it(built, sources, full_nlp):
    out, _ = built
    for name in ("diffset", "full"):
        examples = read_examples(out, name)
        chunks = [source_chunk(sources, name, e) for e in examples]
        docs = full_nlp.pipe(chunks)  # the whole pipeline, as a user would run it
        for example, chunk, doc in zip(examples, chunks, docs, strict=True):
            restored, offsets = restore(example["inputs"], example["targets"])
            assert restored == chunk
            entities = {(e.start_char, e.end_char): e.label_ for e in doc.ents}
            assert [entities.get(o) for o in offsets] == example["labels"]
    masked = Counter(label for e in read_examples(out, "full") for label in e["labels"])
    assert masked["DATE"] > 10 and masked["PERSON"] > 5


def test_one_span_per_example_and_one_example_per_chunk_by_default(built):
    out, stats = built
    for name in ("diffset", "full"):
        examples = read_examples(out, name)
        assert all(len(e["labels"]) == 1 for e in examples)
        assert all(e["targets"].endswith("<extra_id_1>") for e in examples)
        assert len({(e["id"], e["chunk"]) for e in examples}) == len(examples)
        figures = stats[name]
        assert figures["examples"] == len(examples) == figures["chunks_with_examples"]
        labels = Counter(label for e in examples for label in e["labels"])
        assert figures["masked_spans_by_label"] == dict(sorted(labels.items()))
        assert figures["masked_spans"] == len(examples)


def test_stats_account_for_every_article_and_chunk(built, sources):
    out, stats = built
    assert stats["inputs"] == ["diffset", "full"] and stats["accounting"]["balanced"]
    assert json.loads((out / "stats.json").read_text())["diffset"] == stats["diffset"]
    for name in ("diffset", "full"):
        texts = {i: t for (n, i), t in sources.items() if n == name}
        figures = stats[name]
        assert figures["articles"] == len(texts)
        assert figures["chunks"] == sum(len(chunk_spans(t, 200)) for t in texts.values())
        assert figures["words"] == sum(len(t.split()) for t in texts.values())
        ids = {e["id"] for e in read_examples(out, name)}
        assert figures["articles_with_examples"] == len(ids)
        skipped = sum(figures["articles_skipped"]["by_reason"].values())
        assert figures["articles_with_examples"] + skipped == figures["articles"]
        assert figures["accounting"]["balanced"]
    assert stats["diffset"]["articles"] == 35 and stats["full"]["articles"] == 191
    assert stats["examples"] == stats["diffset"]["examples"] + stats["full"]["examples"]
    assert stats["spacy"]["components"] == ["ner"] and stats["options"]["chunk_words"] == 200
    assert "DATE" in stats["options"]["labels"]


def test_two_workers_and_beam_write_the_same_bytes(built, ssm_diffset, tmp_path):
    pytest.importorskip("apache_beam")
    from tw_jax.preprocess.ssm.beam import build_ssm_beam

    one, _ = built
    expected = folder_bytes(one)
    assert len([n for n in expected if n.startswith("full.")]) > 1  # several shards
    build_ssm(ssm_diffset, tmp_path / "two", workers=2, progress=False, **SMALL)
    build_ssm_beam(ssm_diffset, tmp_path / "beam", **SMALL)
    for folder in (tmp_path / "two", tmp_path / "beam"):
        assert folder_bytes(folder) == expected
        assert stats_without_time(folder) == stats_without_time(one)
    assert sorted(p.name for p in (tmp_path / "beam").iterdir()) == sorted(
        [*expected, "stats.json"]
    )


def test_label_filter_masks_only_those_labels(built, ssm_diffset, tmp_path):
    _, everything = built
    stats = build_ssm(
        ssm_diffset, tmp_path, inputs=["diffset"], options=SsmOptions(labels=("DATE",))
    )
    examples = read_examples(tmp_path, "diffset")
    assert examples and all(e["labels"] == ["DATE"] for e in examples)
    figures = stats["diffset"]
    dates = everything["diffset"]["salient_entities_by_label"]["DATE"]
    assert figures["salient_entities_by_label"] == {"DATE": dates}
    no_date = figures["chunks_skipped"]["by_reason"].get("no_salient_span", 0)
    assert figures["chunks_with_examples"] + no_date == figures["chunks"]
    assert stats["options"]["labels"] == ["DATE"]
    assert not list(tmp_path.glob("full.tfrecord-*"))


def test_every_salient_span_masked_once_with_examples_per_chunk_zero(
    built, ssm_diffset, sources, tmp_path
):
    _, everything = built
    options = SsmOptions(spans_per_example=3, examples_per_chunk=0)
    stats = build_ssm(ssm_diffset, tmp_path, inputs=["diffset"], options=options)
    examples = read_examples(tmp_path, "diffset")
    salient = sum(everything["diffset"]["salient_entities_by_label"].values())
    assert stats["diffset"]["masked_spans"] == salient
    by_chunk = defaultdict(list)
    for example in examples:
        chunk, offsets = restore(example["inputs"], example["targets"])
        assert chunk == source_chunk(sources, "diffset", example)
        assert 1 <= len(offsets) <= 3
        by_chunk[(example["id"], example["chunk"])] += offsets
    assert sum(len(o) for o in by_chunk.values()) == salient
    assert all(len(set(o)) == len(o) for o in by_chunk.values())  # no span masked twice
    assert any(len(e["labels"]) == 3 for e in examples)


def test_the_seed_decides_which_span_is_masked(built, ssm_diffset, tmp_path):
    out, _ = built
    build_ssm(ssm_diffset, tmp_path, inputs=["diffset"], options=SsmOptions(seed=1), **SMALL)
    seed0 = read_examples(out, "diffset")
    seed1 = read_examples(tmp_path, "diffset")
    assert [(e["id"], e["chunk"]) for e in seed0] == [(e["id"], e["chunk"]) for e in seed1]
    assert sum(a["targets"] != b["targets"] for a, b in zip(seed0, seed1, strict=True)) > 5


def write_diffset(folder, lines):
    """A DiffSet folder as the stage leaves it: the records, then stats.json (its completion
    marker, without which the SSM stage refuses the folder)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "diffset.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "stats.json").write_text("{}\n", encoding="utf-8")
    return folder


def record(id_, title, text):
    return json.dumps({"id": id_, "title": title, "text": text, "kind": "new"})


def test_skips_are_counted_with_their_reasons(tmp_path):
    folder = write_diffset(
        tmp_path / "in",
        [
            record(1, "Empty", ""),
            record(2, "Plain", "the cat sat on the mat and then it slept."),
            record(3, "Literal", "Barack Obama wrote <extra_id_3> in Chicago on 4 May 2001."),
            record(4, "Obama", "Barack Obama was born in Honolulu on 4 August 1961."),
        ],
    )
    stats = build_ssm(folder, tmp_path / "out", inputs=["diffset"])
    figures = stats["diffset"]
    assert figures["articles"] == 4 and figures["articles_with_examples"] == 1
    assert figures["articles_skipped"]["by_reason"] == {"empty_text": 1, "no_example": 2}
    assert figures["chunks"] == 3 and figures["chunks_with_examples"] == 1
    assert figures["chunks_skipped"]["by_reason"] == {"no_salient_span": 1, "sentinel_text": 1}
    assert figures["chunks_skipped"]["examples"]["sentinel_text"] == [
        "diffset.jsonl line 3: id 3 (Literal) chunk 0"
    ]
    assert figures["accounting"]["balanced"]
    (example,) = read_examples(tmp_path / "out", "diffset")
    assert example["id"] == 4 and example["title"] == "Obama" and example["chunk"] == 0


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ('{"id": 5, "title": "Broken", "text": oops}', "not a JSON line"),
        ('{"id": "5", "title": "Broken", "text": "x"}', "field 'id' must be an integer, got str"),
        ('{"id": 5, "title": "Broken"}', "missing field 'text'"),
        ('[5, "Broken", "x"]', "expected a JSON object, got list"),
    ],
)
def test_a_bad_line_is_an_error_naming_file_and_line(tmp_path, bad, message):
    good = record(4, "Obama", "Barack Obama was born in Honolulu on 4 August 1961.")
    folder = write_diffset(tmp_path / "in", [good, bad, good])
    path = folder / "diffset.jsonl"
    with pytest.raises(DumpError, match=re.escape(message)) as caught:
        build_ssm(folder, tmp_path / "out", inputs=["diffset"])
    assert str(caught.value).startswith(f"{path}, line 2: {message}")
    assert not list((tmp_path / "out").iterdir())  # nothing that looks complete
    pytest.importorskip("apache_beam")
    from tw_jax.preprocess.ssm.beam import build_ssm_beam

    with pytest.raises(DumpError, match=re.escape(f"line 2: {message}")):
        build_ssm_beam(folder, tmp_path / "beam", inputs=["diffset"])
    assert not (tmp_path / "beam" / "stats.json").exists()


def test_cli(ssm_diffset, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "full.tfrecord-00000-of-00001").write_bytes(b"stale")  # an earlier run's output
    argv = ["ssm", "--in", str(ssm_diffset), "--out", str(out), "--inputs", "diffset"]
    assert main([*argv, "--labels", "DATE,PERSON", "--spans-per-example", "2"]) == 0
    summary = json.loads(capsys.readouterr().out)
    stats = json.loads((out / "stats.json").read_text())
    assert summary["examples"] == {"diffset": stats["diffset"]["examples"]}
    assert set(stats["diffset"]["masked_spans_by_label"]) == {"DATE", "PERSON"}
    assert stats["options"]["spans_per_example"] == 2
    assert sorted(p.name for p in out.iterdir()) == [
        "diffset.tfrecord-00000-of-00001",
        "stats.json",
    ]

    assert main([*argv, "--labels", "DATE,NOPE"]) == 2
    assert "NOPE" in capsys.readouterr().err
    assert main([*argv[:-1], "diffset,unchanged"]) == 2
    assert "unknown SSM input 'unchanged'" in capsys.readouterr().err
    assert main([*argv, "--spacy-model", "xx_missing_model"]) == 2
    assert "is not installed" in capsys.readouterr().err
    broken = write_diffset(tmp_path / "broken", ["{"])
    assert (
        main(["ssm", "--in", str(broken), "--out", str(tmp_path / "o"), "--inputs", "diffset"]) == 2
    )
    assert f"{broken / 'diffset.jsonl'}, line 1" in capsys.readouterr().err
    shutil.rmtree(broken)
    with pytest.raises(SystemExit) as stopped:
        main(["ssm", "--in", str(broken), "--out", str(tmp_path / "o")])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"tw-jax ssm: error: argument --in: {broken}: no such file or folder"
    ]


def test_a_chunk_longer_than_spacy_accepts_is_skipped():
    from tw_jax.preprocess.ssm.examples import process_job
    from tw_jax.preprocess.ssm.reader import Article, Job
    from tw_jax.text.spacy_pipeline import load_ner_pipeline

    nlp, info = load_ner_pipeline()
    nlp.max_length = 40
    short = "Barack Obama visited Paris."
    long = "Barack Obama was born in Honolulu on 4 August 1961."
    job = Job("full", 0, "full.jsonl", [Article(1, 7, "Short", short), Article(2, 8, "Long", long)])
    encoded, tally = process_job(nlp, frozenset(info.ner_labels), job, SsmOptions())
    figures = tally.as_dict()
    assert len(encoded) == 1 and figures["examples"] == 1
    assert figures["chunks_skipped"]["examples"] == {
        "too_long_for_spacy": ["full.jsonl line 2: id 8 (Long) chunk 0"]
    }
    assert figures["articles_skipped"]["by_reason"] == {"no_example": 1}
