"""Algorithm 1 on hand-made articles: exactly which text enters the DiffSet."""

from tw_jax.preprocess.diffset.algorithm import (
    BELOW_MIN_CHANGED,
    CHANGED,
    EMPTY,
    NEW,
    UNCHANGED,
    compare,
    new_sentences,
)
from tw_jax.preprocess.dumps.mediawiki import Page


def page(text: str, id_: int = 7, title: str = "Varnholt", markup: str = "wikitext") -> Page:
    return Page(id=id_, ns=0, title=title, text=text, redirect=None, markup=markup)


OLD = """'''Varnholt''' is a city in [[Dravenia]]. It has a population of 1,234,567.

The city was founded in 1204. Dr. Amelia Storr was its first mayor.

== Economy ==
The port handles 3.5 million tonnes a year. Fishing remains important.
"""


def test_new_article_goes_in_whole():
    result = compare(page(OLD), None)
    assert result.kind == NEW
    assert result.diff_paragraphs == result.paragraphs
    assert result.diff_paragraphs[0] == (
        "Varnholt is a city in Dravenia. It has a population of 1,234,567."
    )
    assert result.diff_sentences == 6


def test_identical_article_contributes_nothing():
    result = compare(page(OLD), page(OLD))
    assert result.kind == UNCHANGED
    assert result.diff_paragraphs == ()
    assert result.paragraphs  # still part of the full snapshot


def test_changed_sentence_number_and_edges_are_found():
    new = (
        "Varnholt was renamed in 2021.\n\n"  # added before the first unchanged paragraph
        + OLD.replace("1,234,567", "1,250,000").replace(
            "Fishing remains important.", "Fishing remains important. Tourism grew in 2020."
        )
        + "\nThe city hosted the 2021 Games.\n"  # added after the last unchanged paragraph
    )
    result = compare(page(new), page(OLD))
    assert result.kind == CHANGED
    assert result.diff_paragraphs == (
        "Varnholt was renamed in 2021.",
        "It has a population of 1,250,000.",
        "Tourism grew in 2020.",
        "The city hosted the 2021 Games.",
    )
    assert result.diff_sentences == 4


def test_deleted_sentences_and_paragraphs_never_enter():
    new = OLD.replace(" Dr. Amelia Storr was its first mayor.", "").replace(
        "== Economy ==\nThe port handles 3.5 million tonnes a year. Fishing remains important.\n",
        "",
    )
    result = compare(page(new), page(OLD))
    assert result.kind == UNCHANGED
    assert result.diff_paragraphs == ()


def test_moved_sentence_is_not_new():
    new = OLD.replace(
        "The city was founded in 1204. Dr. Amelia Storr was its first mayor.",
        "Dr. Amelia Storr was its first mayor. The city was founded in 1204.",
    )
    assert compare(page(new), page(OLD)).kind == UNCHANGED


def test_paragraph_without_a_matching_sentence_is_kept_verbatim():
    kept, count = new_sentences(["A new paragraph. With two sentences.", "Old one."], ["Old one."])
    assert kept == ["A new paragraph. With two sentences."]
    assert count == 2


def test_min_changed_chars_filters_small_changes_and_keeps_large_ones():
    new = OLD.replace("Fishing remains important.", "Fishing remains important. Tourism grew.")
    assert compare(page(new), page(OLD), min_changed_chars=13).kind == CHANGED  # "Tourism grew." is 13
    small = compare(page(new), page(OLD), min_changed_chars=14)
    assert small.kind == BELOW_MIN_CHANGED
    assert small.diff_paragraphs == ()
    assert compare(page(OLD), None, min_changed_chars=10_000).kind == BELOW_MIN_CHANGED


def test_article_of_templates_only_is_empty():
    assert compare(page("{{Infobox settlement\n| name = X\n}}"), None).kind == EMPTY


def test_plain_text_pages_from_wikiextractor():
    old = page("First paragraph. Second sentence.\nAnother paragraph.", markup="plain")
    new = page("First paragraph. Second sentence changed.\nAnother paragraph.", markup="plain")
    result = compare(new, old)
    assert result.diff_paragraphs == ("Second sentence changed.",)
