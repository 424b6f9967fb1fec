"""Wikitext to plain-text paragraphs, by the rules of docs/plaintext.md.

Every stage that reads Wikipedia sees an article as the list this module returns, and the sample
world renders its ground truth by the same rules, so the rules are implemented exactly and the
corner cases below are decided once, here.

How it works: a fixed sequence of linear passes, each driven by a precompiled regular expression
(no per-character Python loops, no parser library), so that a typical 3.5 KB article takes a few
hundred microseconds:

1. comments and the tags whose content is special (``<ref>``, ``<math>``, ``<gallery>`` …
   removed with their content; ``<nowiki>``/``<pre>`` kept, with their markup characters
   shielded from the later passes);
2. templates ``{{…}}`` (parser functions and ``{{{parameters}}}`` included) and tables ``{|…|}``,
   found by matching every brace in one pass, so nesting and tables inside templates cost nothing
   extra; the inline templates that carry prose (``{{convert}}``, ``{{lang}}``, dates …) are
   rendered by :mod:`~tw_jax.preprocess.plaintext.wikitext_templates`, every other one is removed;
3. external links ``[url label]``; file and image links, their ``]]`` found by matching
   brackets (captions hold links and single brackets); 4. internal links, innermost first;
5. remaining HTML tags; 6. behaviour switches; 7. bold and italic quotes (MediaWiki's own
   balancing of ``'''``/``''`` on each line);
8. lines into paragraphs: headings, dropped sections, list items, blank lines; then entities are
   decoded and whitespace collapsed in each paragraph.

Decisions the spec leaves open (tests/preprocess/test_wikitext.py pins each one):

* **Removed markup is not a blank line.** Removed constructs leave an invisible marker; a line
  that held only removed markup (a comment, a category link, ``{{cn}}``, a file link, a whole
  multi-line infobox) is dropped without ending the paragraph around it. Only a line that was
  blank in the source ends a paragraph -- and a removed *table*, which is a block, always does.
* **Unclosed constructs** never eat the rest of the article: an unclosed ``{{``, ``{|``,
  ``<!--`` or ``<ref>`` (and the other removed elements) is removed up to the end of its
  paragraph block (the next blank line), which is where a broken infobox or citation usually
  ends; an unclosed ``[[`` is left as literal text, as MediaWiki shows it. Every pass is linear,
  so garbage cannot make it hang or go quadratic.
* ``<source>`` (the old name of ``<syntaxhighlight>``), ``<chem>``/``<ce>`` (chemistry
  formulae, like ``<math>``), ``<hiero>``, ``<graph>``, ``<mapframe>``, ``<inputbox>``,
  ``<categorytree>``, ``<templatestyles>`` and ``<includeonly>`` are removed with their content
  too: they render as pictures, widgets or nothing, never as prose.
* Only known HTML and MediaWiki tag names count as tags (``<small>``, ``<span>``, ``<sup>`` …,
  see :data:`HTML_TAGS`); ``x <y> z`` in prose is text, as in MediaWiki.
* ``<br>`` becomes a space; a horizontal rule ``----`` ends a paragraph.
* A link ``[[Target]]`` shows the target as written (leading colon removed); ``[[Target|]]``
  (the pipe trick) shows the target less its namespace and a trailing ``(…)`` or ``, …``.
  ``[[:Category:X]]``-style links (leading colon) are ordinary visible links. Interlanguage
  prefixes are the Wikipedia language codes in :data:`LANGUAGE_CODES` (case-insensitive, as in
  MediaWiki, so ``[[Fr:Paris]]`` is dropped too); other prefixed links (``[[wikt:word]]``,
  ``[[Wikipedia:About]]``) keep their text. A link whose target is not a valid title (a
  newline, ``<``, ``>``, ``{``, ``}``) is literal text.
* The link trail is the run of ASCII lowercase letters after ``]]`` (English Wikipedia's rule),
  on piped links too: ``[[Target|label]]s`` → ``labels``.
* A list item is one line; ``;term : definition`` keeps its text after the markers.
* Section names are compared after markup removal, whitespace collapsed and case folded,
  exactly against :data:`DROPPED_SECTIONS` (so "Notes and references" is kept).
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable

from tw_jax.preprocess.plaintext.sentences import collapse_whitespace
from tw_jax.preprocess.plaintext.wikitext_templates import MARK, render_template
from tw_jax.preprocess.plaintext.wikitext_vocabulary import (
    BEHAVIOUR_SWITCHES,
    DROPPED_ELEMENTS,
    DROPPED_LINK_NAMESPACES,
    DROPPED_SECTIONS,
    HTML_TAGS,
    LANGUAGE_CODES,
    LITERAL_ELEMENTS,
    PIPE_TRICK_PREFIXES,
)

__all__ = ["DROPPED_ELEMENTS", "DROPPED_SECTIONS", "HTML_TAGS", "LANGUAGE_CODES", "to_paragraphs"]

# ---------------------------------------------------------------------------------------------
# Internal markers.

# Left where markup was removed: a line holding only these is not a blank line. (\x1f cannot
# occur in XML text; any in the input are removed first.)
_MARK = MARK
# Markup characters inside <nowiki>/<pre> (and literal non-links) are swapped for Unicode
# noncharacters, which no later pass matches, and swapped back at the end.
_SHIELDED = "[]{}|'<>=*#:;_-~"
# Every shielded piece starts with _SHIELD_MARK, so one fast ``in`` test tells whether a paragraph
# needs unshielding.
_SHIELD_MARK = "\ufdef"
_SHIELD_TABLE = str.maketrans({c: chr(0xFDD0 + i) for i, c in enumerate(_SHIELDED)})
_UNSHIELD = str.maketrans(
    {chr(0xFDD0 + i): c for i, c in enumerate(_SHIELDED)} | {_SHIELD_MARK: None}
)
_RESERVED = re.compile("[\x1f\ufdd0-\ufdef]")


def _has_reserved(text: str) -> bool:
    """Whether ``text`` holds a marker character. An ASCII string (``isascii`` is a flag lookup)
    can hold only ``\x1f``, which ``in`` finds far faster than a character-class search."""
    if text.isascii():
        return _MARK in text
    # max() looks at every character once, in C; a search for the class takes several times as
    # long (sre tries the class at every character).
    return _MARK in text or max(text) >= "\ufdd0" and _RESERVED.search(text) is not None


def _has_double(text: str, char: str) -> bool:
    """Whether ``char + char`` occurs in ``text``. ``in`` finds one character with memchr, but
    two by a scan about three times slower than sre's search for a literal (which is itself
    slower than memchr): so one character first, then the pair by regex."""
    return char in text and _DOUBLES[char].search(text) is not None


_DOUBLES = {c: re.compile(re.escape(c + c)) for c in "[_'"}


def _shield(text: str) -> str:
    """``text`` with its markup characters hidden from the later passes.

    Every non-blank line gets the mark (the piece may span paragraphs); blank lines stay blank,
    so they still end paragraphs.
    """
    text = text.translate(_SHIELD_TABLE)
    if "\n" not in text:
        return _SHIELD_MARK + text
    return "\n".join(
        _SHIELD_MARK + line if line and not line.isspace() else line for line in text.split("\n")
    )


# ---------------------------------------------------------------------------------------------
# Regular expressions.


def _trie(words: Iterable[str]) -> str:
    """A regex matching any of ``words``, as a trie (``fr|fy|fi`` -> ``f(?:r|y|i)``): sre tries
    an alternation's branches one by one, so 365 flat branches would cost 365 tries a link."""
    heads: dict[str, list[str]] = {}
    for word in sorted(words):
        heads.setdefault(word[:1], []).append(word[1:])
    branches = []
    for head, tails in heads.items():
        if head == "":
            continue
        rest = _trie([t for t in tails if t])
        if rest:
            rest = f"(?:{rest})?" if "" in tails else f"(?:{rest})"
        branches.append(re.escape(head) + rest)
    return "|".join(branches)


