"""The Beam pipeline (DirectRunner) writes the same folder as the local path."""

import json

import pytest

from tw_jax.preprocess.diffset.local import build_diffset
from tw_jax.preprocess.probes.finish import ProbeOptions
from tw_jax.preprocess.probes.local import build_probes
from tw_jax.sample_world.build import wikidata_dump, wikipedia_dump

pytest.importorskip("apache_beam")

FILES = (
    [f"{c}.csv" for c in ("unchanged", "updated", "new", "deleted")]
    + [f"lighttuning_{c}.csv" for c in ("unchanged", "updated", "new", "deleted")]
    + [f"{c}.tfrecord-00000-of-00001" for c in ("unchanged", "updated", "new", "deleted")]
)


@pytest.mark.parametrize("with_old_wikipedia", [True, False])
def test_beam_equals_local(sample_world, tmp_path, with_old_wikipedia):
    from tw_jax.preprocess.probes.beam import build_probes_beam

    root, _ = sample_world
    old, new = "2021-09", "2021-10"
    diffset = tmp_path / "diffset"
    build_diffset(wikipedia_dump(root, old), wikipedia_dump(root, new), diffset)
    # Caps and sampling on, at rates that bite on the small world, so they are compared too.
    options = ProbeOptions(
        unchanged_rate=0.5,
        max_subject_frac=0.01,
        max_object_frac=0.05,
        max_relation_frac=0.2,
        seed=3,
        lighttuning_size=40,
    )
    old_wp = wikipedia_dump(root, old) if with_old_wikipedia else None
    args = (wikidata_dump(root, old), wikidata_dump(root, new), wikipedia_dump(root, new), diffset)
    local = build_probes(*args, tmp_path / "local", options=options, old_wikipedia=old_wp)
    beam = build_probes_beam(*args, tmp_path / "beam", options=options, old_wikipedia=old_wp)
    for name in FILES:
        assert (tmp_path / "local" / name).read_bytes() == (
            tmp_path / "beam" / name
        ).read_bytes(), name
    assert json.dumps(local, sort_keys=True) == json.dumps(beam, sort_keys=True)
    assert local["categories"]["unchanged"]["final"] > 0
