"""Relation templates: CKL Table 4 complete and verbatim, the sample world covered, cloze filling."""

from __future__ import annotations

from tw_jax.preprocess.facts.relation_templates import (
    CKL_INVARIANT,
    MASK,
    TEMPLATES,
    cloze,
    probe_text,
)
from tw_jax.sample_world.schema import PROPERTIES

# CKL Table 4 (spacing before the final period as in LAMA, see the module doc).
CKL_TABLE_4 = {
    "P19": "[X] was born in [Y] .", "P20": "[X] died in [Y] .",
    "P279": "[X] is a subclass of [Y] .", "P37": "The official language of [X] is [Y] .",
    "P449": "[X] was originally aired on [Y] .", "P47": "[X] shares border with [Y] .",
    "P138": "[X] is named after [Y] .", "P364": "The original language of [X] is [Y] .",
    "P527": "[X] consists of [Y] .", "P176": "[X] is produced by [Y] .",
    "P27": "[X] is [Y] citizen .", "P407": "[X] was written in [Y] .",
    "P30": "[X] is located in [Y] .", "P178": "[X] is developed by [Y] .",
    "P1376": "[X] is the capital of [Y] .", "P131": "[X] is located in [Y] .",
    "P1412": "[X] used to communicate in [Y] .", "P17": "[X] is located in [Y] .",
    "P276": "[X] is located in [Y] .", "P937": "[X] used to work in [Y] .",
    "P140": "[X] is affiliated with the [Y] religion .", "P103": "The native language of [X] is [Y] .",
    "P190": "[X] and [Y] are twin cities .", "P1001": "[X] is a legal term in [Y] .",
    "P495": "[X] was created in [Y] .", "P36": "The capital of [X] is [Y] .",
    "P740": "[X] was founded in [Y] .", "P361": "[X] is part of [Y] .",
}
TIME_VARYING = ("P54", "P169", "P39", "P6", "P286", "P1082", "P35", "P102", "P166", "P26",
                "P1346", "P161", "P57")


def test_every_ckl_invariant_relation_has_the_papers_template():
    assert len(CKL_TABLE_4) == 28
    assert set(CKL_INVARIANT) == set(CKL_TABLE_4)
    for pid, template in CKL_TABLE_4.items():
        assert TEMPLATES[pid].template == template
        assert TEMPLATES[pid].source == "ckl"


def test_time_varying_and_sample_world_relations_are_covered_with_wikidata_labels():
    for pid in TIME_VARYING:
        assert pid in TEMPLATES
    for pid, (label, _) in PROPERTIES.items():
        assert TEMPLATES[pid].label == label, pid


def test_every_template_has_both_slots_once():
    for pid, t in TEMPLATES.items():
        assert t.relation_id == pid
        assert t.template.count("[X]") == 1 and t.template.count("[Y]") == 1, pid


def test_cloze():
    assert cloze("P19", "Taras Kuzio", "Halifax") == "Taras Kuzio was born in Halifax ."
    assert cloze("P19", "Taras Kuzio") == f"Taras Kuzio was born in {MASK} ."
    assert cloze("P36", "Granville County") == "The capital of Granville County is <extra_id_0> ."
    assert cloze("P161", "The Film", "Ann Lee") == "Ann Lee is a cast member of The Film ."
    assert cloze("P0", "anything") is None


def test_cloze_fillers_are_never_read_as_slots():
    assert cloze("P19", "A [Y] B", "C [X] D") == "A [Y] B was born in C [X] D ."


def test_probe_text():
    assert probe_text("Lionel Messi", "member of sports team", "Paris Saint-Germain F.C.") == \
        "Lionel Messi member of sports team Paris Saint-Germain F.C."