def _anycase(word: str) -> str:
    """A regex matching ``word`` in any letter case. (re.IGNORECASE would make sre give up its
    fast literal-prefix search, which costs several times more on every article.)"""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


_BLOCK_END = re.compile(r"\n[ \t]*\n")
_SPECIAL_NAMES = sorted(DROPPED_ELEMENTS | LITERAL_ELEMENTS, key=len, reverse=True)
_SPECIAL_OPEN = re.compile(
    r"<(?:!--|(" + "|".join(map(_anycase, _SPECIAL_NAMES)) + r")(?=[\s/>])([^<>]*)>)"
)
_SPECIAL_CLOSE = {name: re.compile(r"</" + _anycase(name) + r"\s*>") for name in _SPECIAL_NAMES}
# A comment, or a <ref> element: self-closing (its attributes end with "/"), else up to the first
# closing tag, as _strip_special_elements reads them. One that is not closed matches to the end of
# the text with its group set (so many unclosed ones cost one scan, not one each).
_REF = _anycase("ref")
_COMMENT_OR_REF = re.compile(
    r"<(?:!--(?:[^-]++|-(?!->))*+(?:-->|()\Z)|"
    + _REF
    + r"(?=[\s/>])(?:[^<>]*/\s*>|[^<>]*>(?:[^<]++|<(?!/"
    + _REF
    + r"\s*>))*+(?:</"
    + _REF
    + r"\s*>|()\Z)))"
)
_OPEN_BRACE = re.compile(r"\{")
_CLOSE_BRACE = re.compile(r"\}")
# What most articles' braces are: templates ("{{", not "{{{") holding text and templates that
# hold only text, and tables ("{|") holding text and such templates; no other brace. Group 1 is
# a template's body; a table has none. Possessive throughout: linear, no backtracking.
_TEXT_TEMPLATE = r"\{\{(?!\{)[^{}]*+\}\}"
_TEMPLATE_BODY = r"(?:[^{}]++|" + _TEXT_TEMPLATE + r")*+"
_FLAT_BRACES = re.compile(
    r"\{\{(?!\{)(" + _TEMPLATE_BODY + r")\}\}"
    r"|\{\|(?:[^{}]++|\{\{(?!\{)" + _TEMPLATE_BODY + r"\}\})*+\}"
)
_PROTOCOLS = str.split(
    "https:// http:// ftp:// ftps:// sftp:// irc:// ircs:// git:// svn:// gopher:// telnet:// "
    "nntp:// worldwind:// mms:// // mailto: news: urn: tel: sip: sips: sms: xmpp: geo: magnet: "
    "bitcoin:"
)
# Every protocol is letters then ":", or "//": the lookahead rejects an internal link's "[" (and
# any other "[word") before the many alternatives are tried one by one.
_EXTERNAL_LINK = re.compile(
    r"\[(?=[A-Za-z]++:|//)(?:"
    + "|".join(map(_anycase, _PROTOCOLS))
    + r")[^\s\[\]<>\"]*(?:[ \t\u00a0]+([^\]\n]*))?\]"
)
# An innermost internal link: target, "|label" and trail. A target cannot hold a newline or any
# of <>{}| (not a valid title), so "[[a\nb]]" is not a link and stays literal.
_INTERNAL_LINK = re.compile(r"\[\[([^\[\]\n<>{}|]*)(\|[^\[\]]*)?\]\]([a-z]*)")
# Category and interlanguage links, written as most are: removed (the trail stays), also without
# a Python call per link.
_DROPPED_LINK = re.compile(
    r"\[\[(?:[Cc]ategory|" + _trie(LANGUAGE_CODES) + r"):[^\[\]\n<>{}|]*+(?:\|[^\[\]]*+)?\]\]"
)
# The links most articles are made of, ``[[Target]]`` and ``[[Target|label]]`` with a target
# outside any namespace and not blank (and a label not blank): the one capture is the text shown
# (the trail stays where it is), so ``"".join(pattern.split(text))`` resolves them all without a
# Python call per link. Possessive quantifiers and lookaheads keep it linear.
_TITLE_CHAR = r"[^\[\]\n<>{}|:]"
_SIMPLE_LINK = re.compile(
    r"\[\[(?:(?=" + _TITLE_CHAR + r"*+\]\])|(?!\s*+\|)" + _TITLE_CHAR + r"++\|)"
    r"(?!\s*+\])([^\[\]]++)\]\]"
)  # (``[[Target]]``, the commoner, tried first; at most one of the two can match)
_FILE_LINK = re.compile(r"\[\[[ \t]*(?:" + _anycase("file") + "|" + _anycase("image") + r")[ \t]*:")
_LINK_BRACKET = re.compile(r"\[\[|\]\]|\n[ \t]*\n")
_MAX_LINK_DEPTH = 4  # links nested deeper than this (never seen in real text) stay literal
_PIPE_TRICK_PARENS = re.compile(r"\s*[(（][^()（）]*[)）]\s*$")
_HTML_TAG = re.compile(r"</?([A-Za-z][A-Za-z0-9]*)(?:\s[^<>]*)?/?>")
_SWITCH = re.compile(r"__(?:" + "|".join(BEHAVIOUR_SWITCHES) + r")__")
_QUOTE_RUN = re.compile(r"(''+)")  # (not "'{2,}": sre finds a literal start far faster)
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
_WHITESPACE = re.compile(r"\s+")
_LIST_MARKERS = "*#:;"


