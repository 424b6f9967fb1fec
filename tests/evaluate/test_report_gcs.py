"""``results.jsonl`` and ``tw-jax report`` in a bucket (the local GCS server): the same files,
byte for byte, as the same report run on local folders."""

from __future__ import annotations

import io

import matplotlib.image as mpimg
import pytest
from gcs_upload import upload_tree
from test_report_render import _results

from tw_jax.cli import main
from tw_jax.evaluate.results import append_results, read_results, results_path
from tw_jax.io import paths

FIGURES = ("fig1_learned_kept.png", "fig3_relative_propn.png", "fig4_probe_average.png",
           "fig5_misalignment.png")


def _split(results):
    return ([r for r in results if r.method != "kadapter"],
            [r for r in results if r.method == "kadapter"])


def test_results_appended_in_a_bucket_equal_the_local_file(gcs_bucket, gcs_server, tmp_path):
    first, second = _split(_results())
    for run in (str(tmp_path / "run"), f"{gcs_bucket}/run"):
        assert append_results(run, first[:5]) == results_path(run)
        append_results(run, first[5:])
        append_results(run, [])
        append_results(run, second)
    local = (tmp_path / "run" / "results.jsonl").read_bytes()
    assert paths.read_bytes(f"{gcs_bucket}/run/results.jsonl") == local
    assert local.count(b"\n") == len(first) + len(second)
    assert gcs_server.objects(gcs_bucket[5:], "run/") == ["run/results.jsonl"]  # no temporaries
    assert str(results_path(f"{gcs_bucket}/run")) == f"{gcs_bucket}/run/results.jsonl"
    remote = read_results([f"{gcs_bucket}/run"])
    assert [r.key for r in remote] == [r.key for r in read_results([tmp_path / "run"])]
    assert [r.value for r in remote] == [r.value for r in first + second]


def test_report_from_and_into_a_bucket_equals_the_local_report(gcs_bucket, gcs_server, tmp_path,
                                                               capsys):
    first, second = _split(_results())
    append_results(tmp_path / "run_a", first)
    append_results(tmp_path / "run_b", second)
    upload_tree(tmp_path / "run_a", f"{gcs_bucket}/run_a")
    upload_tree(tmp_path / "run_b", f"{gcs_bucket}/run_b")
    local_runs = [str(tmp_path / "run_a"), str(tmp_path / "run_b")]
    remote_runs = [f"{gcs_bucket}/run_a", f"{gcs_bucket}/run_b/results.jsonl"]

    assert main(["report", *local_runs, "--out", str(tmp_path / "report")]) == 0
    assert main(["report", *remote_runs, "--out", f"{gcs_bucket}/report/"]) == 0
    assert f"report: {gcs_bucket}/report/report.md (4 tables, 4 figures)" in capsys.readouterr().out

    local_names = sorted(p.name for p in (tmp_path / "report").iterdir())
    assert local_names == sorted(["report.md", *FIGURES, "table_ppl.md", "table_ppl.csv",
                                  "table_em.md", "table_em.csv", "table_ckl_em.md",
                                  "table_ckl_em.csv", "summary_ppl.md", "summary_ppl.csv"])
    remote_names = [n[len("report/"):] for n in gcs_server.objects(gcs_bucket[5:], "report/")]
    assert remote_names == local_names  # and no temporaries left behind

    local_report = (tmp_path / "report" / "report.md").read_text(encoding="utf-8")
    remote_report = paths.read_text(f"{gcs_bucket}/report/report.md")
    sources = (f"`{tmp_path / 'run_a' / 'results.jsonl'}`, `{tmp_path / 'run_b' / 'results.jsonl'}`",
               f"`{gcs_bucket}/run_a/results.jsonl`, `{gcs_bucket}/run_b/results.jsonl`")
    assert sources[0] in local_report and sources[1] in remote_report
    assert remote_report.encode() == local_report.replace(*sources).encode()
    for name in local_names:
        if name == "report.md":
            continue
        remote = paths.read_bytes(f"{gcs_bucket}/report/{name}")
        if name.endswith(".png"):
            assert remote[:8] == b"\x89PNG\r\n\x1a\n"
            height, width = mpimg.imread(io.BytesIO(remote), format="png").shape[:2]
            assert width >= 600 and height >= 400
        assert remote == (tmp_path / "report" / name).read_bytes(), name


def test_default_report_folder_is_beside_the_results_in_the_bucket(gcs_bucket, capsys):
    append_results(f"{gcs_bucket}/run", _results())
    assert main(["report", f"{gcs_bucket}/run"]) == 0
    assert f"{gcs_bucket}/run/report/report.md" in capsys.readouterr().out
    assert paths.read_text(f"{gcs_bucket}/run/report/report.md").startswith(
        f"# Evaluation report\n\n{len(_results())} results from `{gcs_bucket}/run/results.jsonl`")


def test_a_missing_bucket_or_run_is_one_line(gcs_bucket, capsys):
    with pytest.raises(SystemExit) as exited:
        main(["report", "gs://no-such-bucket-tw/run"])
    assert exited.value.code == 2
    assert "gs://no-such-bucket-tw/run: bucket 'no-such-bucket-tw' does not exist" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["report", f"{gcs_bucket}/never-written"])
    assert f"{gcs_bucket}/never-written: no such object or folder" in capsys.readouterr().err
