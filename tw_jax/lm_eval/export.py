"""TWiki-Probes as lm-evaluation-harness tasks: YAML configs and their documents, from a data folder.

``tw-jax lm-eval-tasks --data DATA --out DIR`` writes, for every period and probe category of
``DATA`` (:func:`tw_jax.tasks.layout.discover`; the CSVs read through
:func:`tw_jax.preprocess.probes.probe_csv.read_stage_probes`, so a CSV that its ``stats.json``
does not vouch for is refused) three tasks named after the SeqIO tasks
(:mod:`tw_jax.tasks.probes`), and ``changed`` (UPDATED then NEW) as SeqIO has it:

==========================================  =======================  ==============================
lm-eval task                                ``output_type``          scores (lm-eval metrics)
==========================================  =======================  ==============================
``twiki_probes_<P>_<category>``             loglikelihood_rolling    the probe text ``subject
                                                                     relation object`` (SeqIO's
                                                                     text format): word_perplexity,
                                                                     byte_perplexity, bits_per_byte
``twiki_probes_<P>_<category>_object``      loglikelihood            `` object`` after ``subject
                                                                     relation`` (SeqIO's
                                                                     ``_object``): perplexity, acc
                                                                     (whether greedy decoding
                                                                     gives the object)
``twiki_probes_<P>_<category>_object_gen``  generate_until           the object generated after the
                                                                     prompt: em, f1 (tw_jax's SQuAD
                                                                     normalisation, in percent)
==========================================  =======================  ==============================

Groups: ``twiki_probes_<P>`` (a period's tasks) and ``twiki_probes`` (every period's); tags
``twiki_probes_text``, ``twiki_probes_object``, ``twiki_probes_object_gen`` (one format of every
period). A category without rows (a month that deleted no fact) has no task: lm-eval cannot
evaluate an empty set.

Layout of ``DIR``: ``<task>.yaml`` per task, ``<group>.yaml`` per group, ``utils.py`` (the
generation tasks' scoring, :mod:`tw_jax.lm_eval.probe_utils`, standard library only) and
``docs/<period>_<category>.jsonl`` (one document per probe, in the CSV's order, which the three
tasks of a category share). A document holds the probe's fields, ``id`` (``<period>/<category>/
<row>``), ``key`` (the per-probe key of :func:`tw_jax.evaluate.per_probe.probe_keys`), ``prompt``
and ``target`` (SeqIO's ``_object`` texts) and ``text`` (its probe text). The configs use
``dataset_path: json`` with the documents' absolute paths, so nothing is fetched from a hub;
move the folder and export again.

The texts are tw_jax's definition exactly (``docs/lm_eval.md`` says how lm-eval's backends frame
them: the ``hf`` backend starts a text with BOS only where its tokenizer adds one).

Beside them, :func:`export_all` writes the sibling benchmarks' sets the data folder holds
(``DATA/ckl``, ``DATA/ecbd``, ``DATA/qa``, or folders given): CKL's LAMA sets, ECBD's spans and
EvolvingQA's questions, :mod:`tw_jax.lm_eval.siblings`. :func:`export_tasks` is the same export,
returning the probes' tasks.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from tw_jax.evaluate.per_probe import probe_keys
from tw_jax.io import paths
from tw_jax.lm_eval import siblings as siblings_module
from tw_jax.lm_eval.task_files import group_yaml, scalar, write
from tw_jax.preprocess.probes.probe_csv import read_stage_probes
from tw_jax.tasks import names
from tw_jax.tasks.layout import discover, join
from tw_jax.tasks.probes import CATEGORIES, format_lm, format_lm_object
from tw_jax.time import Period

BENCHMARK = names.PROBES  # the whole benchmark's group
UTILS = "utils.py"
DOCS = "docs"
# format -> (task-name suffix, output_type); the suffixes are the SeqIO tasks' where they exist
FORMATS: dict[str, tuple[str, str]] = {
    "text": ("", "loglikelihood_rolling"),
    "object": ("_object", "loglikelihood"),
    "object_gen": ("_object_gen", "generate_until"),
}
DEFAULT_MAX_GEN_TOKS = 16


@dataclass(frozen=True)
class ExportedTask:
    """One written task: its name, period, category, format and documents file."""

    name: str
    period: Period
    category: str
    fmt: str
    docs: str


def probe_documents(rows: Sequence[Mapping[str, str]], period: Period,
                    category: str) -> list[dict[str, str]]:
    """One lm-eval document per probe row (see the module docstring for the fields)."""
    keys = probe_keys(rows)
    documents = []
    for index, (row, key) in enumerate(zip(rows, keys.tolist(), strict=True)):
        prompted = format_lm_object(row)
        documents.append({
            "id": f"{period.name}/{category}/{index}", "key": str(key), "period": period.name,
            "category": category, "subject": row["subject"], "relation": row["relation"],
            "object": row["object"], "previous_object": row.get("previous_object", ""),
            "prompt": prompted["inputs"], "target": prompted["targets"],
            "text": format_lm(row)["targets"]})
    return documents


_scalar = scalar
_write = write


@dataclass
class ExportResult:
    """What :func:`export_all` wrote: the probes' tasks and the sibling benchmarks'."""

    probes: list[ExportedTask] = field(default_factory=list)
    siblings: siblings_module.SiblingExport = field(
        default_factory=siblings_module.SiblingExport)


def task_yaml(name: str, fmt: str, docs_path: str, *, max_gen_toks: int) -> str:
    """The lm-eval config of one task (its documents at ``docs_path``, absolute)."""
    _, output_type = FORMATS[fmt]
    lines = [
        f"task: {name}",
        f"tag: [{BENCHMARK}_{fmt}]",
        "dataset_path: json",
        "dataset_kwargs:",
        "  data_files:",
        f"    test: {_scalar(docs_path)}",
        "test_split: test",
        f"output_type: {output_type}",
    ]
    if fmt == "text":
        # the whole probe sentence from the start of text (lm-eval puts its prefix token first)
        lines += ['doc_to_text: ""', "doc_to_target: text", "metric_list:"]
        for metric, aggregation in (("word_perplexity", "weighted_perplexity"),
                                    ("byte_perplexity", "weighted_perplexity"),
                                    ("bits_per_byte", "bits_per_byte")):
            lines += [f"  - metric: {metric}", f"    aggregation: {aggregation}",
                      "    higher_is_better: false"]
    elif fmt == "object":
        # the target carries its leading space (tw_jax's ``_object`` format), so no delimiter
        lines += ["doc_to_text: prompt", "doc_to_target: target", 'target_delimiter: ""',
                  "metric_list:",
                  "  - metric: perplexity", "    aggregation: perplexity",
                  "    higher_is_better: false",
                  "  - metric: acc", "    aggregation: mean", "    higher_is_better: true"]
    else:
        lines += ["doc_to_text: prompt", "doc_to_target: object", 'target_delimiter: ""',
                  "generation_kwargs:", f'  until: [{_scalar(chr(10))}]',
                  f"  max_gen_toks: {int(max_gen_toks)}", "  do_sample: false",
                  "process_results: !function utils.process_generation",
                  "metric_list:",
                  "  - metric: em", "    aggregation: mean", "    higher_is_better: true",
                  "  - metric: f1", "    aggregation: mean", "    higher_is_better: true"]
    lines += ["metadata:", "  version: 1.0", ""]
    return "\n".join(lines)


def _category_rows(probes: str) -> dict[str, list[dict[str, str]]]:
    """``{category: rows}`` of one ``probes/`` folder (``changed``: UPDATED then NEW, as SeqIO's
    task), for the CSVs present."""
    found = {c: read_stage_probes(join(probes, f"{c}.csv")) for c in CATEGORIES
             if paths.isfile(join(probes, f"{c}.csv"))}
    if "updated" in found and "new" in found:
        found["changed"] = [*found["updated"], *found["new"]]
    return found


def export_tasks(data_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                 formats: Sequence[str] = tuple(FORMATS),
                 max_gen_toks: int = DEFAULT_MAX_GEN_TOKS,
                 folders: Mapping[str, str | os.PathLike[str] | None] | None = None,
                 siblings: bool = True) -> list[ExportedTask]:
    """:func:`export_all`, returning the probes' tasks in order."""
    return export_all(data_dir, out_dir, formats=formats, max_gen_toks=max_gen_toks,
                      folders=folders, siblings=siblings).probes


