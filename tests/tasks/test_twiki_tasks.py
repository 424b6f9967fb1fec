"""The TemporalWiki tasks of a data folder laid out as the CLIs write it (the sample world)."""

from __future__ import annotations

import csv
import shutil

import gin
import pytest
import seqio
from twiki_data import read_jsonl

import tw_jax.tasks
from tw_jax.errors import DumpError
from tw_jax.tasks import metrics

PAIRS = ("0809", "0910", "1011")
FORMATS = ("", "_object", "_cloze", "_ssm", "_ssm_cloze")
CATEGORIES = ("unchanged", "updated", "new", "deleted", "changed")


def examples(name: str, sequence_length=None, split=None) -> list[dict]:
    task = seqio.get_mixture_or_task(name)
    dataset = task.get_dataset(sequence_length, split=split or task.splits[0], shuffle=False)
    return list(dataset.as_numpy_iterator())


def csv_rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as handle:
        return list(csv.DictReader(handle))


def token_stream(texts: list[str], vocabulary) -> list[int]:
    stream: list[int] = []
    for text in texts:
        stream += list(vocabulary.encode(text)) + [vocabulary.eos_id]
    return stream


def squash(text: str) -> str:
    return " ".join(text.split())


def test_every_task_of_the_layout_is_registered(twiki):
    names = set(twiki["names"])
    for pair in PAIRS:
        for name in (
            "diffset_{}_lm",
            "diffset_{}_ssm",
            "nondiff_{}_lm",
            "mixreview_{}_lm",
            "mixreview_{}_ssm",
            "replay_{}_lm",
            "replay_{}_ssm",
        ):
            assert "twiki_" + name.format(pair) in names
        for category in CATEGORIES:
            for suffix in FORMATS:
                assert f"twiki_probes_{pair}_{category}{suffix}" in names
                assert f"twiki_lighttuning_{pair}_{category}{suffix}" in names
        # One light-tuning run trains on UNCHANGED + UPDATED + NEW together.
        for suffix in FORMATS:
            assert f"twiki_lighttuning_{pair}_all{suffix}" in names
    # 08 from the 2-digit initial-snapshot folder, 09-11 from the pairs' full outputs.
    for month in ("08", "09", "10", "11"):
        assert {f"twiki_full_{month}_lm", f"twiki_full_{month}_ssm"} <= names
    # Evaluation mixtures: per pair the intrinsic pair and one per probe format for the probes
    # (the five categories) and for the light-tuning sets (four: CHANGED would repeat rows).
    for pair in PAIRS:
        assert [t.name for t in seqio.get_mixture_or_task(f"twiki_intrinsic_{pair}_lm").tasks] \
            == [f"twiki_diffset_{pair}_lm", f"twiki_nondiff_{pair}_lm"]
        folder = twiki["data_dir"] / pair / "probes"
        # the categories with rows (seqio.Evaluator cannot evaluate an empty task)
        probed = [c for c in CATEGORIES[:4] if csv_rows(folder / f"{c}.csv")] + ["changed"]
        tuned = [c for c in CATEGORIES[:4] if csv_rows(folder / f"lighttuning_{c}.csv")]
        for suffix in FORMATS:
            probes = seqio.get_mixture_or_task(f"twiki_probes_{pair}{suffix}")
            assert [t.name for t in probes.tasks] == sorted(  # seqio lists them by name
                f"twiki_probes_{pair}_{c}{suffix}" for c in probed)
            lighttuning = seqio.get_mixture_or_task(f"twiki_lighttuning_{pair}{suffix}")
            assert [t.name for t in lighttuning.tasks] == sorted(
                f"twiki_lighttuning_{pair}_{c}{suffix}" for c in tuned)
    assert len(names) == 3 * (5 + 2 * 5 * 5 + 5 + 1 + 2 * 5 + 2) + 4 * 2  # + 2: replay
    assert set(seqio.TaskRegistry.names()) | set(seqio.MixtureRegistry.names()) >= names
    # Mix-Review replays the INITIAL snapshot (08) for every pair, found along the chain.
    for pair in PAIRS:
        mixture = seqio.get_mixture_or_task(f"twiki_mixreview_{pair}_lm")
        assert [t.name for t in mixture.tasks] == [f"twiki_diffset_{pair}_lm", "twiki_full_08_lm"]


