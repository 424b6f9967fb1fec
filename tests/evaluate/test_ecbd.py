"""ECBD evaluation: span perplexities checked in closed form, recall@k, the tables and the CLI."""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from tw_jax.cli_parser import OneLineErrorParser
from tw_jax.evaluate import ecbd
from tw_jax.models import model_for
from tw_jax.models.t5_fill import extract_span
from tw_jax.models.token_scores import score_seq2seq
from tw_jax.tasks.ecbd import read_ecbd

DEF_A = ["Barack Obama was born in Honolulu.", "He studied at Columbia University."]
DEF_B = ["Microsoft opened offices in London."]


def _row(ex_id: str, masked: str, span: str, span_type: str, definition: list[str],
         mention: str) -> dict:
    return {"ex_id": ex_id, "masked_sentence": masked, "answer_str": f"<extra_id_0> {span} "
            "<extra_id_1>", "answer_d": {"<extra_id_0>": span}, "span_type": span_type,
            "definition": definition, "entity_span_str": mention}


ROWS = {
    ("2019", "np"): [
        _row("Barack Obama_1_2_0", "Barack Obama met <extra_id_0> in Paris on Monday.",
             "Angela Merkel", "NP-PROPER", DEF_A, "Barack Obama"),
        _row("Barack Obama_1_3_1", "Barack Obama studied at <extra_id_0>.",
             "Columbia University", "NP-PROPER", DEF_A, "Barack Obama")],
    ("2019", "random"): [
        _row("Barack Obama_1_2_0", "Barack Obama met Angela Merkel <extra_id_0> on Monday.",
             "in Paris", "RANDOM", DEF_A, "Barack Obama")],
    ("2020", "random"): [
        _row("Microsoft_2_1_0", "Microsoft and Google opened <extra_id_0> in London.",
             "offices", "RANDOM", DEF_B, "Microsoft"),
        _row("Microsoft_2_1_1", "Microsoft walked to the market and bought <extra_id_0>.",
             "some bread and fresh apples", "RANDOM", DEF_B, "Microsoft")],
}


@pytest.fixture()
def folder(tmp_path) -> Path:
    for (subset, kind), rows in ROWS.items():
        path = tmp_path / "ecbd" / subset / f"{kind}_spans_test.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return tmp_path / "ecbd"


def _by(results, **want) -> dict:
    return {(r.subset, r.input, r.span_type, r.metric): r for r in results
            if all(getattr(r, k) == v for k, v in want.items())}


def test_micro_and_entity_averaged_perplexity():
    records = [
        {"subset": "2019", "split": "test", "input": "original", "entity": "a", "span_group": "NP",
         "nll": 1.0},
        {"subset": "2019", "split": "test", "input": "original", "entity": "a",
         "span_group": "RANDOM", "nll": 2.0},
        {"subset": "2020", "split": "test", "input": "original", "entity": "b",
         "span_group": "RANDOM", "nll": 4.0, "hit": 1},
    ]
    results = _by(ecbd.aggregate("m", records, recall_k=10))
    assert results[("2019", "original", "all", "ppl")].value == pytest.approx(math.exp(1.5))
    pooled = ("2017-2019", "original", "all")
    assert results[(*pooled, "ppl")].value == pytest.approx(math.exp(1.5))
    assert results[("2020-2021", "original", "RANDOM", "ppl_entity")].value == pytest.approx(
        math.exp(4.0))
    assert results[("2020-2021", "original", "all", "recall_at_10")].value == 100.0
    assert ("2019", "original", "all", "recall_at_10") not in results  # no recall was run there
    both = records + [dict(records[2], subset="2019")]
    results = _by(ecbd.aggregate("m", both))
    assert results[("2019", "original", "all", "ppl")].value == pytest.approx(math.exp(7 / 3))
    assert results[("2019", "original", "all", "ppl_entity")].value == pytest.approx(
        math.exp((1.5 + 4.0) / 2))
    assert results[("2019", "original", "RANDOM", "ppl_entity")].value == pytest.approx(
        math.exp(3.0))
    assert results[("2019", "original", "all", "ppl")].entities == 2


# --- results.jsonl rows, and the ecbd_results.jsonl of earlier versions ------------------------

