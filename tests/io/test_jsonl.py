"""Results files grow by whole rows: a torn last line (a run killed mid-write) is cut back before
the next append, a whole row that lacks its newline keeps its bytes, and a failed write leaves
the file byte for byte as it was; locally and in a bucket, for results.jsonl and ECBD's file."""

from __future__ import annotations

import errno
import json
import logging
import os

import pytest
from fault_helpers import file_size_limit

from tw_jax.errors import OutputError
from tw_jax.evaluate import ecbd
from tw_jax.evaluate.results import Result, append_results, read_results
from tw_jax.io import jsonl, paths

ROWS = [json.dumps({"n": 1}), json.dumps({"n": 2})]


def _row(n: int) -> Result:
    return Result("diff", "0809", "0809", "unchanged", "ppl", float(n))


def test_a_torn_last_line_is_cut_back_with_a_warning_before_appending(tmp_path, caplog):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": 2, "va')  # killed in the middle of row 2
    with caplog.at_level(logging.WARNING, logger="tw_jax.io.jsonl"):
        jsonl.append_lines(path, [json.dumps({"n": 3})])
    assert path.read_bytes() == b'{"n": 1}\n{"n": 3}\n'
    [warning] = caplog.messages
    assert str(path) in warning and "12 bytes" in warning


def test_a_whole_last_row_without_its_newline_is_kept(tmp_path, caplog):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"n": 1}\n{"n": 2}')  # written elsewhere, no final newline
    with caplog.at_level(logging.WARNING, logger="tw_jax.io.jsonl"):
        jsonl.append_lines(path, [json.dumps({"n": 3})])
    assert path.read_bytes() == b'{"n": 1}\n{"n": 2}\n{"n": 3}\n'
    assert caplog.messages == []


@pytest.mark.parametrize("before", [b'{"n": 1}\n', b'{"n": 1}\n{"n": 2, "va', b""])
def test_a_failed_write_leaves_the_file_as_it_was(tmp_path, monkeypatch, before):
    path = tmp_path / "results.jsonl"
    path.write_bytes(before)
    real_write = os.write
    calls = []

    def disk_full(fd, data):  # half the bytes land, then the disk is full
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, data[: len(data) // 2])
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_write(fd, data)  # the truncation freed the space

    monkeypatch.setattr(jsonl.os, "write", disk_full)
    with pytest.raises(OutputError) as error:
        jsonl.append_lines(path, ROWS)
    assert path.read_bytes() == before
    assert str(error.value).startswith(f"{path}: no space left on device while writing it (")
    assert str(error.value).endswith("; 2 row(s) not appended, the file is as it was")


def test_results_past_a_file_size_limit_are_one_line_and_leave_the_file_as_it_was(tmp_path):
    """A real EFBIG (RLIMIT_FSIZE, no root needed) while results are appended: one
    OutputError naming the file, which the CLI prints as one line; the file byte for byte as it
    was, and a file the append would have created is not there."""
    append_results(tmp_path, [_row(1)])
    path = tmp_path / "results.jsonl"
    before = path.read_bytes() + b'{"method": "di'  # a torn row a killed run left
    path.write_bytes(before)
    with file_size_limit(len(before) + 20), pytest.raises(OutputError) as error:
        append_results(tmp_path, [_row(2), _row(3)])
    assert path.read_bytes() == before
    message = str(error.value)
    assert "\n" not in message
    assert message.startswith(f"{path}: file too large while writing it (the file-size limit, "
                              f"ulimit -f, is {len(before) + 20} bytes)")
    assert message.endswith("; 2 row(s) not appended, the file is as it was")
    with file_size_limit(10), pytest.raises(OutputError):
        append_results(tmp_path / "new", [_row(1)])
    assert not (tmp_path / "new" / "results.jsonl").exists()


def test_a_write_that_lands_in_parts_completes(tmp_path, monkeypatch):
    path = tmp_path / "results.jsonl"
    real_write = os.write
    monkeypatch.setattr(jsonl.os, "write", lambda fd, data: real_write(fd, data[:5]))
    jsonl.append_lines(path, ROWS)
    assert path.read_bytes() == b'{"n": 1}\n{"n": 2}\n'


def test_results_appended_after_a_crash_are_all_readable(tmp_path):
    append_results(tmp_path, [_row(1), _row(2)])
    path = tmp_path / "results.jsonl"
    path.write_bytes(path.read_bytes()[:-7])  # the second row cut
    append_results(tmp_path, [Result("diff", "0910", "0910", "new", "ppl", 3.0)])
    rows = read_results([path])
    assert [(r.trained_through.name, r.value) for r in rows] == [("0809", 1.0), ("0910", 3.0)]


def test_ecbd_results_go_through_the_same_appender(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_bytes(b'{"cut')
    ecbd.append_results(tmp_path, [])
    assert path.read_bytes() == b'{"cut'  # nothing to append: nothing touched
    cell = ecbd.EcbdResult("t5", "2019", "test", "original", "all", "ppl", 9.5, 3, 2)
    ecbd.append_results(tmp_path, [cell])  # the torn fragment cut back, as for any results
    slice_ = '"slice": {"input": "original", "span_type": "all", "split": "test"}}'
    start = '{"method": "t5", "trained_through": "base", "eval_month": "-", "category": "2019", '
    assert path.read_text().splitlines() == [
        f'{start}"metric": "ecbd_ppl", "value": 9.5, {slice_}',
        f'{start}"metric": "ecbd_examples", "value": 3, {slice_}',
        f'{start}"metric": "ecbd_entities", "value": 2, {slice_}']
    assert ecbd.read_results(tmp_path) == [cell]


def test_in_a_bucket_a_torn_line_is_repaired_too(gcs_bucket):
    url = paths.join(gcs_bucket, "out", "results.jsonl")
    paths.write_text(url, '{"n": 1}\n{"n"')
    jsonl.append_lines(url, [json.dumps({"n": 3})])
    assert paths.read_text(url) == '{"n": 1}\n{"n": 3}\n'
    paths.write_text(url, '{"n": 1}')
    jsonl.append_lines(url, [json.dumps({"n": 3})])
    assert paths.read_text(url) == '{"n": 1}\n{"n": 3}\n'
