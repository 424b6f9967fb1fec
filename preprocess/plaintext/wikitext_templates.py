"""Inline templates that carry prose, rendered as English Wikipedia shows them (docs/plaintext.md).

Dropping every ``{{…}}`` loses the numbers, names and dates that editors write through templates
("a land area of {{convert|180|km2|sqmi}}"), so the sentence reads "a land area of and" and an
edit to the value never reaches a DiffSet. The templates in :data:`RENDERERS` are therefore
printed from their arguments; every other template is dropped, as before.

Rules, decided once here (tests/preprocess/test_wikitext_templates.py pins each):

* Names are compared as MediaWiki does: the first letter in any case, ``_`` as a space, runs of
  spaces as one, a ``Template:`` / ``subst:`` / ``safesubst:`` prefix ignored.
* Arguments are split at ``|`` outside nested templates and links; ``name=value`` arguments are
  named (an explicit ``1=`` is positional 1); named values are stripped, positional ones are not.
* Only the arguments a template prints are expanded, so a nested template renders (``{{nowrap|
  {{convert|5|km}}}}``) but nothing in an unused argument is ever parsed. The caller bounds the
  nesting depth.
* Deterministic: nothing reads a clock. ``{{age}}`` and the "(age N)" of ``{{birth date and
  age}}`` are left out; ``{{death date and age}}`` keeps its "(aged N)", which only needs its two
  dates.
* Strict: a template whose arguments are not what it takes (``{{convert|about|5|km}}``, a month
  13) is dropped rather than guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from tw_jax.preprocess.plaintext.wikitext_quantities import (
    age_at,
    format_date,
    format_number,
    parse_date,
    unit_symbol,
)

__all__ = [
    "MARK",
    "MAX_ARGUMENTS",
    "RENDERERS",
    "Args",
    "canonical_name",
    "render_template",
    "split_arguments",
]

# Left where markup was removed (see tw_jax.preprocess.plaintext.wikitext); never part of a value.
MARK = "\x1f"

Expand = Callable[[str], str]
# Positional arguments read at most: {{chem|99999999=x}} must not loop over 10^8 empty ones.
MAX_ARGUMENTS = 100


class Args:
    """A template's arguments: ``a[1]`` positional, ``a["u"]`` named, expanded when read."""

    __slots__ = ("_expand", "_named", "_positional")

    def __init__(self, pieces: list[tuple[str | None, str]], expand: Expand) -> None:
        self._expand = expand
        self._positional: list[str] = []
        self._named: dict[str, str] = {}
        for key, value in pieces:
            if key is None:
                self._positional.append(value)
            else:
                self._named[key] = value

    def raw(self, key: int | str) -> str | None:
        """The argument as written, or None when absent (an explicit ``2=`` wins, as in MW)."""
        if isinstance(key, int):
            explicit = self._named.get(str(key))
            if explicit is not None:
                return explicit
            return self._positional[key - 1] if 0 < key <= len(self._positional) else None
        return self._named.get(key)

    def __getitem__(self, key: int | str) -> str:
        """The argument with its nested templates rendered; ``""`` when absent."""
        raw = self.raw(key)
        if raw is None:
            return ""
        return self._expand(raw) if "{" in raw else raw

    def plain(self, key: int | str) -> str:
        """The rendered argument without removed-markup marks, stripped: for values."""
        return " ".join(self[key].replace(MARK, " ").split())

    def count(self) -> int:
        """How many positional arguments there are: the highest number given, explicit ``n=``
        included (up to :data:`MAX_ARGUMENTS`; none of the templates rendered takes more)."""
        numbered = [
            int(k)
            for k in self._named
            if k.isascii() and k.isdigit() and len(k) <= 3 and int(k) <= MAX_ARGUMENTS
        ]
        return min(max([len(self._positional), *numbered]), MAX_ARGUMENTS)

    def first(self, *keys: int | str) -> str:
        """The first of ``keys`` given with a non-blank value, rendered (``""`` if none)."""
        for key in keys:
            raw = self.raw(key)
            if raw is not None and raw.strip():
                return self[key]
        return ""

    def flag(self, key: str) -> bool:
        """Whether a yes/no option (``df=y``, ``lc=yes``) is on."""
        return self.plain(key).lower() in {"y", "yes", "on", "true", "1"}


# ---------------------------------------------------------------------------------------------
# Names and arguments.

_ARG_TOKEN = re.compile(r"\[\[|\]\]|[{}|=]")
_NAME_PREFIXES = ("template:", "subst:", "safesubst:")
_SPACES = re.compile(r"[\s_]+")


