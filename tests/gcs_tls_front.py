"""Google's GCS host names, answered on 127.0.0.1 by the local GCS server: what lets
TensorFlow's own ``gs://`` file system (``tf.io.gfile``: SeqIO's cache job and cached reads,
TFDS) reach fake-gcs-server.

TensorFlow's GCS file system has no endpoint setting: it always asks
``https://www.googleapis.com/storage/v1/…`` and ``https://storage.googleapis.com/…``. It does
honour what libcurl honours: a proxy (``https_proxy``) and a CA bundle (``CURL_CA_BUNDLE``), and
a fixed token (``GOOGLE_AUTH_TOKEN_FOR_TESTING``) instead of any credential look-up. So this
front is an HTTPS proxy on 127.0.0.1 that accepts ``CONNECT`` to those two hosts only (any other
is refused: nothing leaves the machine), ends the TLS itself with a certificate of a CA made
for the test session, and relays the plain HTTP/1.1 stream to the local server, which serves
``storage.googleapis.com`` as its public host. Nothing is emulated here: every object lives in
the real local server.
"""

from __future__ import annotations

import contextlib
import datetime
import socket
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

GOOGLE_HOSTS = ("storage.googleapis.com", "www.googleapis.com")


def make_certificates(folder: Path) -> tuple[Path, Path, Path]:
    """``(ca.pem, cert.pem, key.pem)``: a CA of this session and a certificate it signed for
    :data:`GOOGLE_HOSTS`."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    now = datetime.datetime.now(datetime.UTC)
    valid = (now - datetime.timedelta(days=1), now + datetime.timedelta(days=7))

    def name(common: str) -> x509.Name:
        return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (x509.CertificateBuilder().subject_name(name("tw_jax test CA"))
          .issuer_name(name("tw_jax test CA")).public_key(ca_key.public_key())
          .serial_number(x509.random_serial_number())
          .not_valid_before(valid[0]).not_valid_after(valid[1])
          .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
          .add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                       content_commitment=False, key_encipherment=False,
                                       data_encipherment=False, key_agreement=False,
                                       encipher_only=False, decipher_only=False), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder().subject_name(name(GOOGLE_HOSTS[0]))
            .issuer_name(ca.subject).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(valid[0]).not_valid_after(valid[1])
            .add_extension(x509.SubjectAlternativeName([x509.DNSName(h) for h in GOOGLE_HOSTS]),
                           critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .sign(ca_key, hashes.SHA256()))
    folder.mkdir(parents=True, exist_ok=True)
    paths = folder / "ca.pem", folder / "cert.pem", folder / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return paths


class GcsTlsFront:
    """The proxy, in a process of its own (TensorFlow holds the GIL through some of its GCS
    calls, so a proxy thread in the same process would never answer them); :attr:`env` is
    what a TensorFlow process needs to reach ``target`` (``(host, port)`` of the local
    server) for ``gs://``."""

    def __init__(self, target: tuple[str, int], folder: Path) -> None:
        self.ca = folder / "ca.pem"
        self._process = subprocess.Popen(
            [sys.executable, __file__, f"{target[0]}:{target[1]}", str(folder)],
            stdout=subprocess.PIPE, text=True)
        line = self._process.stdout.readline() if self._process.stdout else ""
        if not line.strip().isdigit():
            self.close()
            raise RuntimeError(f"the GCS TLS front did not start: {line!r}")
        self.port = int(line)

    @property
    def env(self) -> dict[str, str]:
        proxy = f"http://127.0.0.1:{self.port}"
        # loopback stays direct: the other clients (google-cloud-storage, Beam) already talk
        # to the local server at 127.0.0.1, and so do the upload URLs it hands them
        return {"https_proxy": proxy, "HTTPS_PROXY": proxy, "http_proxy": proxy,
                "no_proxy": "127.0.0.1,localhost", "NO_PROXY": "127.0.0.1,localhost",
                "CURL_CA_BUNDLE": str(self.ca),
                "GOOGLE_AUTH_TOKEN_FOR_TESTING": "tw-jax-test-token", "NO_GCE_CHECK": "true"}

    def close(self) -> None:
        if self._process.poll() is None:
            self._process.terminate()
            self._process.wait(timeout=10)


