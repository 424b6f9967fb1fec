"""The TemporalWiki stages with the local runner on a bucket of the test GCS server: `tw-jax
diffset`, `probes` and `ssm` read their dumps and the previous stage's folder from gs:// and
write there exactly the files of the same run in a local folder, stats.json last; a missing
object or bucket is one line and exit status 2; a relative --out is resolved."""

from __future__ import annotations

import json

import pytest
from gcs_compare import (
    assert_no_local_gs_folder,
    assert_same_outputs,
    assert_written_last,
    bucket_files,
    local_files,
)

from tw_jax.cli import main
from tw_jax.io import paths
from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump

TIMINGS = ("seconds",)


@pytest.fixture(autouse=True)
def _in_tmp_path(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)


def _upload(local, url):
    paths.copy(local, url)
    return url


def _run(argv, capsys):
    assert main(argv) == 0
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def test_diffset_probes_and_ssm_in_a_bucket_equal_the_local_run(sample_world, gcs_bucket,
                                                                gcs_server, tmp_path, capsys):
    root, _ = sample_world
    dumps = {
        "wp_old": wikipedia_dump(root, "2021-08"), "wp_new": wikipedia_dump(root, "2021-09"),
        "wd_old": wikidata_dump(root, "2021-08"), "wd_new": wikidata_dump(root, "2021-09"),
    }
    remote = {k: _upload(v, f"{gcs_bucket}/dumps/{v.name}") for k, v in dumps.items()}
    renamed = {remote[k]: str(dumps[k]) for k in dumps}
    local_out, remote_out = tmp_path / "0809", f"{gcs_bucket}/data/0809"
    renamed[remote_out] = str(local_out)

    for files, out in ((dumps, str(local_out)), (remote, remote_out)):
        _run(["diffset", "--old", str(files["wp_old"]), "--new", str(files["wp_new"]),
              "--out", f"{out}/diffset", "--workers", "2"], capsys)
        _run(["probes", "--old", str(files["wd_old"]), "--new", str(files["wd_new"]),
              "--wikipedia", str(files["wp_new"]), "--diffset", f"{out}/diffset",
              "--out", f"{out}/probes", "--workers", "2"], capsys)
        _run(["ssm", "--in", f"{out}/diffset", "--out", f"{out}/ssm", "--inputs", "diffset",
              "--workers", "1"], capsys)

    for stage in ("diffset", "probes", "ssm"):
        local, bucket = local_files(local_out / stage), bucket_files(gcs_server,
                                                                     f"{remote_out}/{stage}")
        assert "stats.json" in local and len(local) >= 2
        assert_same_outputs(local, bucket, renamed, TIMINGS)
        assert_written_last(gcs_server, f"{remote_out}/{stage}", "stats.json")
    assert_no_local_gs_folder()


def test_a_missing_object_or_bucket_is_one_line(sample_world, gcs_bucket, capsys):
    root, _ = sample_world
    missing = f"{gcs_bucket}/dumps/nothing.xml.bz2"
    with pytest.raises(SystemExit) as stopped:
        main(["diffset", "--new", missing, "--out", f"{gcs_bucket}/out"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        f"tw-jax diffset: error: argument --new: {missing}: no such object or folder"]

    with pytest.raises(SystemExit) as stopped:
        main(["ssm", "--in", str(root), "--out", "gs://tw-jax-no-such-bucket/ssm"])
    assert stopped.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "tw-jax ssm: error: argument --out: gs://tw-jax-no-such-bucket/ssm: bucket "
        "'tw-jax-no-such-bucket' does not exist (or is not visible with these credentials)"]
    assert_no_local_gs_folder()


def test_a_relative_out_is_resolved(sample_world, tmp_path, capsys):
    root, _ = sample_world
    summary = _run(["diffset", "--new", str(wikipedia_dump(root, "2021-08")), "--out",
                    "rel/08"], capsys)
    assert summary["out"] == str(tmp_path / "rel" / "08")
    assert (tmp_path / "rel" / "08" / "stats.json").is_file()


def test_an_uncompressed_dump_in_a_bucket_reads_as_a_local_one(sample_world, gcs_bucket,
                                                               gcs_server, tmp_path, capsys):
    import bz2

    root, _ = sample_world
    plain = tmp_path / "enwiki-20210801-pages-articles.xml"
    plain.write_bytes(bz2.decompress(wikipedia_dump(root, "2021-08").read_bytes()))
    remote = _upload(plain, f"{gcs_bucket}/dumps/{plain.name}")
    _run(["diffset", "--new", str(plain), "--out", str(tmp_path / "local")], capsys)
    _run(["diffset", "--new", remote, "--out", f"{gcs_bucket}/out"], capsys)
    assert_same_outputs(local_files(tmp_path / "local"), bucket_files(gcs_server,
                        f"{gcs_bucket}/out"), {remote: str(plain),
                        f"{gcs_bucket}/out": str(tmp_path / "local")}, TIMINGS)