def test_diffset_lm_blocks_are_the_packed_token_stream(twiki, vocabularies):
    gpt2 = vocabularies["gpt2"]
    length = 64
    texts = [r["text"] for r in read_jsonl(twiki["data_dir"] / "0809/diffset/diffset.jsonl")]
    stream = token_stream(texts, gpt2)
    blocks = [b["targets"].tolist() for b in examples("twiki_diffset_0809_lm", {"targets": length})]
    assert len(blocks) == len(stream) // length > 10
    assert all(len(block) == length for block in blocks)
    for k, block in enumerate(blocks):
        assert block == stream[k * length : (k + 1) * length]
    # A document wholly inside a block decodes back to its text.
    inside = []
    for block in blocks:
        ends = [i for i, token in enumerate(block) if token == gpt2.eos_id]
        inside += [gpt2.decode(block[a + 1 : b]) for a, b in zip(ends, ends[1:], strict=False)]
    assert inside and all(text in texts for text in inside)


def test_full_and_nondiff_lm_tasks_pack_their_snapshots(twiki, vocabularies):
    gpt2 = vocabularies["gpt2"]
    data = twiki["data_dir"]
    for name, jsonl in (
        ("twiki_full_08_lm", data / "08/full/full.jsonl"),
        ("twiki_full_10_lm", data / "0910/diffset/full.jsonl"),
        ("twiki_nondiff_1011_lm", data / "1011/diffset/unchanged.jsonl"),
    ):
        stream = token_stream([r["text"] for r in read_jsonl(jsonl)], gpt2)
        blocks = examples(name, {"targets": 256})
        assert len(blocks) == len(stream) // 256, name
        assert blocks[-1]["targets"].tolist() == stream[(len(blocks) - 1) * 256 : len(blocks) * 256]


def test_tasks_and_mixtures_feed_seqio_feature_converters(twiki):
    lm = seqio.get_dataset(
        "twiki_mixreview_0910_lm",
        {"targets": 32},
        seqio.DecoderFeatureConverter(pack=False),
        shuffle=True,
        seed=1,
    )
    first = next(lm.as_numpy_iterator())
    assert first["decoder_target_tokens"].shape == (32,)
    assert (
        first["decoder_input_tokens"].tolist()[1:] == first["decoder_target_tokens"].tolist()[:-1]
    )
    t5 = seqio.get_dataset(
        "twiki_diffset_1011_ssm",
        {"inputs": 64, "targets": 16},
        seqio.EncDecFeatureConverter(pack=False),
    )
    first = next(t5.as_numpy_iterator())
    assert first["encoder_input_tokens"].shape == (64,) and first[
        "decoder_target_tokens"
    ].shape == (16,)


def test_lm_task_without_a_sequence_length_says_what_it_needs(twiki):
    with pytest.raises(ValueError, match="sequence_length"):
        examples("twiki_diffset_0809_lm", None)


def test_ssm_task_tokens_decode_back_to_the_tfrecord_text(twiki, vocabularies):
    t5 = vocabularies["t5"]
    written = twiki["ssm"]["0809"]
    got = examples("twiki_diffset_0809_ssm", {"inputs": 1024, "targets": 64})
    assert len(got) == len(written) > 5
    for example, record in zip(got, written, strict=True):
        for key in ("inputs", "targets"):
            tokens = example[key].tolist()
            assert tokens[-1] == t5.eos_id
            assert squash(t5.decode(tokens)) == squash(record[key])
        assert example["targets"][0] == t5.vocab_size - 1  # <extra_id_0>, T5's sentinel id
    short = examples("twiki_diffset_0809_ssm", {"inputs": 16, "targets": 4})
    assert all(len(e["inputs"]) <= 16 and e["inputs"][-1] == t5.eos_id for e in short)
    assert len(examples("twiki_full_08_ssm", {"inputs": 512, "targets": 64})) == len(
        twiki["ssm"]["08"]
    )