RECORDS = [
    {"subset": "2019", "split": "test", "input": "original", "entity": "a", "span_group": "NP",
     "nll": 1.0, "hit": 1},
    {"subset": "2019", "split": "test", "input": "no_ent", "entity": "a", "span_group": "NP",
     "nll": 2.0, "hit": 0},
    {"subset": "2020", "split": "test", "input": "original", "entity": "b",
     "span_group": "RANDOM", "nll": 4.0, "hit": 0},
    {"subset": "2020", "split": "test", "input": "original", "entity": "c",
     "span_group": "RANDOM", "nll": None, "hit": 1},  # a span with no token: recall only
]


def test_cells_become_results_rows_and_back():
    from tw_jax.evaluate.results import BASE, NO_MONTH, Result

    cells = ecbd.aggregate("T5-Small", RECORDS, recall_k=10)
    rows = ecbd.to_results(cells)
    cell = {"input": "original", "span_type": "RANDOM", "split": "test"}
    # 2020 RANDOM: perplexities of entity b's one scored example, recall over both examples.
    assert [r for r in rows if r.category == "2020" and r.slice == cell] == [
        Result("t5-small", BASE, NO_MONTH, "2020", "ecbd_ppl", math.exp(4.0), cell),
        Result("t5-small", BASE, NO_MONTH, "2020", "ecbd_examples", 1, cell),
        Result("t5-small", BASE, NO_MONTH, "2020", "ecbd_entities", 2, cell),
        Result("t5-small", BASE, NO_MONTH, "2020", "ecbd_ppl_entity", math.exp(4.0), cell),
        Result("t5-small", BASE, NO_MONTH, "2020", "ecbd_recall_at_10", 50.0, cell),
        Result("t5-small", BASE, NO_MONTH, "2020", "ecbd_recall_examples", 2, cell),
    ]
    for row in rows:
        row.validate()
    assert len(rows) == len({r.key for r in rows}) == 12 * 6  # cells × (3 numbers, 3 counts)
    lowered = [replace(c, model="t5-small") for c in cells]
    assert ecbd.from_results(rows) == lowered
    # Other benchmarks' rows in the same file are passed over.
    assert ecbd.from_results([Result("diff", "0910", "0910", "new", "ppl", 3.0), *rows]) == lowered
    with pytest.raises(ValueError, match=r"^'t5\.small' is not a method name"):
        ecbd.to_results([replace(cells[0], model="t5.small")])


def test_an_out_dir_of_an_earlier_version_still_reports_the_same_tables(tmp_path):
    """The same numbers give the same tables from results.jsonl, from the ecbd_results.jsonl
    that earlier versions wrote, and from both in one folder."""
    from tw_jax.benchmarks.ecbd_eval import render
    from tw_jax.evaluate.results import iter_results

    cells = ecbd.aggregate("m", RECORDS, recall_k=10)
    legacy = tmp_path / "old" / "ecbd_results.jsonl"
    legacy.parent.mkdir()
    legacy.write_text("".join(json.dumps(c.__dict__) + "\n" for c in cells), encoding="utf-8")
    assert legacy.read_text().splitlines()[0] == (
        '{"model": "m", "subset": "2017-2019", "split": "test", "input": "no_ent", '
        '"span_type": "NP", "metric": "ppl", "value": 7.38905609893065, "examples": 1, '
        '"entities": 1}')
    written = ecbd.append_results(tmp_path / "new", cells)
    assert written == str(tmp_path / "new" / "results.jsonl")
    assert [r.metric for r in iter_results(written)][:4] == [
        "ecbd_ppl", "ecbd_examples", "ecbd_entities", "ecbd_ppl_entity"]
    expected = render(cells)
    assert "### entity-averaged perplexity by group (ECBD Table 3), test" in expected
    for source in (tmp_path / "old", legacy, tmp_path / "new", written):
        assert ecbd.read_results(source) == cells, source
        code, printed = _cli(["ecbd", "report", str(source)])
        assert code == 0 and printed == expected, source
    # Both files in one folder: the legacy model's rows and the new ones, newer lines winning.
    both = tmp_path / "both"
    both.mkdir()
    (both / "ecbd_results.jsonl").write_text(
        "".join(json.dumps({**c.__dict__, "model": "old", "value": c.value + 1}) + "\n"
                for c in cells) + json.dumps({**cells[0].__dict__, "value": 99.0}) + "\n",
        encoding="utf-8")
    ecbd.append_results(both, cells)
    found = ecbd.read_results(both)
    assert sorted(found, key=lambda c: c.key) == sorted(
        [replace(c, model="old", value=c.value + 1) for c in cells] + cells, key=lambda c: c.key)
    assert "| old | ORIGINAL |" in render(found) and "| m | ORIGINAL |" in render(found)
    (tmp_path / "empty").mkdir()
    from tw_jax.errors import DumpError

    with pytest.raises(DumpError, match="no results.jsonl .* or ecbd_results.jsonl"):
        ecbd.read_results(tmp_path / "empty")
    legacy.write_text('{"model": "m"}\n', encoding="utf-8")
    with pytest.raises(DumpError, match=r"ecbd_results.jsonl, line 1: not an ECBD result"):
        ecbd.read_results(legacy)


