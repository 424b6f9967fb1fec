"""The test folders have no ``__init__.py`` (pytest imports each file by its basename), so two
test files with one name would stop the whole run at collection: every name is unique."""

from collections import Counter
from pathlib import Path


def test_every_test_file_name_is_unique():
    names = Counter(path.name for path in Path(__file__).parent.rglob("test_*.py"))
    assert [name for name, count in names.items() if count > 1] == []
