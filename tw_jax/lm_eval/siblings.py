"""CKL's LAMA sets, ECBD's spans and EvolvingQA's questions as lm-evaluation-harness tasks.

:func:`tw_jax.lm_eval.export.export_all` (``tw-jax lm-eval-tasks``) writes them beside the
probes' tasks when the data folder holds them: ``DATA/ckl/`` (a CKL folder or zip(s) of it, as
released or as ``tw-jax ckl build-lama`` writes it; read by
:mod:`tw_jax.preprocess.ckl.release_files`), ``DATA/ecbd/`` (an ECBD folder,
``{subset}/{np,random}_spans_{dev,test}.json``; :func:`tw_jax.tasks.ecbd.read_ecbd`) and
``DATA/qa/`` (EvolvingQA's QA CSVs, where ``tw-jax evolvingqa generate`` writes them;
:func:`tw_jax.tasks.evolvingqa.find_qa_files`), or the folders given instead. The tasks are
named after the SeqIO tasks of the same sets:

- ``ckl_<set>`` (``ckl_invariant_lama``, ``ckl_updated_lama``, ``ckl_new_lama``,
  ``ckl_new_lama_easy[_X]``), ``generate_until``: the answer generated after the statement's
  left context; em, f1 against the best accepted answer (UpdatedLAMA: also em_previous,
  f1_previous against the old ones);
- ``ckl_<set>_object``, ``loglikelihood``: the first answer after the left context;
  perplexity, acc (greedy);
- ``ecbd_<subset>_<split>[_<input>]``, ``loglikelihood``: the span after the input type's left
  context; perplexity, acc (ECBD's own metric, per-token span perplexity, is derived from the
  samples: ``docs/lm_eval.md``);
- ``evolvingqa_{unchanged,new[_T],edited[_T]}``, ``generate_until``: the answer generated after
  the question; em, f1 (Edited: against the updated answer; em_previous, f1_previous the
  outdated one);
- ``evolvingqa_edited[_T]_mc``, ``multiple_choice``: the outdated and the updated answer after
  the question, gold the updated one; acc, acc_norm.

Groups: ``ckl_lama`` (every CKL task, in CKL Table 2's order), ``ecbd`` (of the groups
``ecbd_<split>[_<input>]``, each every subset's task, SeqIO's mixtures), ``evolvingqa`` (every
EvolvingQA task) and ``evolvingqa_eval_<T>`` (Unchanged with time step T's sets, SeqIO's
mixtures). Documents: ``DIR/docs/<task>.jsonl`` (``<task>`` the SeqIO name, shared by its
forms; ``<task>_mc.jsonl`` the multiple-choice rows). ``DIR/siblings.json`` lists every task
with its source file, documents and rows left out, and why.

A causal LM reads left to right, so a cloze statement becomes the text left of its blank (the
prompt) and the answer after it (the target), the space before the blank starting the target
(``" Honolulu"``, as the probes' objects; :func:`tw_jax.models.base.filler_start`), no
``target_delimiter``; the right context is dropped (kept in the document as ``right``), as
tw_jax's own causal-LM cloze scoring (ECBD's GPT-2 setting) does. A CKL statement whose blank
opens it (nothing left of it) asks for its answer from nothing: it is left out of both CKL
forms and counted; an ECBD span at a sentence's start is kept (an empty context: lm-eval
scores it after the prefix token, as tw_jax after BOS).
"""

from __future__ import annotations

import os
import string
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.lm_eval.probe_utils import normalize_answer
from tw_jax.lm_eval.task_files import (
    dataset_lines,
    group_yaml,
    metric_lines,
    scalar,
    write,
    write_documents,
)
from tw_jax.preprocess.ckl import release
from tw_jax.preprocess.ckl.release_files import (
    LAMA_SETS,
    find_files,
    lama_files,
    lama_set,
    read_lama_set,
)
from tw_jax.tasks import ecbd as ecbd_tasks
from tw_jax.tasks import evolvingqa as qa_tasks

