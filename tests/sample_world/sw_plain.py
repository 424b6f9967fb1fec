"""A small, independent wikitext → plain paragraphs converter following docs/plaintext.md.

It exists only to check the sample world: the generator builds plain text from fragments,
this parses the wikitext it wrote, and the two must agree paragraph for paragraph.
"""

from __future__ import annotations

import html
import re

DROPPED_SECTIONS = {"references", "external links", "see also", "notes", "further reading",
                    "bibliography", "sources", "footnotes", "citations"}
_ELEMENTS = "gallery|math|syntaxhighlight|timeline|score|imagemap|templatedata"


def _remove_nested(text: str, open_: str, close: str) -> str:
    out, depth, i = [], 0, 0
    while i < len(text):
        if text.startswith(open_, i):
            depth += 1
            i += len(open_)
        elif depth and text.startswith(close, i):
            depth -= 1
            i += len(close)
        else:
            if not depth:
                out.append(text[i])
            i += 1
    return "".join(out)


def _remove_tables(text: str) -> str:
    out, depth = [], 0
    for line in text.split("\n"):
        s = line.strip()
        if s.startswith("{|"):
            depth += 1
            continue
        if depth:
            if s.startswith("|}"):
                depth -= 1
            continue
        out.append(line)
    return "\n".join(out)


def _remove_special_links(text: str) -> str:
    pattern = re.compile(r"\[\[(?:File|Image|Category|[a-z]{2,3}):", re.IGNORECASE)
    while True:
        m = pattern.search(text)
        if not m:
            return text
        depth, i = 0, m.start()
        while i < len(text):
            if text.startswith("[[", i):
                depth += 1
                i += 2
            elif text.startswith("]]", i):
                depth -= 1
                i += 2
                if depth == 0:
                    break
            else:
                i += 1
        text = text[: m.start()] + text[i:]


def _inline(text: str) -> str:
    text = re.sub(r"\[\[([^\[\]|]*)\|([^\[\]]*)\]\]([a-z]*)", r"\2\3", text)
    text = re.sub(r"\[\[([^\[\]|]*)\]\]([a-z]*)", r"\1\2", text)
    text = re.sub(r"\[(?:https?:)?//[^\s\]]+ ([^\]]*)\]", r"\1", text)
    text = re.sub(r"\[(?:https?:)?//[^\s\]]+\]", "", text)
    text = text.replace("'''", "").replace("''", "")
    text = re.sub(r"<br\s*/?>", " ", text, flags=re.IGNORECASE)
    text = re.sub(r"</?[a-zA-Z][^>]*>", "", text)
    return html.unescape(text)


def to_paragraphs(wikitext: str) -> list[str]:
    text = re.sub(r"<!--.*?-->", "", wikitext, flags=re.S)
    text = re.sub(r"<ref[^>]*/>", "", text)
    text = re.sub(r"<ref[^>]*>.*?</ref>", "", text, flags=re.S)
    text = re.sub(rf"<({_ELEMENTS})[^>]*>.*?</\1>", "", text, flags=re.S)
    text = _remove_nested(text, "{{", "}}")
    text = _remove_tables(text)
    text = _remove_special_links(text)
    text = re.sub(r"__[A-Z]+__", "", text)
    paragraphs: list[str] = []
    current: list[str] = []
    skip_level = 0

    def end() -> None:
        if current:
            paragraphs.append(" ".join(current))
            current.clear()

    for line in text.split("\n"):
        heading = re.match(r"^(={2,6})\s*(.*?)\s*\1\s*$", line)
        if heading:
            end()
            level = len(heading.group(1))
            if skip_level and level > skip_level:
                continue
            skip_level = level if heading.group(2).lower() in DROPPED_SECTIONS else 0
            continue
        if skip_level:
            continue
        if not line.strip():
            end()
        elif line[0] in "*#:;":
            end()
            paragraphs.append(line.lstrip("*#:;"))
        else:
            current.append(line)
    end()
    out = []
    for p in paragraphs:
        p = " ".join(_inline(p).split())
        if p:
            out.append(p)
    return out