# ---------------------------------------------------------------------------------------------
# Pass 1: comments and special elements.


def _block_end(text: str, start: int) -> int:
    """Where the paragraph block containing ``start`` ends: the next blank line, or the end."""
    m = _BLOCK_END.search(text, start)
    return m.start() if m else len(text)


def _strip_special(text: str) -> str:
    if "<" not in text:
        return text
    # Most articles hold only comments and <ref> elements, all closed: one split removes them.
    # It removes what the loop below would, element by element from the left, as long as the
    # first special element each time is one it matches closed; when one is not (another
    # element), its opening tag is still there afterwards, and the loop reads the text.
    parts = _COMMENT_OR_REF.split(text)  # text, unclosed?, unclosed?, text, …
    if len(parts) == 1:
        return _strip_special_elements(text)
    if parts[-3] is None and parts[-2] is None:  # (only the last can be unclosed)
        removed = _MARK.join(parts[0::3])
        if _SPECIAL_OPEN.search(removed) is None:
            return removed
    return _strip_special_elements(text)


def _strip_special_elements(text: str) -> str:
    out: list[str] = []
    pos = 0
    search = _SPECIAL_OPEN.search
    # Where a search for a closing tag (or "-->") already failed: a later one from further on
    # fails too, so many unclosed tags cost one scan, not one each.
    unclosed_from: dict[str, int] = {}
    while True:
        m = search(text, pos)
        if m is None:
            break
        out.append(text[pos : m.start()])
        name = m.group(1)
        if name is None:  # a comment, "<!--"
            end = (
                -1
                if m.end() >= unclosed_from.get("--", len(text) + 1)
                else text.find("-->", m.end())
            )
            if end < 0:
                unclosed_from["--"] = m.end()
                pos = _block_end(text, m.end())
            else:
                pos = end + 3
            out.append(_MARK)
            continue
        name = name.lower()
        literal = name in LITERAL_ELEMENTS
        if m.group(2).rstrip().endswith("/"):  # self-closing: <ref name="x" />
            pos = m.end()
            out.append("" if literal else _MARK)
            continue
        close = None
        if m.end() < unclosed_from.get(name, len(text) + 1):
            close = _SPECIAL_CLOSE[name].search(text, m.end())
        if close is None:
            unclosed_from[name] = m.end()
            if literal:  # a stray opening tag: drop it, read on as usual
                pos = m.end()
            else:
                pos = _block_end(text, m.end())
                out.append(_MARK)
            continue
        if literal:
            out.append(_shield(text[m.end() : close.start()]))
        else:
            out.append(_MARK)
        pos = close.end()
    out.append(text[pos:])
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Pass 2: templates and tables.


