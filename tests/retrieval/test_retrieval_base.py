"""The retriever registry: names to classes, retrievers imported on use, one-line errors."""

from __future__ import annotations

import json
from collections.abc import Sequence

import pytest

from tw_jax.errors import UsageError
from tw_jax.io import paths
from tw_jax.retrieval import base
from tw_jax.retrieval.base import (
    Passage,
    Retriever,
    known_retrievers,
    register_retriever,
    retriever_class,
)


def test_bm25_is_found_by_name_and_imported_on_use():
    from tw_jax.retrieval.bm25 import BM25Retriever

    assert retriever_class("bm25") is BM25Retriever
    assert known_retrievers()[:2] == ["bm25", "dpr"]


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(UsageError, match=r"unknown retriever 'colbert'; known: bm25, dpr"):
        retriever_class("colbert")


def test_a_missing_dense_module_says_dense_retrieval_is_not_available(monkeypatch):
    monkeypatch.setitem(base._MODULES, "dpr", "tw_jax.retrieval.no_such_dense")
    monkeypatch.delitem(base._REGISTRY, "dpr", raising=False)
    with pytest.raises(UsageError, match="dense retrieval is not available yet") as caught:
        retriever_class("dpr")
    assert "\n" not in str(caught.value)


class _Echo(Retriever):
    """The smallest real retriever: a passage matches a question that contains its title."""

    name = "echo-test"

    def __init__(self) -> None:
        self.titles: list[str] = []

    def build(self, passages: Sequence[Passage]) -> None:
        self.titles = [p.title.lower() for p in passages]

    def search(self, questions: Sequence[str], k: int) -> list[list[tuple[int, float]]]:
        return [[(i, 1.0) for i, t in enumerate(self.titles) if t in q.lower()][:k]
                for q in questions]

    def save(self, folder: str) -> None:
        paths.makedirs(folder)
        paths.write_text(paths.join(folder, "titles.json"), json.dumps(self.titles))

    @classmethod
    def load(cls, folder: str) -> Retriever:
        echo = cls()
        echo.titles = json.loads(paths.read_text(paths.join(folder, "titles.json")))
        return echo


def test_registering_a_retriever_makes_it_findable_and_names_are_unique(monkeypatch, tmp_path):
    monkeypatch.setattr(base, "_REGISTRY", dict(base._REGISTRY))
    assert register_retriever(_Echo) is _Echo and retriever_class("echo-test") is _Echo
    echo = _Echo()
    echo.build([Passage("a", "Varnholt", ""), Passage("b", "Corvania", "")])
    assert echo.search(["Capital of Corvania?"], k=3) == [[(1, 1.0)]]
    assert echo.fingerprint() == _Echo().fingerprint() and len(echo.fingerprint()) == 64
    echo.save(str(tmp_path / "echo"))
    assert _Echo.load(str(tmp_path / "echo")).search(["Varnholt?"], k=1) == [[(0, 1.0)]]

    class Other(_Echo):
        pass

    with pytest.raises(ValueError, match="'echo-test' is taken"):
        register_retriever(Other)

    class Nameless(_Echo):
        name = ""

    with pytest.raises(TypeError, match="needs a class attribute `name`"):
        register_retriever(Nameless)
