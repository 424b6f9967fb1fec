"""Every TemporalWiki task and mixture name, built from its period in one place.

A name holds a period's or snapshot's token (:attr:`tw_jax.time.Period.token`): ``0809`` and
``08`` for a folder of the 2021 layout, ``202412_202501`` and ``202412`` (``20240220`` for a day
other than the first) otherwise. Nothing else writes these names by hand.

======================================================  ========================================
name                                                    what
======================================================  ========================================
``twiki_diffset_<period>_<objective>``                  the DiffSet (T5 SSM / causal LM)
``twiki_nondiff_<period>_<lm objective>``               the NON-DiffSet (unchanged articles)
``twiki_intrinsic_<period>_<lm objective>``             the two, an evaluation mixture
``twiki_full_<snapshot>_<objective>``                   a full snapshot
``twiki_mixreview_<period>_<objective>``                Mix-Review: DiffSet + initial snapshot
``twiki_replay_<period>_<objective>``                   replay: DiffSet + earlier data, a ratio
``twiki_probes_<period>[_<source>][_<category>]<fmt>``  probes (``source``: open-book retriever)
``twiki_lighttuning_<period>_<category><fmt>``          light-tuning sets (``all``: the mix)
======================================================  ========================================

An objective is ``ssm``, ``lm`` or ``lm_<tokenizer>`` (below). ``objective`` defaults to the
placeholder ``{objective}``, which a run fills with its model's
(:func:`tw_jax.runtime.task_data.task_name`), as the gin files' ``MIXTURE_OR_TASK_NAME`` does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tw_jax.time import Period, Snapshot, TimeError

OBJECTIVE = "{objective}"
PROBES = "twiki_probes"
LIGHTTUNING = "twiki_lighttuning"

# --- objectives: the task form a model trains on ------------------------------------------
#
# ``ssm`` (T5's salient span masking), ``lm`` (a causal LM in GPT-2's vocabulary, the papers'
# tasks), and ``lm_<tokenizer>`` (a causal LM in a model folder's own tokenizer, registered
# under that name: ``lm_llama_3_2_1b``). The probe formats of an objective (task-name suffixes):
#
# ===============  ===========  ===================  ==================
# objective        text         object (the prompt)  cloze
# ===============  ===========  ===================  ==================
# ``lm``           (none)       ``_object``          ``_cloze``
# ``lm_<name>``    ``_lm_<n>``  ``_lm_<n>_object``   ``_lm_<n>_cloze``
# ``ssm``          ``_ssm``     ``_ssm``             ``_ssm_cloze``
# ===============  ===========  ===================  ==================

LM = "lm"
SSM = "ssm"
_TOKENIZER = re.compile(r"[a-z0-9]+(?:_[a-z0-9]+)*")


def tokenizer_name(text: str) -> str:
    """A tokenizer's name as task names spell it: lower case, runs of anything but letters and
    digits as one ``_`` (a model folder ``Llama-3.2-1B`` gives ``llama_3_2_1b``)."""
    name = "_".join(part for part in re.split(r"[^a-z0-9]+", text.lower()) if part)
    if not name:
        raise ValueError(f"{text!r} gives no tokenizer name (letters or digits needed)")
    return name


def lm_objective(tokenizer: str | None = None) -> str:
    """``lm`` (GPT-2's vocabulary) or ``lm_<tokenizer>``."""
    if tokenizer is None:
        return LM
    if not _TOKENIZER.fullmatch(tokenizer):
        raise ValueError(f"tokenizer name {tokenizer!r} must be lower-case letters and digits "
                         f"joined by single '_' (e.g. {tokenizer_name(tokenizer)!r})")
    return f"{LM}_{tokenizer}"


def is_lm(objective: str) -> bool:
    return objective == LM or objective.startswith(f"{LM}_")


def probe_suffix(objective: str, variant: str) -> str:
    """The probe task suffix of ``objective``'s format for ``variant`` (``text``, ``object``,
    ``cloze``; see the table above)."""
    if variant not in ("text", "object", "cloze"):
        raise ValueError(f"unknown probe variant {variant!r}")
    if objective == SSM:
        return {"text": "_ssm", "object": "_ssm", "cloze": "_ssm_cloze"}[variant]
    if not is_lm(objective):
        raise ValueError(f"no probe tasks for a model of objective {objective!r} "
                         f"(known: {LM}, {LM}_<tokenizer>, {SSM})")
    head = "" if objective == LM else f"_{objective}"
    return head + {"text": "", "object": "_object", "cloze": "_cloze"}[variant]


def qa_suffix(objective: str) -> str:
    """The question-answering form of the probes for ``objective`` (what light-tuning trains
    and what decoding answers): the ``object`` format."""
    return probe_suffix(objective, "object")


def diffset(period: Period, objective: str = OBJECTIVE) -> str:
    return f"twiki_diffset_{period.token}_{objective}"


def nondiff(period: Period, objective: str = "lm") -> str:
    return f"twiki_nondiff_{period.token}_{objective}"


def intrinsic(period: Period, objective: str = "lm") -> str:
    return f"twiki_intrinsic_{period.token}_{objective}"


def full(snapshot: Snapshot, objective: str = OBJECTIVE) -> str:
    return f"twiki_full_{snapshot.token}_{objective}"


def mixreview(period: Period, objective: str = OBJECTIVE) -> str:
    return f"twiki_mixreview_{period.token}_{objective}"


def replay(period: Period, objective: str = OBJECTIVE) -> str:
    """The replay mixture of ``period`` (:mod:`tw_jax.tasks.replay`): its DiffSet, every
    earlier DiffSet of its chain and the initial snapshot, at a fixed ratio."""
    return f"twiki_replay_{period.token}_{objective}"


def probe_set(period: Period, source: str | None = None) -> str:
    """``<period>[_<source>]``: the probe tasks' middle (an open-book folder's retriever)."""
    return f"{period.token}_{source}" if source else period.token


def probes(period: Period, category: str | None = None, suffix: str = "",
           source: str | None = None, prefix: str = PROBES) -> str:
    """``twiki_probes_<period>[_<source>][_<category>]<suffix>``; without ``category``, the
    evaluation mixture of the categories."""
    middle = f"_{category}" if category else ""
    return f"{prefix}_{probe_set(period, source)}{middle}{suffix}"


def lighttuning(period: Period, category: str | None = None, suffix: str = "") -> str:
    return probes(period, category, suffix, prefix=LIGHTTUNING)


def probe_category(task: str, period: Period, suffix: str = "",
                   source: str | None = None) -> str:
    """The category of one of a probe mixture's tasks (``twiki_probes_0809_updated_object`` →
    ``updated``)."""
    head = probes(period, source=source) + "_"
    if not task.startswith(head) or not task.endswith(suffix):
        raise ValueError(f"{task} is not a probe task of {probes(period, None, suffix, source)}")
    return task[len(head): len(task) - len(suffix)] if suffix else task[len(head):]


# --- the configs of the temporal_wiki TFDS builder (tw_jax.datasets.temporal_wiki) ---------
#
# ``<P>`` (DiffSet and NON-DiffSet), ``<P>_ssm``, ``<P>_probes[_<retriever>]``, ``full_<S>``,
# ``full_<S>_ssm``, and the release's ``release_<P>``, ``release_<P>_probes``,
# ``release_full_<S>``: ``<P>`` a period's token, ``<S>`` a snapshot's.

RELEASE = "release"
CONFIG_KINDS = ("diffset", "ssm", "probes", "full", "full_ssm")
_CONFIG = re.compile(r"(.+?)(?:_(ssm|probes)(?:_([a-z0-9]+))?)?")


@dataclass(frozen=True)
class ConfigName:
    """What a ``temporal_wiki`` config name says: its kind (:data:`CONFIG_KINDS`), source
    (``data`` or ``release``), the period (or, for a snapshot's kinds, the snapshot) and the
    retriever of open-book probes."""

    kind: str
    source: str
    period: Period | Snapshot
    retriever: str = ""

    @property
    def name(self) -> str:
        head = f"{RELEASE}_" if self.source == RELEASE else ""
        if self.kind in ("full", "full_ssm"):
            tail = "_ssm" if self.kind == "full_ssm" else ""
            return f"{head}full_{self.period.token}{tail}"
        tail = {"diffset": "", "ssm": "_ssm", "probes": "_probes"}[self.kind]
        retriever = f"_{self.retriever}" if self.retriever else ""
        return f"{head}{self.period.token}{tail}{retriever}"


def config(kind: str, period: Period | Snapshot, retriever: str = "",
           source: str = "data") -> str:
    """The ``temporal_wiki`` config name of a period's (or snapshot's) ``kind``."""
    return ConfigName(kind, source, period, retriever).name


def parse_config(name: str) -> ConfigName | None:
    """The config a name stands for (None: not a ``temporal_wiki`` config name); a name is read
    back only in the spelling :func:`config` writes."""
    source, rest = (RELEASE, name[len(RELEASE) + 1:]) if name.startswith(f"{RELEASE}_") else (
        "data", name)
    found: ConfigName | None = None
    if rest.startswith("full_"):
        body = rest.removeprefix("full_")
        kind = "full_ssm" if body.endswith("_ssm") else "full"
        snapshot = _token(Snapshot, body.removesuffix("_ssm"))
        found = ConfigName(kind, source, snapshot) if snapshot else None
    elif match := _CONFIG.fullmatch(rest):
        token, tail, retriever = match.groups()
        period = _token(Period, token)
        kind = {None: "diffset", "ssm": "ssm", "probes": "probes"}[tail]
        if period is not None and (not retriever or kind == "probes"):
            found = ConfigName(kind, source, period, retriever or "")
    return found if found is not None and found.name == name else None


def _token(kind: type[Period] | type[Snapshot], token: str) -> Any:
    try:
        value = kind.parse(token)
    except TimeError:
        return None
    return value if value.token == token else None