def _starts_line(text: str, pos: int) -> bool:
    """Whether only spaces, tabs and ``:`` indentation precede ``pos`` on its line."""
    line_start = text.rfind("\n", 0, pos) + 1
    return not text[line_start:pos].strip(" \t:")


# Templates nested deeper than this inside rendered templates' arguments are dropped (real text
# nests two or three deep); it bounds the recursion and keeps garbage linear.
_MAX_TEMPLATE_DEPTH = 8


def _strip_braces(text: str, depth: int = 0) -> str:
    """Templates rendered or removed (:mod:`wikitext_templates`), tables removed: found whole
    where they can be (:func:`_flat_braces`), else brace by brace."""
    if "{" not in text:
        return text
    constructs = _flat_braces(text)
    if constructs is None:
        constructs = _nested_braces(text)
    return _replace_braces(text, constructs, depth)


# A template or table to replace: (start, end, is_table, template body or None). A template
# with no body (never closed) is dropped, not rendered.
_Construct = tuple[int, int, bool, str | None]


def _flat_braces(text: str) -> list[_Construct] | None:
    """The templates and tables of ``text`` when every brace in it belongs to one that
    :data:`_FLAT_BRACES` matches whole, and every table starts its line; None otherwise.

    Then every construct is balanced and holds no other, so matching braces one by one (as
    :func:`_nested_braces` does) would pair each construct's first brace with its last,
    and no brace outside them would change that: the same constructs, found by one search for
    ``{{`` or ``{|`` each instead of a Python step per brace.
    """
    found: list[_Construct] = []
    # Each brace outside the constructs found so far must start the next one. (str.find jumps
    # to it: sre looks for a pattern's first character several times slower.)
    start = text.find("{")
    while start >= 0:
        m = _FLAT_BRACES.match(text, start)
        if m is None:
            return None  # "{{{", a lone "{", or braces nested deeper
        body = m.group(1)
        if body is None and not _starts_line(text, start):
            return None  # "{|" inside a line: not a table, only braces
        found.append((start, m.end(), body is None, body))
        start = text.find("{", m.end())
    return found