class _Proxy:
    """Accepts connections on 127.0.0.1 and tunnels each (:meth:`_tunnel`) on a thread."""

    def __init__(self, target: tuple[str, int], folder: Path) -> None:
        self.target = target
        _, cert, key = make_certificates(folder)
        self._tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._tls.load_cert_chain(cert, key)
        self._tls.set_alpn_protocols(["http/1.1"])  # the local server is plain HTTP/1.1
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]

    def serve(self) -> None:
        while True:
            client, _ = self._listener.accept()
            threading.Thread(target=self._tunnel, args=(client,), daemon=True).start()

    def _tunnel(self, client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                chunk = client.recv(4096)
                if not chunk:
                    return
                head += chunk
            method, where = head.split(b"\r\n", 1)[0].split(b" ")[:2]
            if method != b"CONNECT":  # plain HTTP through the proxy: the server's upload URLs
                if _host(where) not in GOOGLE_HOSTS:
                    client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                    return
                with socket.create_connection(self.target) as server:
                    _relay(_Replayed(client, head), server)
                return
            host = where.decode("latin-1").rsplit(":", 1)[0]
            if host not in GOOGLE_HOSTS:
                client.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                return
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            try:
                tls = self._tls.wrap_socket(client, server_side=True)
            except (ssl.SSLError, OSError):
                return
            with tls, socket.create_connection(self.target) as server:
                _relay(tls, server)


def _host(url: bytes) -> str:
    """The host of an absolute ``http://host[:port]/…`` request target ('' if none)."""
    text = url.decode("latin-1")
    if not text.startswith("http://"):
        return ""
    return text[len("http://"):].split("/", 1)[0].rsplit(":", 1)[0]


class _Replayed:
    """A client socket whose first bytes (already read) are read again."""

    def __init__(self, sock: socket.socket, first: bytes) -> None:
        self.sock, self.first = sock, first

    def recv(self, size: int) -> bytes:
        if self.first:
            data, self.first = self.first[:size], self.first[size:]
            return data
        return self.sock.recv(size)

    def sendall(self, data: bytes) -> None:
        self.sock.sendall(data)

    def shutdown(self, how: int) -> None:
        self.sock.shutdown(how)


def _relay(tls: ssl.SSLSocket | _Replayed, server: socket.socket) -> None:
    """Requests one way (their headers fixed, :func:`_requests`), responses back as they come,
    until either side closes."""

    def back() -> None:
        try:
            while data := server.recv(65536):
                tls.sendall(data)
        except OSError:
            pass
        finally:
            _shut(tls, server)

    thread = threading.Thread(target=back, daemon=True)
    thread.start()
    try:
        for chunk in _requests(tls):
            server.sendall(chunk)
    except OSError:
        pass
    finally:
        _shut(tls, server)
    thread.join()


def _shut(*ends: socket.socket) -> None:
    for end in ends:
        with contextlib.suppress(OSError):
            end.shutdown(socket.SHUT_RDWR)


def _requests(tls: ssl.SSLSocket | _Replayed) -> Iterator[bytes]:
    """The client's HTTP/1.1 requests with two things Go's HTTP server (the local server)
    refuses taken out: ``Transfer-Encoding: identity``, which TensorFlow sends with its
    empty-body POSTs (starting an upload; Go answers 501), and a ``Content-Length`` beside
    ``Transfer-Encoding: chunked`` (TensorFlow's upload PUTs send both; the chunked framing is
    what the body has). A proxy request's absolute URL becomes its path."""
    reader = _Reader(tls)
    while (head := reader.until(b"\r\n\r\n")) is not None:
        lines = [line for line in head[:-4].split(b"\r\n")
                 if line.lower().replace(b" ", b"") != b"transfer-encoding:identity"]
        method, target, version = lines[0].split(b" ", 2)
        if target.startswith(b"http://"):
            target = b"/" + target[len(b"http://"):].split(b"/", 1)[-1]
            lines[0] = b" ".join((method, target, version))
        fields = {line.split(b":", 1)[0].strip().lower(): line.split(b":", 1)[1].strip()
                  for line in lines[1:] if b":" in line}
        chunked = fields.get(b"transfer-encoding", b"").lower() == b"chunked"
        if chunked:
            lines = [line for line in lines if not line.lower().startswith(b"content-length:")]
        yield b"\r\n".join(lines) + b"\r\n\r\n"
        if chunked:
            while (size_line := reader.until(b"\r\n")) is not None:
                yield size_line
                size = int(size_line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:  # the trailers, up to an empty line
                    while (trailer := reader.until(b"\r\n")) not in (None, b"\r\n"):
                        yield trailer
                    yield b"\r\n"
                    break
                yield reader.exactly(size + 2)
        else:
            yield reader.exactly(int(fields.get(b"content-length", b"0")))


class _Reader:
    """Buffered reads of a socket: up to a delimiter, or an exact count."""

    def __init__(self, sock: ssl.SSLSocket | _Replayed) -> None:
        self.sock, self.buffer = sock, b""

    def _fill(self) -> bool:
        data = self.sock.recv(65536)
        self.buffer += data
        return bool(data)

    def until(self, delimiter: bytes) -> bytes | None:
        while delimiter not in self.buffer:
            if not self._fill():
                return None
        at = self.buffer.index(delimiter) + len(delimiter)
        data, self.buffer = self.buffer[:at], self.buffer[at:]
        return data

    def exactly(self, count: int) -> bytes:
        while len(self.buffer) < count:
            if not self._fill():
                break
        data, self.buffer = self.buffer[:count], self.buffer[count:]
        return data


if __name__ == "__main__":  # python gcs_tls_front.py HOST:PORT CERT_FOLDER: prints its port
    host, port = sys.argv[1].rsplit(":", 1)
    proxy = _Proxy((host, int(port)), Path(sys.argv[2]))
    print(proxy.port, flush=True)
    proxy.serve()