@pytest.mark.parametrize("category", CATEGORIES)
def test_probe_tasks_yield_one_example_per_csv_row(twiki, vocabularies, category):
    folder = twiki["data_dir"] / "0809" / "probes"
    if category == "changed":
        rows = csv_rows(folder / "updated.csv") + csv_rows(folder / "new.csv")
    else:
        rows = csv_rows(folder / f"{category}.csv")
    t5, gpt2 = vocabularies["t5"], vocabularies["gpt2"]
    full, obj, lm_cloze, ssm, cloze = (examples(f"twiki_probes_0809_{category}{s}")
                                       for s in FORMATS)
    assert len(full) == len(obj) == len(lm_cloze) == len(ssm) == len(cloze) == len(rows)
    for row, a, b, e, c, d in zip(rows, full, obj, lm_cloze, ssm, cloze, strict=True):
        for example in (a, b, c, d, e):
            for key in ("subject", "relation", "object", "previous_object"):
                assert example[key].decode() == row[key]
        # GPT-2: EOS as BOS, then the probe text, every text token scored.
        text = list(gpt2.encode(row["text"]))
        assert a["targets"].tolist() == [gpt2.eos_id, *text]
        assert a["targets_weights"].tolist() == [0] + [1] * len(text)
        # The object-only format splits the same tokens into prompt and object.
        assert b["inputs"].tolist() + b["targets"].tolist() == a["targets"].tolist()
        assert gpt2.decode(b["targets"].tolist()) == " " + row["object"]
        assert b["targets_weights"].tolist() == [1] * len(b["targets"])
        # GPT-2 cloze: EOS, the cloze sentence, only the object's tokens scored (no cloze
        # sentence holding the object: the object format's row).
        scored = [t for t, w in zip(e["targets"].tolist(), e["targets_weights"].tolist(),
                                    strict=True) if w]
        assert gpt2.decode(scored).strip() == row["object"]  # with its space, if any
        if row["object"] in row["cloze"]:
            assert e["targets"].tolist() == [gpt2.eos_id, *gpt2.encode(row["cloze"])]
        else:
            assert e["targets"].tolist() == a["targets"].tolist()
        # T5: the object's pieces are scored, not the sentinel, not EOS.
        for example in (c, d):
            assert example["targets_weights"].tolist() == [0] + [1] * (len(c["targets"]) - 2) + [0]
        assert (
            squash(t5.decode(c["inputs"].tolist()))
            == f"{row['subject']} {row['relation']} <extra_id_0>"
        )
        assert squash(t5.decode(c["targets"].tolist())) == squash(f"<extra_id_0> {row['object']}")
        assert d["targets"].tolist() == c["targets"].tolist()
        masked = (
            row["cloze"].replace(row["object"], "<extra_id_0>")
            if row["object"] in row["cloze"]
            else None
        )
        if masked:
            assert squash(t5.decode(d["inputs"].tolist())) == squash(masked)


def test_light_tuning_tasks_read_the_light_tuning_csvs(twiki):
    folder = twiki["data_dir"] / "1011" / "probes"
    for category in ("unchanged", "new", "deleted"):
        rows = csv_rows(folder / f"lighttuning_{category}.csv")
        got = examples(f"twiki_lighttuning_1011_{category}_ssm")
        assert [e["object"].decode() for e in got] == [r["object"] for r in rows]
    assert seqio.get_mixture_or_task("twiki_lighttuning_1011_new").splits == ("train",)


