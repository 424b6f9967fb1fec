"""CKL's benchmark as seqio tasks, from a folder or zip of its released files (or of our build).

``register_ckl(folder)`` finds the files by name anywhere below ``folder`` (a folder, a zip, or a
folder with zips, read in place with :mod:`tw_jax.tasks.published`'s safe zip access) and
registers, for those present:

=================================  ===============================  ===========  ==============
task                               file                             eval in/out  results category
=================================  ===============================  ===========  ==============
``ckl_invariant_lama``             ``invariantLAMA.csv``            25 / 4       ``unchanged``
``ckl_updated_lama``               ``updatedLAMA.csv``              50 / 10      ``updated``
``ckl_new_lama``                   ``newLAMA.csv``                  50 / 10      ``new``
``ckl_new_lama_easy[_X]``          ``newLAMA_easy[_X].csv``         150 / 10     ``new_easy``
``ckl_recent_news[_X]_ssm``        ``recent_news[_X].csv``          (350/350)    training
``ckl_wikipedia_pretrain[_X]_ssm`` ``wikipedia_pretrain[_X].csv``   (350/350)    Mix-Review's old data
``ckl_mixreview_ssm``              the two main corpora mixed (:class:`MixReviewMixture`)
=================================  ===============================  ===========  ==============

(``_X`` is the file's suffix lower-cased: ``newLAMA_easy_small_split1.csv`` →
``ckl_new_lama_easy_small_split1``.) ``ckl_recent_news_ssm`` is ``recent_news_full.csv``, else
``recent_news_small.csv``, else the only ``recent_news*.csv``; likewise for Wikipedia.

LAMA examples: ``inputs`` the statement (``<extra_id_0>`` where the answer goes), ``targets``
``<extra_id_0> answer``, plus ``id``, ``object`` (the first answer), ``answers`` (every accepted
answer, a JSON list) and ``previous_object`` (UpdatedLAMA's old answers, `` | ``-separated) for
the evaluator; splits ``validation`` and ``test`` (the same rows). Answers come from the answer
JSON beside the CSV (``<stem>_answers.json`` or the release's names, :data:`ANSWER_FILES`), else
from the CSV. SSM examples: ``input`` → ``inputs``, ``output`` → ``targets``; splits ``train``
and ``validation``.

seqio takes feature lengths per call, not per task: CKL's evaluation lengths (Appendix C) are
:func:`eval_lengths` of the task, which ``tw-jax ckl eval`` passes as the task feature lengths
(inputs are trimmed to fit, EOS kept, and at most ``targets`` tokens are decoded).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass

import seqio
import tensorflow as tf

from tw_jax.io import paths
from tw_jax.preprocess.ckl import release
from tw_jax.preprocess.errors import DumpError
from tw_jax.tasks import metrics
from tw_jax.tasks.mixreview import MixReviewMixture
from tw_jax.tasks.preprocessors import tokenize_keep_text, tokenize_only
from tw_jax.tasks.published import PublishedFile, index_files
from tw_jax.tasks.registration import Registrar
from tw_jax.tasks.sources import RowsSource
from tw_jax.tasks.twiki import CORPUS_SPLITS, ssm_features
from tw_jax.tasks.vocab import LazyVocabulary, load_vocabularies, t5_path

LAMA_SPLITS = ("validation", "test")
SENTINEL = release.SENTINEL
PREVIOUS_SEPARATOR = " | "


@dataclass(frozen=True)
class LamaSet:
    """One of CKL's probe sets: how its files are named and evaluated."""

    task: str
    pattern: re.Pattern[str]
    kind: str  # release.INVARIANT | UPDATED | NEW
    category: str  # results category (tw_jax.evaluate.results.CKL_CATEGORIES)
    lengths: tuple[int, int]  # CKL Appendix C: input / output length
    answer_files: tuple[str, ...]  # the release's answer JSON names, after <stem>_answers.json
    label: str  # the paper's name