def test_gpt2_span_perplexity_in_closed_form(folder, unigram_gpt2, gpt2_vocab):
    """Every position of the unigram GPT-2 predicts the same distribution, so a span's NLL is
    the mean of -log p over the span's own tokens (" span" alone: BPE splits at spaces), whatever
    the context: all four inputs score the same, and the tables' deltas are 0."""
    model, params, log_probs = unigram_gpt2
    data = read_ecbd(folder)
    run = ecbd.evaluate_ecbd(model, params, gpt2_vocab, data, "uni",
                             ecbd.EcbdOptions(batch_size=4, recall_k=10))
    assert run.notes == {"recall@k skipped: T5 only (ECBD Appendix D)": 1}
    expected = {}
    for (subset, _), rows in ROWS.items():
        for row in rows:
            ids = gpt2_vocab.encode(" " + row["answer_d"]["<extra_id_0>"])
            expected.setdefault(subset, []).append((row["ex_id"].split("_")[1],
                                                    -float(np.mean(log_probs[ids]))))
    assert len(run.records) == 4 * 5
    for record in run.records:
        ids = gpt2_vocab.encode(" " + record["span"])
        assert record["nll"] == pytest.approx(-np.mean(log_probs[ids]), rel=1e-5)
        assert record["tokens"] == len(ids)
    results = _by(run.results)
    for subset, values in expected.items():
        nlls = [v for _, v in values]
        for input_type in ecbd.INPUT_LABELS:
            micro = results[(subset, input_type, "all", "ppl")]
            assert micro.value == pytest.approx(math.exp(np.mean(nlls)), rel=1e-5)
            assert micro.examples == len(nlls)
    # 2019: entity "1" only (three examples); 2017-2019 pools it alone.
    assert results[("2017-2019", "definition", "all", "ppl_entity")].value == pytest.approx(
        math.exp(np.mean([v for _, v in expected["2019"]])), rel=1e-5)
    tables = {t.name: t for t in _tables(run.results)}
    table5 = tables["ecbd_table5_test"]
    assert table5.headers == ["model", "input", "2019", "2020"]
    assert [row[1] for row in table5.rows] == [
        "ORIGINAL", "NO ENT", "RANDOM DEF.", "DEFINITION", "Δ(ORIG. → RAND.)", "Δ(ORIG. → DEF.)"]
    assert table5.rows[-1][2:] == ["+0.00", "+0.00"]
    assert tables["ecbd_table3_test"].headers == ["model", "input", "2017-2019", "2020-2021"]
    assert tables["ecbd_table6_test"].headers[2:] == ["2019 NP", "2019 RAND", "2020 NP",
                                                      "2020 RAND"]
    assert "ecbd_table7_test" not in tables  # recall is T5's


def _tables(results):
    from tw_jax.benchmarks.ecbd_eval import ecbd_tables

    return ecbd_tables(results)


def test_t5_scores_the_tokens_between_the_sentinels(folder, random_t5, t5_vocab):
    model, params = random_t5
    example = read_ecbd(folder)[("2019", "test")][0]
    built, cut = ecbd.span_example(model, t5_vocab, example, example.masked_sentence)
    assert not cut
    weighted = [t for t, w in zip(built.targets, built.weights, strict=True) if w]
    assert t5_vocab.decode(weighted) == "Angela Merkel"
    assert built.targets[0] == t5_vocab.vocab_size - 1  # <extra_id_0>, not scored
    assert built.weights[-2:] == (0.0, 0.0)  # <extra_id_1> and EOS are not scored either
    nll, tokens = ecbd.span_nlls(model, params, t5_vocab, [example], [example.masked_sentence])
    direct = score_seq2seq(model, params, [built])
    assert tokens[0] == len(weighted)
    assert nll[0] == pytest.approx(-direct.log_likelihood[0] / len(weighted))


