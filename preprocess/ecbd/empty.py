"""Why an ECBD build found no example, in one line naming the filter that removed them.

An empty ECBD folder written with exit status 0 reads as success; the usual cause is a filter
that does not fit the dump (the default origination years 2017-2021 on a dump whose entities
are older, articles shorter than ``--min-words``), so the message names that filter, what it
asked and what the dump has.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# entity skip reason -> how the line says it, with the option behind it
_SAID = {"short_article": "{n} articles shorter than --min-words {value}",
         "no_sentences": "{n} articles without a sentence of --min-sentence-words {value}+ words "
                         "naming the entity"}
_OPTION_OF = {"short_article": "--min-words", "no_sentences": "--min-sentence-words"}


def _years(years: tuple[int, int] | None) -> str:
    if years is None:
        return "in any year"
    first, last = years
    return str(first) if first == last else f"{first}-{last}"


def why_empty(years: tuple[int, int] | None, dated_years: Sequence[int], kept: int,
              entity_skips: Mapping[str, int], options: Mapping[str, int]) -> str:
    """The line for a build with no example.

    ``dated_years``: the origination year of every item of the dump that has one (before the
    year filter); ``kept``: the items of ``years`` with a label and an enwiki sitelink;
    ``entity_skips``: why each of those gave no example (``Skips.counts``); ``options``: the
    builder's values by option name (``{"--min-words": 500, ...}``).
    """
    asked = _years(years)
    if not dated_years:
        return "no examples: the Wikidata dump has no item with an origination date"
    in_range = [y for y in dated_years if years is None or years[0] <= y <= years[1]]
    if not in_range:
        return (f"no examples: --years {asked} keeps none of the dump's {len(dated_years)} items "
                f"with an origination date (theirs are {min(dated_years)}-{max(dated_years)}); "
                "try --years all")
    if not kept:
        return (f"no examples: none of the {len(in_range)} items dated {asked} has an English "
                "label and an enwiki sitelink")
    reasons = []
    for reason, count in sorted(entity_skips.items(), key=lambda item: (-item[1], item[0])):
        said = _SAID.get(reason, "{reason} {n}")
        reasons.append(said.format(n=count, reason=reason,
                                   value=options.get(_OPTION_OF.get(reason, ""))))
    return (f"no examples: none of the {kept} entities dated {asked} gave one: "
            + ", ".join(reasons))