def canonical_name(name: str) -> str:
    """``Convert``, `` convert ``, ``Template:Convert`` -> ``convert``; ``Birth_date`` ->
    ``birth date``. Only the first letter's case is folded, as in MediaWiki titles."""
    name = _SPACES.sub(" ", name.replace(MARK, "")).strip()  # a comment in a name is nothing
    changed = True
    while changed:
        changed = False
        lowered = name.lower()
        for prefix in _NAME_PREFIXES:
            if lowered.startswith(prefix):
                name, changed = name[len(prefix) :].strip(), True
                break
    return name[:1].lower() + name[1:]


def split_arguments(body: str) -> list[tuple[str | None, str]]:
    """The ``|``-separated pieces of a template's body (name first, as a positional piece),
    each as ``(key, value)``: key None for a positional piece, the stripped name for
    ``name=value``. Pipes and ``=`` inside nested templates and links do not count."""
    pieces: list[tuple[str | None, str]] = []
    start = 0
    braces = links = 0
    equals = -1
    for m in _ARG_TOKEN.finditer(body):
        token = m.group()
        if token == "{":
            braces += 1
        elif token == "}":
            braces = max(braces - 1, 0)
        elif token == "[[":
            links += 1
        elif token == "]]":
            links = max(links - 1, 0)
        elif braces or links:
            continue
        elif token == "=":
            if equals < 0:
                equals = m.start()
        else:
            pieces.append(_piece(body, start, m.start(), equals, first=not pieces))
            start, equals = m.end(), -1
    pieces.append(_piece(body, start, len(body), equals, first=not pieces))
    return pieces


def _piece(body: str, start: int, end: int, equals: int, *, first: bool) -> tuple[str | None, str]:
    if first or equals < 0:
        return None, body[start:end]
    key = body[start:equals].strip()
    return key, body[equals + 1 : end].strip()


# ---------------------------------------------------------------------------------------------
# Renderers: each takes the arguments and returns the text, or None to drop the template.

Renderer = Callable[[Args], "str | None"]


def _text(index: int | str) -> Renderer:
    return lambda a: a[index]


def _last(a: Args) -> str:
    return a[a.count()] if a.count() else ""


def _constant(text: str) -> Renderer:
    return lambda a: text


def _lang(a: Args) -> str:
    return a.first("text", 2)


def _joined(separator: str) -> Renderer:
    return lambda a: separator.join(a[i] for i in range(1, a.count() + 1))


def _angle(a: Args) -> str:
    return f"⟨{a[1]}⟩"


def _literal(a: Args) -> str | None:
    text = a.first(1, "lit")
    return f"lit. '{text}'" if text else None


def _nihongo(a: Args) -> str:
    english, kanji, romaji, extra, extra2 = (a[i] for i in range(1, 6))
    if english.strip():
        inner = [p for p in (kanji, romaji, extra) if p.strip()]
        text = english + (f" ({', '.join(inner)})" if inner else "")
    else:
        inner = [p for p in (romaji, extra) if p.strip()]
        text = kanji + (f" ({', '.join(inner)})" if inner else "")
    return text + (f" {extra2}" if extra2.strip() else "")


def _flag(a: Args) -> str:
    return a.first("name", 1)


def _ship(prefix: str) -> Renderer:
    def render(a: Args) -> str | None:
        name, number = a.plain(1), a.plain(2)
        if not name:
            return None
        return f"{prefix} {name}" + (f" ({number})" if number else "")

    return render


def _quote(a: Args) -> str | None:
    """A block quotation: its text is a paragraph of its own, as on the page."""
    text = a.first("text", "quote", 1)
    return f"\n\n{text}\n\n" if text.strip() else None


def _sic(a: Args) -> str:
    # {{sic}} marks an error in a quotation; with arguments, they are the text, joined.
    start = 2 if a.plain(1) == "?" else 1
    return "".join(a[i] for i in range(start, a.count() + 1))


# --- numbers and units ------------------------------------------------------------------------

# Units printed without a space before them (a density is "94/sq mi"; an angle "30°", but a
# temperature "30 °C").
_UNSPACED_UNITS = ("%", "′", "″", "‰", "/")


def _with_unit(value: str, symbol: str) -> str:
    if symbol.startswith(_UNSPACED_UNITS) or symbol == "°":
        return value + symbol
    return f"{value} {symbol}"


