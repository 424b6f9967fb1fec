"""Errors that name the file and the record, so bad input never surfaces as a deep traceback."""

from __future__ import annotations


class DumpError(Exception):
    """A dump cannot be read past this point: corrupt archive, malformed XML, unreadable bytes.

    ``record`` says where: a page id or title, a line number, a byte offset, whatever the format
    has. The CLI prints ``str(error)`` and exits non-zero.
    """

    def __init__(self, path: str, record: str | None, message: str) -> None:
        self.path = str(path)
        self.record = record
        self.message = message
        where = f"{self.path}" + (f", {record}" if record else "")
        super().__init__(f"{where}: {message}")

    def __reduce__(self):  # noqa: ANN204 - keeps the error intact across worker processes
        return (type(self), (self.path, self.record, self.message))


class OutputError(Exception):
    """An output cannot be written: the disk is full, the folder is read-only or a file, or
    another run holds it. ``path`` names the output; the CLI prints ``str(error)``, exit 2."""

    def __init__(self, path: str, message: str) -> None:
        self.path = str(path)
        self.message = message
        super().__init__(f"{self.path}: {message}")

    def __reduce__(self):  # noqa: ANN204 - keeps the error intact across worker processes
        return (type(self), (self.path, self.message))


class UsageError(ValueError):
    """A configuration that cannot work, said in one line with what to change: an unknown task,
    a model that cannot read a task's features, a schedule longer than the run, a missing
    vocabulary. The CLI prints it without a traceback (``--debug`` or ``TW_JAX_DEBUG=1`` shows
    one), exit 2. A ``ValueError`` so library callers that caught those keep working."""


def tensorflow_message(error: BaseException) -> str:
    """A TensorFlow op error's own words on one line, without the graph node it names
    (``{{function_node __wrapped__ReduceDataset…}} corrupted record at 12 [Op:ReduceDataset]``
    → ``corrupted record at 12``)."""
    text = (getattr(error, "message", None) or str(error)).strip()
    if not text:
        return type(error).__name__
    line = text.splitlines()[-1].split("}} ")[-1]
    return line.split(" [Op:")[0].strip()
