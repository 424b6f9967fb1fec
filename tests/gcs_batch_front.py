"""A pass-through front for the local GCS server that makes its batch endpoint answer
google-cloud-storage 3 (Apache Beam's ``gs://`` IO).

Beam's file sinks finish by renaming their temporary files with batched copy and delete
requests (``POST /batch/storage/v1``). google-cloud-storage sends the parts of a batch without a
``Content-ID`` header, which real GCS accepts and fake-gcs-server silently skips (it answers an
empty batch, which the client reports as "Bad response: not multi-part"). This front forwards
every request to the server unchanged, except that it numbers the parts of a batch. The objects
all live in the real server; nothing is emulated here.
"""

from __future__ import annotations

import http.client
import re
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade",
               "proxy-connection", "content-length", "host"}


def number_batch_parts(body: bytes, boundary: bytes) -> bytes:
    """The batch body with ``Content-ID: <n>`` in each part's headers (CRLF line ends)."""
    text = re.sub(rb"\r?\n", b"\r\n", body)
    parts = text.split(b"--" + boundary)
    numbered = [parts[0]]
    for index, part in enumerate(parts[1:], 1):
        if part.startswith(b"--") or b"content-id:" in part.split(b"\r\n\r\n", 1)[0].lower():
            numbered.append(part)
        else:
            numbered.append(b"\r\nContent-ID: <%d>" % index + part)
    return (b"--" + boundary).join(numbered)


class GcsBatchFront:
    """Listens on 127.0.0.1 and forwards to ``target`` (``http://host:port``); :attr:`url` is
    what ``STORAGE_EMULATOR_HOST`` should name."""

    def __init__(self, target: str) -> None:
        parsed = urllib.parse.urlsplit(target)
        host, port = parsed.hostname or "127.0.0.1", parsed.port or 80
        front = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:  # quiet
                pass

            def _body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    chunks = []
                    while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(chunks)
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _forward(self) -> None:
                body = self._body()
                headers = {k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP}
                content_type = self.headers.get("Content-Type", "")
                if self.path.startswith("/batch/") and "boundary=" in content_type:
                    boundary = content_type.split("boundary=", 1)[1].split(";")[0].strip('"')
                    body = number_batch_parts(body, boundary.encode())
                    body = body.replace(front.url.encode(), target.encode())
                connection = http.client.HTTPConnection(host, port, timeout=60)
                try:
                    connection.request(self.command, self.path, body=body or None, headers={
                        **headers, "Content-Length": str(len(body))})
                    reply = connection.getresponse()
                    payload = reply.read()
                    self.send_response(reply.status, reply.reason)
                    for key, value in reply.getheaders():
                        if key.lower() not in _HOP_BY_HOP:
                            self.send_header(key, value)
                    self.send_header("Content-Length", str(len(payload)))
                    self.end_headers()
                    if self.command != "HEAD":
                        self.wfile.write(payload)
                finally:
                    connection.close()

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _forward

        class Server(ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                """A client that hangs up early (a reader that stops before the end of an
                object) is not an error of the front."""
                import sys

                if not isinstance(sys.exc_info()[1], ConnectionError):
                    super().handle_error(request, client_address)

        self._server = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
