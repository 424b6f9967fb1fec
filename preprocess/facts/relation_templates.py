"""Natural-language templates for Wikidata relations, for cloze probes and probe text.

TemporalWiki's probes are plain ``subject relation-label object`` strings (:func:`probe_text`);
CKL's InvariantLAMA turns a triple into a sentence with the object masked (:func:`cloze`).
The table is a Python literal (no data file to install) with one row per relation and the
row's source:

- ``ckl``: the 28 time-invariant relations of CKL Table 4, with the paper's templates. The
  paper's PDF text drops the space before some final periods and has a comma for P1376's; these
  are written in LAMA's tokenised form (``[X] is the capital of [Y] .``), which is what the
  InvariantLAMA inputs use.
- ``lama``: the other LAMA T-REx relations (Petroni et al., 2019), with LAMA's templates, kept
  even where they read oddly for the sample world (P136 ``plays [Y] music``).
- ``tw_jax``: relations LAMA lacks that the sample world and TemporalWiki's time-varying
  probes use (P6, P26, P35, P57, P161, P166, P169, P286, P1082, ...), in the same style.

Labels are Wikidata's English property labels as of the 2021 dumps (the sample world uses
the same), so ``probe_text(subject, TEMPLATES[pid].label, obj)`` matches TemporalWiki.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["CKL_INVARIANT", "MASK", "TEMPLATES", "RelationTemplate", "cloze", "probe_text"]

MASK = "<extra_id_0>"


@dataclass(frozen=True)
class RelationTemplate:
    """A relation's English label and its sentence template with ``[X]`` (subject), ``[Y]`` (object)."""

    relation_id: str
    label: str
    template: str
    source: str = "tw_jax"  # ckl | lama | tw_jax: where the template comes from