def export_all(data_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
               formats: Sequence[str] = tuple(FORMATS),
               max_gen_toks: int = DEFAULT_MAX_GEN_TOKS,
               folders: Mapping[str, str | os.PathLike[str] | None] | None = None,
               siblings: bool = True) -> ExportResult:
    """Write the lm-eval tasks of every period × category of ``data_dir`` under ``out_dir``
    (a local folder: lm-eval reads it by path), and (``siblings``) those of the CKL, ECBD and
    EvolvingQA sets it holds or ``folders`` gives (:func:`tw_jax.lm_eval.siblings.
    export_siblings`); ``formats`` are the probes'. Nothing found at all is a ValueError."""
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"unknown formats {unknown}; known: {', '.join(FORMATS)}")
    out = Path(out_dir).resolve()
    (out / DOCS).mkdir(parents=True, exist_ok=True)
    result = ExportResult(probes=_export_probes(data_dir, out, formats, max_gen_toks))
    if siblings:
        result.siblings = siblings_module.export_siblings(data_dir, out, folders=folders,
                                                          max_gen_toks=max_gen_toks)
    if not result.probes and not result.siblings.tasks:
        raise ValueError(f"{data_dir}: no probes found (expected DATA/<period>/probes/"
                         f"{{{','.join(CATEGORIES)}}}.csv, as tw-jax build writes them), "
                         "nor CKL, ECBD or EvolvingQA sets (DATA/ckl, DATA/ecbd, DATA/qa)")
    if result.siblings.tasks:
        _write(str(out / siblings_module.MANIFEST),
               json.dumps(siblings_module.manifest(result.siblings), indent=1,
                          ensure_ascii=False) + "\n")
    _write(str(out / UTILS), Path(__file__).with_name("probe_utils.py").read_text("utf-8"))
    return result


