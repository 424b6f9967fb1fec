"""The hand-made build folder of :mod:`retrieval_data`, fresh for each test."""

from pathlib import Path

import pytest
from retrieval_data import write_build_folder


@pytest.fixture()
def data(tmp_path) -> Path:
    return write_build_folder(tmp_path)