LAMA_SETS: tuple[LamaSet, ...] = (
    LamaSet("ckl_invariant_lama", re.compile(r"^invariantLAMA()\.csv$"), release.INVARIANT,
            "unchanged", (25, 4), (), "InvariantLAMA"),
    LamaSet("ckl_updated_lama", re.compile(r"^updatedLAMA()\.csv$"), release.UPDATED,
            "updated", (50, 10), ("updatedlama_val_answers.json",), "UpdatedLAMA"),
    LamaSet("ckl_new_lama", re.compile(r"^newLAMA()\.csv$"), release.NEW, "new", (50, 10),
            ("recentlama_h_val_answers.json",), "NewLAMA"),
    LamaSet("ckl_new_lama_easy", re.compile(r"^newLAMA_easy(_\w+)?\.csv$"), release.NEW,
            "new_easy", (150, 10), ("newLAMA_easy_answers.json", "recentlama_val_answers.json"),
            "NewLAMA-Easy"),
)
SSM_CORPORA: tuple[tuple[str, re.Pattern[str], tuple[str, ...]], ...] = (
    ("ckl_recent_news", re.compile(r"^recent_news(_\w+)?\.csv$"), ("_full", "_small")),
    ("ckl_wikipedia_pretrain", re.compile(r"^wikipedia_pretrain(_\w+)?\.csv$"),
     ("_full", "_small", "")),
)
MIXREVIEW_TASK = "ckl_mixreview_ssm"


def lama_set(task: str) -> LamaSet:
    """The :class:`LamaSet` a task belongs to (``ckl_new_lama_easy_small`` → NewLAMA-Easy)."""
    for spec in sorted(LAMA_SETS, key=lambda s: -len(s.task)):
        if task == spec.task or task.startswith(spec.task + "_"):
            return spec
    raise KeyError(f"{task!r} is not a CKL probe task")


def eval_lengths(task: str) -> dict[str, int]:
    """CKL's evaluation lengths of a probe task as seqio feature lengths."""
    inputs, targets = lama_set(task).lengths
    return {"inputs": inputs, "targets": targets}


# --- files ----------------------------------------------------------------------------------


def find_files(root: str | os.PathLike[str]) -> dict[str, PublishedFile]:
    """Every file below ``root`` (folder or zip) by base name; a name found twice is an error
    (which of the two is meant cannot be told)."""
    found: dict[str, PublishedFile] = {}
    for file in index_files(root):
        name = file.path.name
        if name in found:
            raise DumpError(file.name, None, f"{name} is also at {found[name].name}; keep one")
        found[name] = file
    return found


def read_lama_set(files: Mapping[str, PublishedFile], name: str, spec: LamaSet
                  ) -> list[release.LamaRow]:
    """The rows of one LAMA CSV with their answers (see the module docstring)."""
    file = files[name]
    with file.open_text() as handle:
        rows = release.read_lama_csv(handle, file.name, spec.kind)
    stem = name[: -len(".csv")]
    for answers_name in (f"{stem}_answers.json", *spec.answer_files):
        if answers_name in files:
            answers_file = files[answers_name]
            with answers_file.open_text() as handle:
                answers = release.read_answers_json(handle, answers_file.name,
                                                    updated=spec.kind == release.UPDATED)
            return release.join_answers(rows, file.name, answers, answers_file.name)
    return release.join_answers(rows, file.name)


def lama_example(row: release.LamaRow) -> dict[str, str]:
    return {
        "inputs": row.statement,
        "targets": f"{SENTINEL} {row.answers[0]}",
        "id": row.id,
        "object": row.answers[0],
        "answers": json.dumps(list(row.answers), ensure_ascii=False),
        "previous_object": PREVIOUS_SEPARATOR.join(row.previous),
    }


_EMPTY_EXAMPLE = lama_example(release.LamaRow("", "", ("",)))


def _as_example(row: Mapping[str, str]) -> dict[str, str]:
    return {k: row.get(k, v) for k, v in _EMPTY_EXAMPLE.items()}


def lama_postprocessor(output: object, example: Mapping | None = None, is_target: bool = False
                       ) -> object:
    """Targets → :class:`metrics.Target` with every accepted answer; predictions → the first
    span of T5's sentinel answer."""
    if is_target and example is not None and "answers" in example:
        raw = example["answers"]
        answers = json.loads(raw.decode("utf-8") if isinstance(raw, bytes) else raw)
        count = len(example["targets"]) if "targets" in example else None
        return metrics.Target(answers=answers, num_tokens=count)
    return metrics.probe_postprocessor(output, example, is_target)


def ssm_pairs(file: PublishedFile) -> Iterator[tuple[str, str]]:
    with file.open_text() as handle:
        yield from release.iter_ssm_pairs(handle, file.name)


def count_ssm_examples(file: PublishedFile) -> int:
    """Examples in one pass over an SSM corpus (what ``--epochs`` turns into steps)."""
    return sum(1 for _ in ssm_pairs(file))