def _replace_braces(text: str, constructs: list[_Construct], depth: int) -> str:
    """``text`` with each template rendered (:mod:`wikitext_templates`) or dropped, and each
    table removed; ``constructs`` in order, none inside another."""
    out: list[str] = []
    pos = 0

    def expand(argument: str) -> str:
        return _strip_braces(argument, depth + 1)

    for start, end, is_table, body in constructs:
        out.append(text[pos:start])
        pos = end
        if is_table:
            out.append("\n\n")
            continue
        rendered = None
        if body is not None and depth < _MAX_TEMPLATE_DEPTH:
            rendered = render_template(body, expand)
        out.append(_MARK if rendered is None else rendered)
    out.append(text[pos:])
    return "".join(out)


def _nested_braces(text: str) -> list[_Construct]:
    """The templates and tables of any text, outermost only."""
    # Match every brace with its partner in one pass (a stack of positions). A template is a
    # run of two or more '{' and ends where its first brace is closed; a table is '{|' at the
    # start of a line and ends where its '{' is closed (by the '}' of '|}'). Single-character
    # patterns are searched because sre finds those fastest.
    braces = [m.start() for m in _OPEN_BRACE.finditer(text)]
    closing = [m.start() for m in _CLOSE_BRACE.finditer(text)]
    if closing:
        braces += closing
        braces.sort()
    stack: list[int] = []
    partner: dict[int, int] = {}
    openers: list[tuple[int, bool]] = []  # (position, is_table)
    previous = -2
    for at in braces:
        if text[at] == "{":
            if previous != at - 1 or text[previous] != "{":  # first brace of a run
                following = text[at + 1 : at + 2]
                if following == "{":
                    openers.append((at, False))
                elif following == "|" and _starts_line(text, at):
                    openers.append((at, True))
            stack.append(at)
        elif stack:
            partner[stack.pop()] = at
        previous = at
    constructs: list[_Construct] = []
    end = 0
    for start, is_table in openers:
        if start < end:
            continue  # inside a construct already found
        close = partner.get(start)
        end = _block_end(text, start) if close is None else close + 1
        body = None if is_table or close is None else text[start + 2 : close - 1]
        constructs.append((start, end, is_table, body))
    return constructs


