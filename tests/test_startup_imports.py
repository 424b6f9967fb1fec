"""A command pays only for what it uses: ``tw-jax diffset`` and ``probes`` never import
TensorFlow or JAX (8-10 CPU-seconds and about 850 MB before the first byte of a dump was read),
and a command that does use TensorFlow still starts without its C++ start-up lines (the quiet
import runs when anything first imports it, wherever that is)."""

from __future__ import annotations

import json
import subprocess
import sys

from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump

_PROBE = """
import json, sys
from tw_jax.cli import main
code = main(sys.argv[1:])
print(json.dumps({"code": code, "tensorflow": "tensorflow" in sys.modules,
                  "jax": "jax" in sys.modules}))
"""


def _imports(*argv: str) -> tuple[dict, str]:
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], capture_output=True, text=True,
                          timeout=300, check=False)
    return json.loads(done.stdout.strip().splitlines()[-1]), done.stderr


def test_the_dump_stages_import_neither_tensorflow_nor_jax(sample_world, tmp_path):
    root, world = sample_world
    old, new = world["months"][:2]
    found, err = _imports("diffset", "--old", str(wikipedia_dump(root, old)), "--new",
                          str(wikipedia_dump(root, new)), "--out", str(tmp_path / "diffset"),
                          "--workers", "1")
    assert found == {"code": 0, "tensorflow": False, "jax": False}, err
    found, err = _imports("probes", "--old", str(wikidata_dump(root, old)), "--new",
                          str(wikidata_dump(root, new)), "--wikipedia",
                          str(wikipedia_dump(root, new)), "--diffset", str(tmp_path / "diffset"),
                          "--out", str(tmp_path / "probes"), "--unchanged-rate", "1")
    assert found == {"code": 0, "tensorflow": False, "jax": False}, err


def test_a_command_that_imports_tensorflow_starts_quietly(tmp_path):
    found, err = _imports("tasks", "--data", str(tmp_path))
    assert found["tensorflow"] and found["code"] == 0
    # its own line only: no "All log messages before absl::InitializeLog()", no CUDA probes
    assert err.splitlines() == [f"0 of 0 tasks and mixtures registered from {tmp_path}"]
