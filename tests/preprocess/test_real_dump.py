"""The DiffSet stage on a real English Wikipedia dump: the 106 articles of the shortened enwiki
dump that gensim ships in its test data (CC BY-SA Wikipedia text, installed with the ``test``
extra; nothing is downloaded).

The dump is compared with itself (no row) and with a copy this test edits: prose sentences and a
template value changed, paragraphs added at seeded places, a brand-new article, and edits that do
not show on the page (inside a ``<ref>``, a comment, a category link, whitespace), which must give
no row. Every expected row is written out exactly. The rendered text of all 106 articles is also
held to zero leftover markup and zero sentences split after an abbreviation.
"""

from __future__ import annotations

import bz2
import importlib.util
import json
import random
import re
from pathlib import Path

import pytest

from tw_jax.preprocess.diffset.local import build_diffset
from tw_jax.preprocess.plaintext.audit import abbreviation_splits, leftover_markup
from tw_jax.preprocess.plaintext.sentences import split_sentences

DUMP_NAME = "enwiki-latest-pages-articles1.xml-p000000010p000030302-shortened.bz2"


def gensim_dump() -> Path:
    """The dump inside the installed gensim package, found without importing gensim (slow)."""
    spec = importlib.util.find_spec("gensim")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gensim is not installed: install the test extra (pip install -e '.[test]')")
    path = Path(next(iter(spec.submodule_search_locations))) / "test" / "test_data" / DUMP_NAME
    if not path.is_file():
        pytest.fail(f"gensim is installed but its test dump is missing: {path}")
    return path


# -- the edits ---------------------------------------------------------------------------------


def edit_page(xml: str, title: str, old: str, new: str) -> str:
    """``xml`` with ``old`` replaced by ``new`` inside the page titled ``title``, where ``old``
    must occur exactly once (the text is as the export writes it: ``<`` is ``&lt;``)."""
    start = xml.index(f"<title>{title}</title>")
    end = xml.index("</page>", start)
    page = xml[start:end]
    count = page.count(old)
    if count != 1:
        raise AssertionError(f"{old!r} occurs {count} times in page {title!r}, not once")
    return xml[:start] + page.replace(old, new) + xml[end:]


# Visible edits, each with the one sentence the DiffSet must then hold for its article.
CHANGED = {
    # a template value: {{convert|150|cm|ft}} -> 190
    621: (
        "Amphibian",
        "which can reach {{convert|150|cm|ft|abbr=off}}",
        "which can reach {{convert|190|cm|ft|abbr=off}}",
        "The adults vary in length from 8 to 75 centimetres (3 to 30 inches) with the exception "
        "of Thomson's caecilian (Caecilia thompsoni), which can reach 190 cm.",
    ),
    # prose next to a template value
    690: (
        "Aruba",
        "and is densely populated",
        "and is very densely populated",
        "It has a land area of 179 km² and is very densely populated, with a total of 102,484 "
        "inhabitants at the 2010 Census.",
    ),
    # the year of an {{as of}}
    25: (
        "Autism",
        "{{as of|2014|lc=y}}",
        "{{as of|2015|lc=y}}",
        "About 1.5% of children in the United States (one in 68) are diagnosed with ASD as of "
        "2015, a 30% increase from one in 88 in 2012.",
    ),
    # prose in a sentence full of abbreviations: it stays one sentence
    711: (
        "Albert Sidney Johnston",
        "as chief of staff to Bvt. Brig. Gen. [[Henry Atkinson (soldier)|Henry Atkinson]].",
        "as chief of staff to Bvt. Brig. Gen. [[Henry Atkinson (soldier)|Henry Atkinson]] "
        "in Illinois.",
        "Johnston was assigned to posts in New York and Missouri and served in the Black Hawk War "
        "in 1832 as chief of staff to Bvt. Brig. Gen. Henry Atkinson in Illinois.",
    ),
}
# Edits that do not show on the page: these articles must give no row.
INVISIBLE = [
    # inside a <ref>
    (
        305,
        "Achilles",
        "publisher=The Center for Hellenic Studies|accessdate=19 March 2015}}&lt;/ref&gt;",
        "publisher=The Center for Hellenic Studies|accessdate=19 March 2015}} Edited.&lt;/ref&gt;",
    ),
    # a comment added in the lead sentence
    (
        680,
        "Aardvark",
        "The '''aardvark''' (",
        "The '''aardvark'''&lt;!-- a comment added by the test --&gt; (",
    ),
    # a category link added, another given a sort key
    (
        39,
        "Albedo",
        "[[Category:Climate forcing]]",
        "[[Category:Climate forcing]]\n[[Category:Test]]",
    ),
    (39, "Albedo", "[[Category:Climatology]]", "[[Category:Climatology|Albedo]]"),
    # whitespace inside a line
    (600, "Andorra", "'''Andorra''' ({{IPAc-en", "'''Andorra'''   ({{IPAc-en"),
    (600, "Andorra", "is a sovereign [[landloc", "is  a sovereign\t [[landloc"),
]
NEW_ID = 30_000
NEW_ARTICLE = (
    "'''Test River''' is a {{convert|12|km|mi}} river in [[Aruba]].<ref>A source.</ref> It was "
    "surveyed {{circa|1850}} by Maj. Gen. J. Smith.\n\n== History ==\n"
    "On {{start date|1901|5|3|df=y}} it flooded.\n\n== References ==\n{{reflist}}\n"
    "[[Category:Rivers of Aruba]]"
)
NEW_TEXT = (
    "Test River is a 12 km river in Aruba. It was surveyed c. 1850 by Maj. Gen. J. Smith.\n"
    "On 3 May 1901 it flooded."
)
SEED = 2024
N_ADDED = 6


