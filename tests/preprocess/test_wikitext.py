"""to_paragraphs: one test per rule of docs/plaintext.md (exact paragraph lists), the decisions
the spec leaves open, a realistic article, and garbage that must not hang."""

from __future__ import annotations

import time

import pytest

from tw_jax.preprocess.plaintext.wikitext import DROPPED_SECTIONS, to_paragraphs

# -- what is removed ---------------------------------------------------------------------------


def test_templates_nested_across_lines():
    text = (
        "{{Infobox person\n| name = X\n| birth_date = {{birth date|1950|5|1}}\n"
        "| spouse = {{marriage|[[Y]]|{{nowrap|1970}}}}\n}}\n"
        "X{{efn|a note}} was born.{{cn|date=May 2020}} {{Use dmy dates}}"
    )
    assert to_paragraphs(text) == ["X was born."]


def test_parser_functions_and_parameters():
    text = "A {{#if:{{{1|}}}|yes|no}} b {{#invoke:Foo|bar|x={{{x}}}}} c {{DEFAULTSORT:X, Y}}"
    assert to_paragraphs(text) == ["A b c"]


def test_tables_nested_and_inside_templates():
    text = (
        "Before.\n"
        '{| class="wikitable"\n! H1 !! H2\n|-\n| {{flag|X}} || [[Y]]\n|-\n'
        "|\n{|\n| inner\n|}\n|}\n"
        "After.\n"
        "{{Sidebar|content=\n{|\n| cell\n|}}}\n"
        "End."
    )
    # a table is a block: it ends the paragraph before it
    assert to_paragraphs(text) == ["Before.", "After. End."]


def test_indented_table():
    assert to_paragraphs("Intro:\n:{|\n| x\n|}\nOutro.") == ["Intro:", "Outro."]


def test_references():
    text = (
        'A.<ref name="a">{{cite web |url=http://x.org |title=T}}</ref> '
        'B.<ref name="a" /> C.<ref name=b/> D.<REF>upper</REF>\n'
        "E.<ref group=n>note\n\nwith a blank line</ref> F.\n"
        "<references />"
    )
    assert to_paragraphs(text) == ["A. B. C. D. E. F."]


def test_comments():
    text = "A <!-- one --> b.<!--\nmulti\n\nline\n--> C.\n<!-- a whole line -->\nD."
    assert to_paragraphs(text) == ["A b. C. D."]


@pytest.mark.parametrize(
    "element",
    ["gallery", "math", "syntaxhighlight", "timeline", "score", "imagemap", "templatedata"],
)
def test_elements_removed_with_content(element):
    text = f'A <{element} lang="x">inner [[link]] {{{{t}}}}\n\nmore</{element}> b.'
    assert to_paragraphs(text) == ["A b."]


def test_other_tags_keep_inner_text():
    text = (
        'A <small>small</small> <span style="color:red">red</span> x<sup>2</sup> '
        "H<sub>2</sub>O <div>block</div> <blockquote>quoted</blockquote>"
        "<poem>verse</poem> one<br>two<br/>three<br />four</br>five"
    )
    assert to_paragraphs(text) == ["A small red x2 H2O block quotedverse one two three four five"]


def test_file_and_image_links_with_nested_links_in_captions():
    text = (
        "[[File:Map.png|thumb|upright=1.2|The [[river]] near [[Paris|the capital]], "
        "see [http://x.org map]]]\n"
        "Text [[Image:Flag.svg|20px]] here. [[file:lower.jpg]]done. [[ File : spaced.jpg ]]"
    )
    assert to_paragraphs(text) == ["Text here. done."]


def test_file_links_whose_captions_hold_single_brackets_are_matched_whole():
    text = (
        "Before.\n"
        "[[File:15th Congress.jpg|thumb|Front row: Rykov and [[Stalin]]—'drowned out by the sheep "
        "(Ch. V), just as in the party Congress in 1927 [above], at Stalin's instigation'.]]\n"
        "[[Image:Saturated C4 hydrocarbons.png|thumb|right| [[n-butane]] and isobutane. "
        "[[Bicyclo(1.1.0)butane|Bicyclo[1.1.0]butane]] has no isomer.]]\n"
        "After [[image:x.png|a [[b|c [d]]] e]]f. Next [[File:y.png|ends with [note]]] g."
    )
    assert to_paragraphs(text) == ["Before. After f. Next g."]


def test_unclosed_file_link_stays_literal_and_does_not_eat_later_paragraphs():
    # (the bracket matching starts afresh at each blank line)
    text = "A [[File:x.png|thumb|cap [y] [[link]]\n\nB ]] c [[d]]."
    assert to_paragraphs(text) == ["A [[File:x.png|thumb|cap [y] link", "B ]] c d."]
    assert to_paragraphs("[[:File:x.png]] is a link to the file page.") == [
        "File:x.png is a link to the file page."
    ]


def test_category_links():
    text = "Text.\n\n[[Category:Rivers of France]]\n[[Category:Seine| ]]\n[[category:lower]]"
    assert to_paragraphs(text) == ["Text."]