# ---------------------------------------------------------------------------------------------
# Passes 3-4: links.


def _external_link(m: re.Match[str]) -> str:
    return m.group(1) or _MARK


def _pipe_trick(target: str) -> str:
    text = target.lstrip(":")
    prefix, colon, rest = text.partition(":")
    if colon and prefix.strip().replace("_", " ").lower() in PIPE_TRICK_PREFIXES:
        text = rest
    stripped = _PIPE_TRICK_PARENS.sub("", text)
    if stripped != text:
        return stripped
    return text.split(",", 1)[0]


def _internal_link(m: re.Match[str]) -> str:
    target, label, trail = m.groups()
    if label is None and ":" not in target and target and not target.isspace():
        return target + trail  # [[Target]], most links: the general case below gives the same
    if ":" in target:
        name = target.strip()
        if name.startswith(":"):
            shown = name[1:]
        else:
            prefix = name.partition(":")[0].strip().replace("_", " ").lower()
            if prefix in DROPPED_LINK_NAMESPACES or prefix in LANGUAGE_CODES:
                return _MARK + trail
            shown = target
    else:
        shown = target
    if not target or target.isspace():  # [[]], [[|x]]: not links; keep them out of later passes
        return _shield(m.group(0)[: len(m.group(0)) - len(trail)]) + trail
    if label is not None:
        label = label[1:]
        if label and not label.isspace():
            return label + trail
        return _pipe_trick(target.strip()) + trail
    return shown + trail


def _strip_file_links(text: str) -> str:
    """File and image links removed whole, their closing ``]]`` found by matching brackets.

    A caption holds links (``[[river]]``) and single brackets (``[above]``,
    ``Bicyclo[1.1.0]butane``), which the innermost-first link pattern cannot span. Every ``[[``
    is matched with its ``]]`` in one pass (a stack, emptied at each blank line, so an unclosed
    file link stays literal rather than eating later paragraphs); ``]]]`` after a caption holding
    ``[`` closes the link one character later, as in MediaWiki.
    """
    starts = {m.start() for m in _FILE_LINK.finditer(text)}
    if not starts:
        return text
    # Which "]]" closes a file link depends only on the brackets after it, so the scan starts at
    # the line of the first one (a line start never splits a bracket token) and stops once the
    # last one is closed or cut off by a blank line.
    first, last = min(starts), max(starts)
    spans: list[tuple[int, int]] = []
    stack: list[int] = []
    open_files = 0  # file links on the stack
    for m in _LINK_BRACKET.finditer(text, text.rfind("\n", 0, first) + 1):
        token = m.group()
        if token == "[[":
            stack.append(m.start())
            open_files += m.start() in starts
        elif token == "]]":
            if stack:
                start = stack.pop()
                if start in starts:
                    open_files -= 1
                    end = m.end()
                    if text[end : end + 1] == "]" and "[" in text[start + 2 : m.start()].replace(
                        "[[", ""
                    ):
                        end += 1
                    spans.append((start, end))
        else:  # a blank line
            stack.clear()
            open_files = 0
        if not open_files and m.start() >= last:
            break
    if not spans:
        return text
    spans.sort()
    out: list[str] = []
    pos = 0
    for start, end in spans:
        if start < pos:
            continue  # inside a file link already removed
        out.append(text[pos:start])
        out.append(_MARK)
        pos = end
    out.append(text[pos:])
    return "".join(out)


def _resolve_links(text: str) -> str:
    if "[" not in text:
        return text
    if ":" in text or "//" in text:  # (one character first: "in" finds it with memchr)
        text = _EXTERNAL_LINK.sub(_external_link, text)
        text = _strip_file_links(text)
    if not _has_double(text, "["):
        return text
    # Simple links first, then category links, then any other innermost link. One link inside
    # another's label may then be resolved with it in this one round, where the rounds below
    # take one round per level; so the result is kept only when no "[[" is left (every link
    # resolved, nesting at most three deep, so within the depth limit: the same text the
    # rounds give, since each link's text depends only on its own, once resolved).
    resolved = "".join(_SIMPLE_LINK.split(text))
    if _has_double(resolved, "["):
        resolved = _DROPPED_LINK.sub(_MARK, resolved)
    if _has_double(resolved, "["):
        resolved = _INTERNAL_LINK.sub(_internal_link, resolved)
        if _has_double(resolved, "["):
            return _resolve_nested_links(text)
    return resolved


