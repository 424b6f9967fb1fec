"""Fixtures of the task tests: one data folder (demo + initial snapshot + SSM + vocabularies)
per session; ``twiki`` registers its tasks before each test that uses it (cheap), so tests that
register other folders cannot leak into the rest."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def task_data(train_data) -> dict:
    """The session's data folder (tests/conftest.py's ``train_data``): one build per worker
    serves the task, training and evaluation tests; the task tests only read it."""
    return train_data


@pytest.fixture()
def twiki(task_data) -> dict:
    import tw_jax.tasks

    names = tw_jax.tasks.register_all(
        task_data["data_dir"], t5_vocab=str(task_data["t5"]), gpt2_vocab=str(task_data["gpt2"])
    )
    return {**task_data, "names": names}


@pytest.fixture(scope="session")
def vocabularies(task_data) -> dict:
    from tw_jax.data.vocabularies import gpt2_vocabulary, t5_vocabulary

    return {"t5": t5_vocabulary(task_data["t5"]), "gpt2": gpt2_vocabulary(task_data["gpt2"])}