# {{convert}} range words and what it prints between the values (Module:Convert's ranges).
_RANGES = {
    "-": "–",
    "–": "–",
    "to": " to ",
    "to(-)": " to ",
    "to about": " to about ",
    "and": " and ",
    "and(-)": " and ",
    "or": " or ",
    "by": " by ",
    "x": " × ",
    "×": " × ",
    "+": " + ",
    "+/-": " ± ",
    "±": " ± ",
}
# Input units that may be followed by a smaller one: {{convert|6|ft|4|in|cm}} -> "6 ft 4 in".
_COMPOUND_UNITS = {
    ("mi", "yd"),
    ("mi", "ft"),
    ("mi", "ch"),
    ("yd", "ft"),
    ("yd", "in"),
    ("ft", "in"),
    ("st", "lb"),
    ("lb", "oz"),
    ("LT", "cwt"),
}


def _convert(a: Args) -> str | None:
    """``{{convert|150|cm|ft}}`` -> ``150 cm``: the value(s) and unit the editor wrote."""
    if a.plain("disp").lower() in {"out", "output only", "output number only"}:
        return None  # prints only the converted value, which is not computed here
    args = [a.plain(i) for i in range(1, a.count() + 1)]
    first = format_number(args[0]) if args else None
    if first is None:
        return None
    text, i = first, 1
    while i + 1 < len(args) and args[i] in _RANGES:
        value = format_number(args[i + 1])
        if value is None:
            return None
        text += _RANGES[args[i]] + value
        i += 2
    if i >= len(args) or not args[i]:
        return None
    unit = args[i]
    text = _with_unit(text, unit_symbol(unit))
    if i + 2 < len(args) and (unit, args[i + 2]) in _COMPOUND_UNITS:
        value = format_number(args[i + 1])
        if value is not None:
            text += f" {value} {unit_symbol(args[i + 2])}"
    return text


def _val(a: Args) -> str | None:
    """``{{val|1.5|0.2|e=3|u=kg}}`` -> ``1.5 ± 0.2×10^3 kg``."""
    value = format_number(a.plain(1), group=False)
    if value is None:
        return None
    upper, lower = a.plain(2), a.plain(3)
    if upper and lower:
        high, low = format_number(upper, group=False), format_number(lower, group=False)
        if high is None or low is None:
            return None
        value += f" {high} {low}"
    elif upper:
        error = format_number(upper, group=False)
        if error is None:
            return None
        value += f" ± {error}"
    if a.plain("e"):
        exponent = format_number(a.plain("e"), group=False)
        if exponent is None:
            return None
        value += f"×10^{exponent}"
    unit = a.plain("u") or a.plain("ul")
    per = a.plain("up") or a.plain("upl")
    if unit:
        value = _with_unit(value, unit_symbol(unit))
    if per:
        value += "/" + unit_symbol(per)
    return value + a.plain("end")


def _exponent(a: Args) -> str | None:
    power = format_number(a.plain(1), group=False)
    return None if power is None else f"×10^{power}"


def _fraction(a: Args) -> str | None:
    parts = [a.plain(i) for i in range(1, a.count() + 1)]
    if not parts or len(parts) > 3 or not all(parts):
        return None
    if len(parts) == 1:
        return f"1/{parts[0]}"
    if len(parts) == 2:
        return f"{parts[0]}/{parts[1]}"
    return f"{parts[0]} {parts[1]}/{parts[2]}"


def _formatnum(a: Args) -> str:
    """``{{formatnum:1234567}}`` -> ``1,234,567``; ``|R`` removes the commas; not a number: as is."""
    value, option = a.plain(1), a.plain(2)
    if option == "R":
        return value.replace(",", "")
    formatted = None if option == "NOSEP" else format_number(value)
    return value if formatted is None else formatted


def _ordinal(a: Args) -> str | None:
    value = a.plain(1)
    if not value.isascii() or not value.isdigit() or len(value) > 18:
        return None
    n = int(value)
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return value + suffix


# --- dates ------------------------------------------------------------------------------------


def _date_at(a: Args, start: int) -> tuple[int, int | None, int | None] | None:
    return parse_date(a.plain(start), a.plain(start + 1), a.plain(start + 2))


def _date(a: Args) -> str | None:
    """{{start date}}, {{birth date}} …: month first unless ``df=y``; the age is left out."""
    date = _date_at(a, 1)
    return None if date is None else format_date(date, day_first=a.flag("df"))


