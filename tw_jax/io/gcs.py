"""Google Cloud Storage: the emulator setting every client must follow, and one-line errors.

Each GCS client in the stack reads its own settings:

- epath (our path layer, orbax's metadata) goes through TensorFlow's GCS file system unless
  ``EPATH_USE_TF=false``, then through gcsfs;
- gcsfs, google-cloud-storage (Apache Beam's ``gs://`` IO) honour ``STORAGE_EMULATOR_HOST``;
- TensorStore (orbax's array data) honours only ``TENSORSTORE_GCS_HTTP_URL``;
- TensorFlow's own GCS file system (``tf.io.gfile``, ``tf.data``, hence seqio's reads) has no
  endpoint setting: it always talks to Google.

So when ``STORAGE_EMULATOR_HOST`` is set (a local fake-gcs-server in tests, or a user's own
emulator), :func:`configure_environment` points epath at gcsfs and TensorStore at the emulator,
before either is used; it runs when :mod:`tw_jax` is imported. Settings the user made stay.
"""

from __future__ import annotations

import os
from collections.abc import MutableMapping

from tw_jax.io.paths import StorageError, as_path, is_url

EMULATOR_ENV = "STORAGE_EMULATOR_HOST"


def emulator_url(environ: MutableMapping[str, str] = os.environ) -> str | None:
    """``http://host:port`` of the configured emulator, or None."""
    host = environ.get(EMULATOR_ENV, "").strip()
    if not host or host == "default":
        return None
    return host if host.startswith(("http://", "https://")) else f"http://{host}"


def configure_environment(environ: MutableMapping[str, str] = os.environ) -> None:
    """Points every GCS client at ``STORAGE_EMULATOR_HOST`` when it is set (see the module)."""
    url = emulator_url(environ)
    if url is None:
        return
    environ.setdefault("EPATH_USE_TF", "false")
    environ.setdefault("TENSORSTORE_GCS_HTTP_URL", url)
    # gcsfs's extended client asks Google's storage-control API for the bucket type first.
    environ.setdefault("GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT", "false")


def bucket_of(url: str) -> str:
    """``gs://bucket/a/b`` → ``bucket``."""
    return url.split("://", 1)[1].split("/", 1)[0]


def check_access(url: str, *, must_exist: bool) -> None:
    """Raises :class:`StorageError` (one line, naming ``url``) when the bucket is missing or
    unreachable, credentials are refused, or (``must_exist``) the object or folder is absent.
    Local paths are not checked here."""
    if not is_url(url):
        return
    scheme = url.split("://", 1)[0]
    bucket = bucket_of(url)
    if not bucket:
        raise StorageError(f"{url}: no bucket in the URL")
    try:
        if not as_path(f"{scheme}://{bucket}").exists():
            raise StorageError(f"{url}: bucket {bucket!r} does not exist (or is not visible "
                               "with these credentials)")
        if must_exist and not as_path(url).exists():
            raise StorageError(f"{url}: no such object or folder")
    except StorageError:
        raise
    except Exception as error:  # noqa: BLE001 - every client's errors become one line
        raise StorageError(f"{url}: {describe(error)}") from error


def describe(error: BaseException) -> str:
    """The first line of an error from any storage client, with its type when it says little."""
    text = str(error).strip().splitlines()[0] if str(error).strip() else ""
    name = type(error).__name__
    return f"{name}: {text}" if text else name