_ROWS: tuple[tuple[str, str, str, str], ...] = (
    # CKL Table 4: the 28 time-invariant relations of InvariantLAMA.
    ("P19", "place of birth", "[X] was born in [Y] .", "ckl"),
    ("P20", "place of death", "[X] died in [Y] .", "ckl"),
    ("P279", "subclass of", "[X] is a subclass of [Y] .", "ckl"),
    ("P37", "official language", "The official language of [X] is [Y] .", "ckl"),
    ("P449", "original broadcaster", "[X] was originally aired on [Y] .", "ckl"),
    ("P47", "shares border with", "[X] shares border with [Y] .", "ckl"),
    ("P138", "named after", "[X] is named after [Y] .", "ckl"),
    ("P364", "original language of film or TV show", "The original language of [X] is [Y] .", "ckl"),
    ("P527", "has part", "[X] consists of [Y] .", "ckl"),
    ("P176", "manufacturer", "[X] is produced by [Y] .", "ckl"),
    ("P27", "country of citizenship", "[X] is [Y] citizen .", "ckl"),
    ("P407", "language of work or name", "[X] was written in [Y] .", "ckl"),
    ("P30", "continent", "[X] is located in [Y] .", "ckl"),
    ("P178", "developer", "[X] is developed by [Y] .", "ckl"),
    ("P1376", "capital of", "[X] is the capital of [Y] .", "ckl"),
    ("P131", "located in the administrative territorial entity", "[X] is located in [Y] .", "ckl"),
    ("P1412", "languages spoken, written or signed", "[X] used to communicate in [Y] .", "ckl"),
    ("P17", "country", "[X] is located in [Y] .", "ckl"),
    ("P276", "location", "[X] is located in [Y] .", "ckl"),
    ("P937", "work location", "[X] used to work in [Y] .", "ckl"),
    ("P140", "religion", "[X] is affiliated with the [Y] religion .", "ckl"),
    ("P103", "native language", "The native language of [X] is [Y] .", "ckl"),
    ("P190", "twinned administrative body", "[X] and [Y] are twin cities .", "ckl"),
    ("P1001", "applies to jurisdiction", "[X] is a legal term in [Y] .", "ckl"),
    ("P495", "country of origin", "[X] was created in [Y] .", "ckl"),
    ("P36", "capital", "The capital of [X] is [Y] .", "ckl"),
    ("P740", "location of formation", "[X] was founded in [Y] .", "ckl"),
    ("P361", "part of", "[X] is part of [Y] .", "ckl"),
    # The rest of LAMA T-REx (time-varying or otherwise left out of InvariantLAMA).
    ("P31", "instance of", "[X] is a [Y] .", "lama"),
    ("P39", "position held", "[X] has the position of [Y] .", "lama"),
    ("P54", "member of sports team", "[X] plays with [Y] .", "lama"),
    ("P101", "field of work", "[X] works in the field of [Y] .", "lama"),
    ("P102", "member of political party", "[X] is a member of the [Y] political party .", "lama"),
    ("P106", "occupation", "[X] is a [Y] by profession .", "lama"),
    ("P108", "employer", "[X] works for [Y] .", "lama"),
    ("P127", "owned by", "[X] is owned by [Y] .", "lama"),
    ("P136", "genre", "[X] plays [Y] music .", "lama"),
    ("P159", "headquarters location", "The headquarter of [X] is in [Y] .", "lama"),
    ("P264", "record label", "[X] is represented by music label [Y] .", "lama"),
    ("P413", "position played on team / speciality", "[X] plays in [Y] position .", "lama"),
    ("P463", "member of", "[X] is a member of [Y] .", "lama"),
    ("P530", "diplomatic relation", "[X] maintains diplomatic relations with [Y] .", "lama"),
    ("P1303", "instrument", "[X] plays [Y] .", "lama"),
    # TemporalWiki's time-varying relations and the rest of the sample world's properties.
    ("P6", "head of government", "The head of government of [X] is [Y] .", "tw_jax"),
    ("P18", "image", "The image of [X] is [Y] .", "tw_jax"),
    ("P21", "sex or gender", "The gender of [X] is [Y] .", "tw_jax"),
    ("P26", "spouse", "[X] is married to [Y] .", "tw_jax"),
    ("P35", "head of state", "The head of state of [X] is [Y] .", "tw_jax"),
    ("P57", "director", "[X] was directed by [Y] .", "tw_jax"),
    ("P69", "educated at", "[X] was educated at [Y] .", "tw_jax"),
    ("P112", "founded by", "[X] was founded by [Y] .", "tw_jax"),
    ("P115", "home venue", "The home venue of [X] is [Y] .", "tw_jax"),
    ("P118", "league", "[X] plays in the [Y] .", "tw_jax"),
    ("P161", "cast member", "[Y] is a cast member of [X] .", "tw_jax"),
    ("P166", "award received", "[X] received the [Y] .", "tw_jax"),
    ("P169", "chief executive officer", "The chief executive officer of [X] is [Y] .", "tw_jax"),
    ("P286", "head coach", "The head coach of [X] is [Y] .", "tw_jax"),
    ("P452", "industry", "[X] works in the [Y] industry .", "tw_jax"),
    ("P569", "date of birth", "[X] was born on [Y] .", "tw_jax"),
    ("P570", "date of death", "[X] died on [Y] .", "tw_jax"),
    ("P571", "inception", "[X] was established in [Y] .", "tw_jax"),
    ("P577", "publication date", "[X] was released in [Y] .", "tw_jax"),
    ("P580", "start time", "[X] started in [Y] .", "tw_jax"),
    ("P582", "end time", "[X] ended in [Y] .", "tw_jax"),
    ("P585", "point in time", "[X] took place in [Y] .", "tw_jax"),
    ("P710", "participant", "[Y] participated in [X] .", "tw_jax"),
    ("P854", "reference URL", "The reference URL of [X] is [Y] .", "tw_jax"),
    ("P856", "official website", "The official website of [X] is [Y] .", "tw_jax"),
    ("P1082", "population", "The population of [X] is [Y] .", "tw_jax"),
    ("P1128", "employees", "[X] has [Y] employees .", "tw_jax"),
    ("P1346", "winner", "The winner of [X] is [Y] .", "tw_jax"),
    ("P1448", "official name", "The official name of [X] is [Y] .", "tw_jax"),
    ("P1476", "title", "The title of [X] is [Y] .", "tw_jax"),
    ("P2046", "area", "The area of [X] is [Y] .", "tw_jax"),
    ("P2130", "cost", "The cost of [X] is [Y] .", "tw_jax"),
    ("P2139", "total revenue", "The total revenue of [X] is [Y] .", "tw_jax"),
)

TEMPLATES: Mapping[str, RelationTemplate] = MappingProxyType(
    {pid: RelationTemplate(pid, label, template, source) for pid, label, template, source in _ROWS}
)
# The 28 relations of CKL's InvariantLAMA, in Table 4's order.
CKL_INVARIANT: tuple[str, ...] = tuple(pid for pid, _, _, source in _ROWS if source == "ckl")


def cloze(relation_id: str, subject: str, obj: str | None = None) -> str | None:
    """The relation's sentence about ``subject``, with the object or, if None, T5's mask.

    None when the relation has no template.
    """
    t = TEMPLATES.get(relation_id)
    if t is None:
        return None
    filler = MASK if obj is None else obj
    # Split on [X] and fill [Y] piecewise, so that a subject or object that itself contains
    # "[X]" or "[Y]" is never read as a slot.
    return subject.join(piece.replace("[Y]", filler) for piece in t.template.split("[X]"))


def probe_text(subject: str, relation_label: str, obj: str) -> str:
    """TemporalWiki's probe: ``subject relation-label object`` joined by single spaces."""
    return f"{subject} {relation_label} {obj}"