CKL, ECBD, EVOLVINGQA = "ckl", "ecbd", "evolvingqa"
BENCHMARKS = (CKL, ECBD, EVOLVINGQA)
# where each sits in a data folder (EvolvingQA's: tw_jax.preprocess.evolvingqa.layout.qa_dir)
FOLDERS = {CKL: "ckl", ECBD: "ecbd", EVOLVINGQA: "qa"}
GROUPS = {CKL: "ckl_lama", ECBD: "ecbd", EVOLVINGQA: "evolvingqa"}
MANIFEST = "siblings.json"
OBJECT_SUFFIX = "_object"  # CKL's loglikelihood form
MC_SUFFIX = "_mc"  # EvolvingQA Edited's multiple choice
SENTINEL = release.SENTINEL  # ECBD's <extra_id_0> is the same
DOCS = "docs"
# why a row is left out of a task (siblings.json's "skipped")
NO_LEFT_CONTEXT = "blank opens the statement (no left context)"
SAME_ANSWERS = "outdated and updated answers normalise alike"
FALLBACK = "input type not buildable (the original sentence instead)"
_TRAILING = string.punctuation + string.whitespace


@dataclass
class SiblingTask:
    """One written task: its name, benchmark, output type, documents and where they come
    from."""

    name: str
    benchmark: str
    output_type: str
    docs: str
    documents: int
    source: str
    skipped: dict[str, int] = field(default_factory=dict)
    notes: dict[str, int] = field(default_factory=dict)


@dataclass
class SiblingExport:
    """What :func:`export_siblings` wrote: tasks in order, and groups (name → members)."""

    tasks: list[SiblingTask] = field(default_factory=list)
    groups: dict[str, list[str]] = field(default_factory=dict)

    def names(self, benchmark: str | None = None) -> list[str]:
        return [t.name for t in self.tasks if benchmark in (None, t.benchmark)]


# --- the cloze texts ------------------------------------------------------------------------


def cloze_prompt(statement: str, filler: str) -> tuple[str, str, str]:
    """``(prompt, target, right)`` of a statement with one blank (``<extra_id_0>``): the text
    left of the blank without its last space, that space and ``filler``, and the text right of
    the blank (dropped: a causal LM cannot read it before the filler)."""
    left, _, right = statement.partition(SENTINEL)
    cut = len(left) - 1 if left.endswith(" ") else len(left)
    return left[:cut], left[cut:] + filler, right


def blank_at_end(right: str) -> bool:
    """Whether only punctuation (``" ."``) follows the blank."""
    return not right.strip(_TRAILING)


# --- the task configs -----------------------------------------------------------------------


def loglikelihood_yaml(name: str, docs_path: str) -> str:
    lines = dataset_lines(name, docs_path, "loglikelihood")
    lines += ["doc_to_text: prompt", "doc_to_target: target", 'target_delimiter: ""',
              *metric_lines([("perplexity", "perplexity", False), ("acc", "mean", True)])]
    return "\n".join([*lines, "metadata:", "  version: 1.0", ""])


def generation_yaml(name: str, docs_path: str, *, previous: bool, max_gen_toks: int) -> str:
    process = "process_answers_previous" if previous else "process_answers"
    metrics = ["em", "f1", *(["em_previous", "f1_previous"] if previous else [])]
    lines = dataset_lines(name, docs_path, "generate_until")
    lines += ["doc_to_text: prompt", "doc_to_target: answer", 'target_delimiter: ""',
              "generation_kwargs:", f"  until: [{scalar(chr(10))}]",
              f"  max_gen_toks: {int(max_gen_toks)}", "  do_sample: false",
              f"process_results: !function utils.{process}",
              # the outdated answer's scores: higher means the model kept the old fact
              *metric_lines([(m, "mean", not m.endswith("_previous")) for m in metrics])]
    return "\n".join([*lines, "metadata:", "  version: 1.0", ""])


def multiple_choice_yaml(name: str, docs_path: str) -> str:
    """The question, then `` `` and each choice (lm-eval's default ``target_delimiter``)."""
    lines = dataset_lines(name, docs_path, "multiple_choice")
    lines += ["doc_to_text: question", "doc_to_choice: choices", "doc_to_target: gold",
              *metric_lines([("acc", "mean", True), ("acc_norm", "mean", True)])]
    return "\n".join([*lines, "metadata:", "  version: 1.0", ""])