def _resolve_nested_links(text: str) -> str:
    """Internal links resolved innermost first, one level a round, up to the depth limit."""
    for _ in range(_MAX_LINK_DEPTH):
        if "[[" not in text:
            break
        text, n = _INTERNAL_LINK.subn(_internal_link, text)
        if not n:
            break
    return text


# ---------------------------------------------------------------------------------------------
# Passes 5-7: tags, behaviour switches, quotes.


def _html_tag(m: re.Match[str]) -> str:
    name = m.group(1).lower()
    if name not in HTML_TAGS:
        return m.group(0)
    return " " if name == "br" else _MARK


def _strip_quotes_line(line: str) -> str:
    """Remove bold/italic quote runs from one line, balancing them as MediaWiki's doQuotes."""
    parts = _QUOTE_RUN.split(line)
    italics = bold = 0
    for i in range(1, len(parts), 2):
        n = len(parts[i])
        if n == 4:  # an apostrophe, then bold
            parts[i - 1] += "'"
            parts[i] = "'''"
        elif n > 5:  # apostrophes, then bold italic
            parts[i - 1] += "'" * (n - 5)
            parts[i] = "'''''"
        n = len(parts[i])
        if n == 2:
            italics += 1
        elif n == 3:
            bold += 1
        else:
            italics += 1
            bold += 1
    if italics % 2 and bold % 2:
        # One bold is really an apostrophe followed by italics: pick it as MediaWiki does.
        single = multi = space = -1
        for i in range(1, len(parts), 2):
            if len(parts[i]) != 3:
                continue
            before = parts[i - 1]
            x1 = before[-1:]
            x2 = before[-2:-1] if len(before) >= 2 else before[:1]
            if x1 == " ":
                if space < 0:
                    space = i
            elif x2 == " ":
                single = i
                break
            elif multi < 0:
                multi = i
        chosen = single if single >= 0 else multi if multi >= 0 else space
        if chosen >= 0:
            parts[chosen - 1] += "'"
    return "".join(parts[0::2])


def _strip_quotes(text: str) -> str:
    """Quote runs removed from each line holding one; the other lines are copied untouched."""
    found = _DOUBLES["'"].search(text)  # (sre finds two characters faster than str.find)
    if found is None:
        return text
    out: list[str] = []
    pos = 0
    while found is not None:
        at = found.start()
        start = text.rfind("\n", 0, at) + 1
        end = text.find("\n", at)
        if end < 0:
            end = len(text)
        out.append(text[pos:start])
        out.append(_strip_quotes_line(text[start:end]))
        pos = end
        found = _DOUBLES["'"].search(text, end)
    out.append(text[pos:])
    return "".join(out)


# ---------------------------------------------------------------------------------------------
# Pass 8: paragraphs.


def _decode_entity(m: re.Match[str]) -> str:
    return html.unescape(m.group(0))


def _finish(text: str) -> str:
    """Unshield, decode entities, collapse whitespace: the final form of a paragraph."""
    if _SHIELD_MARK in text:
        text = text.translate(_UNSHIELD)
    if "&" in text:
        text = _ENTITY.sub(_decode_entity, text)
    return collapse_whitespace(text)


# Printable ASCII, newlines and markers: an article's text made of these alone has paragraphs
# that are printable ASCII once their markers are removed (as _assemble removes them).
_PLAIN_ASCII = bytes(range(0x20, 0x7F)) + b"\n" + MARK.encode()


def _finish_plain(text: str) -> str:
    """:func:`_finish` of a paragraph of printable ASCII: with no entity and no double space,
    its ends stripped is its final form (isprintable, which reads every character, is known)."""
    if "&" in text or "  " in text:
        return _finish(text)
    return text.strip(" ")