def test_t5_recall_at_k(folder, random_t5, t5_vocab):
    """Gold spans set to the model's own predictions give recall 100%; unlikely ones 0%."""
    model, params = random_t5
    data = read_ecbd(folder)
    first = data[("2019", "test")]
    top = model_for(model).cloze_fillers(params, t5_vocab, [ex.masked_sentence for ex in first],
                                         k=2, beam_size=3, max_new_tokens=4, batch_size=8)
    assert all(1 <= len(found) <= 2 and len(set(found)) == len(found) for found in top)
    mine = {  # 2019: the k-th prediction (still within the top k); 2020: a span never predicted
        ("2019", "test"): [replace(ex, span=found[-1]) for ex, found in zip(first, top, strict=True)],
        ("2020", "test"): [replace(ex, span="zebra zebra") for ex in data[("2020", "test")]],
    }
    options = ecbd.EcbdOptions(input_types=("original",), recall_k=2, beam_size=3,
                               max_new_tokens=4, batch_size=8)
    run = ecbd.evaluate_ecbd(model, params, t5_vocab, mine, "t5", options)
    results = _by(run.results, metric="recall_at_2")
    assert {k[0]: r.value for k, r in results.items() if k[2] == "all"} == {
        "2019": 100.0, "2020": 0.0, "2017-2019": 100.0, "2020-2021": 0.0}
    assert [r["predictions"] for r in run.records[:3]] == top  # batching changes nothing
    assert math.isfinite(next(r.value for r in run.results if r.metric == "ppl"))


def test_extract_span(t5_vocab):
    ids = t5_vocab.encode("<extra_id_0> the city <extra_id_1> rest")
    assert extract_span(t5_vocab, ids) == "the city"
    assert extract_span(t5_vocab, t5_vocab.encode("the city") + [1, 5, 6]) == "the city"
    assert extract_span(t5_vocab, t5_vocab.encode("<extra_id_0>") + [1]) == ""