# --- documents ------------------------------------------------------------------------------


def ckl_documents(task: str, rows: Sequence[release.LamaRow]
                  ) -> tuple[list[dict[str, Any]], dict[str, int], dict[str, int]]:
    """``(documents, skipped, notes)`` of one LAMA set: a document per row with a left context
    (``id`` ``<task>/<row>``, ``key`` the set's id, the statement, ``prompt``/``target`` the
    left context and `` answer``, ``answer`` the first accepted answer, ``answers`` all of them,
    ``previous_answers`` UpdatedLAMA's old ones, ``right`` and ``blank_at_end``)."""
    documents, skipped, notes = [], {}, {}
    for index, row in enumerate(rows):
        prompt, target, right = cloze_prompt(row.statement, row.answers[0])
        if not prompt.strip():
            skipped[NO_LEFT_CONTEXT] = skipped.get(NO_LEFT_CONTEXT, 0) + 1
            continue
        at_end = blank_at_end(right)
        if not at_end:
            notes["right context dropped"] = notes.get("right context dropped", 0) + 1
        documents.append({
            "id": f"{task}/{index}", "key": row.id, "statement": row.statement,
            "prompt": prompt, "target": target, "answer": row.answers[0],
            "answers": list(row.answers), "previous_answers": list(row.previous),
            "right": right, "blank_at_end": at_end})
    return documents, skipped, notes


def ecbd_documents(task: str, examples: Sequence[ecbd_tasks.EcbdExample], input_type: str,
                   pool: Sequence[ecbd_tasks.EcbdExample], *, n_definition: int = 1,
                   seed: int = 0) -> tuple[list[dict[str, Any]], int]:
    """``(documents, fallbacks)``: a document per span, its input type's sentence built as the
    SeqIO task builds it (:func:`tw_jax.tasks.ecbd.input_sentence`; a sentence the type cannot
    be built for stays the original one, counted), ``prompt``/``target`` its left context and
    `` span``."""
    randoms: list[str | None] | None = None
    if input_type == "random_def":
        drawn = ecbd_tasks.random_definitions(pool, n_definition, seed)
        by_source = {ex.source: i for i, ex in enumerate(pool)}
        randoms = [drawn[by_source[ex.source]] for ex in examples]
    documents, fallbacks = [], 0
    for index, ex in enumerate(examples):
        sentence = ecbd_tasks.input_sentence(
            ex, input_type, n_definition=n_definition,
            random_definition=randoms[index] if randoms is not None else None)
        if sentence is None:
            fallbacks += 1
            sentence = ex.masked_sentence
        prompt, target, right = cloze_prompt(sentence, ex.span)
        documents.append({
            "id": f"{task}/{index}", "key": ex.ex_id, "entity": ex.entity, "subset": ex.subset,
            "split": ex.split, "input_type": input_type, "span_type": ex.span_type,
            "span_group": ex.span_group, "sentence": sentence, "span": ex.span,
            "prompt": prompt, "target": target, "right": right})
    return documents, fallbacks