def _death_date_and_age(a: Args) -> str | None:
    died = _date_at(a, 1)
    if died is None:
        return None
    text = format_date(died, day_first=a.flag("df"))
    born = _date_at(a, 4)
    age = None if born is None else age_at(born, died)
    return text if age is None else f"{text} (aged {age})"


def _death_year_and_age(a: Args) -> str | None:
    died, born = parse_date(a.plain(1)), parse_date(a.plain(2))
    if died is None:
        return None
    age = None if born is None else age_at(born, died)
    return str(died[0]) if age is None else f"{died[0]} (aged {age})"


def _old_style_date(a: Args) -> str | None:
    """``{{OldStyleDate|February 2|1905|January 21}}`` -> ``February 2 [O.S. January 21] 1905``."""
    day, year, old = a.plain(1), a.plain(2), a.plain(3)
    if not day or not year:
        return None
    return f"{day} [O.S. {old}] {year}" if old else f"{day} {year}"


def _year(a: Args) -> str | None:
    date = parse_date(a.plain(1))
    return None if date is None else str(date[0])


def _as_of(a: Args) -> str | None:
    """``{{as of|2010|5}}`` -> ``As of May 2010`` (day first unless ``df=US``)."""
    if a.plain("alt"):
        return a["alt"]
    date = _date_at(a, 1)
    if date is None:
        return None
    text = format_date(date, day_first=a.plain("df").upper() != "US")
    if not a.flag("bare"):
        lead = "Since" if a.flag("since") else "As of"
        text = f"{lead.lower() if a.flag('lc') else lead} {text}"
    return text


def _prefixed(label: str) -> Renderer:
    """{{circa|1850}} -> ``c. 1850``, {{fl.|1200}}; two dates give a range."""

    def render(a: Args) -> str:
        dates = [a.plain(i) for i in (1, 2) if a.plain(i)]
        return " – ".join(f"{label} {d}" for d in dates) if dates else label

    return render


def _era(label: str, *, before: bool = False) -> Renderer:
    def render(a: Args) -> str | None:
        year = a.plain(1)
        if not year:
            return label
        return f"{label} {year}" if before else f"{year} {label}"

    return render


# ---------------------------------------------------------------------------------------------
# The table. Names are written as on Wikipedia; the table folds them like canonical_name.

_TABLE: dict[str, Renderer] = {
    # text as it stands
    "nowrap": _text(1), "nobr": _text(1), "nobreak": _text(1), "small": _text(1),
    "smaller": _text(1), "big": _text(1), "larger": _text(1), "resize": _last,
    "sc": _text(1), "smallcaps": _text(1), "small caps": _text(1), "nobold": _text(1),
    "noitalic": _text(1), "em": _text(1), "strong": _text(1), "var": _text(1),
    "mvar": _text(1), "math": _text(1), "vanchor": _text(1), "visible anchor": _text(1),
    "tooltip": _text(1), "abbr": _text(1), "abbrlink": _text(1), "not a typo": _text(1),
    "notatypo": _text(1), "proper name": _text(1), "sic": _sic, "IPA": _text(1),
    "lang": _lang, "langx": _lang, "transl": _last, "transliteration": _last,
    "script": _text(2), "nastaliq": _text(1), "native name": _text(2),
    "native phrase": _text(2), "ill": _text(1), "interlanguage link": _text(1),
    "LSJ": lambda a: a.first(2, 1), "angbr": _angle, "lit": _literal, "literal translation": _literal,
    "nihongo": _nihongo, "flag": _flag, "flagcountry": _flag, "flagu": _flag,
    "chem": _joined(""), "chem2": _text(1), "linktext": _joined(""), "gaps": _joined(" "),
    "quote": _quote, "blockquote": _quote, "quotation": _quote,
    # punctuation and spacing
    "'": _constant("'"), "'s": _constant("'s"), '"\'': _constant("\"'"), "'\"": _constant("'\""),
    "!": _constant("|"), "=": _constant("="), "pipe": _constant("|"), "·": _constant(" · "),
    "•": _constant(" • "), "dot": _constant(" · "), "ndash": _constant("–"),
    "en dash": _constant("–"), "mdash": _constant("—"), "em dash": _constant("—"),
    "snd": _constant(" – "), "spnd": _constant(" – "), "sndash": _constant(" – "),
    "spaced ndash": _constant(" – "), "spaced en dash": _constant(" – "),
    "spaced mdash": _constant(" — "), "mdashb": _constant(" — "), "nbsp": _constant(" "),
    "thinsp": _constant(" "), "thin space": _constant(" "), "hair space": _constant(" "),
    "spaces": _constant(" "), "eqm": _constant(" ⇌ "), "okina": _constant("ʻ"),
    # numbers and units
    "convert": _convert, "cvt": _convert, "val": _val, "e": _exponent, "frac": _fraction,
    "sfrac": _fraction, "fraction": _fraction, "formatnum:": _formatnum, "ordinal": _ordinal,
    # dates
    "start date": _date, "end date": _date, "birth date": _date, "death date": _date,
    "start date and age": _date, "end date and age": _date, "birth date and age": _date,
    "bda": _date, "dob": _date, "film date": _date, "death date and age": _death_date_and_age,
    "dda": _death_date_and_age, "birth year and age": _year,
    "death year and age": _death_year_and_age, "as of": _as_of, "OldStyleDate": _old_style_date,
    "circa": _prefixed("c."), "c.": _prefixed("c."), "floruit": _prefixed("fl."),
    "fl.": _prefixed("fl."), "BCE": _era("BCE"), "BC": _era("BC"), "CE": _era("CE"),
    "AD": _era("AD", before=True),
    # ship names: {{USS|Enterprise|CV-6}} -> USS Enterprise (CV-6)
    **{p: _ship(p) for p in ("USS", "HMS", "HMAS", "HMCS", "HMNZS", "SS", "RMS", "USNS", "USCGC")},
    # parser functions: {{lc:TEXT}}
    "lc:": lambda a: a[1].lower(), "uc:": lambda a: a[1].upper(),
    "lcfirst:": lambda a: a[1][:1].lower() + a[1][1:],
    "ucfirst:": lambda a: a[1][:1].upper() + a[1][1:],
}  # fmt: skip
RENDERERS: dict[str, Renderer] = {canonical_name(k) if not k.endswith(":") else k: v
                                  for k, v in _TABLE.items()}  # fmt: skip
