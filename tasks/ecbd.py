"""Entity Cloze By Date files: the reader, the four input types, and seqio tasks for T5.

Files are JSON lines, one masked span each, as released (``ecbd/{subset}/{np,random}_spans_
{dev,test}.json``, subsets ``2017`` … ``2021`` and ``popular``) and as ``tw-jax ecbd build`` writes
them. Each line needs ``ex_id`` (``{title}_{pageid}_{paragraph}_{sentence}``; the page id, third
from the right, identifies the entity), ``masked_sentence`` (one ``<extra_id_0>``), ``answer_str``
(``<extra_id_0> span <extra_id_1>``), ``span_type`` and ``definition`` (the first paragraph's
sentences, a list or one string; ``[ENT_START]``/``[ENT_END]`` marks are dropped). The gold span
is ``answer_d["<extra_id_0>"]`` when present, else what ``answer_str`` holds between its
sentinels. A bad line is a :class:`DumpError` naming the file and the line.

Input types (ECBD §3):

- ``original``: the masked sentence;
- ``no_ent``: the entity mention replaced by "the entity" ("The entity" at the start), found by
  ``entity_span_char`` (builder files), else the first occurrence of ``entity_span_str`` on word
  boundaries before the mask, else anywhere; a sentence without it stays as it is (counted);
- ``definition``: the entity's first ``n_definition`` definition sentences (1: "the first
  sentence of the entity's Wikipedia article"), a space, the masked sentence;
- ``random_def``: the same with the definition of another entity, drawn uniformly (from a
  generator seeded by the seed and the example's subset, split and content, not its file's
  location) among all other entities of the examples given -- every subset and split read
  together, so even a subset with one entity gets one.

Tasks: :func:`register_ecbd` registers ``ecbd_{subset}_{split}`` (T5, inputs the masked sentence,
targets ``answer_str``) and ``ecbd_{subset}_{split}_{no_ent,definition,random_def}``, one example
per line, for ``tw-jax eval``/``infer`` and training, and the evaluation mixtures
``ecbd_{split}[_{input_type}]`` of every subset's task (each keeping its own metrics). The ECBD metric (perplexity of the span
only, entity-averaged) is :mod:`tw_jax.evaluate.ecbd`, which ``tw-jax ecbd eval`` runs.
"""

from __future__ import annotations

import os
import random
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tw_jax.errors import DumpError
from tw_jax.io import paths
from tw_jax.io.jsonl import parse_record
from tw_jax.preprocess.dumps.released import PublishedFile, index_files
from tw_jax.tasks import metrics
from tw_jax.tasks.layout import resolve_data_dir
from tw_jax.tasks.preprocessors import cache_point, tokenize_keep_text
from tw_jax.tasks.registration import Registrar
from tw_jax.tasks.sources import RowsSource, tfds_active, tfds_rows
from tw_jax.tasks.vocab import LazyVocabulary, load_vocabularies, t5_path
from tw_jax.time import is_year, parse_year

SENTINEL_0, SENTINEL_1 = "<extra_id_0>", "<extra_id_1>"
SPLITS = ("dev", "test")
# The released subsets: the ``ecbd`` TFDS builder's configs (another subset stays on its files).
SUBSETS = ("2017", "2018", "2019", "2020", "2021", "popular")
NO_CHAR = -1  # a TFDS example's entity_span_char half without one (the released files)
INPUTS = ("original", "no_ent", "random_def", "definition")
REPLACE_TOKEN = "the entity"
_FILE = re.compile(r"^(np|random)_spans_(dev|test)\.jsonl?$")
_ENT_TAGS = re.compile(r"\[ENT_(?:START|END)\]")
_REQUIRED = ("ex_id", "masked_sentence", "answer_str", "span_type", "definition")


@dataclass(frozen=True)
class EcbdExample:
    """One masked span of an ECBD file."""

    ex_id: str
    masked_sentence: str
    answer_str: str
    span: str
    span_type: str
    definition: tuple[str, ...]
    entity: str  # the page id from ex_id: examples of one entity share it
    subset: str
    split: str
    source: str  # "file:line"
    entity_span_str: str | None = None
    entity_span_char: tuple[int, int] | None = None

    @property
    def span_group(self) -> str:
        """``NP`` for NP-COMMON / NP-PROPER / NP, ``RANDOM`` for random spans (ECBD Table 6)."""
        kind = self.span_type.upper()
        if kind.startswith("NP"):
            return "NP"
        return "RANDOM" if kind.startswith("RAND") else self.span_type


