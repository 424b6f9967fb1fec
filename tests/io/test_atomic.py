import json

import pytest

from tw_jax.io.atomic import atomic_open, write_json


def test_file_appears_only_on_success(tmp_path):
    target = tmp_path / "sub" / "out.txt"
    with pytest.raises(RuntimeError), atomic_open(target) as handle:
        handle.write("half")
        raise RuntimeError("interrupted")
    assert not target.exists()
    assert list((tmp_path / "sub").iterdir()) == []
    with atomic_open(target) as handle:
        handle.write("whole")
    assert target.read_text() == "whole"


def test_write_json_replaces_previous(tmp_path):
    target = tmp_path / "stats.json"
    write_json(target, {"b": 1, "a": "ü"})
    write_json(target, {"c": 2})
    assert json.loads(target.read_text()) == {"c": 2}
    assert [p.name for p in tmp_path.iterdir()] == ["stats.json"]