_PARSER_FUNCTIONS = frozenset(k[:-1] for k in _TABLE if k.endswith(":"))


def _table_key(name: str) -> tuple[str | None, str | None]:
    """``(key in RENDERERS, parser function argument)`` for a template's first piece; key None
    when it cannot be rendered."""
    if "{" in name or "[" in name or "}" in name:
        return None, None  # a name built by a template or parameter: not resolvable here
    head, colon, rest = name.partition(":")
    if colon:
        function = head.strip().lower()
        if function in _PARSER_FUNCTIONS:
            return function + ":", rest
        if function + ":" not in _NAME_PREFIXES:
            return None, None  # #if:, #invoke:, DEFAULTSORT:, … and other namespaces
    return canonical_name(name), None


# Articles use the same few dozen templates over and over (cite web, citation needed, convert
# …): what a short name renders with is remembered, name -> _find_renderer(name), for up to
# 4,096 names (then started afresh); a long name would hold memory for nothing.
_LOOKUPS: dict[str, tuple[Renderer | None, str | None]] = {}
_CACHED_NAME_CHARS = 200


def _lookup(name: str) -> tuple[Renderer | None, str | None]:
    """The renderer for a template's first piece, and, for a parser function, its argument."""
    found = _LOOKUPS.get(name)
    if found is None:
        found = _find_renderer(name)
        if len(name) <= _CACHED_NAME_CHARS:
            if len(_LOOKUPS) >= 4096:
                _LOOKUPS.clear()
            _LOOKUPS[name] = found
    return found


def _find_renderer(name: str) -> tuple[Renderer | None, str | None]:
    canonical, function_arg = _table_key(name)
    if canonical is None:
        return None, None
    if function_arg is not None:
        return RENDERERS[canonical], function_arg
    renderer = RENDERERS.get(canonical)
    if renderer is None and canonical.startswith("lang-") and len(canonical) > 5:
        renderer = _text(1)  # {{lang-fr|texte}}
    return renderer, None


def render_template(body: str, expand: Expand) -> str | None:
    """The text of ``{{body}}``, or None when the template is not rendered (dropped).

    ``expand`` renders the templates nested in an argument (the caller's template pass, one
    level deeper).
    """
    bar = body.find("|")
    renderer, function_arg = _lookup(body if bar < 0 else body[:bar])
    if renderer is None:
        return None
    pieces = split_arguments(body)
    if function_arg is not None:
        pieces[0] = (None, function_arg)
    else:
        pieces = pieces[1:]
    text = renderer(Args(pieces, expand))
    return text if text and text.replace(MARK, "") else None