def _span_of(record: Mapping, answer: str) -> str | None:
    answer_d = record.get("answer_d")
    if isinstance(answer_d, Mapping) and isinstance(answer_d.get(SENTINEL_0), str):
        return answer_d[SENTINEL_0].strip()
    match = re.fullmatch(r"\s*" + re.escape(SENTINEL_0) + r"(.*?)(?:" + re.escape(SENTINEL_1)
                         + r"\s*)?", answer, re.S)
    return match.group(1).strip() if match else None


def parse_example(line: str, path: str, number: int, subset: str, split: str) -> EcbdExample:
    """One line of an ECBD file (see the module docstring)."""
    where = f"line {number}"
    record = parse_record(line, path, number)
    missing = [f for f in _REQUIRED if f not in record]
    if missing:
        raise DumpError(path, where, f"missing {', '.join(missing)}")
    texts = [f for f in ("ex_id", "masked_sentence", "answer_str", "span_type")
             if not isinstance(record[f], str)]
    if texts:
        raise DumpError(path, where, f"{', '.join(texts)} must be strings")
    masked = record["masked_sentence"]
    if masked.count(SENTINEL_0) != 1:
        raise DumpError(path, where, f"masked_sentence has {masked.count(SENTINEL_0)} "
                        f"{SENTINEL_0}, expected exactly one")
    span = _span_of(record, record["answer_str"])
    if not span:
        raise DumpError(path, where, f"no span in answer_str {record['answer_str']!r}")
    parts = record["ex_id"].split("_")
    if len(parts) < 4:
        raise DumpError(path, where, f"ex_id {record['ex_id']!r} is not "
                        "{title}_{pageid}_{paragraph}_{sentence}")
    definition = record["definition"]
    if isinstance(definition, str):
        definition = [definition]
    if not isinstance(definition, list) or not all(isinstance(s, str) for s in definition):
        raise DumpError(path, where, "definition must be a list of sentences or a string")
    chars = record.get("entity_span_char")
    mention = record.get("entity_span_str")
    return EcbdExample(
        ex_id=record["ex_id"],
        masked_sentence=masked,
        answer_str=record["answer_str"],
        span=span,
        span_type=record["span_type"],
        definition=tuple(_ENT_TAGS.sub("", s).strip() for s in definition),
        entity=parts[-3],
        subset=subset,
        split=split,
        source=f"{path}:{number}",
        entity_span_str=mention if isinstance(mention, str) and mention else None,
        entity_span_char=tuple(chars) if isinstance(chars, list) and len(chars) == 2 else None,
    )


EcbdFile = str | PublishedFile  # a file of a folder (local or in a bucket), or a zip member


def read_ecbd_file(file: str | os.PathLike[str] | PublishedFile, subset: str, split: str
                   ) -> list[EcbdExample]:
    """Every example of one file (local, in a bucket, or in a zip read in place), in file order
    (blank lines skipped)."""
    if isinstance(file, PublishedFile):
        name, opened = file.name, file.open_text
    else:
        name = os.fspath(file)
        opened = lambda: paths.open_file(name, "r", encoding="utf-8")  # noqa: E731
    try:
        with opened() as handle:
            return [parse_example(line, name, n, subset, split)
                    for n, line in enumerate(handle, 1) if line.strip()]
    except UnicodeDecodeError as error:
        raise DumpError(name, f"byte {error.start}", "not UTF-8") from None


def discover(folder: str | os.PathLike[str]) -> dict[tuple[str, str], list[EcbdFile]]:
    """``{(subset, split): [files]}`` of an ECBD folder (local or in a bucket):
    ``folder/{subset}/…`` or one subset's files directly in ``folder`` (the folder's name is
    then the subset); or of the release as downloaded (a zip, or a folder holding zips: each
    file's subset is the folder it sits in inside the zip, members read in place with the
    release reader's checks, :mod:`tw_jax.preprocess.dumps.released`)."""
    root = os.fspath(folder).rstrip("/") or "/"
    if paths.isfile(root) or (paths.isdir(root) and any(
            name.lower().endswith(".zip") for name in paths.listdir(root))):
        found = _archived(root)
    elif not paths.isdir(root):
        raise DumpError(root, None, "no such ECBD folder")
    else:
        found = _in_folders(root)
    if not found:
        raise DumpError(root, None, "no ECBD files ({subset}/np_spans_dev.json, …)")
    return found


def _in_folders(root: str) -> dict[tuple[str, str], list[EcbdFile]]:
    found: dict[tuple[str, str], list[EcbdFile]] = {}
    below = [paths.join(root, name) for name in paths.listdir(root)]
    for directory in [root, *sorted(p for p in below if paths.isdir(p))]:
        for name in paths.listdir(directory):
            match = _FILE.match(name)
            path = paths.join(directory, name)
            if match and paths.isfile(path):
                subset = os.path.basename(directory)
                found.setdefault((subset, match.group(2)), []).append(path)
    return found


