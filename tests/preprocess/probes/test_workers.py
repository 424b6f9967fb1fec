"""``build_probes(workers=2)`` writes the very folder of one worker, byte for byte.

Sampling and caps are on (they depend on the order and content of what the workers send back),
jobs are made a few lines long so every dump spans many of them, and the new dump carries bad
lines so that skip counts and examples are merged across jobs too.
"""

import bz2
from pathlib import Path

import pytest

from tw_jax.preprocess.diffset.local import build_diffset
from tw_jax.preprocess.probes import local
from tw_jax.preprocess.probes.finish import ProbeOptions
from tw_jax.preprocess.probes.local import build_probes
from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump

OPTIONS = ProbeOptions(
    unchanged_rate=0.5,
    max_subject_frac=0.2,
    max_object_frac=0.2,
    max_relation_frac=0.3,
    seed=7,
    lighttuning_size=3,
)


def _files(folder: Path) -> dict[str, bytes]:
    return {
        str(path.relative_to(folder)): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.fixture(scope="module")
def inputs(sample_world, tmp_path_factory):
    root, _ = sample_world
    work = tmp_path_factory.mktemp("probes_workers")
    diffset = work / "diffset"
    build_diffset(wikipedia_dump(root, "2021-08"), wikipedia_dump(root, "2021-09"), diffset)
    with bz2.open(wikidata_dump(root, "2021-09"), "rt", encoding="utf-8") as handle:
        lines = handle.read().splitlines()
    lines.insert(2, "{not json,")
    lines.insert(5, '{"id": "L1", "type": "lexeme"},')
    lines.insert(9, "[1, 2],")
    new = work / "new.json.bz2"
    with bz2.open(new, "wt", encoding="utf-8") as handle:
        handle.write("\n".join(lines) + "\n")
    return root, new, diffset


@pytest.mark.parametrize("old_wikipedia", [True, False])
def test_two_workers_write_the_same_folder(inputs, tmp_path, monkeypatch, old_wikipedia):
    root, new, diffset = inputs
    monkeypatch.setattr(local, "_CHUNK_LINES", 3)
    outs = {}
    for workers in (1, 2):
        outs[workers] = tmp_path / f"w{workers}"
        build_probes(
            wikidata_dump(root, "2021-08"),
            new,
            wikipedia_dump(root, "2021-09"),
            diffset,
            outs[workers],
            options=OPTIONS,
            old_wikipedia=wikipedia_dump(root, "2021-08") if old_wikipedia else None,
            workers=workers,
        )
    one, two = _files(outs[1]), _files(outs[2])
    assert "stats.json" in one and len(one) > 5
    assert sorted(one) == sorted(two)
    for name in one:
        assert one[name] == two[name], name
    stats = (outs[1] / "stats.json").read_text()
    assert '"bad_json": 1' in stats and '"unsupported_entity_type": 1' in stats
