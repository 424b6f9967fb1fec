"""CKL's phases as a data folder the lifelong runner reads (``tw-jax ckl phases``).

The runner (:mod:`tw_jax.lifelong.runner`) trains month pair after month pair from
``DATA/<MMMM>/ssm`` and scores each checkpoint on ``DATA/<MMMM>/probes``. CKL's phases (CKL §5.2:
Small-P1 → Small-P2, each continued from the previous one, D_0 being T5's own pretraining) become
pseudo month pairs ``0001, 0102, …`` (phase ``i`` is ``{i-1:02d}{i:02d}``), so
``tw-jax lifelong --months 0001,0102 --initial-checkpoint t5-large-ssm/`` runs them unchanged:

- ``DATA/<pair>/ssm/diffset.tfrecord-*``: the phase's SSM corpus (``recent_news_*.csv``:
  ``input`` → ``inputs``, ``output`` → ``targets``), what the runner trains on
  (``twiki_diffset_<pair>_ssm``);
- ``DATA/<pair>/probes/{unchanged,updated,new,deleted}.csv``: the phase's probes in the probes
  stage's columns: ``unchanged`` InvariantLAMA, ``updated`` the phase's UpdatedLAMA-like set,
  ``new`` its acquisition set (NewLAMA, or NewLAMA-Easy's split as in CKL Table 3), ``deleted``
  empty. A cloze row has ``subject`` = the set's name, ``relation`` = its id, ``object`` = the
  answer and ``text`` = ``cloze`` = the statement with the answer filled in, so the runner's
  ``ppl_cloze`` (T5: the answer given the masked statement) and GPT-2's ``ppl`` (the statement)
  are meaningful; ``ppl``/``qa`` for T5 prompt ``subject relation <extra_id_0>`` and are not
  (and the runner's ``qa`` would write ``em`` lines under the keys ``eval-phases`` fills);
- ``DATA/<pair>/ckl/``: the phase's sets in CKL's released format (every accepted answer kept),
  which ``tw-jax ckl eval-phases`` scores by EM at CKL's lengths;
- ``DATA/00/ssm/full.tfrecord-*`` (optional): the initial corpus Mix-Review replays
  (``wikipedia_pretrain*.csv``), the runner's ``twiki_mixreview_<pair>_ssm``;
- ``DATA/vocab/t5/spiece.model`` (optional): the T5 vocabulary the runner's tasks load;
- ``DATA/ckl_phases.json``, written last: the phases, their sources, which task holds each
  results category, and counts.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.io.atomic import atomic_open, discard, write_json
from tw_jax.io.tfrecord import ShardedTFRecordWriter, encode_example
from tw_jax.preprocess.ckl.release import (
    LamaRow,
    answers_json_text,
    iter_ssm_pairs,
    lama_csv_text,
)
from tw_jax.preprocess.ckl.release_files import find_files, lama_files, read_lama_set
from tw_jax.preprocess.probes.probe_csv import masked_cloze, read_probe_csv
from tw_jax.preprocess.probes.records import PREVIOUS_SEPARATOR, Probe, csv_text
from tw_jax.preprocess.runners.accounting import STATS_FILE
from tw_jax.time import Period

MANIFEST = "ckl_phases.json"
PROBE_CATEGORIES = ("unchanged", "updated", "new", "deleted")
INITIAL_MONTH = "00"


@dataclass(frozen=True)
class PhaseSpec:
    """File names (in the CKL folder or zip) of one phase's corpus and probe sets."""

    corpus: str
    updated: str | None = None
    new: str | None = None
    new_easy: str | None = None


# CKL's phases are named as periods of the 2021 layout (tw_jax.time): D_0 is its month 00, and
# phase i runs from month i-1 to month i, a chain the runner reads in order up to 0708 (2022-07
# to 2022-08); the next name, 0809, is 2021's first period and would end the chain.
MAX_PHASES = 8


def pair_id(phase: int) -> str:
    """The pseudo period of phase ``phase`` (1-based): 1 → ``0001``, 2 → ``0102``."""
    if not 1 <= phase <= MAX_PHASES:
        raise ValueError(f"phase {phase} is outside 1..{MAX_PHASES} (CKL's phases are named as "
                         f"the months 00..{MAX_PHASES:02d} of the 2021 layout)")
    return Period.parse(f"{phase - 1:02d}{phase:02d}").name


def probe_csv_text(rows: Sequence[LamaRow], label: str, category: str) -> tuple[str, int]:
    """The probes CSV of cloze rows (module docstring) and how many rows lack a cloze that
    gives their statement back (the answer also occurs after the sentinel)."""

    probes, lost = [], 0
    for row in rows:
        filled = row.filled()
        cloze = filled
        if masked_cloze({"cloze": filled, "object": row.answers[0]}) != row.statement:
            cloze, lost = "", lost + 1
        probes.append(Probe(label, row.id, row.answers[0], "", "", "",
                            PREVIOUS_SEPARATOR.join(row.previous), filled, cloze, category, ""))
    return csv_text(probes), lost


def _write(path: str, text: str) -> None:
    with atomic_open(path, "w", encoding="utf-8", newline="") as handle:
        handle.write(text)


def _copy(source: str, target: str) -> None:
    """Copies one file atomically, between any two places (local, ``gs://``)."""
    with paths.open_file(source, "rb") as reader, atomic_open(target, "wb") as writer:
        shutil.copyfileobj(reader, writer, 8 << 20)