def _archived(root: str) -> dict[tuple[str, str], list[EcbdFile]]:
    found: dict[tuple[str, str], list[EcbdFile]] = {}
    for file in sorted(index_files(root), key=lambda f: f.path):
        match = _FILE.match(file.path.name)
        if match:
            subset = file.path.parent.name or os.path.basename(root).removesuffix(".zip")
            found.setdefault((subset, match.group(2)), []).append(file)
    return found


def subset_order(subset: str) -> tuple[int, int, str]:
    """``popular`` first, then years in order, then any other name."""
    if subset == "popular":
        return (0, 0, subset)
    if is_year(subset):
        return (1, parse_year(subset), subset)
    return (2, 0, subset)


def read_ecbd(
    folder: str | os.PathLike[str],
    subsets: Iterable[str] | None = None,
    splits: Iterable[str] | None = None,
    *,
    from_tfds: bool = False,
) -> dict[tuple[str, str], list[EcbdExample]]:
    """The examples of an ECBD folder by (subset, split), optionally only some of them.

    ``from_tfds``: the subsets that have an ``ecbd`` TFDS config are read from the datasets
    prepared from the folder (:func:`tw_jax.tasks.sources.use_tfds`), the same examples in the
    same order; the folder still says which subsets and splits there are."""
    wanted_subsets = set(subsets) if subsets is not None else None
    wanted_splits = set(splits) if splits is not None else None
    out = {}
    for (subset, split), files in sorted(discover(folder).items(),
                                         key=lambda kv: (subset_order(kv[0][0]), kv[0][1])):
        if (wanted_subsets is not None and subset not in wanted_subsets) or (
                wanted_splits is not None and split not in wanted_splits):
            continue
        if from_tfds and subset in SUBSETS:
            out[(subset, split)] = [_tfds_example(row, subset, split, index) for index, row
                                    in enumerate(tfds_rows("ecbd", subset, split))]
        else:
            out[(subset, split)] = [ex for path in files
                                    for ex in read_ecbd_file(path, subset, split)]
    return out


def _tfds_example(row: Mapping[str, Any], subset: str, split: str, index: int) -> EcbdExample:
    """An example of the ``ecbd`` TFDS builder's features (``tw_jax.datasets.ecbd``)."""
    chars = tuple(row["entity_span_char"])
    return EcbdExample(
        ex_id=row["ex_id"], masked_sentence=row["masked_sentence"], answer_str=row["answer_str"],
        span=row["span"], span_type=row["span_type"], definition=tuple(row["definition"]),
        entity=row["entity"], subset=subset, split=split,
        source=f"ecbd/{subset}[{split}]:{index}",
        entity_span_str=row["entity_span_str"] or None,
        entity_span_char=None if chars == (NO_CHAR, NO_CHAR) else (int(chars[0]), int(chars[1])),
    )


# --- input types --------------------------------------------------------------------------


def definition_text(definition: Sequence[str], n_definition: int = 1) -> str:
    """The first ``n_definition`` sentences (all when 0), joined by spaces."""
    chosen = definition if n_definition <= 0 else definition[:n_definition]
    return " ".join(s for s in chosen if s)


def _mention_at(example: EcbdExample) -> tuple[int, int] | None:
    sentence, mention = example.masked_sentence, example.entity_span_str
    if mention is None:
        return None
    chars = example.entity_span_char
    if chars is not None and sentence[chars[0] : chars[1]] == mention:
        return chars
    pattern = re.compile(r"(?<!\w)" + re.escape(mention) + r"(?!\w)")
    mask_at = sentence.index(SENTINEL_0)
    found = list(pattern.finditer(sentence))
    before = [m for m in found if m.end() <= mask_at]
    match = (before or found or [None])[0]
    return (match.start(), match.end()) if match is not None else None


def without_entity(example: EcbdExample, replace: str = REPLACE_TOKEN) -> str | None:
    """The masked sentence with the mention replaced by ``replace``; None if it is not found."""
    at = _mention_at(example)
    if at is None:
        return None
    sentence = example.masked_sentence
    token = replace[:1].upper() + replace[1:] if not sentence[: at[0]].strip() else replace
    return sentence[: at[0]] + token + sentence[at[1] :]


def random_definitions(
    examples: Sequence[EcbdExample], n_definition: int = 1, seed: int = 0
) -> list[str | None]:
    """For each example, the definition of another entity (None when there is no other)."""
    pool: dict[str, str] = {}
    for ex in examples:
        text = definition_text(ex.definition, n_definition)
        if text:
            pool.setdefault(ex.entity, text)
    entities = sorted(pool)
    out: list[str | None] = []
    for ex in examples:
        others = [e for e in entities if e != ex.entity]
        out.append(pool[random.Random(_draw_key(seed, ex)).choice(others)] if others else None)
    return out