def _ssm_dataset_fn(file: PublishedFile) -> Callable[..., tf.data.Dataset]:
    def generate() -> Iterator[dict[str, str]]:
        for inputs, targets in ssm_pairs(file):
            yield {"inputs": inputs, "targets": targets}

    def dataset_fn(split: str, shuffle_files: bool, seed: int | None = None) -> tf.data.Dataset:
        del split, shuffle_files, seed  # one file; the task shuffles examples if asked
        signature = {k: tf.TensorSpec([], tf.string) for k in ("inputs", "targets")}
        return tf.data.Dataset.from_generator(generate, output_signature=signature)

    return dataset_fn


def corpus_files(files: Mapping[str, PublishedFile]) -> dict[str, PublishedFile]:
    """SSM task name → file, the main corpora's unsuffixed aliases included."""
    out: dict[str, PublishedFile] = {}
    for base, pattern, preferred in SSM_CORPORA:
        by_suffix = {m.group(1) or "": f for n, f in files.items() if (m := pattern.match(n))}
        for suffix, file in sorted(by_suffix.items()):
            out[f"{base}{suffix.lower()}_ssm"] = file
        main = next((by_suffix[s] for s in preferred if s in by_suffix), None)
        if main is None and len(by_suffix) == 1:
            main = next(iter(by_suffix.values()))
        if main is not None:
            out[f"{base}_ssm"] = main
    return out


def lama_files(files: Mapping[str, PublishedFile]) -> dict[str, tuple[str, LamaSet]]:
    """Probe task name → (file name, its set)."""
    out: dict[str, tuple[str, LamaSet]] = {}
    for name in sorted(files):
        for spec in LAMA_SETS:
            if match := spec.pattern.match(name):
                out[spec.task + (match.group(1) or "").lower()] = (name, spec)
    return out


# --- registration ---------------------------------------------------------------------------


def _loader(files: Mapping[str, PublishedFile], name: str, spec: LamaSet
            ) -> Callable[[], list[dict[str, str]]]:
    return lambda: [lama_example(row) for row in read_lama_set(files, name, spec)]


def register_ckl(
    folder_or_zip: str | os.PathLike[str],
    t5_vocab: str | None = None,
    group: str = "ckl",
) -> list[str]:
    """Registers the CKL tasks of a folder or zip (module docstring); returns their names.

    The T5 vocabulary is ``t5_vocab``, else ``$TW_JAX_T5_VOCAB``, else
    ``FOLDER/vocab/t5/spiece.model``. Registering the same ``group`` again replaces its tasks.
    """
    root = os.fspath(folder_or_zip)  # local or in a bucket: never a pathlib.Path
    files = find_files(root)
    vocabulary = LazyVocabulary("t5", t5_path(root if paths.isdir(root) else None, t5_vocab))
    registrar = Registrar(group)
    lama_features = {k: seqio.Feature(vocabulary, add_eos=True) for k in ("inputs", "targets")}
    for task, (name, spec) in lama_files(files).items():
        registrar.task(
            task,
            source=RowsSource(_loader(files, name, spec), _as_example, LAMA_SPLITS),
            output_features=lama_features,
            preprocessors=[load_vocabularies, tokenize_keep_text,
                           seqio.preprocessors.append_eos_after_trim],
            postprocess_fn=lama_postprocessor,
            metric_fns=[metrics.perplexity, metrics.squad],
        )
    corpora = corpus_files(files)
    for task, file in corpora.items():
        registrar.task(
            task,
            source=seqio.FunctionDataSource(_ssm_dataset_fn(file), splits=CORPUS_SPLITS),
            output_features=ssm_features(vocabulary),
            preprocessors=[load_vocabularies, tokenize_only,
                           seqio.preprocessors.append_eos_after_trim],
            postprocess_fn=metrics.token_count_postprocessor,
            metric_fns=[metrics.perplexity],
        )
    if "ckl_recent_news_ssm" in corpora and "ckl_wikipedia_pretrain_ssm" in corpora:
        registrar.mixture(MixReviewMixture(MIXREVIEW_TASK, "ckl_recent_news_ssm",
                                           "ckl_wikipedia_pretrain_ssm"))
    return list(registrar.names)


def probe_tasks(names: list[str]) -> list[str]:
    """The probe tasks among registered names, in CKL Table 2's order (IL, UL, NL, NLE…)."""
    order = {spec.task: i for i, spec in enumerate(LAMA_SETS)}
    probes = [n for n in names if not n.endswith("_ssm")]
    return sorted(probes, key=lambda n: (order[lama_set(n).task], n))