def added_paragraphs(xml: str) -> dict[int, tuple[str, str]]:
    """Seeded choice of articles (none edited otherwise) that get a new paragraph at the end of
    their lead: id -> (title, paragraph)."""
    pages = re.findall(r"<title>([^<]*)</title>\s*<ns>0</ns>\s*<id>(\d+)</id>\s*<revision>", xml)
    taken = set(CHANGED) | {page_id for page_id, *_ in INVISIBLE}
    candidates = sorted((int(i), t) for t, i in pages if int(i) not in taken)
    chosen = random.Random(SEED).sample(candidates, N_ADDED)
    return {
        page_id: (title, f"The test added paragraph {k} to {title}. It has two sentences.")
        for k, (page_id, title) in enumerate(sorted(chosen))
    }


def edited_copy(xml: str) -> str:
    for title, old, new, _ in CHANGED.values():
        xml = edit_page(xml, title, old, new)
    for _, title, old, new in INVISIBLE:
        xml = edit_page(xml, title, old, new)
    for title, paragraph in added_paragraphs(xml).values():
        start = xml.index(f"<title>{title}</title>")
        heading = re.compile(r"\n==[^=\n]").search(xml, start)
        assert heading is not None and heading.start() < xml.index("</page>", start), title
        xml = xml[: heading.start()] + f"\n\n{paragraph}\n" + xml[heading.start() :]
    new_page = (
        f"  <page>\n    <title>Test River</title>\n    <ns>0</ns>\n    <id>{NEW_ID}</id>\n"
        "    <revision>\n      <id>1</id>\n      <timestamp>2016-04-01T00:00:00Z</timestamp>\n"
        "      <model>wikitext</model>\n      <format>text/x-wiki</format>\n"
        '      <text xml:space="preserve">'
        + NEW_ARTICLE.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        + "</text>\n    </revision>\n  </page>\n"
    )
    return xml.replace("</mediawiki>", new_page + "</mediawiki>")


# -- the runs ----------------------------------------------------------------------------------


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict:
    dump = gensim_dump()
    work = tmp_path_factory.mktemp("real_dump")
    xml = bz2.decompress(dump.read_bytes()).decode("utf-8")
    edited = work / "edited.xml.bz2"
    edited.write_bytes(bz2.compress(edited_copy(xml).encode("utf-8"), 1))
    identity = build_diffset(dump, dump, work / "identity", progress=False)
    changed = build_diffset(dump, edited, work / "edited", progress=False)
    return {
        "xml": xml,
        "identity": (work / "identity", identity),
        "edited": (work / "edited", changed),
    }


def test_the_dump_against_itself_gives_no_row(runs):
    out, stats = runs["identity"]
    assert stats["articles"]["unchanged"] == 106
    assert stats["articles"]["new"] == stats["articles"]["changed"] == 0
    assert stats["accounting"]["balanced"]
    assert read_jsonl(out / "diffset.jsonl") == []
    assert len(read_jsonl(out / "full.jsonl")) == 106


def test_the_edited_copy_gives_exactly_the_expected_rows(runs):
    out, stats = runs["edited"]
    expected = {page_id: ("changed", sentence) for page_id, (*_, sentence) in CHANGED.items()}
    for page_id, (_, paragraph) in added_paragraphs(runs["xml"]).items():
        expected[page_id] = ("changed", paragraph)
    expected[NEW_ID] = ("new", NEW_TEXT)
    rows = {r["id"]: (r["kind"], r["text"]) for r in read_jsonl(out / "diffset.jsonl")}
    assert rows == expected
    assert not set(rows) & {page_id for page_id, *_ in INVISIBLE}
    assert stats["articles"] == {
        "new": 1,
        "changed": len(CHANGED) + N_ADDED,
        "unchanged": 106 - len(CHANGED) - N_ADDED,
        "below_min_changed_chars": 0,
        "deleted": 0,
    }
    assert stats["accounting"]["balanced"]


def test_user_audit_sentences_render_whole(runs):
    out, _ = runs["identity"]
    text = {r["title"]: r["text"] for r in read_jsonl(out / "full.jsonl")}
    sentences = {
        title: {s for p in body.split("\n") for s in split_sentences(p)}
        for title, body in text.items()
    }
    assert (
        "It has a land area of 179 km² and is densely populated, with a total of 102,484 "
        "inhabitants at the 2010 Census." in sentences["Aruba"]
    )
    assert (
        "The average depth of the Atlantic with its adjacent seas, is 3,339 m; without them it "
        "is 3,926 m." in sentences["Atlantic Ocean"]
    )
    assert (
        "Napoleon brings the raven back (Ch. IX), as Stalin brought back the Russian Orthodox "
        "Church." in sentences["Animal Farm"]
    )
    assert (
        'According to Chaubey et al. (2010), "AA speakers in India today are derived from '
        "dispersal from Southeast Asia, followed by extensive sex-specific admixture with local "
        'Indian populations."' in sentences["Austroasiatic languages"]
    )
    assert "File:" not in text["Animal Farm"] and "Image:" not in text["Alkane"]


def test_no_leftover_markup_and_no_abbreviation_splits(runs):
    out, _ = runs["identity"]
    paragraphs = [p for r in read_jsonl(out / "full.jsonl") for p in r["text"].split("\n")]
    words = sum(len(p.split()) for p in paragraphs)
    assert words > 400_000
    # The three "|" are text on the page itself: the ASCII article writes the characters \| and
    # "sm|rg}sar" (a Swedish sentence in 7-bit ASCII), and the Afghanistan article has a stray
    # "([[Pashto]] |افغانستان)" in its prose, which MediaWiki prints as it stands.
    assert dict(leftover_markup(paragraphs)) == {"|": 3}
    splits = [s for p in paragraphs for s in abbreviation_splits(split_sentences(p))]
    assert splits == []