def _draw_key(seed: int, example: EcbdExample) -> str:
    """What seeds an example's draw: its content, not where its file lies, so a folder moved
    to a bucket, or read from its prepared TFDS dataset, draws the same definitions."""
    return (f"{seed}:{example.subset}:{example.split}:{example.ex_id}:{example.span_type}:"
            f"{example.span}:{example.masked_sentence}")


def input_sentence(
    example: EcbdExample, input_type: str, *, n_definition: int = 1,
    random_definition: str | None = None,
) -> str | None:
    """The masked sentence for one input type; None when the type cannot be built for it."""
    if input_type == "original":
        return example.masked_sentence
    if input_type == "no_ent":
        return without_entity(example)
    if input_type == "definition":
        prefix = definition_text(example.definition, n_definition)
    elif input_type == "random_def":
        prefix = random_definition or ""
    else:
        raise ValueError(f"unknown input type {input_type!r}; known: {', '.join(INPUTS)}")
    return f"{prefix} {example.masked_sentence}" if prefix else None


# --- seqio tasks ----------------------------------------------------------------------------


def task_name(subset: str, split: str, input_type: str = "original") -> str:
    base = f"ecbd_{re.sub(r'[^0-9A-Za-z_]', '_', subset)}_{split}"
    return base if input_type == "original" else f"{base}_{input_type}"


def _rows(examples: Sequence[EcbdExample], input_type: str, n_definition: int,
          seed: int, pool: Sequence[EcbdExample]) -> list[dict[str, str]]:
    randoms = random_definitions(pool, n_definition, seed) if input_type == "random_def" else None
    by_source = {ex.source: i for i, ex in enumerate(pool)}
    rows = []
    for ex in examples:
        rand = randoms[by_source[ex.source]] if randoms is not None else None
        text = input_sentence(ex, input_type, n_definition=n_definition, random_definition=rand)
        rows.append({"inputs": text if text is not None else ex.masked_sentence,
                     "targets": ex.answer_str, "ex_id": ex.ex_id, "span_type": ex.span_type})
    return rows


def _task_row(row: Mapping[str, str]) -> dict[str, str]:
    return {k: row.get(k, "") for k in ("inputs", "targets", "ex_id", "span_type")}


def register_ecbd(
    folder: str | os.PathLike[str],
    t5_vocab: str | None = None,
    input_types: Sequence[str] = INPUTS,
    *,
    n_definition: int = 1,
    seed: int = 0,
) -> list[str]:
    """Registers the T5 tasks of an ECBD folder (see the module docstring); returns the names.

    ``t5_vocab`` defaults as the other tasks' (``TW_JAX_T5_VOCAB`` or ``DATA_DIR/vocab/t5``).
    Registering again replaces the tasks of the previous call.
    """
    import seqio

    unknown = [t for t in input_types if t not in INPUTS]
    if unknown:
        raise ValueError(f"unknown input types {unknown}; known: {', '.join(INPUTS)}")
    data = read_ecbd(folder, from_tfds=tfds_active())
    pool = [ex for examples in data.values() for ex in examples]
    vocabulary = LazyVocabulary("t5", t5_path(resolve_data_dir(None), t5_vocab))
    features = {k: seqio.Feature(vocabulary, add_eos=True) for k in ("inputs", "targets")}
    registrar = Registrar("ecbd")
    names = []
    for (subset, split), examples in data.items():
        if not examples:
            continue
        for input_type in input_types:
            def load(examples=examples, input_type=input_type) -> list[dict[str, str]]:
                return _rows(examples, input_type, n_definition, seed, pool)

            name = task_name(subset, split, input_type)
            registrar.task(
                name,
                source=RowsSource(load, _task_row, ("validation", "test")),
                output_features=features,
                preprocessors=[load_vocabularies, tokenize_keep_text, cache_point(),
                               seqio.preprocessors.append_eos_after_trim],
                metric_fns=[metrics.perplexity],
            )
            names.append(name)
    for split in sorted({split for (_, split), examples in data.items() if examples}):
        for input_type in input_types:
            tasks = [task_name(subset, s, input_type) for (subset, s), examples in data.items()
                     if s == split and examples]
            mixture = mixture_name(split, input_type)
            registrar.eval_mixture(mixture, tasks)
            names.append(mixture)
    return names


def mixture_name(split: str, input_type: str = "original") -> str:
    """``ecbd_{split}[_{input_type}]``: every subset's task of one split and input type."""
    base = f"ecbd_{split}"
    return base if input_type == "original" else f"{base}_{input_type}"
