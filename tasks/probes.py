"""TWiki-Probes and light-tuning tasks: one example per CSV row, in five formats.

For probes ``DATA_DIR/<period>/probes/{category}.csv`` (category unchanged, updated, new,
deleted; ``changed`` = updated then new, the final paper's CHANGED) and light-tuning sets
``lighttuning_{category}.csv``:

==========================================  =======  ===========================================
task                                        model    example (``variant`` it scores)
==========================================  =======  ===========================================
``twiki_probes_<P>_{category}``             GPT-2    targets: EOS (as BOS) + the probe text
                                                     ``subject relation object``, every text
                                                     token scored (``text``)
``twiki_probes_<P>_{category}_object``      GPT-2    inputs EOS + ``subject relation``, targets
                                                     `` object``: the object alone is scored or
                                                     generated (``object``)
``twiki_probes_<P>_{category}_cloze``       GPT-2    targets: EOS + the cloze sentence, the
                                                     object's tokens scored (rows without a
                                                     cloze sentence: as ``_object``) (``cloze``)
``twiki_probes_<P>_{category}_ssm``         T5       ``subject relation <extra_id_0>`` →
                                                     ``<extra_id_0> object``; the object's
                                                     tokens are scored (``text`` = ``object``)
``twiki_probes_<P>_{category}_ssm_cloze``   T5       the cloze sentence with the object masked
                                                     → ``<extra_id_0> object`` (rows without a
                                                     cloze sentence use the ``_ssm`` input, so
                                                     every format has one example per row)
                                                     (``cloze``)
==========================================  =======  ===========================================

One definition of probe perplexity. :func:`probe_spec` says, as text, what a probe's perplexity
scores: the tokens of a target text overlapping the object's characters (or all of them) given a
source text. The tasks' token features are built from it by :func:`probe_features`:
``targets_weights`` (1 = scored) marks the scored target tokens, which ``tw-jax eval`` and the
lifelong runner (both through these tasks' evaluation mixtures and ``seqio.Evaluator``) honour,
so there is one probe perplexity (``docs/metrics.md``); a model's ``probe_example``
(:mod:`tw_jax.models.base`) builds the same spec row by row through ``model.span_example``. T5 inputs and targets end with EOS, never scored; GPT-2 rows start
with EOS standing for BOS, so the first text token is scored too.

Light-tuning tasks are named ``twiki_lighttuning_<P>_{category}`` with the same suffixes, and
``twiki_lighttuning_<P>_all`` holds the UNCHANGED, UPDATED and NEW sets together (what one
light-tuning run trains on). Open-book probes (``DATA_DIR/<period>/probes_<retriever>/``, the
CSVs with a ``context`` column of retrieved passages) are tasks ``twiki_probes_<P>_<retriever>_
{category}`` in the same formats: the context is read first (:func:`context_prefix`), the scored
tokens are the closed-book ones.
Every example also carries ``subject``, ``relation``, ``object`` and ``previous_object`` (UPDATED
probes' earlier objects, `` | ``-separated) as strings for the evaluator, and the texts as
``inputs_pretokenized``/``targets_pretokenized``. Metrics: perplexity from scores on every
format, SQuAD EM/F1 from predictions on the formats that generate an object (``_object``,
``_ssm``, ``_ssm_cloze``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import seqio
import tensorflow as tf

from tw_jax.data.tokens import Span, encode_with_offsets, object_span, prefix_id, span_mask
from tw_jax.io import paths
from tw_jax.preprocess.probes.probe_csv import SENTINEL, masked_cloze
from tw_jax.tasks import metrics, names
from tw_jax.tasks.layout import join
from tw_jax.tasks.metrics import TARGETS_WEIGHTS
from tw_jax.tasks.preprocessors import cache_point
from tw_jax.tasks.registration import Registrar
from tw_jax.tasks.sources import Formatter, concatenated, probe_rows
from tw_jax.tasks.vocab import LazyVocabulary
from tw_jax.time import Period

CATEGORIES = ("unchanged", "updated", "new", "deleted")
CAUSAL = "causal"  # the probe formats of a causal LM (one row), in whichever tokenizer
PASSTHROUGH = ("subject", "relation", "object", "previous_object")
PROBE_SPLITS = ("validation", "test")
LIGHTTUNING_SPLITS = ("train",)
# The light-tuning sets one light-tuning run trains on (``twiki_lighttuning_<P>_all``): not
# DELETED, whose facts no longer hold.
LIGHTTUNING_MIX = ("unchanged", "updated", "new")
# What a probe perplexity scores (the variant of a model's ``probe_example``).
VARIANTS = ("text", "object", "cloze")


def _passthrough(row: Mapping[str, str]) -> dict[str, str]:
    return {k: row.get(k, "") for k in PASSTHROUGH}


def probe_text(row: Mapping[str, str]) -> str:
    """The paper's probe text ``subject relation object`` (the CSV's ``text`` when present)."""
    return row.get("text") or f"{row['subject']} {row['relation']} {row['object']}"


# --- the definition: what a probe's perplexity scores ---------------------------------------


@dataclass(frozen=True)
class ProbeSpec:
    """The tokens of ``target`` that overlap ``spans`` (character ranges in ``target``; None:
    every token) are scored, given ``source`` (a model that reads one row reads
    ``source + target``)."""

    source: str
    target: str
    spans: tuple[Span, ...] | None


def probe_spec(row: Mapping[str, str], variant: str, *, sentinel: bool) -> ProbeSpec:
    """What the perplexity of ``variant`` scores for one probe row.

    ``sentinel`` (T5): the object given ``subject relation <extra_id_0>`` (``cloze``: the cloze
    sentence with the object masked, when it has the object), target ``<extra_id_0> object``,
    the object's tokens only (not the sentinel: the metric is about the object). Otherwise
    (GPT-2): ``text`` — every token of the probe text; ``object`` — the object's tokens of
    ``subject relation object``; ``cloze`` — the object's tokens in the cloze sentence (rows
    without one fall back to ``object``). The object's span includes the space before it, the
    word-boundary mark of its first token.

    A row with a ``context`` (open book: passages retrieved for it, :func:`context_prefix`)
    reads the context first; the scored tokens are the same text's.
    """
    if variant not in VARIANTS:
        raise ValueError(f"unknown variant {variant!r}; known: {', '.join(VARIANTS)}")
    obj, context = row["object"], context_prefix(row)
    cloze = masked_cloze(row) if variant == "cloze" else None
    if sentinel:
        target = f"{SENTINEL} {obj}"
        source = cloze if cloze is not None else f"{row['subject']} {row['relation']} {SENTINEL}"
        return ProbeSpec(context + source, target, ((len(SENTINEL), len(target)),))
    if variant == "text":
        return ProbeSpec(context, probe_text(row), None)
    if cloze is not None:
        span = object_span(row["cloze"], obj)
        return ProbeSpec(context, row["cloze"], (span,) if span is not None else ())
    prefix = f"{row['subject']} {row['relation']}"
    text = f"{prefix} {obj}"
    return ProbeSpec(context, text, ((len(prefix), len(text)),))


def context_prefix(row: Mapping[str, str]) -> str:
    """``"<context> "`` for a row with retrieved passages in ``context``, else ``""``: what an
    open-book reader reads before the probe (``tw-jax probe-contexts`` writes the column)."""
    context = " ".join(str(row.get("context") or "").split())
    return f"{context} " if context else ""


def _real(vocabulary: Any) -> Any:
    return vocabulary.vocabulary if isinstance(vocabulary, LazyVocabulary) else vocabulary


def _weights(offsets: Sequence[Span], spans: Sequence[Span] | None, shift: int = 0) -> list[int]:
    if spans is None:
        return [1] * len(offsets)
    return [int(f) for f in span_mask(offsets, [(a + shift, b + shift) for a, b in spans])]


def probe_features(
    spec: ProbeSpec, vocabulary: Any, kind: str, *, prompt: bool
) -> dict[str, list[int]]:
    """Token features of one probe: ``inputs`` (context only), ``targets`` and
    ``targets_weights`` (1 on the scored target tokens), the tokens ``model.span_example``
    scores for ``spec`` (``tests/tasks/test_probes_features.py`` checks both agree).

    ``kind`` ``"t5"``: inputs = source + EOS, targets = target + EOS (EOS weight 0).
    ``"causal"``: one row, the vocabulary's BOS (GPT-2, Qwen: EOS as BOS; :func:`prefix_id`) +
    source + target; with ``prompt`` the row is split before its first scored token into inputs
    and targets, else all of it is targets (the BOS weight 0).
    """
    vocabulary = _real(vocabulary)
    eos = int(vocabulary.eos_id)
    if kind == "t5":
        source, _ = encode_with_offsets(vocabulary, spec.source)
        target, offsets = encode_with_offsets(vocabulary, spec.target)
        return {"inputs": [*source, eos], "targets": [*target, eos],
                TARGETS_WEIGHTS: [*_weights(offsets, spec.spans), 0]}
    if kind != CAUSAL:
        raise ValueError(f"unknown vocabulary kind {kind!r}")
    ids, offsets = encode_with_offsets(vocabulary, spec.source + spec.target)
    spans = spec.spans if spec.spans is not None or not spec.source else ((0, len(spec.target)),)
    row = [prefix_id(vocabulary), *ids]
    weights = [0, *_weights(offsets, spans, len(spec.source))]
    if not any(weights):
        raise ValueError(f"nothing to score in {spec.source + spec.target!r}")
    if not prompt:
        return {"targets": row, TARGETS_WEIGHTS: weights}
    first = weights.index(1)
    return {"inputs": row[:first], "targets": row[first:], TARGETS_WEIGHTS: weights[first:]}


# --- the five formats ------------------------------------------------------------------------


def format_lm(row: Mapping[str, str]) -> dict[str, str]:
    return {"targets": context_prefix(row) + probe_text(row), **_passthrough(row)}


def format_lm_object(row: Mapping[str, str]) -> dict[str, str]:
    # The leading space belongs to the object: byte-level BPE then splits the text exactly as
    # it splits the whole probe, so prefix + object tokens are the probe's tokens.
    return {
        "inputs": f"{context_prefix(row)}{row['subject']} {row['relation']}",
        "targets": f" {row['object']}",
        **_passthrough(row),
    }


def format_lm_cloze(row: Mapping[str, str]) -> dict[str, str]:
    spec = probe_spec(row, "cloze", sentinel=False)
    return {"targets": spec.source + spec.target, **_passthrough(row)}


def format_ssm(row: Mapping[str, str]) -> dict[str, str]:
    return {
        "inputs": f"{context_prefix(row)}{row['subject']} {row['relation']} {SENTINEL}",
        "targets": f"{SENTINEL} {row['object']}",
        **_passthrough(row),
    }


def format_ssm_cloze(row: Mapping[str, str]) -> dict[str, str]:
    example = format_ssm(row)
    cloze = masked_cloze(row)
    if cloze is not None:
        example["inputs"] = context_prefix(row) + cloze
    return example


@dataclass(frozen=True)
class ProbeFormat:
    """One format: task-name suffix (a causal format's, in GPT-2's vocabulary), vocabulary kind
    (``t5`` or ``causal``), the texts (``*_pretokenized`` and the passthrough strings), the
    perplexity variant its tokens score, and whether it generates an object after a prompt in
    ``inputs``."""

    suffix: str
    kind: str
    formatter: Formatter
    variant: str
    generates: bool

    @property
    def keys(self) -> tuple[str, ...]:
        return ("inputs", "targets") if self.generates else ("targets",)


FORMATS: tuple[ProbeFormat, ...] = (
    ProbeFormat("", CAUSAL, format_lm, "text", False),
    ProbeFormat("_object", CAUSAL, format_lm_object, "object", True),
    ProbeFormat("_cloze", CAUSAL, format_lm_cloze, "cloze", False),
    ProbeFormat("_ssm", "t5", format_ssm, "text", True),
    ProbeFormat("_ssm_cloze", "t5", format_ssm_cloze, "cloze", True),
)


# The question-answering form of the probes (inputs → the object) per training objective:
# what light-tuning trains a model of that objective on (``twiki_lighttuning_<P>_all{suffix}``);
# any objective's: :func:`tw_jax.tasks.names.qa_suffix`.
QA_SUFFIX: dict[str, str] = {"lm": "_object", "ssm": "_ssm"}


def task_formats(
    vocabularies: Mapping[str, seqio.Vocabulary],
    causal: Mapping[str, seqio.Vocabulary] | None = None,
) -> list[tuple[str, ProbeFormat, seqio.Vocabulary]]:
    """``(suffix, format, vocabulary)`` of every probe task set: T5's formats, and the causal
    formats once per causal objective (``causal``: objective -> vocabulary, default GPT-2's
    ``lm``), suffixed as :func:`tw_jax.tasks.names.probe_suffix` says."""
    causal = causal or {names.LM: vocabularies["gpt2"]}
    found = []
    for fmt in FORMATS:
        if fmt.kind != CAUSAL:
            found.append((fmt.suffix, fmt, vocabularies[fmt.kind]))
            continue
        for objective, vocabulary in causal.items():
            found.append((names.probe_suffix(objective, fmt.variant), fmt, vocabulary))
    return found


def probe_dataset(
    rows: Sequence[Mapping[str, str]], fmt: ProbeFormat, vocabulary: Any
) -> tf.data.Dataset:
    """One example per row, in row order: token features (:func:`probe_features`), the texts
    as ``inputs_pretokenized``/``targets_pretokenized``, and the passthrough strings."""
    texts = [fmt.formatter(row) for row in rows]
    tokens = [probe_features(probe_spec(row, fmt.variant, sentinel=fmt.kind == "t5"),
                             vocabulary, fmt.kind, prompt=fmt.generates) for row in rows]
    columns: dict[str, tf.Tensor] = {}
    for key in (*fmt.keys, *PASSTHROUGH):
        name = f"{key}_pretokenized" if key in fmt.keys else key
        columns[name] = tf.constant([t[key] for t in texts], tf.string, shape=[len(rows)])
    for key in (*fmt.keys, TARGETS_WEIGHTS):
        lists = [t[key] for t in tokens]
        dense = np.zeros((len(lists), max(map(len, lists), default=0)), np.int32)
        for i, ids in enumerate(lists):
            dense[i, : len(ids)] = ids
        columns[key] = tf.constant(dense)
        columns[f"{key}_length"] = tf.constant([len(ids) for ids in lists], tf.int32,
                                               shape=[len(rows)])
    token_keys = (*fmt.keys, TARGETS_WEIGHTS)

    def unpad(ex: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        out = {k: v for k, v in ex.items() if not k.endswith("_length")}
        out.update({k: ex[k][: ex[f"{k}_length"]] for k in token_keys})
        return out

    return tf.data.Dataset.from_tensor_slices(columns).map(unpad)


class ProbeSource(seqio.FunctionDataSource):
    """Examples of one format from rows that ``load`` reads when a dataset is built (the
    vocabulary is loaded then too, so a missing one fails here, naming its path)."""

    def __init__(self, load: Callable[[], list[dict[str, str]]], fmt: ProbeFormat,
                 vocabulary: Any, splits: Sequence[str]) -> None:
        self._load = load

        def dataset_fn(split: str, shuffle_files: bool, seed: int | None = None) -> tf.data.Dataset:
            del split, shuffle_files, seed  # one file; the task shuffles examples if asked
            return probe_dataset(self._load(), fmt, _real(vocabulary))

        super().__init__(dataset_fn=dataset_fn, splits=splits)

    def rows(self) -> list[dict[str, str]]:
        return self._load()


def _cut(tokens: tf.Tensor, length: int, keep_last: bool) -> tf.Tensor:
    if not keep_last:
        return tokens[:length]
    return tf.cond(tf.size(tokens) > length,
                   lambda: tf.concat([tokens[: length - 1], tokens[-1:]], axis=0),
                   lambda: tokens)


def trim_to_lengths(
    dataset: tf.data.Dataset,
    sequence_length: Mapping[str, int] | None = None,
    output_features: Mapping[str, seqio.Feature] | None = None,
) -> tf.data.Dataset:
    """Token features cut to ``sequence_length`` (``targets_weights`` with ``targets``); a
    feature ending with EOS (T5) keeps it last, as seqio's ``append_eos_after_trim`` does.
    Without lengths nothing is cut (``seqio.Evaluator`` then measures the longest example)."""
    if not sequence_length or not output_features:
        return dataset

    def trim(ex: Mapping[str, tf.Tensor]) -> dict[str, tf.Tensor]:
        out = dict(ex)
        for key, feature in output_features.items():
            length = sequence_length.get(key)
            if key not in ex or not length:
                continue
            for name in (key, TARGETS_WEIGHTS) if key == "targets" else (key,):
                out[name] = _cut(ex[name], int(length), feature.add_eos)
        return out

    return dataset.map(trim, num_parallel_calls=tf.data.AUTOTUNE)


def output_features(
    kind: str, keys: Sequence[str], vocabulary: seqio.Vocabulary
) -> dict[str, seqio.Feature]:
    # T5 ends inputs and targets with EOS as in its pretraining; a causal LM's text has none.
    return {k: seqio.Feature(vocabulary, add_eos=kind == "t5") for k in keys}


def register_row_tasks(
    registrar: Registrar,
    base_name: str,
    load: Callable[[], list[dict[str, str]]],
    vocabularies: Mapping[str, seqio.Vocabulary],
    splits: Sequence[str],
    causal: Mapping[str, seqio.Vocabulary] | None = None,
) -> list[str]:
    """The formats of one CSV (see the module docstring; the causal ones per ``causal``
    objective, :func:`task_formats`); returns the task names."""
    found = []
    for suffix, fmt, vocabulary in task_formats(vocabularies, causal):
        metric_fns = [metrics.perplexity] + ([metrics.squad] if fmt.generates else [])
        registrar.task(
            base_name + suffix,
            source=ProbeSource(load, fmt, vocabulary, splits),
            output_features=output_features(fmt.kind, fmt.keys, vocabulary),
            preprocessors=[cache_point(), trim_to_lengths],
            postprocess_fn=metrics.probe_postprocessor,
            metric_fns=metric_fns,
        )
        found.append(base_name + suffix)
    return found


def _reader(path: str) -> Callable[[], list[dict[str, str]]]:
    return probe_rows(path)  # the CSV, or its prepared TFDS split (sources.use_tfds)


def _has_rows(path: str) -> bool:
    """Whether a probes CSV has a row after its header (two lines read, not the file)."""
    with paths.open_file(path, "rb") as handle:
        handle.readline()
        return bool(handle.readline().strip())


def register_probe_folder(
    registrar: Registrar,
    period: Period,
    folder: str,
    vocabularies: Mapping[str, seqio.Vocabulary],
    exists: Callable[[str], bool],
    source: str | None = None,
    causal: Mapping[str, seqio.Vocabulary] | None = None,
) -> list[str]:
    """Probe and light-tuning tasks of one ``probes/`` folder (``source``: the retriever of an
    open-book ``probes_<source>/`` folder), for the CSVs present; the causal formats once per
    ``causal`` objective (:func:`task_formats`)."""
    found = []
    for prefix, stem, splits in (
        (names.PROBES, "{}.csv", PROBE_SPLITS),
        (names.LIGHTTUNING, "lighttuning_{}.csv", LIGHTTUNING_SPLITS),
    ):
        def name(category: str | None, suffix: str = "", prefix: str = prefix) -> str:
            return names.probes(period, category, suffix, source, prefix=prefix)

        lighttuning = prefix == names.LIGHTTUNING
        present = {c: join(folder, stem.format(c)) for c in CATEGORIES}
        present = {c: path for c, path in present.items() if exists(path)}
        for category, path in present.items():
            found += register_row_tasks(
                registrar, name(category), _reader(path), vocabularies, splits, causal
            )
        if "updated" in present and "new" in present:
            load = concatenated(_reader(present["updated"]), _reader(present["new"]))
            found += register_row_tasks(
                registrar, name("changed"), load, vocabularies, splits, causal
            )
        mix = [_reader(present[c]) for c in LIGHTTUNING_MIX if c in present]
        if lighttuning and mix:
            found += register_row_tasks(
                registrar, name("all"), concatenated(*mix), vocabularies, splits, causal
            )
        # seqio.Evaluator cannot evaluate a task without examples: the mixtures hold the
        # categories with rows (a month may delete no fact)
        categories = [c for c, path in present.items() if _has_rows(path)]
        if not lighttuning and {"updated", "new"} & set(categories) and \
                {"updated", "new"} <= set(present):
            categories.append("changed")  # a light-tuning mixture repeats no row
        for suffix, _, _ in task_formats(vocabularies, causal):
            if registrar.eval_mixture(name(None, suffix),
                                      [name(c, suffix) for c in categories]):
                found.append(name(None, suffix))
    return found