def test_probe_tasks_carry_their_metrics(twiki):
    generating = seqio.get_mixture_or_task("twiki_probes_0809_updated_ssm")
    assert generating.predict_metric_fns == [metrics.squad]
    assert generating.score_metric_fns == [metrics.perplexity]
    scoring = seqio.get_mixture_or_task("twiki_probes_0809_updated")
    assert scoring.predict_metric_fns == [] and scoring.score_metric_fns == [metrics.perplexity]
    example = examples("twiki_probes_0809_updated_ssm")[0]
    target = generating.postprocess_fn(
        example["targets_pretokenized"].decode(), example=example, is_target=True
    )
    # the scored tokens: the object's, not the sentinel or EOS; the outdated object too
    previous = example["previous_object"].decode()
    assert target == {"answers": ["Groris Funley"], "num_tokens": len(example["targets"]) - 2,
                      "previous": [previous]}
    prediction = generating.postprocess_fn(
        "<extra_id_0> Groris Funley <extra_id_1>", example=example
    )
    assert metrics.squad([target], [prediction]) == {"em": 100.0, "f1": 100.0,
                                                     "em_previous": 0.0, "f1_previous": 0.0}


def test_missing_vocabulary_fails_when_used_naming_path_and_variable(twiki, tmp_path):
    missing = tmp_path / "nowhere" / "spiece.model"
    names = tw_jax.tasks.register_all(twiki["data_dir"], t5_vocab=str(missing))
    assert "twiki_diffset_0809_ssm" in names  # registration does not need the files
    with pytest.raises(tw_jax.tasks.VocabularyNotFoundError) as raised:
        examples("twiki_probes_0809_new_ssm")
    assert str(missing) in str(raised.value) and "TW_JAX_T5_VOCAB" in str(raised.value)


def test_registering_another_folder_replaces_the_tasks(twiki, tmp_path):
    shutil.copytree(twiki["data_dir"] / "0809" / "diffset", tmp_path / "0809" / "diffset")
    (tmp_path / "0809" / "ssm").mkdir()
    names = tw_jax.tasks.register_all(tmp_path)
    assert sorted(names) == [
        "twiki_diffset_0809_lm",
        "twiki_diffset_0809_ssm",
        "twiki_full_09_lm",
        "twiki_full_09_ssm",
        "twiki_intrinsic_0809_lm",
        "twiki_nondiff_0809_lm",
    ]
    assert "twiki_probes_0910_new" not in seqio.TaskRegistry.names()
    assert "twiki_mixreview_0809_lm" not in seqio.MixtureRegistry.names()
    with pytest.raises(FileNotFoundError, match=r"ssm/diffset\.tfrecord.*tw-jax ssm"):
        examples("twiki_diffset_0809_ssm", {"inputs": 8, "targets": 8})
    assert tw_jax.tasks.register_all(tmp_path / "empty") == []
    assert "twiki_diffset_0809_lm" not in seqio.TaskRegistry.names()


def test_data_folder_comes_from_the_environment_or_gin(twiki, monkeypatch, tmp_path):
    shutil.copytree(twiki["data_dir"] / "0910" / "diffset", tmp_path / "0910" / "diffset")
    monkeypatch.setenv("TW_JAX_DATA_DIR", str(tmp_path))
    assert "twiki_diffset_0910_lm" in tw_jax.tasks.register_all()
    monkeypatch.delenv("TW_JAX_DATA_DIR")
    try:
        gin.parse_config(f"tw_jax.tasks.register_all.data_dir = '{twiki['data_dir']}'")
        assert "twiki_mixreview_1011_ssm" in tw_jax.tasks.register_all()
    finally:
        gin.clear_config()


def test_bad_probe_row_names_file_and_line(twiki, tmp_path):
    folder = tmp_path / "0809" / "probes"
    folder.mkdir(parents=True)
    rows = (twiki["data_dir"] / "0809/probes/new.csv").read_text().splitlines()
    rows[2] = "Gaulburg,founded"  # two fields where the header has nine
    (folder / "new.csv").write_text("\n".join(rows) + "\n")
    shutil.copy(twiki["data_dir"] / "0809/probes/stats.json", folder)  # a finished stage's
    tw_jax.tasks.register_all(tmp_path)
    with pytest.raises(DumpError, match=r"new\.csv, line 3: 2 fields, header has 9"):
        examples("twiki_probes_0809_new")
