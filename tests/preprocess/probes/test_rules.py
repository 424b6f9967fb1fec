"""Unit tests of each rule: Algorithm 2, identity keys, alignment, heuristics, caps, sampling."""

from collections import Counter

import pytest

from tw_jax.preprocess.probes.align import SubjectTexts, alignment_reason
from tw_jax.preprocess.probes.categorise import categorise
from tw_jax.preprocess.probes.facts import object_key, sampled
from tw_jax.preprocess.probes.lighttuning import Sampler, quotas_for
from tw_jax.preprocess.probes.records import Probe, csv_text
from tw_jax.preprocess.probes.rules import cap_limit, finalise, heuristic_reason, mentions


def fact(relation, value):
    return (relation, object_key(value), value)


def test_algorithm_2_with_deleted():
    old = (fact("P1", ("item", "Q1")), fact("P2", ("item", "Q2")), fact("P3", ("string", "x")))
    new = (fact("P1", ("item", "Q1")), fact("P2", ("item", "Q9")), fact("P4", ("item", "Q4")))
    got = {(c.category, c.relation_id, c.key, c.previous) for c in categorise("Q0", new, old)}
    assert got == {
        ("unchanged", "P1", "Q1", ()),
        ("updated", "P2", "Q9", (("item", "Q2"),)),
        ("new", "P4", "Q4", ()),
        ("deleted", "P2", "Q2", ()),
        ("deleted", "P3", "string:x", ()),
    }


def test_subject_absent_before_makes_everything_new_and_absent_now_nothing():
    new = (fact("P1", ("item", "Q1")),)
    assert [c.category for c in categorise("Q0", new, None)] == ["new"]
    assert list(categorise("Q0", None, new)) == []


def test_objects_compare_by_identity_not_label():
    assert object_key(("quantity", "+1234.50", None)) == object_key(("quantity", "1234.5", None))
    assert object_key(("time", "+1990-01-01T00:00:00Z", 9)) != object_key(
        ("time", "+1990-01-01T00:00:00Z", 11)
    )
    assert object_key(("item", "Q1")) != object_key(("item", "Q2"))
    with pytest.raises(ValueError):
        object_key(("globe", 1, 2))


def test_mentions_is_case_insensitive_on_word_boundaries():
    assert mentions("He moved to PARIS in 2020.", "Paris")
    assert not mentions("He moved to Parisville.", "Paris")
    assert mentions("Born 12 March 1990.", "12 March 1990")
    assert not mentions(None, "Paris")


def test_alignment_per_category():
    texts = SubjectTexts(
        1, "joined Acme FC", "joined Acme FC; born in Oslo", 7, "played for Borg", True
    )
    assert alignment_reason("new", "Acme FC", texts) is None
    assert alignment_reason("updated", "Oslo", texts) == "object_not_in_diffset_text"
    assert alignment_reason("unchanged", "Oslo", texts) is None
    assert alignment_reason("unchanged", "Bergen", texts) == "object_not_in_article"
    assert alignment_reason("deleted", "Borg", texts) is None
    assert alignment_reason("deleted", "Oslo", texts) == "object_not_in_old_article"
    no_diff = texts._replace(diff=None)
    assert alignment_reason("new", "Acme FC", no_diff) == "article_not_in_diffset"
    none = SubjectTexts(None, None, None, None, None, False)
    assert alignment_reason("unchanged", "x", none) == "subject_without_article"
    # Without the old dump, DELETED needs only absence from the new article.
    assert alignment_reason("deleted", "Borg", texts._replace(have_old_dump=False)) is None


def test_heuristic_rules():
    assert heuristic_reason("Paris", "Paris Saint-Germain") == "subject_object_substring"
    assert heuristic_reason("Paris Saint-Germain", "paris") == "subject_object_substring"
    assert heuristic_reason("Ann", "one two three four five six") == "object_too_long"
    assert heuristic_reason("Ann", "one two three four five") is None


def probe(subject_id, relation_id, obj, subject=None):
    subject = subject or f"S{subject_id}"
    return Probe(
        subject,
        f"r{relation_id}",
        obj,
        subject_id,
        relation_id,
        "",
        "",
        f"{subject} r{relation_id} {obj}",
        "",
        "new",
        obj,
    )


def test_caps_keep_at_most_floor_fraction_of_n_each():
    # 100 probes: subject A has 30, each of 70 others one; object "o0" appears 20 times.
    probes = [probe("A", f"P{i % 7}", f"a{i}") for i in range(30)]
    probes += [probe(f"B{i:02d}", f"P{i % 7}", "o0" if i < 20 else f"x{i}") for i in range(70)]
    kept, counts = finalise(probes, 0.1, 1.0, 1.0)
    assert cap_limit(0.1, 100) == 10
    assert counts["after_subject_cap"] == 10 + 70
    assert Counter(p.subject_id for p in kept)["A"] == 10
    kept, counts = finalise(probes, 1.0, 0.05, 1.0)
    assert counts["after_object_cap"] == 100 - 20 + 5
    kept, counts = finalise(probes, 1.0, 1.0, 0.05)
    assert counts["after_relation_cap"] == 7 * 5
    assert cap_limit(0.01, 5) == 1


def test_duplicates_by_text_are_removed():
    probes = [probe("A", "P1", "o", subject="Same"), probe("B", "P1", "o", subject="Same")]
    kept, counts = finalise(probes, 1.0, 1.0, 1.0)
    assert counts["after_duplicates"] == 1 and kept[0].subject_id == "A"


def test_unchanged_sampling_is_seeded_deterministic_and_near_rate():
    keys = [(f"Q{i}", "P31", f"Q{i % 13}") for i in range(20000)]
    first = [k for k in keys if sampled(0, 0.1, *k)]
    assert first == [k for k in reversed(keys) if sampled(0, 0.1, *k)][::-1]
    assert 1800 < len(first) < 2200
    assert first != [k for k in keys if sampled(1, 0.1, *k)]
    assert all(sampled(0, 1.0, *k) for k in keys[:10])


def test_lighttuning_keeps_relation_shares():
    assert quotas_for(Counter(P1=600, P2=300, P3=100), 10) == {"P1": 6, "P2": 3, "P3": 1}
    assert sum(quotas_for(Counter(P1=1, P2=1, P3=1), 2).values()) == 2
    sampler = Sampler(10)
    for i in range(1000):
        relation = "P1" if i < 700 else "P2"
        sampler.add(probe(f"Q{i}", relation, f"o{i}"), hash(("x", i)) & (2**63 - 1))
    chosen = sampler.sample()
    assert Counter(p.relation_id for p in chosen) == {"P1": 7, "P2": 3}
    merged = Sampler(10).merge(sampler)
    assert merged.sample() == chosen


def test_csv_quotes_and_header():
    text = csv_text([probe("A", "P1", 'a, "b"')])
    assert text.splitlines()[0].startswith("subject,relation,object,subject_id")
    assert '"a, ""b"""' in text