def write_ssm(file: Any, prefix: str) -> dict[str, int]:
    """TFRecords (``inputs``, ``targets``) of an SSM CSV under ``prefix``; their counts."""
    paths.remove_matching(f"{prefix}-*")  # shards of an earlier layout match the task's pattern
    skipped: list[int] = []
    writer = ShardedTFRecordWriter(prefix)
    examples = 0
    try:
        with file.open_text() as handle:
            for inputs, targets in iter_ssm_pairs(handle, file.name, skipped):
                writer.write(encode_example({"inputs": inputs, "targets": targets}))
                examples += 1
        writer.commit()
    except BaseException:
        writer.abort()
        raise
    if not examples:
        raise DumpError(file.name, None, "no example with both input and output")
    return {"examples": examples, "skipped_empty": len(skipped)}


def layout_phases(
    source: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    phases: Sequence[PhaseSpec],
    *,
    invariant: str = "invariantLAMA.csv",
    initial_corpus: str | None = None,
    t5_vocab: str | os.PathLike[str] | None = None,
) -> dict[str, Any]:
    """Writes the phases folder (module docstring) and returns its manifest.

    ``out_dir`` and ``t5_vocab`` may be local paths or ``gs://`` URLs; the manifest is written
    last, so the folder is complete exactly when it exists.
    """

    if not phases:
        raise ValueError("no phases given (one --corpus per phase)")
    out = os.fspath(out_dir)
    paths.makedirs(out)
    discard(paths.join(out, MANIFEST))
    files = find_files(source)
    by_name = {name: (task, spec) for task, (name, spec) in lama_files(files).items()}

    def task_of(name: str | None, role: str) -> str | None:
        if name is None:
            return None
        if name not in by_name:
            known = ", ".join(sorted(by_name)) or "none"
            raise DumpError(os.fspath(source), None,
                            f"{role}: no CKL probe file named {name} (found: {known})")
        return by_name[name][0]

    def corpus(name: str) -> Any:
        if name not in files:
            raise DumpError(os.fspath(source), None, f"no corpus file named {name}")
        return files[name]

    invariant_task = task_of(invariant, "--invariant")
    manifest: dict[str, Any] = {"source": os.fspath(source), "phases": []}
    for index, spec in enumerate(phases, start=1):
        pair = pair_id(index)
        folder = paths.join(out, pair)
        names = {"unchanged": invariant, "updated": spec.updated, "new": spec.new,
                 "new_easy": spec.new_easy}
        sets = {c: task_of(n, f"phase {index} {c}") for c, n in names.items()}
        counts: dict[str, Any] = {"ssm": write_ssm(
            corpus(spec.corpus), paths.join(folder, "ssm", "diffset.tfrecord"))}
        for category, name in names.items():
            rows: list[LamaRow] = []
            if name is not None:
                _, lama = by_name[name]
                rows = read_lama_set(files, name, lama)
                _write(paths.join(folder, "ckl", name), lama_csv_text(rows, lama.kind))
                _write(paths.join(folder, "ckl", f"{name[:-4]}_answers.json"),
                       answers_json_text(rows, lama.kind))
            if category in PROBE_CATEGORIES:
                label = by_name[name][1].label if name is not None else category
                text, lost = probe_csv_text(rows, label, category)
                _write(paths.join(folder, "probes", f"{category}.csv"), text)
                counts[category] = {"probes": len(rows), "without_cloze": lost}
        _write(paths.join(folder, "probes", "deleted.csv"), probe_csv_text([], "", "deleted")[0])
        _record_stage(paths.join(folder, "ssm"), {"inputs": ["diffset"], "diffset": counts["ssm"]})
        _record_stage(paths.join(folder, "probes"), {"categories": {
            c: {"final": len(read_probe_csv(paths.join(folder, "probes", f"{c}.csv")))}
            for c in (*PROBE_CATEGORIES, "deleted") if c in counts or c == "deleted"},
            "lighttuning": {}})
        manifest["phases"].append({"pair": pair, "corpus": spec.corpus, "files": names,
                                   "sets": sets, "counts": counts})
    if initial_corpus is not None:
        prefix = paths.join(out, INITIAL_MONTH, "ssm", "full.tfrecord")
        manifest["initial_corpus"] = {"file": initial_corpus,
                                      **write_ssm(corpus(initial_corpus), prefix)}
        _record_stage(paths.join(out, INITIAL_MONTH, "ssm"), {
            "inputs": ["full"], "full": {"examples": manifest["initial_corpus"]["examples"]}})
    if t5_vocab is not None:
        _copy(os.fspath(t5_vocab), paths.join(out, "vocab", "t5", "spiece.model"))
        manifest["t5_vocab"] = os.fspath(t5_vocab)
    manifest["invariant"] = invariant_task
    write_json(paths.join(out, MANIFEST), manifest)
    return manifest


def _record_stage(folder: str, stats: dict[str, Any]) -> None:
    """The folder's ``stats.json``, written last, in the schema of the stage whose files it holds
    (``tw-jax ssm``'s examples per input, ``tw-jax probes``' rows per category): the readers of
    a stage's folder check its files against it (:mod:`tw_jax.preprocess.runners.whole`)."""
    write_json(paths.join(folder, STATS_FILE), {**stats, "written_by": "tw-jax ckl phases"})


def phase_summary(manifest: Mapping[str, Any]) -> list[str]:
    """One line per phase: its pair, corpus size and probe counts (what the CLI prints)."""
    lines = []
    for phase in manifest["phases"]:
        counts = phase["counts"]
        probes = ", ".join(f"{c} {counts[c]['probes']}" for c in PROBE_CATEGORIES[:3]
                           if c in counts)
        sets = ", ".join(f"{c}={t}" for c, t in phase["sets"].items() if t)
        lines.append(f"{phase['pair']}: {counts['ssm']['examples']} SSM examples from "
                     f"{phase['corpus']}; probes {probes}; sets {sets}")
    return lines
