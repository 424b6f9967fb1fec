"""`tw-jax report` renders a small results file into every table and figure."""

from __future__ import annotations

import csv

import matplotlib.image as mpimg
import pytest

from tw_jax.cli import main
from tw_jax.evaluate.report import ResultIndex, ckl_table, method_fuar, probe_table
from tw_jax.evaluate.results import BASE, NO_MONTH, Result, append_results, read_results

CATS = ("unchanged", "updated", "new", "deleted")
# TemporalWiki preprint Table 3 (INITIAL and DIFF, 0809 and 0910) plus DELETED values of ours.
PPL = {
    ("initial", BASE, "0809"): (370.42, 312.32, 367.68, 400.0),
    ("initial", BASE, "0910"): (333.39, 355.88, 429.43, 410.0),
    ("diff", "0809", "0809"): (395.33, 246.49, 301.05, 420.0),
    ("diff", "0910", "0910"): (384.12, 268.58, 353.96, 430.0),
    ("diff", "0809", "0910"): (390.00, 300.00, 380.00, 425.0),  # misaligned: trained 0809
    ("kadapter", "0809", "0809"): (326.54, 255.02, 297.64, 390.0),
    ("kadapter", "0910", "0910"): (305.26, 285.92, 344.42, 395.0),
}
# EM for the CKL table: DIFF reuses CKL Table 2's T5-Vanilla row (FUAR 1.08); KADAPTER has two
# phases whose FUAR is worked out in test_two_phase_fuar_from_results.
EM = {
    ("initial", BASE, "0809"): (24.17, 1.62, 1.88),
    ("initial", BASE, "0910"): (19.00, 3.00, 2.00),
    ("diff", "0809", "0809"): (12.89, 10.17, 3.77),
    ("kadapter", "0809", "0809"): (22.17, 5.62, 4.88),
    ("kadapter", "0809", "0910"): (15.00, 3.00, 2.00),
    ("kadapter", "0910", "0809"): (21.17, 1.00, 1.00),
    ("kadapter", "0910", "0910"): (14.00, 7.00, 5.00),
}
PROPN = {  # (diffset, nondiff)
    ("initial", BASE, "0809"): (40.0, 20.0),
    ("initial", BASE, "0910"): (50.0, 25.0),
    ("diff", "0809", "0809"): (30.0, 22.0),
    ("diff", "0910", "0910"): (35.0, 30.0),
    ("kadapter", "0809", "0809"): (36.0, 20.0),
    ("kadapter", "0910", "0910"): (45.0, 25.5),
}


def _results() -> list[Result]:
    out = []
    for (method, trained, month), values in PPL.items():
        out += [Result(method, trained, month, c, "ppl", v) for c, v in zip(CATS, values,
                                                                             strict=True)]
    for (method, trained, month), values in EM.items():
        out += [Result(method, trained, month, c, "em", v) for c, v in zip(CATS, values,
                                                                            strict=False)]
    for (method, trained, month), (diffset, nondiff) in PROPN.items():
        out.append(Result(method, trained, month, "diffset", "propn_ppl_diffset", diffset))
        out.append(Result(method, trained, month, "nondiff", "propn_ppl_nondiff", nondiff))
    out.append(Result("diff", "0809", NO_MONTH, "all", "train_seconds", 7200.0))
    out.append(Result("diff", "0910", NO_MONTH, "all", "train_seconds", 3600.0))
    return out


@pytest.fixture
def runs(tmp_path):
    """Two run folders, as two methods' runners would leave them."""
    results = _results()
    append_results(tmp_path / "run_a", [r for r in results if r.method != "kadapter"])
    append_results(tmp_path / "run_b", [r for r in results if r.method == "kadapter"])
    return [tmp_path / "run_a", tmp_path / "run_b"]


