"""Fixtures of the SSM tests: the sample world's 0809 DiffSet folder and spaCy pipelines."""

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def ssm_diffset(sample_world, tmp_path_factory) -> Path:
    """A DiffSet folder of the sample world (35 changed or new articles, 191 in full)."""
    from tw_jax.preprocess.diffset.local import build_diffset
    from tw_jax.sample_world.build import wikipedia_dump

    root, _ = sample_world
    out = tmp_path_factory.mktemp("ssm_diffset")
    build_diffset(wikipedia_dump(root, "2021-08"), wikipedia_dump(root, "2021-09"), out)
    return out


@pytest.fixture(scope="session")
def full_nlp():
    """The whole English pipeline, as a user would load it, to check the stage against."""
    from tw_jax.text.spacy_pipeline import load_ner_pipeline

    return load_ner_pipeline(prune=False)[0]
