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
``ckl_lama``                       evaluation mixture of every LAMA set present
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

With the TFDS switch on (:func:`tw_jax.tasks.sources.use_tfds`, ``$TW_JAX_TFDS_DIR``) the LAMA
sets are read from the ``ckl_lama`` datasets prepared from the same folder (docs/tfds.md): the
same examples in the same order; the training corpora stay on their files.

seqio takes feature lengths per call, not per task: CKL's evaluation lengths (Appendix C) are
:func:`eval_lengths` of the task, which ``tw-jax ckl eval`` passes as the task feature lengths
(inputs are trimmed to fit, EOS kept, and at most ``targets`` tokens are decoded).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping

import seqio
import tensorflow as tf

from tw_jax.io import paths
from tw_jax.preprocess.ckl import release
from tw_jax.preprocess.ckl.release_files import (
    LAMA_SETS,
    LamaSet,
    corpus_files,
    find_files,
    lama_files,
    lama_set,
    read_lama_set,
    ssm_pairs,
)
from tw_jax.preprocess.dumps.released import PublishedFile
from tw_jax.tasks import metrics
from tw_jax.tasks.mixreview import MixReviewMixture
from tw_jax.tasks.preprocessors import cache_point, tokenize_keep_text, tokenize_only
from tw_jax.tasks.registration import Registrar
from tw_jax.tasks.sources import RowsSource, tfds_active, tfds_rows
from tw_jax.tasks.twiki import CORPUS_SPLITS, ssm_features
from tw_jax.tasks.vocab import LazyVocabulary, load_vocabularies, t5_path

LAMA_SPLITS = ("validation", "test")
SENTINEL = release.SENTINEL
PREVIOUS_SEPARATOR = " | "
MIXREVIEW_TASK = "ckl_mixreview_ssm"
# Every LAMA probe set present (IL, UL, NL, NLE…): one name evaluates CKL's Table 2 columns.
EVAL_MIXTURE = "ckl_lama"


def eval_lengths(task: str) -> dict[str, int]:
    """CKL's evaluation lengths of a probe task as seqio feature lengths."""
    inputs, targets = lama_set(task).lengths
    return {"inputs": inputs, "targets": targets}


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


def _ssm_dataset_fn(file: PublishedFile) -> Callable[..., tf.data.Dataset]:
    def generate() -> Iterator[dict[str, str]]:
        for inputs, targets in ssm_pairs(file):
            yield {"inputs": inputs, "targets": targets}

    def dataset_fn(split: str, shuffle_files: bool, seed: int | None = None) -> tf.data.Dataset:
        del split, shuffle_files, seed  # one file; the task shuffles examples if asked
        signature = {k: tf.TensorSpec([], tf.string) for k in ("inputs", "targets")}
        return tf.data.Dataset.from_generator(generate, output_signature=signature)

    return dataset_fn


# --- registration ---------------------------------------------------------------------------


def _loader(files: Mapping[str, PublishedFile], name: str, spec: LamaSet, task: str
            ) -> Callable[[], list[dict[str, str]]]:
    """The set's rows: its file, or (after :func:`tw_jax.tasks.sources.use_tfds`) the
    ``ckl_lama`` split prepared from it (``ckl_lama/updated_lama``, split ``test``; a file with
    a suffix, ``newLAMA_easy_small_split1.csv``, is the split ``small_split1``)."""
    if tfds_active():
        config, split = spec.task.removeprefix("ckl_"), task[len(spec.task) + 1:] or "test"
        return lambda: [
            lama_example(release.LamaRow(row["id"], row["statement"], tuple(row["answers"]),
                                         tuple(row["previous_answers"])))
            for row in tfds_rows("ckl_lama", config, split)]
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
            source=RowsSource(_loader(files, name, spec, task), _as_example, LAMA_SPLITS),
            output_features=lama_features,
            preprocessors=[load_vocabularies, tokenize_keep_text, cache_point(),
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
            preprocessors=[load_vocabularies, tokenize_only, cache_point(),
                           seqio.preprocessors.append_eos_after_trim],
            postprocess_fn=metrics.token_count_postprocessor,
            metric_fns=[metrics.perplexity],
        )
    registrar.eval_mixture(EVAL_MIXTURE, probe_tasks(list(lama_files(files))))
    if "ckl_recent_news_ssm" in corpora and "ckl_wikipedia_pretrain_ssm" in corpora:
        registrar.mixture(MixReviewMixture(MIXREVIEW_TASK, "ckl_recent_news_ssm",
                                           "ckl_wikipedia_pretrain_ssm", preset="ckl"))
    return list(registrar.names)


def probe_tasks(names: list[str]) -> list[str]:
    """The probe tasks among registered names, in CKL Table 2's order (IL, UL, NL, NLE…)."""
    order = {spec.task: i for i, spec in enumerate(LAMA_SETS)}
    probes = [n for n in names if not n.endswith("_ssm") and n != EVAL_MIXTURE]
    return sorted(probes, key=lambda n: (order[lama_set(n).task], n))
