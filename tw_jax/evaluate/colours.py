"""One colour per method, shared by every figure of a report.

A reader matches methods across figures by colour, so the colour must follow the method, not
its position in one figure's legend: the paper's methods (:data:`METHODS`) have fixed colours
(INITIAL grey, the reference every update starts from), other methods take the next free ones
in the order given.
"""

from __future__ import annotations

from collections.abc import Sequence

from tw_jax.evaluate.results import METHODS

_TAB10 = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2",
          "#bcbd22", "#17becf")  # matplotlib's tab10 without its grey
_GREY = "#7f7f7f"
_EXTRA = ("#aec7e8", "#ffbb78", "#98df8a", "#ff9896", "#c5b0d5", "#c49c94", "#f7b6d2",
          "#dbdb8d", "#9edae5")  # tab20's light halves, for methods outside METHODS

_LATER = ("#393b79", "#637939", "#843c39", "#7b4173", "#8c6d31", "#3182bd")  # tab20b/c darks
# TemporalWiki's methods and open book keep tab10's colours; the methods added since (TiC-LM's)
# take dark ones that no light extra resembles; methods outside METHODS take the extras.
_KNOWN = [m for m in METHODS if m != "initial"]
METHOD_COLOURS: dict[str, str] = {"initial": _GREY} | dict(
    zip(_KNOWN, _TAB10 + _LATER, strict=False))


def method_colours(methods: Sequence[str]) -> dict[str, str]:
    """``{method: colour}``: the fixed colour of each paper method, the next extra colour (in
    ``methods``' order) for any other."""
    extras = [m for m in methods if m not in METHOD_COLOURS]
    return {m: METHOD_COLOURS.get(m) or _EXTRA[extras.index(m) % len(_EXTRA)] for m in methods}
