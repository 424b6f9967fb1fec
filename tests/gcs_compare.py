"""Comparing a command's output folder written locally with its twin written to a bucket of the
test GCS server: same files, same bytes, the completion marker written last, and no URL turned
into a local ``gs:`` folder on the way."""

from __future__ import annotations

import json
import os
import urllib.request
from pathlib import Path

from tw_jax.io import paths


def assert_no_local_gs_folder() -> None:
    """No URL became a local path on the way (``pathlib.Path("gs://b/x")`` is ``gs:/b/x``)."""
    assert not Path("gs:").exists(), "a gs:// URL was written to as a local path"


# --- comparing a local output folder with its bucket twin ---------------------------------


def local_files(root: Path) -> dict[str, bytes]:
    found = {}
    for folder, _, names in os.walk(root):
        for name in names:
            full = Path(folder, name)
            found[full.relative_to(root).as_posix()] = full.read_bytes()
    return found


def split_url(url: str) -> tuple[str, str]:
    bucket, _, prefix = url.removeprefix("gs://").partition("/")
    return bucket, prefix


def bucket_files(server, url: str) -> dict[str, bytes]:
    """Every object below ``url``, listed by the server itself, with its bytes."""
    bucket, prefix = split_url(url)
    names = server.objects(bucket, prefix + "/")
    return {name[len(prefix) + 1 :]: paths.read_bytes(f"gs://{bucket}/{name}") for name in names}


def generations(server, url: str) -> dict[str, int]:
    """Object name (below ``url``) → its generation, from the server: the time (in
    microseconds) its content was written."""
    bucket, prefix = split_url(url)
    query = f"{server.url}/storage/v1/b/{bucket}/o?prefix={prefix}/"
    with urllib.request.urlopen(query) as reply:
        items = json.load(reply).get("items", [])
    return {item["name"][len(prefix) + 1 :]: int(item["generation"]) for item in items}


def json_content(data: bytes, renamed: dict[str, str], timings: tuple[str, ...]) -> dict:
    """A JSON file's content with the bucket run's input paths named as the local run's, and
    without its (top-level) timings (measured: only their type and sign are checked)."""
    text = data.decode("utf-8")
    for remote, local in renamed.items():
        text = text.replace(remote, local)
    content = json.loads(text)
    for key in timings:
        seconds = content.pop(key, None)
        assert seconds is None or (isinstance(seconds, float) and seconds >= 0), (key, seconds)
    return content


STATS_FILES = ("stats.json", "build.json", "generate.json", "ckl_phases.json")


def assert_same_outputs(local: dict[str, bytes], remote: dict[str, bytes],
                         renamed: dict[str, str] | None = None,
                         timings: tuple[str, ...] = ()) -> None:
    """The same files; the same bytes, except in the stats files (:data:`STATS_FILES`) the input
    paths (``renamed``: bucket URL → local path) and ``timings``."""
    renamed = renamed or {}
    assert sorted(remote) == sorted(local)
    assert not [n for n in remote if any(part.startswith(".") for part in n.split("/"))]
    for name, data in local.items():
        if name.rsplit("/", 1)[-1] in STATS_FILES:
            assert json_content(remote[name], renamed, timings) == json_content(data, {}, timings), name
        else:
            assert remote[name] == data, name


def assert_written_last(server, url: str, marker: str) -> None:
    """The completion marker is the last object written (and nothing went to a local gs:)."""
    written = generations(server, url)
    assert written[marker] == max(written.values()), written
    assert_no_local_gs_folder()