def _csv(path) -> dict[str, dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as handle:
        return {row["Method"]: row for row in csv.DictReader(handle)}


def test_cli_writes_tables_and_figures(runs, tmp_path, capsys):
    out = tmp_path / "report"
    assert main(["report", str(runs[0]), str(runs[1]), "--out", str(out)]) == 0
    assert "report.md" in capsys.readouterr().out

    table3 = _csv(out / "table_ppl.csv")
    assert list(table3) == ["INITIAL", "DIFF", "KADAPTER"]
    diff = table3["DIFF"]
    assert diff["Time"] == "1.50 h" and table3["INITIAL"]["Time"] == "0 h"
    assert table3["KADAPTER"]["Time"] == "-"
    assert [diff[f"0809 {c}"] for c in ("Un", "Up", "New", "Del")] == [
        "395.33", "246.49", "301.05", "420.00"]
    assert diff["0809 Avg"] == "334.55"  # 0.5 Un + 0.25 Up + 0.25 New (preprint Fig. 4)
    assert diff["0910 Up"] == "268.58"  # the aligned model, not the one trained through 0809
    assert table3["INITIAL"]["0910 New"] == "429.43"

    ckl = _csv(out / "table_ckl_em.csv")
    assert ckl["DIFF"] == {"Method": "DIFF", "IL EM": "12.89", "UL EM": "10.17", "NL EM": "3.77",
                           "FUAR": "1.08"}
    assert ckl["KADAPTER"]["FUAR"] == "0.43" and ckl["KADAPTER"]["IL EM"] == "14.00"
    assert ckl["INITIAL"]["FUAR"] == "-" and ckl["INITIAL"]["IL EM"] == "19.00"

    markdown = (out / "table_ppl.md").read_text()
    assert "| DIFF | 1.50 h | 395.33 | 246.49 | 301.05 | 420.00 | 334.55 |" in markdown
    assert markdown.startswith("### Zero-shot perplexity on TWiki-Probes (TemporalWiki Table 3)")
    report = (out / "report.md").read_text()
    for name in ("fig3_relative_propn.png", "fig4_probe_average.png", "fig5_misalignment.png"):
        assert f"({name})" in report
        path = out / name
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 20_000
        height, width = mpimg.imread(path).shape[:2]
        assert width >= 600 and height >= 400


def test_two_phase_fuar_from_results(runs):
    index = ResultIndex(read_results(runs))
    result = method_fuar(index, "kadapter")
    # Forgotten: IL@0809 2 (phase 1) + 3 (phase 2) + UNCHANGED@0910 15 -> 14 = 1: 6.
    # Gained: UL@0809 +4, NL@0809 +3 (phase 1), UL@0910 +4, NL@0910 +3 (phase 2): 14.
    assert (result.forgotten, result.gained) == (pytest.approx(6.0), pytest.approx(14.0))
    assert method_fuar(index, "initial") is None


def test_no_gain_prints_in_the_table(tmp_path):
    results = [Result("initial", BASE, "0809", c, "em", v)
               for c, v in (("unchanged", 20.0), ("updated", 5.0), ("new", 5.0))]
    results += [Result("diff", "0809", "0809", c, "em", v)
                for c, v in (("unchanged", 10.0), ("updated", 4.0), ("new", 5.0))]
    table = ckl_table(ResultIndex(results))
    assert table.rows[1] == ["DIFF", "10.00", "4.00", "5.00", "no gain"]


def test_changed_category_gives_the_final_papers_average():
    results = [Result("diff", "0809", "0809", c, "ppl", v)
               for c, v in (("unchanged", 300.0), ("updated", 100.0), ("new", 200.0),
                            ("changed", 150.0))]
    table = probe_table(ResultIndex(results), "ppl")
    assert table.headers == ["Method", "Time", "0809 Un", "0809 Up", "0809 New", "0809 Chg",
                             "0809 Avg"]
    assert table.rows == [["DIFF", "-", "300.00", "100.00", "200.00", "150.00", "225.00"]]


def test_bad_results_line_is_reported_not_raised(tmp_path, capsys):
    (tmp_path / "results.jsonl").write_text('{"method": "diff"}\n')
    assert main(["report", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "results.jsonl, line 1: missing trained_through" in err


def test_training_time_reads_in_the_unit_that_fits():
    from tw_jax.evaluate.report import fmt_hours

    assert [fmt_hours(h) for h in (None, 0.0, 1.5, 0.1, 0.05, 37 / 3600)] == [
        "-", "0 h", "1.50 h", "0.10 h", "3.0 min", "37 s"]


def test_ecbd_lines_in_the_same_results_file_change_no_table(runs, tmp_path, capsys):
    """ECBD's cells share results.jsonl; tw-jax report leaves them to tw-jax ecbd report and
    says so: every table it writes is byte for byte what it was without them."""
    from tw_jax.evaluate import ecbd
    from tw_jax.evaluate.report import tabulated, tabulated_elsewhere

    assert main(["report", str(runs[0]), str(runs[1]), "--out", str(tmp_path / "before")]) == 0
    cells = [ecbd.EcbdResult("t5", "2019", "test", "original", span_type, metric, 12.5, 3, 2)
             for span_type in ("all", "NP") for metric in ("ppl", "ppl_entity")]
    ecbd.append_results(runs[0], cells)
    rows = read_results(runs)
    assert tabulated_elsewhere(rows) == {"tw-jax ecbd report": 8}  # 4 values, 2 cells × 2 counts
    assert len([r for r in rows if tabulated(r)]) == len(_results())
    assert ResultIndex(rows).values == ResultIndex(_results()).values
    assert main(["report", str(runs[0]), str(runs[1]), "--out", str(tmp_path / "after")]) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in (tmp_path / "before").iterdir()
              if p.suffix in (".md", ".csv") and p.name != "report.md"}
    after = {p.name: p.read_bytes() for p in (tmp_path / "after").iterdir()
             if p.suffix in (".md", ".csv") and p.name != "report.md"}
    assert after == before and "table_ppl.csv" in after
    first, *rest = (tmp_path / "after" / "report.md").read_text().split("\n\n")
    old_first, *old_rest = (tmp_path / "before" / "report.md").read_text().split("\n\n")
    assert first == old_first == "# Evaluation report" and rest[1:] == old_rest[1:]
    sources = f"`{runs[0] / 'results.jsonl'}`, `{runs[1] / 'results.jsonl'}`"
    assert old_rest[0] == f"{len(_results())} results from {sources}."
    assert rest[0] == f"{old_rest[0]} 8 more are tabulated by `tw-jax ecbd report`."
    assert main(["ecbd", "report", str(runs[0])]) == 0
    assert "| t5 | ORIGINAL | 12.50 |" in capsys.readouterr().out
