"""One bounded CSV reader for every released or built CSV.

Released CSVs hold whole Wikipedia articles in one field, past the csv module's default limit of
128 KiB, so the limit must be raised; raised without bound (2^31), one hostile field can make a
reader build a string of gigabytes. :data:`MAX_FIELD_CHARS` is far above any article (the
longest English Wikipedia articles are about 1.5 MB of wikitext) and far below the memory of a
worker. A field over it, or any other CSV syntax error, is a :class:`DumpError` naming the file
and the line, not a traceback from inside the csv module.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterator
from typing import IO

from tw_jax.errors import DumpError

MAX_FIELD_CHARS = 1 << 26  # 64 Mi characters in one field
FIELD_LIMIT_ENV = "TW_JAX_CSV_FIELD_LIMIT"


def field_limit() -> int:
    """The bound in force: ``$TW_JAX_CSV_FIELD_LIMIT`` when set, else :data:`MAX_FIELD_CHARS`."""
    value = os.environ.get(FIELD_LIMIT_ENV)
    if not value:
        return MAX_FIELD_CHARS
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if limit < 1:
        raise ValueError(f"${FIELD_LIMIT_ENV}={value!r}: expected a positive number of characters")
    return limit


class BoundedReader:
    """``csv.reader(handle)`` under :func:`field_limit`, whose errors name the file and line.

    Iterates rows (lists of fields) like ``csv.reader`` and keeps its ``line_num``; ``name`` is
    what errors call the file (a path, or ``archive!member``).
    """

    def __init__(self, handle: IO[str], name: str) -> None:
        self.limit = field_limit()
        csv.field_size_limit(self.limit)  # process-wide in the csv module
        self.name = name
        self._reader = csv.reader(handle)

    @property
    def line_num(self) -> int:
        return self._reader.line_num

    def __iter__(self) -> BoundedReader:
        return self

    def __next__(self) -> list[str]:
        try:
            return next(self._reader)
        except csv.Error as error:
            reason = f"not CSV: {error}"
            if "field larger than field limit" in str(error):
                reason = (f"a field is longer than {self.limit:,} characters (set "
                          f"${FIELD_LIMIT_ENV} to read larger ones)")
            raise DumpError(self.name, f"line {self.line_num}", reason) from None
        except UnicodeDecodeError as error:
            raise DumpError(self.name, f"line {self.line_num + 1}",
                            f"not UTF-8 (byte {error.start} of a read block)") from None


def csv_rows(handle: IO[str], name: str) -> Iterator[tuple[int, list[str]]]:
    """``(line, fields)`` of each row of ``handle`` (see :class:`BoundedReader`)."""
    reader = BoundedReader(handle, name)
    for fields in reader:
        yield reader.line_num, fields
