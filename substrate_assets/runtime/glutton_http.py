"""Glutton over HTTP: POST routes with protobuf bodies, ``GET /readyz``, upstream status codes.

Wrong method 405; a body that does not parse 400; invalid argument 400; not
found 404; anything else 500; the body of an error is its message. Every
success carries ``x-server-elapsed-us``.

A body is sized by ``Content-Length`` or sent chunked (the router streams
bodies of unknown length on chunked); one over ``MAX_REQUEST_BODY`` is 413, a
body cut short ends the connection unanswered.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from google.protobuf.message import DecodeError, Message

from substrate_assets.protos import glutton_pb2 as pb
from substrate_assets.runtime.glutton import Glutton, GluttonError
from substrate_assets.workload.quantity import INT32_MAX

CONTENT_TYPE = "application/x-protobuf"
ELAPSED_HEADER = "x-server-elapsed-us"
# The largest legitimate request is an Ingest of the largest payload a script may send (2 GiB − 1: sizes travel
# as int32) with its key (a file name, at most 255 bytes) and protobuf framing (three tags, two length varints
# of at most 5 bytes, the append flag); 4 KiB covers the key and framing with room to spare.
MAX_REQUEST_BODY = INT32_MAX + 4096
_CHUNK_LINE = 1024


class BodyRefused(Exception):
    """A request's body that cannot be used, the status to answer with and why (glutton's and the router's);
    ``status`` 0: the connection ended mid-body, with nobody left to answer."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def routes(glutton: Glutton) -> dict[str, tuple[type[Message], Callable[[Any], Any]]]:
    return {
        "/ping": (pb.PingRequest, glutton.ping),
        "/writeram": (pb.WriteRAMRequest, glutton.write_ram),
        "/readram": (pb.ReadRAMRequest, glutton.read_ram),
        "/writedisk": (pb.WriteDiskRequest, glutton.write_disk),
        "/readdisk": (pb.ReadDiskRequest, glutton.read_disk),
        "/ingest": (pb.IngestRequest, glutton.ingest),
        "/burncpu": (pb.BurnCPURequest, glutton.burn_cpu),
        "/usecpu": (pb.UseCPURequest, glutton.use_cpu),
    }


class GluttonServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 512  # the router opens many connections at once when parked requests are released

    def __init__(self, address: tuple[str, int], glutton: Glutton) -> None:
        self.glutton = glutton
        self.routes = routes(glutton)
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes; Nagle would hold the second
    server: GluttonServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(self, status: int, body: bytes, content_type: str, extra: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (extra or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str) -> None:
        self._reply(status, message.encode(), "text/plain; charset=utf-8")

    def _read_exactly(self, size: int) -> bytes:
        data = self.rfile.read(size)
        if len(data) < size:
            raise BodyRefused(0, "the connection ended mid-body")
        return data

    def _drain(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._read_chunked()
        text = self.headers.get("Content-Length") or "0"
        if not text.strip().isdigit():
            raise BodyRefused(400, f"malformed Content-Length {text!r}")
        length = int(text)
        if length > MAX_REQUEST_BODY:
            raise BodyRefused(413, f"request body of {length} bytes is over the limit of {MAX_REQUEST_BODY} bytes")
        return self._read_exactly(length) if length else b""

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            line = self.rfile.readline(_CHUNK_LINE)
            if not line:
                raise BodyRefused(0, "the connection ended mid-body")
            try:
                size = int(line.split(b";", 1)[0].strip(), 16)
            except ValueError:
                raise BodyRefused(400, f"malformed chunk size line {line[:64]!r}") from None
            if size == 0:
                break
            total += size
            if total > MAX_REQUEST_BODY:
                raise BodyRefused(413, f"request body is over the limit of {MAX_REQUEST_BODY} bytes")
            parts.append(self._read_exactly(size))
            self._read_exactly(2)  # the chunk's CRLF
        while self.rfile.readline(_CHUNK_LINE) not in (b"\r\n", b"\n", b""):
            pass  # trailers: none that glutton reads
        return b"".join(parts)

    def _body(self) -> bytes | None:
        """The request's body; None once the request has been answered (or abandoned) for a bad one."""
        try:
            return self._drain()
        except BodyRefused as error:
            self.close_connection = True
            if error.status:
                self._error(error.status, error.message)
            return None

    def do_GET(self) -> None:
        if self._body() is None:
            return
        path = self.path.split("?", 1)[0]
        if path == "/readyz":
            self._reply(200, b"ok", "text/plain; charset=utf-8")
        elif path in self.server.routes:
            self._error(405, f"method {self.command} not allowed on {path}")
        else:
            self._error(404, f"no route {path}")

    def _not_allowed(self) -> None:
        if self._body() is None:
            return
        path = self.path.split("?", 1)[0]
        if path in self.server.routes or path == "/readyz":
            self._error(405, f"method {self.command} not allowed on {path}")
        else:
            self._error(404, f"no route {path}")

    do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _not_allowed

    def do_POST(self) -> None:
        started = time.perf_counter()
        body = self._body()
        if body is None:
            return
        path = self.path.split("?", 1)[0]
        route = self.server.routes.get(path)
        if route is None:
            if path == "/readyz":
                self._error(405, "method POST not allowed on /readyz")
            else:
                self._error(404, f"no route {path}")
            return
        request_type, handler = route
        try:
            request = request_type.FromString(body)
        except DecodeError as error:
            self._error(400, f"cannot parse {request_type.__name__}: {error}")
            return
        try:
            response = handler(request)
        except GluttonError as error:
            self._error(error.status, error.message)
            return
        except Exception as error:  # an RPC that failed for an unforeseen reason is a 500, as upstream
            self._error(500, f"{type(error).__name__}: {error}")
            return
        elapsed_us = int((time.perf_counter() - started) * 1e6)
        self._reply(200, response.SerializeToString(), CONTENT_TYPE, {ELAPSED_HEADER: str(elapsed_us)})
