"""A report opens with the story (what each update learned and kept, against INITIAL) and lists,
instead of printing, accuracy tables in which no model reaches 1%."""

from __future__ import annotations

from tw_jax.cli import main
from tw_jax.evaluate.report import ResultIndex, all_tables
from tw_jax.evaluate.results import BASE, NO_MONTH, Result, append_results
from tw_jax.evaluate.summary import summary_table, without_signal

PPL = {  # (method, trained_through): (unchanged, updated, new) on 0910's probes
    ("initial", BASE): (100.0, 300.0, 200.0),
    ("diff", "0910"): (150.0, 90.0, 50.0),
    ("lora", "0910"): (95.0, 280.0, 180.0),
}


def _results(em: float) -> list[Result]:
    out = []
    for (method, trained), values in PPL.items():
        for category, value in zip(("unchanged", "updated", "new"), values, strict=True):
            out.append(Result(method, trained, "0910", category, "ppl", value))
            out.append(Result(method, trained, "0910", category, "em", em))
    out.append(Result("diff", "0910", NO_MONTH, "all", "train_seconds", 30.0))
    return out


def test_the_summary_sets_what_was_kept_against_what_was_learned():
    table = summary_table(ResultIndex(_results(em=0.0)))
    assert table.headers == ["Method", "Time", "Un (kept)", "New (learned)", "Avg",
                             "Un vs INITIAL", "New vs INITIAL"]
    assert table.rows == [
        ["INITIAL", "0 h", "100.00", "200.00", "175.00", "-", "-"],  # 0.5 Un + 0.25 (Up + New)
        ["DIFF", "30 s", "150.00", "50.00", "110.00", "+50%", "-75%"],
        ["LORA", "-", "95.00", "180.00", "162.50", "-5%", "-10%"],
    ]
    assert table.title == "Summary: what each update learned and kept (0910)"


def test_accuracy_tables_without_signal_are_listed_not_printed(tmp_path, capsys):
    tables = all_tables(ResultIndex(_results(em=0.5)))
    assert without_signal(tables) == {"table_em": 0.5, "table_ckl_em": 0.5}
    assert without_signal(all_tables(ResultIndex(_results(em=1.0)))) == {}

    append_results(tmp_path / "run", _results(em=0.5))
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")]) == 0
    capsys.readouterr()
    report = (tmp_path / "report" / "report.md").read_text()
    first_table = report.index("### ")
    assert report[first_table:].startswith("### Summary: what each update learned and kept (0910)")
    assert report.index("![fig4_probe_average]") < report.index("### Zero-shot perplexity")
    assert ("Not shown here, because no model reaches 1% on any probe set, so they tell nothing "
            "(their files are written): `table_em.md` (best 0.50%), `table_ckl_em.md` (best 0.50%).") in report
    assert "### em on TWiki-Probes" not in report
    assert (tmp_path / "report" / "table_em.md").exists()
    assert (tmp_path / "report" / "summary_ppl.csv").read_text().splitlines()[2].startswith(
        "DIFF,30 s,150.00,50.00,110.00,+50%,-75%")


def test_the_report_opens_with_diff_against_full_and_what_each_update_cost(tmp_path, capsys):
    """TemporalWiki's headline measured: DIFF against FULL on the learned and the kept facts,
    at what share of FULL's tokens; tokens and FLOPs per update beside the scores."""
    results = _results(em=0.0)
    for category, value in zip(("unchanged", "updated", "new"), (120.0, 100.0, 52.0),
                               strict=True):
        results.append(Result("full", "0910", "0910", category, "ppl", value))
    for method, tokens, flops in (("diff", 1000.0, 2e9), ("full", 12000.0, 2.4e10)):
        results += [Result(method, "0910", NO_MONTH, "all", "train_tokens", tokens),
                    Result(method, "0910", NO_MONTH, "all", "train_flops", flops)]
    table = summary_table(ResultIndex(results))
    assert table.headers[-2:] == ["Tokens", "FLOPs"]
    rows = {row[0]: row for row in table.rows}
    assert rows["DIFF"][-2:] == ["1K", "2B"] and rows["FULL"][-2:] == ["12K", "24B"]
    assert rows["INITIAL"][-2:] == ["-", "-"]
    headline = ("DIFF against FULL (ppl, 0910): on NEW 50.00 against 52.00 (-4%); on UNCHANGED "
                "150.00 against 120.00 (+25%), training on 8.3% of FULL's tokens (1K against "
                "12K per update); so here, as in TemporalWiki, DIFF is about as good as FULL "
                "(within 5%) on what changed.")
    assert table.notes[0] == headline

    append_results(tmp_path / "run", results)
    assert main(["report", str(tmp_path / "run"), "--out", str(tmp_path / "report")]) == 0
    capsys.readouterr()
    report = (tmp_path / "report" / "report.md").read_text()
    assert report.split("\n\n")[2] == headline  # the first lines, under the results' source
    # learning read against cost: a figure of it, with its sentence, before the summary
    assert (tmp_path / "report" / "fig6_learned_cost.png").stat().st_size > 1000
    assert report.index("![fig6_learned_cost]") < report.index("### Summary")