def _heading(line: str) -> tuple[int, str] | None:
    """``(level, text)`` if ``line`` is a heading (``== text ==``), else None.

    String operations, not a regex: a backtracking pattern goes quadratic on long runs of '='.
    """
    stripped = line.rstrip(" \t")
    if not stripped.endswith("="):
        return None
    n = len(stripped)
    left = n - len(stripped.lstrip("="))
    if left == n:  # only '=': the middle ones are the text, as in MediaWiki
        if n < 3:
            return None
        level = min((n - 1) // 2, 6)
        return level, "=" * (n - 2 * level)
    right = n - len(stripped.rstrip("="))
    level = min(left, right, 6)
    return level, stripped[level : n - level]


_HEADINGS: dict[str, tuple[int, bool] | None] = {}  # line -> _section_heading(line)


def _section_heading(line: str) -> tuple[int, bool] | None:
    """``(level, whether its section is dropped)`` if ``line`` is a heading, else None;
    remembered (up to 65,536 lines): ``== History ==`` recurs in article after article."""
    if line in _HEADINGS:
        return _HEADINGS[line]
    heading = _heading(line)
    found = heading and (heading[0], _finish(heading[1]).lower() in DROPPED_SECTIONS)
    if len(_HEADINGS) >= 1 << 16:
        _HEADINGS.clear()
    _HEADINGS[line] = found
    return found


def _assemble(text: str) -> list[str]:
    # One C-speed look at the whole text (about a fifth of what isprintable costs paragraph by
    # paragraph) spares that check in each paragraph of most articles.
    plain = text.isascii() and not text.encode().translate(None, _PLAIN_ASCII)
    finish = _finish_plain if plain else _finish
    paragraphs: list[str] = []
    current: list[str] = []
    dropped_level = 0  # > 0 while inside a dropped section headed at this level
    # (The paragraph in progress is flushed inline, ``if current: …``, not by a nested function:
    # this loop runs for every line of every article.)
    for line in text.split("\n"):
        if _MARK in line:
            line = line.replace(_MARK, "")
            if not line or line.isspace():
                continue  # held only removed markup: not a blank line
        first = line[:1]
        if first == "=":
            heading = _section_heading(line)
            if heading is not None:
                if current:
                    paragraphs.append(finish(" ".join(current)))
                    current = []
                level, dropped = heading
                if dropped_level and level > dropped_level:
                    continue
                dropped_level = level if dropped else 0
                continue
        if dropped_level:
            continue
        if not line or line.isspace():
            if current:
                paragraphs.append(finish(" ".join(current)))
                current = []
        elif first in _LIST_MARKERS:
            if current:
                paragraphs.append(finish(" ".join(current)))
                current = []
            paragraphs.append(finish(line.lstrip(_LIST_MARKERS)))
        elif line.startswith("----"):
            if current:
                paragraphs.append(finish(" ".join(current)))
                current = []
            rest = line.lstrip("-")
            if rest and not rest.isspace():
                current.append(rest)
        else:
            current.append(line)
    if current:
        paragraphs.append(finish(" ".join(current)))
    return [p for p in paragraphs if p]


# ---------------------------------------------------------------------------------------------


def to_paragraphs(wikitext: str) -> list[str]:
    """The plain-text paragraphs of an article's wikitext, by docs/plaintext.md.

    Paragraphs come in page order, each stripped, with whitespace runs collapsed to one space;
    empty ones are dropped. Headings end paragraphs and are not paragraphs themselves; each list
    item is a paragraph; sections such as References or See also are left out whole.
    """
    text = wikitext
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    if _has_reserved(text):
        text = _RESERVED.sub("", text)
    text = _strip_special(text)
    text = _strip_braces(text)
    text = _resolve_links(text)
    if "<" in text:
        text = _HTML_TAG.sub(_html_tag, text)
    if _has_double(text, "_"):
        text = _SWITCH.sub(_MARK, text)
    text = _strip_quotes(text)
    return _assemble(text)