def _cli(argv: list[str]) -> tuple[int, str]:
    from tw_jax.benchmarks import ecbd_cli

    parser = OneLineErrorParser(prog="tw-jax")
    ecbd_cli.add_parser(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = args.func(args)
    return code, printed.getvalue()


def test_cli_eval_and_report(folder, random_t5, t5_vocab, tmp_path):
    from tw_jax.models.t5_io import save_t5

    model, params = random_t5
    hf = tmp_path / "tiny-t5"
    save_t5(hf, model.config, params)
    shutil.copy(t5_vocab.sentencepiece_model_file, hf / "spiece.model")
    out = tmp_path / "out"
    code, printed = _cli(["ecbd", "eval", "--data", str(folder), "--out", str(out), "--model",
                          str(hf), "--recall-k", "2", "--beam-size", "3", "--max-new-tokens",
                          "4", "--batch-size", "8", "--inputs", "original,no_ent"])
    assert code == 0
    assert "ecbd tiny-t5: 10 scored examples" in printed
    assert "### entity-averaged perplexity by group (ECBD Table 3), test" in printed
    assert "### recall@2 (%) per span type (ECBD Table 8), test" in printed
    results = ecbd.read_results(out)
    assert {r.model for r in results} == {"tiny-t5"} and len(results) == len(set(
        r.key for r in results))
    from tw_jax.evaluate.results import iter_results

    rows = list(iter_results(out))  # the one results file, as every benchmark's
    assert {r.metric for r in rows} == {"ecbd_ppl", "ecbd_ppl_entity", "ecbd_recall_at_2",
                                        "ecbd_examples", "ecbd_recall_examples", "ecbd_entities"}
    assert {tuple(r.slice) for r in rows} == {("input", "span_type", "split")}
    assert ecbd.from_results(rows) == results and not (out / "ecbd_results.jsonl").exists()
    examples = (out / "ecbd_examples.tiny-t5.jsonl").read_text().splitlines()
    assert len(examples) == 10 and "predictions" in json.loads(examples[0])
    tables = sorted(p.name for p in (out / "ecbd_tables").iterdir())
    assert tables == sorted(f"ecbd_table{n}_test.csv" for n in ("3", "5", "5_micro", "6", "7", "8"))
    assert (out / "ecbd_report.md").read_text() in printed
    code, again = _cli(["ecbd", "report", str(out)])
    assert code == 0 and again == (out / "ecbd_report.md").read_text()
    # Bad input: an unknown input type, a split with no examples, a broken file.
    assert _cli(["ecbd", "eval", "--data", str(folder), "--out", str(out), "--model", str(hf),
                 "--inputs", "original,nonsense"])[0] == 2
    assert _cli(["ecbd", "eval", "--data", str(folder), "--out", str(out), "--model", str(hf),
                 "--splits", "dev"])[0] == 2
    (folder / "2020" / "np_spans_test.json").write_text("{broken\n")
    from tw_jax.errors import DumpError

    with pytest.raises(DumpError, match="np_spans_test.json, line 1: not JSON"):
        _cli(["ecbd", "eval", "--data", str(folder), "--out", str(out), "--model", str(hf)])


def test_eval_is_a_python_function_the_command_calls(folder, random_t5, t5_vocab, tmp_path):
    """A notebook or a sweep calls what ``tw-jax ecbd eval`` runs: the same settings as a
    config give the command's results and tables."""
    from tw_jax.benchmarks.ecbd_eval import EcbdEvalConfig, evaluate, render
    from tw_jax.errors import UsageError
    from tw_jax.models.t5_io import save_t5

    model, params = random_t5
    hf = tmp_path / "tiny-t5"
    save_t5(hf, model.config, params)
    shutil.copy(t5_vocab.sentencepiece_model_file, hf / "spiece.model")
    options = ecbd.EcbdOptions(input_types=("original", "no_ent"), batch_size=8)
    outcome = evaluate(EcbdEvalConfig(data=str(folder), out=str(tmp_path / "py"), model=str(hf),
                                      options=options))
    assert outcome.name == "tiny-t5" and len(outcome.run.records) == 10
    assert outcome.results_file == str(tmp_path / "py" / "results.jsonl")
    code, _ = _cli(["ecbd", "eval", "--data", str(folder), "--out", str(tmp_path / "cli"),
                    "--model", str(hf), "--inputs", "original,no_ent", "--batch-size", "8"])
    assert code == 0
    py, cli = ecbd.read_results(tmp_path / "py"), ecbd.read_results(tmp_path / "cli")
    assert [(r.key, r.value) for r in py] == [(r.key, r.value) for r in cli] and py
    assert render(py) == (tmp_path / "cli" / "ecbd_report.md").read_text()
    with pytest.raises(UsageError, match=r"unknown --inputs \['nonsense'\]; known: original"):
        evaluate(EcbdEvalConfig(data=str(folder), out=str(tmp_path / "x"), model=str(hf),
                                options=ecbd.EcbdOptions(input_types=("nonsense",))))
    assert not (tmp_path / "x").exists()
    # Names results.jsonl cannot hold are refused before the model is loaded.
    with pytest.raises(UsageError, match=r"--name, default the model's folder name\): "
                                         r"'t5\.tiny' is not a method name"):
        evaluate(EcbdEvalConfig(data=str(folder), out=str(tmp_path / "x"), model=str(hf),
                                name="T5.tiny", options=options))
    (folder / "2019").rename(folder / "19 (old)")
    with pytest.raises(UsageError, match=r"ECBD subset '19 \(old\)': metric 'ecbd_ppl' takes "
                                         r"a category matching"):
        evaluate(EcbdEvalConfig(data=str(folder), out=str(tmp_path / "x"), model=str(hf),
                                options=options))
    assert not (tmp_path / "x").exists()
    (folder / "19 (old)").rename(folder / "2019")
    outcome = evaluate(EcbdEvalConfig(data=str(folder), out=str(tmp_path / "py"), model=str(hf),
                                      name="Tiny-T5_B", subsets=("2019",), options=options))
    assert outcome.name == "tiny-t5_b"
    assert (tmp_path / "py" / "ecbd_examples.tiny-t5_b.jsonl").exists()
    assert {r.model for r in ecbd.read_results(tmp_path / "py")} == {"tiny-t5", "tiny-t5_b"}


def test_cli_eval_orbax_style_gin_model(folder, random_t5, t5_vocab, tmp_path):
    """--model-dir with the gin files of the model, as tw-jax eval takes them: models/t5_tiny.gin
    with bindings that make it the tiny test T5, whose weights sit in MODEL_DIR."""
    from dataclasses import fields

    from tw_jax.models.t5_io import save_t5

    model, params = random_t5
    config = model.config
    bindings = [f"--gin.tw_jax.models.T5Config.{f.name}={getattr(config, f.name)!r}"
                for f in fields(config) if isinstance(getattr(config, f.name), int | float | str)]
    model_dir = tmp_path / "model_dir"
    save_t5(model_dir, config, params)
    code, printed = _cli(["ecbd", "eval", "--data", str(folder), "--out", str(tmp_path / "o"),
                          "--model-dir", str(model_dir), "--gin_file=models/t5_tiny.gin",
                          *bindings, "--vocab", t5_vocab.sentencepiece_model_file, "--inputs",
                          "original,definition", "--subsets", "2019", "--name", "tiny"])
    assert code == 0, printed
    results = {(r.input, r.metric): r.value for r in ecbd.read_results(tmp_path / "o")
               if r.subset == "2019" and r.span_type == "all"}
    data = read_ecbd(folder, subsets=["2019"])[("2019", "test")]
    nll, _ = ecbd.span_nlls(model, params, t5_vocab, data, [ex.masked_sentence for ex in data])
    assert results[("original", "ppl")] == pytest.approx(math.exp(np.mean(nll)), rel=1e-4)
    table = next(t for t in _tables(ecbd.read_results(tmp_path / "o"))
                 if t.name == "ecbd_table5_test")
    assert [r[1] for r in table.rows] == ["ORIGINAL", "DEFINITION", "Δ(ORIG. → DEF.)"]
    assert table.headers == ["model", "input", "2019"]
    assert _cli(["ecbd", "eval", "--data", str(folder), "--out", str(tmp_path / "o"),
                 "--model-dir", str(model_dir)])[0] == 2  # gin files and vocab are needed


# --- BART ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bart_vocab(gpt2_vocab, tmp_path_factory):
    """The tiny GPT-2 BPE renumbered as BART's: <s> <pad> </s> <unk>, the pieces, <mask> last."""
    from tw_jax.data.vocabularies import bart_vocabulary

    source = Path(gpt2_vocab.path)
    pieces = json.loads((source / "vocab.json").read_text(encoding="utf-8"))
    ordered = [p for p, _ in sorted(pieces.items(), key=lambda kv: kv[1]) if p != "<|endoftext|>"]
    ordered = ["<s>", "<pad>", "</s>", "<unk>", *ordered, "<mask>"]
    folder = tmp_path_factory.mktemp("bart_vocab")
    (folder / "vocab.json").write_text(json.dumps({p: i for i, p in enumerate(ordered)},
                                                  ensure_ascii=False), encoding="utf-8")
    shutil.copy(source / "merges.txt", folder / "merges.txt")
    return bart_vocabulary(folder)


@pytest.fixture(scope="module")
def random_bart(bart_vocab):
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    from tw_jax.models import BART, BARTConfig

    config = BARTConfig(vocab_size=bart_vocab.vocab_size, max_position_embeddings=128,
                        d_model=32, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                        decoder_attention_heads=4, encoder_ffn_dim=64, decoder_ffn_dim=64,
                        dropout_rate=0.0, init_std=0.2)
    model = BART(config)
    dummy = jnp.zeros((1, 8), jnp.int32)
    return model, nn.unbox(jax.jit(model.init)(jax.random.key(3), dummy, dummy)["params"])


def test_bart_span_perplexity_equals_a_numpy_computation_from_the_logits(folder, random_bart,
                                                                         bart_vocab):
    """Two hand-made examples of two entities: BART reads the sentence with <mask> for the span
    and is scored on the whole sentence, framed <s> … </s>; only the span's tokens count. Each
    NLL is the mean over the span's tokens, computed here from the model's logits with numpy,
    and the perplexities are exp of the mean over examples (micro) and over entities."""
    from tw_jax.models import forward_logits
    from tw_jax.models.bart import shift_tokens_right

    model, params = random_bart
    data = read_ecbd(folder)
    examples = [data[("2019", "test")][0], data[("2020", "test")][1]]
    assert [ex.span for ex in examples] == ["Angela Merkel", "some bread and fresh apples"]
    expected = []
    for example in examples:
        left, right = example.masked_sentence.split("<extra_id_0>")
        source = [0, *bart_vocab.encode(f"{left.rstrip()} <mask>{right}"), 2]
        assert bart_vocab.mask_id in source
        before, span = bart_vocab.encode(left.rstrip()), bart_vocab.encode(" " + example.span)
        target = [0, *before, *span, *bart_vocab.encode(right), 2]
        built, cut = ecbd.span_example(model, bart_vocab, example, example.masked_sentence)
        assert not cut and built.inputs == tuple(source) and built.targets == tuple(target)
        assert bart_vocab.decode([t for t, w in zip(built.targets, built.weights, strict=True)
                                  if w]) == " " + example.span
        decoder_inputs = shift_tokens_right(np.asarray([target]), 1, 2)
        logits = forward_logits(model, params, np.asarray([source]), decoder_inputs)[0]
        logits = logits.astype(np.float64)
        log_probs = logits - np.log(np.exp(logits - logits.max(-1, keepdims=True)).sum(-1,
                                    keepdims=True)) - logits.max(-1, keepdims=True)
        at = np.arange(1 + len(before), 1 + len(before) + len(span))
        expected.append(-np.mean(log_probs[at, np.asarray(target)[at]]))
    nll, tokens = ecbd.span_nlls(model, params, bart_vocab, examples,
                                 [ex.masked_sentence for ex in examples], batch_size=2)
    np.testing.assert_allclose(nll, expected, rtol=1e-5)
    assert tokens.tolist() == [len(bart_vocab.encode(" " + ex.span)) for ex in examples]
    mine = {("2019", "test"): examples[:1], ("2020", "test"): examples[1:]}
    run = ecbd.evaluate_ecbd(model, params, bart_vocab, mine, "bart",
                             ecbd.EcbdOptions(input_types=("original",), batch_size=2,
                                              recall_k=10))
    assert run.notes == {"recall@k skipped: T5 only (ECBD Appendix D)": 1}
    results = _by(run.results, input="original", span_type="all")
    for (subset, _, _, metric), result in results.items():
        value = expected[0] if subset.startswith("2019") or subset == "2017-2019" else expected[1]
        assert result.value == pytest.approx(math.exp(value), rel=1e-5), (subset, metric)


def test_cli_eval_bart_from_a_hugging_face_folder_and_from_gin(folder, random_bart, bart_vocab,
                                                               tmp_path):
    from dataclasses import fields

    from tw_jax.models.bart_io import save_bart

    model, params = random_bart
    hf = tmp_path / "tiny-bart"
    save_bart(hf, model.config, params)
    for name in ("vocab.json", "merges.txt"):
        shutil.copy(Path(bart_vocab.path) / name, hf / name)
    out = tmp_path / "out"
    code, printed = _cli(["ecbd", "eval", "--data", str(folder), "--out", str(out), "--model",
                          str(hf), "--batch-size", "8", "--inputs", "original,no_ent",
                          "--recall-k", "2"])
    assert code == 0, printed
    assert "ecbd tiny-bart: 10 scored examples" in printed
    assert "recall@k skipped: T5 only" in printed
    data = read_ecbd(folder, subsets=["2019"])[("2019", "test")]
    nll, _ = ecbd.span_nlls(model, params, bart_vocab, data, [ex.masked_sentence for ex in data])
    by_model = {(r.model, r.input, r.metric): r.value for r in ecbd.read_results(out)
                if r.subset == "2019" and r.span_type == "all"}
    assert by_model[("tiny-bart", "original", "ppl")] == pytest.approx(math.exp(np.mean(nll)),
                                                                       rel=1e-4)
    # The same weights as an orbax-style MODEL_DIR with models/bart_tiny.gin and bindings.
    bindings = [f"--gin.tw_jax.models.BARTConfig.{f.name}={getattr(model.config, f.name)!r}"
                for f in fields(model.config)
                if isinstance(getattr(model.config, f.name), int | float | str)]
    code, printed = _cli(["ecbd", "eval", "--data", str(folder), "--out", str(out),
                          "--model-dir", str(hf), "--gin_file=models/bart_tiny.gin", *bindings,
                          "--vocab", str(hf), "--inputs", "original", "--subsets", "2019",
                          "--name", "gin-bart"])
    assert code == 0, printed
    by_model = {(r.model, r.input, r.metric): r.value for r in ecbd.read_results(out)
                if r.subset == "2019" and r.span_type == "all"}
    assert by_model[("gin-bart", "original", "ppl")] == pytest.approx(
        by_model[("tiny-bart", "original", "ppl")], rel=1e-5)