def test_interlanguage_links():
    text = "Text [[fr:Seine]][[de:Seine]][[zh-min-nan:Seine]][[simple:Seine]] end."
    assert to_paragraphs(text) == ["Text end."]


def test_behaviour_switches():
    assert to_paragraphs("__NOTOC__\nText __TOC__ more.__NOEDITSECTION__") == ["Text more."]


def test_bold_and_italic():
    text = "'''Bold''' and ''italic'' and '''''both'''''.\n\n''Le Monde'''s office."
    assert to_paragraphs(text) == ["Bold and italic and both.", "Le Monde's office."]


def test_four_quotes_keep_an_apostrophe():
    assert to_paragraphs("the ''''word''''") == ["the 'word'"]


@pytest.mark.parametrize("name", sorted(DROPPED_SECTIONS))
def test_dropped_sections(name):
    heading = name.title() if name != "see also" else "SEE also"
    text = f"Lead.\n\n== {heading} ==\nDropped.\n* Dropped item.\n=== Sub ===\nAlso dropped.\n"
    text += "== History ==\nKept."
    assert to_paragraphs(text) == ["Lead.", "Kept."]


def test_dropped_section_ends_at_same_or_higher_level_only():
    text = (
        "=== Notes ===\ngone\n==== Deeper ====\ngone too\n=== Next ===\nkept\n"
        "== References ==\ngone\n= Top =\nkept too"
    )
    assert to_paragraphs(text) == ["kept", "kept too"]


def test_section_names_are_compared_after_markup_removal():
    text = "== [[Notes]] ==\ngone\n== ''See  also''<!-- x --> ==\ngone\n== Notes and references ==\nkept"
    assert to_paragraphs(text) == ["kept"]


# -- what is kept ------------------------------------------------------------------------------


def test_internal_links_labels_and_trails():
    text = (
        "[[Target]] [[Target|label]] [[Target]]s [[Target|label]]led [[Target]]'s "
        "[[Target]]é [[Paris, Texas|]] [[Mercury (planet)|]] [[Help:Contents|]] "
        "[[:Category:Rivers]] [[wikt:word]] [[Foo#Bar]] [[Target|a|b]]"
    )
    assert to_paragraphs(text) == [
        "Target label Targets labelled Target's Targeté Paris Mercury Contents "
        "Category:Rivers wikt:word Foo#Bar a|b"
    ]


def test_external_links():
    text = (
        "[http://x.org Label] [https://y.org/a?b=c&d=e two words] [http://bare.org] "
        "[//proto.relative/x rel] [mailto:a@b.org mail] see http://plain.org here "
        "[not a link] [ftp://f.org]."
    )
    assert to_paragraphs(text) == [
        "Label two words rel mail see http://plain.org here [not a link] ."
    ]


def test_entities():
    text = "A&nbsp;B &amp; C &ndash; D &mdash; E &lt;ref&gt; &#91;1&#93; &#x263A; AT&T &copy"
    assert to_paragraphs(text) == ["A B & C – D — E <ref> [1] \u263a AT&T &copy"]


# -- paragraphs --------------------------------------------------------------------------------


def test_headings_end_paragraphs_and_are_not_paragraphs():
    text = "Lead line\n== History ==\nFirst.\n===Early===\nSecond.\n====== Six ======\nThird."
    assert to_paragraphs(text) == ["Lead line", "First.", "Second.", "Third."]


def test_blank_lines_end_paragraphs_and_lines_join():
    text = "One\ntwo\nthree.\n\nFour.\n   \t\nFive\n\n\n\nsix."
    assert to_paragraphs(text) == ["One two three.", "Four.", "Five", "six."]


def test_list_items_are_paragraphs():
    text = "Intro\n* one\n** two [[x]]\n# three\n#: four\n: five\n; term : def\n*\nafter\nlist"
    assert to_paragraphs(text) == [
        "Intro",
        "one",
        "two x",
        "three",
        "four",
        "five",
        "term : def",
        "after list",
    ]


def test_whitespace_is_collapsed_and_stripped():
    assert to_paragraphs("  a \t b\u00a0\u00a0c  \n   d  ") == ["a b c d"]
    assert to_paragraphs("") == []
    assert to_paragraphs("\n\n  \n") == []


def test_horizontal_rule_ends_paragraph():
    assert to_paragraphs("A\n----\nB") == ["A", "B"]


# -- decisions the spec leaves open ------------------------------------------------------------


def test_lines_of_removed_markup_are_not_blank_lines():
    text = "One.\n<!-- note -->\nTwo.\n{{cn}}\nThree.\n[[File:x.jpg|thumb|cap]]\nFour."
    assert to_paragraphs(text) == ["One. Two. Three. Four."]


def test_unclosed_template_is_removed_to_the_end_of_its_paragraph():
    text = "Lead {{Infobox\n| name = X\n| broken = yes\n\nNext paragraph.\n\nLast."
    assert to_paragraphs(text) == ["Lead", "Next paragraph.", "Last."]