def _export_probes(data_dir: str | os.PathLike[str], out: Path, formats: Sequence[str],
                   max_gen_toks: int) -> list[ExportedTask]:
    """The probes' tasks and groups (``twiki_probes`` only when there are some)."""
    layout = discover(data_dir)
    exported: list[ExportedTask] = []
    period_groups = []
    for period in sorted(layout.pairs):
        pair = layout.pairs[period]
        if not paths.isdir(pair.probes):
            continue
        members = []
        for category, rows in _category_rows(pair.probes).items():
            if not rows:
                continue
            docs_path = out / DOCS / f"{period.name}_{category}.jsonl"
            _write(str(docs_path), "".join(json.dumps(d, ensure_ascii=False) + "\n"
                                           for d in probe_documents(rows, period, category)))
            for fmt in formats:
                name = names.probes(period, category, FORMATS[fmt][0])
                _write(str(out / f"{name}.yaml"),
                       task_yaml(name, fmt, str(docs_path), max_gen_toks=max_gen_toks))
                exported.append(ExportedTask(name, period, category, fmt, str(docs_path)))
                members.append(name)
        if members:
            group = names.probes(period)
            _write(str(out / f"{group}.yaml"), group_yaml(group, members))
            period_groups.append(group)
    if period_groups:
        _write(str(out / f"{BENCHMARK}.yaml"), group_yaml(BENCHMARK, period_groups))
    return exported