def qa_documents(task: str, rows: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
    """A document per question: ``prompt`` the question, ``answer`` the one scored (Edited:
    the updated ``answer2``), ``answers`` it alone, ``previous_answers`` Edited's ``answer1``."""
    documents = []
    for index, row in enumerate(rows):
        formatted = qa_tasks.format_qa(row)
        previous = formatted["previous_object"]
        documents.append({
            "id": f"{task}/{index}", "question": row["question"], "prompt": row["question"],
            "answer": formatted["object"], "answers": [formatted["object"]],
            "previous_answers": [previous] if previous else []})
    return documents


def mc_documents(task: str, rows: Sequence[Mapping[str, str]]
                 ) -> tuple[list[dict[str, Any]], int]:
    """``(documents, left out)`` of Edited's multiple choice: ``choices`` the outdated then the
    updated answer, ``gold`` 1 (a tie in lm-eval's argmax goes to the first, the outdated one, as
    tw_jax's rank classification); pairs whose answers normalise alike are left out, as there."""
    documents, same = [], 0
    for index, row in enumerate(rows):
        if normalize_answer(row["answer1"]) == normalize_answer(row["answer2"]):
            same += 1
            continue
        documents.append({"id": f"{task}/{index}", "question": row["question"],
                          "choices": [row["answer1"], row["answer2"]], "gold": 1})
    return documents, same


# --- export ---------------------------------------------------------------------------------


def default_folders(data_dir: str) -> dict[str, str]:
    """Where each benchmark's files sit in a data folder (``DATA/ckl``, ``DATA/ecbd``,
    ``DATA/qa``)."""
    return {b: paths.join(data_dir, FOLDERS[b]) for b in BENCHMARKS}


class _Writer:
    def __init__(self, out: Path, max_gen_toks: int) -> None:
        self.out = out
        self.max_gen_toks = max_gen_toks
        self.done = SiblingExport()
        (out / DOCS).mkdir(parents=True, exist_ok=True)

    def docs(self, stem: str, documents: Sequence[Mapping[str, Any]]) -> str:
        path = self.out / DOCS / f"{stem}.jsonl"
        write_documents(path, documents)
        return str(path)

    def task(self, name: str, benchmark: str, output_type: str, docs: str, documents: int,
             source: str, text: str, **extra: Any) -> str:
        write(self.out / f"{name}.yaml", text)
        self.done.tasks.append(SiblingTask(name, benchmark, output_type, docs, documents,
                                           source, **extra))
        return name

    def group(self, name: str, members: Sequence[str]) -> None:
        if members:
            write(self.out / f"{name}.yaml", group_yaml(name, members))
            self.done.groups[name] = list(members)


def _ckl(writer: _Writer, folder: str, *, required: bool) -> None:
    sets = lama_files(find_files(folder)) if paths.exists(folder) else {}
    if not sets:
        if required:
            raise DumpError(folder, None, "no CKL LAMA sets (invariantLAMA.csv, "
                            "updatedLAMA.csv, newLAMA*.csv)")
        return
    files = find_files(folder)
    order = {spec.task: i for i, spec in enumerate(LAMA_SETS)}
    members = []
    for task in sorted(sets, key=lambda n: (order[lama_set(n).task], n)):
        name, spec = sets[task]
        documents, skipped, notes = ckl_documents(task, read_lama_set(files, name, spec))
        if not documents:
            continue
        docs = writer.docs(task, documents)
        source = files[name].name
        previous = spec.kind == release.UPDATED and all(d["previous_answers"] for d in documents)
        members.append(writer.task(
            task, CKL, "generate_until", docs, len(documents), source,
            generation_yaml(task, docs, previous=previous, max_gen_toks=writer.max_gen_toks),
            skipped=skipped, notes=notes))
        members.append(writer.task(f"{task}{OBJECT_SUFFIX}", CKL, "loglikelihood", docs,
                                   len(documents), source,
                                   loglikelihood_yaml(f"{task}{OBJECT_SUFFIX}", docs),
                                   skipped=skipped, notes=notes))
    writer.group(GROUPS[CKL], members)


def _ecbd(writer: _Writer, folder: str, *, required: bool) -> None:
    try:
        ecbd_tasks.discover(folder)
    except DumpError:
        if required:
            raise
        return
    data = ecbd_tasks.read_ecbd(folder)
    pool = [ex for examples in data.values() for ex in examples]
    mixtures: dict[str, list[str]] = {}
    for (subset, split), examples in data.items():
        if not examples:
            continue
        base = ecbd_tasks.task_name(subset, split)
        for input_type in ecbd_tasks.INPUTS:
            name = ecbd_tasks.task_name(subset, split, input_type)
            documents, fallbacks = ecbd_documents(name, examples, input_type, pool)
            if input_type != "original" and fallbacks == len(documents):
                continue  # not buildable at all (one entity: no other's definition)
            docs = writer.docs(name, documents)
            notes = {FALLBACK: fallbacks} if fallbacks else {}
            writer.task(name, ECBD, "loglikelihood", docs, len(documents),
                        f"{folder} ({subset}, {split}: {base})", loglikelihood_yaml(name, docs),
                        notes=notes)
            mixtures.setdefault(ecbd_tasks.mixture_name(split, input_type), []).append(name)
    groups = sorted(mixtures, key=lambda m: (m.split("_")[1],
                                             ecbd_tasks.INPUTS.index(_input_of(m))))
    for mixture in groups:
        writer.group(mixture, mixtures[mixture])
    writer.group(GROUPS[ECBD], groups)


def _input_of(mixture: str) -> str:
    rest = mixture.split("_", 2)[2:]
    return rest[0] if rest else "original"


def _evolvingqa(writer: _Writer, folder: str, *, required: bool) -> None:
    found = qa_tasks.find_qa_files(folder) if paths.exists(folder) else []
    sets = [qa for qa in found if qa.kind != qa_tasks.FINETUNE]  # the fine-tuning set trains
    if not sets:
        if required:
            raise DumpError(folder, None, "no EvolvingQA evaluation CSVs (unchanged_eval.csv, "
                            "new_T.csv, edited_T.csv)")
        return
    by_set: dict[str, list[str]] = {}
    for qa in sets:
        rows = qa.load()
        if not rows:
            continue
        edited = qa.kind == qa_tasks.EDITED
        documents = qa_documents(qa.task, rows)
        docs = writer.docs(qa.task, documents)
        tasks = [writer.task(qa.task, EVOLVINGQA, "generate_until", docs, len(documents),
                             qa.file.name, generation_yaml(qa.task, docs, previous=edited,
                                                           max_gen_toks=writer.max_gen_toks))]
        if edited:
            choices, same = mc_documents(f"{qa.task}{MC_SUFFIX}", rows)
            if choices:
                mc = f"{qa.task}{MC_SUFFIX}"
                mc_docs = writer.docs(mc, choices)
                tasks.append(writer.task(mc, EVOLVINGQA, "multiple_choice", mc_docs,
                                         len(choices), qa.file.name,
                                         multiple_choice_yaml(mc, mc_docs),
                                         skipped={SAME_ANSWERS: same} if same else {}))
        by_set[qa.task] = tasks
    labels = sorted({qa.label for qa in sets if qa.label and qa.task in by_set})
    for label in labels:  # SeqIO's evolvingqa_eval_T: Unchanged with time step T's sets
        writer.group(f"evolvingqa_eval_{label}",
                     [t for qa in sets if qa.task in by_set
                      and (qa.kind == qa_tasks.UNCHANGED or qa.label == label)
                      for t in by_set[qa.task]])
    writer.group(GROUPS[EVOLVINGQA], [t for tasks in by_set.values() for t in tasks])


EXPORTERS: dict[str, Callable[..., None]] = {CKL: _ckl, ECBD: _ecbd, EVOLVINGQA: _evolvingqa}


def export_siblings(data_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], *,
                    folders: Mapping[str, str | os.PathLike[str] | None] | None = None,
                    max_gen_toks: int = 16) -> SiblingExport:
    """Write the tasks of every sibling benchmark found (module docstring) under ``out_dir``.

    ``folders`` gives a benchmark's folder (or zip) instead of its place in ``data_dir``
    (``{"ecbd": "/data/ecbd"}``); a folder given that holds none of its files is a
    :class:`DumpError`, one looked for in ``data_dir`` is skipped."""
    given = {b: os.fspath(f) for b, f in (folders or {}).items() if f is not None}
    unknown = sorted(set(given) - set(BENCHMARKS))
    if unknown:
        raise ValueError(f"unknown benchmarks {unknown}; known: {', '.join(BENCHMARKS)}")
    where = {**default_folders(os.fspath(data_dir)), **given}
    writer = _Writer(Path(out_dir).resolve(), max_gen_toks)
    for benchmark in BENCHMARKS:
        EXPORTERS[benchmark](writer, where[benchmark], required=benchmark in given)
    return writer.done


def manifest(done: SiblingExport) -> dict[str, Any]:
    """``siblings.json``: every task (benchmark, output type, source, documents, rows left out
    and notes) and group."""
    return {"tasks": {t.name: {"benchmark": t.benchmark, "output_type": t.output_type,
                               "source": t.source, "documents": t.documents,
                               "docs": t.docs, "skipped": t.skipped, "notes": t.notes}
                      for t in done.tasks},
            "groups": done.groups}