def test_unclosed_ref_and_comment_stop_at_the_paragraph_end():
    assert to_paragraphs("A<ref>never closed\nstill\n\nB.") == ["A", "B."]
    assert to_paragraphs("A <!-- never closed\n\nB.") == ["A", "B."]


def test_unclosed_link_is_literal():
    assert to_paragraphs("A [[broken link\n\nB ]] c") == ["A [[broken link", "B ]] c"]


def test_invalid_link_targets_are_literal():
    assert to_paragraphs("[[a\nb]] [[]] [[x<y]]") == ["[[a b]] [[]] [[x<y]]"]


def test_nowiki_and_pre_content_is_literal():
    text = "A <nowiki>[[not a link]] {{not a template}} ''q''</nowiki> B <pre>x = '''y'''</pre>"
    assert to_paragraphs(text) == ["A [[not a link]] {{not a template}} ''q'' B x = '''y'''"]


def test_unknown_tags_and_angle_brackets_are_text():
    assert to_paragraphs("x < y > z and List<int> here") == ["x < y > z and List<int> here"]


def test_source_and_chem_count_as_removed_elements():
    assert to_paragraphs("A <source lang=c>int x;</source> B <chem>H2O</chem> C") == ["A B C"]


# -- a realistic article -----------------------------------------------------------------------

ARTICLE = """{{Short description|River in France}}
{{Use dmy dates|date=May 2020}}
{{Infobox river
| name = Seine
| image = [[File:Seine Paris.jpg|250px]]
| length = {{convert|777|km|mi|abbr=on}}
| mouth = [[English Channel]]
}}
'''Seine''' ({{IPA-fr|sɛn|lang}}) is a {{convert|777|km|mi|adj=on}} river in northern
[[France]].<ref name="len">{{cite web |url=http://example.org/seine |title=Seine |publisher=[[SANDRE]]}}</ref>
It rises near [[Dijon]] and flows through [[Paris]] into the [[English Channel]]&nbsp;at
[[Le Havre]].<ref name="len"/>

The name comes from the [[Latin]] ''Sequana''.<!-- check etymology -->

== Course ==
[[File:Seine map.png|thumb|left|Map of the [[drainage basin]] of the Seine.]]
The river is navigable for ocean-going vessels as far as [[Rouen]]; its main tributaries are:
* the [[Marne (river)|Marne]],
* the [[Oise (river)|Oise]] and
* the [[Yonne]].

{| class="wikitable"
! Tributary !! Length
|-
| [[Marne (river)|Marne]] || {{convert|514|km}}
|}

=== Floods ===
In 1910 the river rose {{convert|8.62|m|ft}} above normal.<ref>{{cite book |title=Floods}}</ref>
Flood defences were built afterwards.<math>h = 8.62</math>

== See also ==
* [[List of rivers of France]]

== References ==
{{Reflist}}

== External links ==
* [http://www.example.org Official site]
{{Authority control}}

[[Category:Rivers of France]]
[[fr:Seine]]
"""


def test_realistic_article():
    assert to_paragraphs(ARTICLE) == [
        "Seine () is a 777 km river in northern France. It rises near Dijon and flows through Paris "
        "into the English Channel at Le Havre.",
        "The name comes from the Latin Sequana.",
        "The river is navigable for ocean-going vessels as far as Rouen; its main tributaries are:",
        "the Marne,",
        "the Oise and",
        "the Yonne.",
        "In 1910 the river rose 8.62 m above normal. Flood defences were built afterwards.",
    ]


def test_windows_newlines():
    assert to_paragraphs("A\r\nB\r\n\r\nC") == ["A B", "C"]


MARKUP_CHARS = "{}[]|=<>'!-*#:;/ \nab&"

# -- garbage -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "garbage",
    [
        "{{" * 50_000,
        "}}" * 50_000,
        "[[" * 50_000,
        "{{" * 3000 + "x" + "}}" * 3000,
        "[[" * 3000 + "x" + "]]" * 3000,
        "[[File:" * 30_000,
        "[[File:a|" * 3000 + "]]" * 3000,
        "[[File:a|[b]" * 10_000,
        "<ref>a\n\n" * 10_000,
        "<!-- a\n\n" * 10_000,
        "{|\n" * 30_000,
        "=a" + "=" * 50_000 + "a=",
        "''a'''" * 15_000,
        "<span " * 15_000,
        "[http://" * 10_000,
        "".join(MARKUP_CHARS[i * 7919 % len(MARKUP_CHARS)] for i in range(100_000)),
    ],
    ids=lambda g: repr(g[:12]),
)
def test_garbage_is_linear(garbage):
    start = time.process_time()  # CPU time: other work on the machine does not count
    to_paragraphs(garbage)
    assert time.process_time() - start < 2.0


def test_unbalanced_braces_do_not_eat_later_paragraphs():
    assert to_paragraphs("A {{broken\n\nB {{ok}} c.\n\nD.") == ["A", "B c.", "D."]
    assert to_paragraphs("A }} b {{ c") == ["A }} b"]
    # a template may span blank lines when it is closed, as in MediaWiki
    assert to_paragraphs("A {{long\n\n| x = y\n\n}} b.") == ["A b."]
