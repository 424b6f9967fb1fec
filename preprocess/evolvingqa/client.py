"""A client for any OpenAI-compatible chat-completions endpoint, on the standard library only.

``POST {endpoint}/chat/completions`` (or the endpoint itself when it already ends so) with a
JSON body ``{"model", "messages", "temperature", "max_tokens"}``; the reply's
``choices[0].message.content`` is returned. The paper used GPT-3.5-turbo through OpenAI's API;
any server speaking the same protocol (vLLM, llama.cpp, TGI, a gateway) works.

- The API key is read from an environment variable (``api_key_env``) when the client is made and
  sent as ``Authorization: Bearer …``; it is never logged, put in an error or shown by ``repr``.
- HTTP 429 and 5xx, timeouts and connection errors are retried up to ``max_retries`` times with
  exponential backoff (``backoff``·2^k seconds, at most ``max_backoff``; a ``Retry-After`` header
  in seconds is honoured within the same cap). Other errors raise :class:`ChatError` at once.
- ``cache``: a JSON-lines file of (request digest, reply), local or ``gs://``. A request seen
  before is answered from it, so an interrupted generation run restarts where it stopped without
  paying twice. A local cache is appended to and flushed at every reply; an object in a bucket
  cannot be appended to, so it is uploaded whole at most every ``cache_upload_every`` seconds
  and when the client is closed (:class:`tw_jax.io.growing.GrowingFile`): close the client, or
  use it as a context manager.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

from tw_jax.io import paths
from tw_jax.io.growing import GrowingFile
from tw_jax.io.jsonl import json_line

RETRIED_STATUS = frozenset({429, 500, 502, 503, 504})


class ChatError(RuntimeError):
    """The endpoint cannot give a usable reply (after retries, for transient errors)."""


class ChatClient:
    """``complete(messages) -> str`` against one endpoint and model (see the module docstring)."""

    def __init__(
        self,
        endpoint: str,
        model: str,
        *,
        api_key_env: str | None = None,
        timeout: float = 60.0,
        max_retries: int = 5,
        backoff: float = 1.0,
        max_backoff: float = 60.0,
        temperature: float = 0.0,
        max_tokens: int | None = 256,
        cache: str | os.PathLike[str] | None = None,
        cache_upload_every: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not endpoint.startswith(("http://", "https://")):
            raise ChatError(f"endpoint {endpoint!r} is not an http(s) URL")
        base = endpoint.rstrip("/")
        self.url = base if base.endswith("/chat/completions") else base + "/chat/completions"
        self.model = model
        self.timeout, self.max_retries = timeout, max_retries
        self.backoff, self.max_backoff = backoff, max_backoff
        self.temperature, self.max_tokens = temperature, max_tokens
        self._sleep = sleep
        self._key: str | None = None
        if api_key_env:
            self._key = os.environ.get(api_key_env)
            if not self._key:
                raise ChatError(f"environment variable {api_key_env} (the API key) is not set")
        self.requests = 0  # HTTP requests made, retries included
        self._lock = threading.Lock()
        self._cache_path = os.fspath(cache) if cache is not None else None
        self._cache_upload_every = cache_upload_every
        self._cache_file: GrowingFile | None = None  # opened at the first new reply
        self._cache = self._load_cache()

    def __repr__(self) -> str:
        key = "set" if self._key else "none"
        return f"ChatClient(url={self.url!r}, model={self.model!r}, api_key={key})"

    # --- the cache ------------------------------------------------------------------------

    def _load_cache(self) -> dict[str, str]:
        found: dict[str, str] = {}
        if self._cache_path is None or not paths.exists(self._cache_path):
            return found
        with paths.open_file(self._cache_path, "r", encoding="utf-8") as handle:
            for line in handle:
                try:
                    record = json.loads(line)
                    found[record["key"]] = record["reply"]
                except (json.JSONDecodeError, KeyError, TypeError):
                    continue  # a torn last line of an interrupted run: asked again
        return found

    def _remember(self, key: str, reply: str) -> None:
        if self._cache_path is None:
            return
        line = json_line({"key": key, "reply": reply})
        with self._lock:
            self._cache[key] = reply
            if self._cache_file is None:
                self._cache_file = GrowingFile(self._cache_path,
                                               upload_every=self._cache_upload_every)
            self._cache_file.write(line.encode("utf-8"))

    def close(self) -> None:
        """Writes out the cache (uploads it, in a bucket); the client stays usable."""
        with self._lock:
            if self._cache_file is not None:
                self._cache_file.close()
                self._cache_file = None

    def __enter__(self) -> ChatClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- requests -------------------------------------------------------------------------

    def body(self, messages: Sequence[dict[str, str]]) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model, "messages": list(messages), "temperature": self.temperature,
        }
        if self.max_tokens is not None:
            body["max_tokens"] = self.max_tokens
        return body

    def complete(self, messages: Sequence[dict[str, str]]) -> str:
        """The assistant's reply to ``messages``."""
        payload = json.dumps(self.body(messages), ensure_ascii=False, sort_keys=True)
        key = hashlib.sha256(f"{self.url}\n{payload}".encode()).hexdigest()
        if key in self._cache:
            return self._cache[key]
        reply = self._post(payload.encode("utf-8"))
        self._remember(key, reply)
        return reply

    def _delay(self, attempt: int, retry_after: str | None) -> float:
        delay = self.backoff * (2**attempt)
        if retry_after is not None:
            with contextlib.suppress(ValueError):  # an HTTP date: keep the backoff
                delay = max(delay, float(retry_after))
        return min(delay, self.max_backoff)

    def _post(self, data: bytes) -> str:
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if self._key:
            headers["Authorization"] = f"Bearer {self._key}"
        last = ""
        for attempt in range(self.max_retries + 1):
            request = urllib.request.Request(self.url, data=data, headers=headers, method="POST")
            retry_after = None
            with self._lock:
                self.requests += 1
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    return _content(response.read(), self.url)
            except urllib.error.HTTPError as error:
                detail = error.read(300).decode("utf-8", "replace").strip()
                last = f"HTTP {error.code}" + (f": {detail}" if detail else "")
                if error.code not in RETRIED_STATUS:
                    raise ChatError(f"{self.url}: {last}") from None
                retry_after = error.headers.get("Retry-After") if error.headers else None
            except (urllib.error.URLError, TimeoutError, ConnectionError) as error:
                last = str(getattr(error, "reason", error))
            if attempt < self.max_retries:
                self._sleep(self._delay(attempt, retry_after))
        raise ChatError(f"{self.url}: giving up after {self.max_retries + 1} attempts ({last})")


def _content(raw: bytes, url: str) -> str:
    try:
        reply = json.loads(raw)
        content = reply["choices"][0]["message"]["content"]
    except (json.JSONDecodeError, KeyError, IndexError, TypeError):
        raise ChatError(f"{url}: not a chat-completions reply: {raw[:200]!r}") from None
    if not isinstance(content, str):
        raise ChatError(f"{url}: the reply's message content is not text")
    return content
