"""TWiki-Probes and light-tuning tasks: one example per CSV row, in four formats.

For probes ``DATA_DIR/<MMMM>/probes/{category}.csv`` (category unchanged, updated, new,
deleted; ``changed`` = updated then new, the final paper's CHANGED) and light-tuning sets
``lighttuning_{category}.csv``:

==========================================  =======  ===========================================
task                                        model    example
==========================================  =======  ===========================================
``twiki_probes_MMMM_{category}``            GPT-2    targets: the probe text ``subject relation
                                                     object`` — the paper's format, every token
                                                     scored (as the reference)
``twiki_probes_MMMM_{category}_object``     GPT-2    inputs ``subject relation``, targets
                                                     `` object``: the object alone is scored or
                                                     generated
``twiki_probes_MMMM_{category}_ssm``        T5       ``subject relation <extra_id_0>`` →
                                                     ``<extra_id_0> object``
``twiki_probes_MMMM_{category}_ssm_cloze``  T5       the cloze sentence with the object masked
                                                     → ``<extra_id_0> object`` (rows without a
                                                     cloze sentence use the ``_ssm`` input, so
                                                     every format has one example per row)
==========================================  =======  ===========================================

Light-tuning tasks are named ``twiki_lighttuning_MMMM_{category}`` with the same suffixes, and
``twiki_lighttuning_MMMM_all`` holds the UNCHANGED, UPDATED and NEW sets together (what one
light-tuning run trains on).
Every example also carries ``subject``, ``relation``, ``object`` and ``previous_object`` (UPDATED
probes' earlier objects, `` | ``-separated) as strings for the evaluator. Metrics: perplexity
from scores on every format, SQuAD EM/F1 from predictions on the formats that generate an
object (``_object``, ``_ssm``, ``_ssm_cloze``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import seqio

from tw_jax.preprocess.probes.probe_csv import SENTINEL, masked_cloze, read_probe_csv
from tw_jax.tasks import metrics
from tw_jax.tasks.layout import join
from tw_jax.tasks.preprocessors import tokenize_keep_text
from tw_jax.tasks.registration import Registrar
from tw_jax.tasks.sources import Formatter, RowsSource, concatenated
from tw_jax.tasks.vocab import load_vocabularies

CATEGORIES = ("unchanged", "updated", "new", "deleted")
PASSTHROUGH = ("subject", "relation", "object", "previous_object")
PROBE_SPLITS = ("validation", "test")
LIGHTTUNING_SPLITS = ("train",)
# The light-tuning sets one light-tuning run trains on (``twiki_lighttuning_MMMM_all``): not
# DELETED, whose facts no longer hold.
LIGHTTUNING_MIX = ("unchanged", "updated", "new")


def _passthrough(row: Mapping[str, str]) -> dict[str, str]:
    return {k: row.get(k, "") for k in PASSTHROUGH}


def probe_text(row: Mapping[str, str]) -> str:
    """The paper's probe text ``subject relation object`` (the CSV's ``text`` when present)."""
    return row.get("text") or f"{row['subject']} {row['relation']} {row['object']}"


def format_lm(row: Mapping[str, str]) -> dict[str, str]:
    return {"targets": probe_text(row), **_passthrough(row)}


def format_lm_object(row: Mapping[str, str]) -> dict[str, str]:
    # The leading space belongs to the object: byte-level BPE then splits the text exactly as
    # it splits the whole probe, so prefix + object tokens are the probe's tokens.
    return {
        "inputs": f"{row['subject']} {row['relation']}",
        "targets": f" {row['object']}",
        **_passthrough(row),
    }


def format_ssm(row: Mapping[str, str]) -> dict[str, str]:
    return {
        "inputs": f"{row['subject']} {row['relation']} {SENTINEL}",
        "targets": f"{SENTINEL} {row['object']}",
        **_passthrough(row),
    }


def format_ssm_cloze(row: Mapping[str, str]) -> dict[str, str]:
    example = format_ssm(row)
    cloze = masked_cloze(row)
    if cloze is not None:
        example["inputs"] = cloze
    return example


# (suffix, vocabulary kind, formatter, output feature keys, generates an object)
FORMATS: tuple[tuple[str, str, Formatter, tuple[str, ...], bool], ...] = (
    ("", "gpt2", format_lm, ("targets",), False),
    ("_object", "gpt2", format_lm_object, ("inputs", "targets"), True),
    ("_ssm", "t5", format_ssm, ("inputs", "targets"), True),
    ("_ssm_cloze", "t5", format_ssm_cloze, ("inputs", "targets"), True),
)


# The question-answering form of the probes (inputs → the object) per training objective:
# what light-tuning trains a model of that objective on (``twiki_lighttuning_MMMM_all{suffix}``).
QA_SUFFIX: dict[str, str] = {"lm": "_object", "ssm": "_ssm"}


def output_features(
    kind: str, keys: Sequence[str], vocabularies: Mapping[str, seqio.Vocabulary]
) -> dict[str, seqio.Feature]:
    # T5 ends inputs and targets with EOS as in its pretraining; GPT-2 text has none.
    return {k: seqio.Feature(vocabularies[kind], add_eos=kind == "t5") for k in keys}


def register_row_tasks(
    registrar: Registrar,
    base_name: str,
    load: Callable[[], list[dict[str, str]]],
    vocabularies: Mapping[str, seqio.Vocabulary],
    splits: Sequence[str],
) -> list[str]:
    """The four formats of one CSV (see the module docstring); returns the task names."""
    names = []
    for suffix, kind, formatter, keys, generates in FORMATS:
        metric_fns = [metrics.perplexity] + ([metrics.squad] if generates else [])
        registrar.task(
            base_name + suffix,
            source=RowsSource(load, formatter, splits),
            output_features=output_features(kind, keys, vocabularies),
            preprocessors=[
                load_vocabularies,
                tokenize_keep_text,
                seqio.preprocessors.append_eos_after_trim,
            ],
            postprocess_fn=metrics.probe_postprocessor,
            metric_fns=metric_fns,
        )
        names.append(base_name + suffix)
    return names


def _reader(path: str) -> Callable[[], list[dict[str, str]]]:
    return lambda: read_probe_csv(path)


def register_probe_folder(
    registrar: Registrar,
    pair: str,
    folder: str,
    vocabularies: Mapping[str, seqio.Vocabulary],
    exists: Callable[[str], bool],
) -> list[str]:
    """Probe and light-tuning tasks of one ``probes/`` folder, for the CSVs present."""
    names = []
    for prefix, stem, splits in (
        ("twiki_probes", "{}.csv", PROBE_SPLITS),
        ("twiki_lighttuning", "lighttuning_{}.csv", LIGHTTUNING_SPLITS),
    ):
        present = {c: join(folder, stem.format(c)) for c in CATEGORIES}
        present = {c: path for c, path in present.items() if exists(path)}
        for category, path in present.items():
            names += register_row_tasks(
                registrar, f"{prefix}_{pair}_{category}", _reader(path), vocabularies, splits
            )
        if "updated" in present and "new" in present:
            load = concatenated(_reader(present["updated"]), _reader(present["new"]))
            names += register_row_tasks(
                registrar, f"{prefix}_{pair}_changed", load, vocabularies, splits
            )
        mix = [_reader(present[c]) for c in LIGHTTUNING_MIX if c in present]
        if prefix == "twiki_lighttuning" and mix:
            names += register_row_tasks(
                registrar, f"{prefix}_{pair}_all", concatenated(*mix), vocabularies, splits
            )
    return names
