"""OldInStep (tw_jax.preprocess.diffset.lockstep): the old dump read alongside the new one gives
every lookup the answer the whole index gives, in and out of id order; and the stage's files do
not depend on which way it read the old dump."""

from __future__ import annotations

import bz2
import hashlib
from pathlib import Path

import pytest

from tw_jax.preprocess.diffset.local import OldIndex, build_diffset
from tw_jax.preprocess.diffset.lockstep import OldInStep, OldOutOfOrder
from tw_jax.preprocess.dumps.mediawiki import Page


def page(page_id: int, text: str | None = None) -> Page:
    return Page(page_id, 0, f"T{page_id}", text or f"Text {page_id}.", None)


def in_step(tmp_path: Path, ids: list[int]) -> tuple[OldInStep, list[int]]:
    """An OldInStep over pages ``ids`` that records which pages it has read."""
    read: list[int] = []

    def pages():
        for i in ids:
            read.append(i)
            yield page(i)

    return OldInStep(pages(), OldIndex(str(tmp_path / "old.sqlite"), create=True)), read


def test_in_order_pages_are_handed_over_and_passed_ones_indexed(tmp_path):
    old, read = in_step(tmp_path, [1, 2, 5, 7, 9])
    assert read == [1]  # the first page is read up front
    assert old.get(2) == page(2)
    assert read == [1, 2, 5]  # page 1 passed over (spilled), page 2 handed over
    assert old.get(1) == page(1)  # from the index
    assert old.get(3) is None and old.get(4) is None  # below the next old id: absent
    assert old.get(9) == page(9)
    assert old.get(7) == page(7) and old.get(5) == page(5)
    assert old.get(10) is None
    assert old.finish() == 5


def test_unsorted_old_pages_go_to_the_index(tmp_path):
    old, _ = in_step(tmp_path, [1, 8, 3, 4])
    assert old.get(8) == page(8)  # the next page (3) is out of order: the rest is indexed
    assert old.get(3) == page(3) and old.get(4) == page(4) and old.get(1) == page(1)
    assert old.get(5) is None
    assert old.finish() == 4


def test_a_page_reported_absent_that_turns_up_is_an_error(tmp_path):
    old, _ = in_step(tmp_path, [1, 5, 3])
    assert old.get(3) is None  # 3 < 5 and the ids ascend so far
    with pytest.raises(OldOutOfOrder):
        old.get(5)  # reading on finds page 3


def test_out_of_order_pages_no_lookup_missed_are_fine(tmp_path):
    old, _ = in_step(tmp_path, [1, 5, 3])
    assert old.get(2) is None
    assert old.get(5) == page(5)
    assert old.get(3) == page(3)  # out of order, but no lookup said it was absent
    assert old.finish() == 3


def test_the_rest_of_the_old_dump_is_checked_too(tmp_path):
    old, _ = in_step(tmp_path, [4, 2])
    assert old.get(2) is None  # 2 < 4
    with pytest.raises(OldOutOfOrder):
        old.finish()


def _dump(path: Path, pages: list[tuple[int, str]]) -> Path:
    body = "".join(
        f"<page><title>T{i}</title><ns>0</ns><id>{i}</id><revision><id>1</id>"
        f'<text xml:space="preserve">{text}</text></revision></page>'
        for i, text in pages
    )
    xml = f'<mediawiki xmlns="http://www.mediawiki.org/xml/export-0.10/">{body}</mediawiki>'
    path.write_bytes(bz2.compress(xml.encode()))
    return path


def _hashes(folder: Path) -> dict[str, str]:
    return {f.name: hashlib.sha256(f.read_bytes()).hexdigest() for f in folder.iterdir()}


@pytest.mark.parametrize(
    "old_ids",
    [
        [1, 2, 3, 4, 6],  # in order, page 6 deleted
        [1, 6, 3, 2, 4],  # out of order: page 3 is looked up before page 6 is read past
        [6, 4, 3, 2, 1],  # reversed
    ],
)
def test_files_equal_those_of_the_whole_index(tmp_path, old_ids):
    old_text = {i: f"Sentence {i}. Shared {i}." for i in old_ids}
    old = _dump(tmp_path / "old.xml.bz2", [(i, old_text[i]) for i in old_ids])
    new = _dump(
        tmp_path / "new.xml.bz2",
        [(1, old_text[1]), (2, old_text[2] + " Added 2."), (3, old_text[3]), (4, "Rewritten."),
         (5, "Brand new.")],
    )
    one = build_diffset(old, new, tmp_path / "one", workers=1)
    two = build_diffset(old, new, tmp_path / "two", workers=2)  # the whole index, always
    assert _hashes(tmp_path / "one") == _hashes(tmp_path / "two")
    assert one["articles"] == {
        "new": 1, "changed": 2, "unchanged": 2, "below_min_changed_chars": 0,
        "deleted": 1 if 6 in old_ids else 0,
    }
    assert one == two and one["accounting"]["balanced"]
