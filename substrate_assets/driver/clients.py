"""The two endpoints a virtual user talks to: the control API (gRPC) and the router (HTTP: protobuf bodies for
glutton, JSON for sweperf's trajectory service)."""

from __future__ import annotations

import errno
import http.client
import io
import json
import select
import socket
import threading
from typing import Any
from urllib.parse import urlsplit

import grpc
from google.protobuf.message import Message

from substrate_assets.driver.failures import RouterError, rpc_code
from substrate_assets.families import DEFAULT_TEMPLATES, TEMPLATE_ATESPACE
from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import ateapi_pb2_grpc

CONTROL_DEADLINE_S = 60.0
ROUTER_TIMEOUT_S = 30.0
TEMPLATE = (TEMPLATE_ATESPACE, DEFAULT_TEMPLATES["agentsession"])
TARGET_HEADER = "ate-target-actor"
ELAPSED_TRAILER = "x-server-elapsed-us"


class ControlClient:
    """The lifecycle calls a session makes, each with upstream's 60 s deadline. Each returns the RPC's response
    message (``pb.Actor``, ``pb.ResumeActorResponse``, …: :mod:`~substrate_assets.protos` generates their classes at
    import, so to the checker each is a protobuf Message)."""

    def __init__(self, endpoint: str, deadline_s: float = CONTROL_DEADLINE_S, tls: bool = False) -> None:
        # TLS trusts the system roots, or the file named by GRPC_DEFAULT_SSL_ROOTS_FILE_PATH (a cluster CA).
        self.channel = (grpc.secure_channel(endpoint, grpc.ssl_channel_credentials()) if tls
                        else grpc.insecure_channel(endpoint))
        self.stub = ateapi_pb2_grpc.ControlStub(self.channel)
        self.deadline_s = deadline_s

    @staticmethod
    def ref(atespace: str, name: str) -> Message:
        return pb.ObjectRef(atespace=atespace, name=name)

    def get_template(self, atespace: str = TEMPLATE[0], name: str = TEMPLATE[1]) -> Message:
        return self.stub.GetActorTemplate(pb.GetActorTemplateRequest(actor_template=self.ref(atespace, name)),
                                          timeout=self.deadline_s)

    def create_atespace(self, name: str) -> Message:
        request = pb.CreateAtespaceRequest(atespace=pb.Atespace(metadata=pb.ResourceMetadata(name=name)))
        return self.stub.CreateAtespace(request, timeout=self.deadline_s)

    def ensure_atespace(self, name: str) -> None:
        """CreateAtespace, where AlreadyExists (another user made it first) is success, as every driver takes it."""
        try:
            self.create_atespace(name)
        except grpc.RpcError as error:
            if rpc_code(error) != grpc.StatusCode.ALREADY_EXISTS:
                raise

    def create_actor(self, atespace: str, name: str, template: tuple[str, str] = TEMPLATE) -> Message:
        return self.stub.CreateActor(self.create_request(atespace, name, template), timeout=self.deadline_s)

    @classmethod
    def create_request(cls, atespace: str, name: str, template: tuple[str, str] = TEMPLATE) -> Message:
        return pb.CreateActorRequest(actor=pb.Actor(metadata=pb.ResourceMetadata(atespace=atespace, name=name),
                                                    actor_template=cls.ref(*template)))

    def revert(self, atespace: str, name: str) -> Message:
        return self.stub.RevertActor(pb.RevertActorRequest(actor=self.ref(atespace, name)), timeout=self.deadline_s)

    def timed(self, rpc: str, request: Any) -> tuple[Any, float | None]:
        """Call ``rpc`` (``"ResumeActor"``, …) and return its response with the server's own elapsed time in
        seconds, from the ``x-server-elapsed-us`` trailer (None when the server sent none). A failed call raises
        its ``grpc.RpcError``; :func:`server_elapsed_s` reads the trailer off it too."""
        method: Any = getattr(self.stub, rpc)  # a unary-unary multi-callable
        response, call = method.with_call(request, timeout=self.deadline_s)
        return response, server_elapsed_s(call)

    def resume(self, atespace: str, name: str) -> Message:
        return self.stub.ResumeActor(pb.ResumeActorRequest(actor=self.ref(atespace, name)), timeout=self.deadline_s)

    def suspend(self, atespace: str, name: str) -> Message:
        return self.stub.SuspendActor(pb.SuspendActorRequest(actor=self.ref(atespace, name)), timeout=self.deadline_s)

    def pause(self, atespace: str, name: str) -> Message:
        return self.stub.PauseActor(pb.PauseActorRequest(actor=self.ref(atespace, name)), timeout=self.deadline_s)

    def delete(self, atespace: str, name: str, any_state: bool = True) -> Message:
        request = pb.DeleteActorRequest(actor=self.ref(atespace, name), any_state=any_state)
        return self.stub.DeleteActor(request, timeout=self.deadline_s)

    def get_actor(self, atespace: str, name: str) -> Message:
        return self.stub.GetActor(pb.GetActorRequest(actor=self.ref(atespace, name)), timeout=self.deadline_s)

    def close(self) -> None:
        self.channel.close()


def server_elapsed_s(call: Any) -> float | None:
    """The ``x-server-elapsed-us`` trailer of a finished call (or of the ``grpc.RpcError`` it raised), seconds."""
    trailing = getattr(call, "trailing_metadata", None)
    for key, value in (trailing() or ()) if callable(trailing) else ():
        if key == ELAPSED_TRAILER:
            try:
                return int(value) / 1e6
            except ValueError:
                return None
    return None


class RouterClient:
    """Requests through the router to one actor (``ate-target-actor``), HTTP/1.1 over kept-alive connections.

    A small client of its own over the ``socket`` module (cooperative once Locust's gevent has patched it): the
    request head is built in one string and sent with a small body in one write; the reply's status line and
    headers are read with the connection's buffered reader, and a body of known length straight into one
    ``bytes``. ``http.client`` cost about 0.45 ms of driver CPU per small request (a new reader and an
    ``email.parser`` header parse per reply, head and body sent apart), this about 0.12-0.16 ms; a coding-session
    step makes three or more such requests. What goes on the wire is what ``http.client`` sent (the same request
    line and headers), and a broken reply raises ``http.client``'s exceptions (``RemoteDisconnected``,
    ``IncompleteRead``, ``BadStatusLine``, ...) with their messages, so failures are booked with the same text.
    Replies with a ``Content-Length``, chunked, or until the connection closes are all read.
    (geventhttpclient, used before ``http.client``, copied each body and reply: 49 ms of CPU to read 16 MiB.)
    """

    def __init__(self, url: str, timeout_s: float = ROUTER_TIMEOUT_S, concurrency: int = 2) -> None:
        """``concurrency``: connections kept to the router, the most requests in flight at once (a VU makes one at
        a time; a spawn batch or burst cohort shares one client among all its actors)."""
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"router URL {url!r} must be http://host[:port]")
        self.host, self.port = parts.hostname, parts.port or 80
        self.timeout_s = timeout_s
        self.prefix = parts.path.rstrip("/")
        # The Host header as http.client writes it: the port only when it is not 80, an IPv6 address bracketed.
        host = f"[{self.host}]" if ":" in self.host else self.host
        self._host_header = host if self.port == 80 else f"{host}:{self.port}"
        # Looked up on the module at call time: gevent's patched classes under Locust, the OS's in plain tests.
        self._slots = threading.BoundedSemaphore(concurrency)
        self._idle: list[_Connection] = []
        self._closed = False

    def post(self, actor: str, route: str, body: bytes) -> bytes:
        """POST a protobuf body; the reply's body, or :class:`RouterError` for a status of 400 or more."""
        return self.request("POST", actor, route, body, "application/x-protobuf")

    def wire_request(self, method: str, actor: str, route: str, body: bytes = b"",
                     content_type: str | None = None) -> tuple[bytes, bytes]:
        """The request as it goes on the wire, in the two writes :meth:`request` makes: the head with a small body
        behind it, and nothing; or the head, and a large body (tens of MiB: sent as it is, not copied behind the
        head)."""
        # http.client's head: Host, Accept-Encoding, Content-Length (0 for a POST without a body, none for a GET
        # without one), then ours.
        length = f"Content-Length: {len(body)}\r\n" if body or method in _METHODS_EXPECTING_BODY else ""
        kind = f"Content-Type: {content_type}\r\n" if content_type is not None else ""
        head = (f"{method} {self.prefix + route} HTTP/1.1\r\nHost: {self._host_header}\r\n"
                f"Accept-Encoding: identity\r\n{length}{TARGET_HEADER}: {actor}\r\n{kind}\r\n").encode("latin-1")
        return (head + body, b"") if len(body) <= _JOINED_BODY else (head, body)

    def request(self, method: str, actor: str, route: str, body: bytes = b"",
                content_type: str | None = None) -> bytes:
        first, rest = self.wire_request(method, actor, route, body, content_type)
        with self._slots:
            connection = self._connection()
            try:
                connection.sock.sendall(first)
                if rest:
                    connection.sock.sendall(rest)
                status, payload, will_close = connection.read_response()
            except BaseException:
                connection.close()  # a request cut short leaves the connection in an unknown state
                raise
            if will_close or self._closed:
                connection.close()
            else:
                self._idle.append(connection)
        if status >= 400:
            raise RouterError(route, status, payload, method)
        return payload

    def _connection(self) -> _Connection:
        """The most recently used idle connection that the router has not closed meanwhile, else a new one."""
        if self._closed:
            raise RuntimeError("router client closed")
        while self._idle:
            connection = self._idle.pop()
            try:
                # An idle keep-alive connection has nothing to read; readable means closed (or garbage).
                if not select.select([connection.sock], [], [], 0.0)[0]:
                    return connection
            except (OSError, ValueError):
                pass
            connection.close()
        return _Connection(socket.create_connection((self.host, self.port), self.timeout_s))

    def get_json(self, actor: str, route: str) -> dict[str, Any]:
        """GET ``route`` (with its query string); the JSON reply."""
        return _json_object(route, self.request("GET", actor, route))

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()


_METHODS_EXPECTING_BODY = frozenset({"PATCH", "POST", "PUT"})
_JOINED_BODY = 64 << 10  # a body up to this size goes in the same write as the head
_MAX_LINE = 65536  # http.client's limits on a status or header line and on the number of headers
_MAX_HEADERS = 100
_NO_BODY = frozenset({204, 304})
# A body of at least _LOW_WATER_FROM bytes is read in wake-ups of up to _LOW_WATER bytes each (SO_RCVLOWAT). With
# the default of 1 byte, gevent's readiness wait returned as soon as anything had arrived, a hub round trip and a
# short recv each time: a 24 MiB reply cost 7-8 ms of user CPU under gevent (2-3 ms in a plain blocking loop); with
# 1 MiB per wake-up 3-4 ms, with 4 MiB 2 ms.
_LOW_WATER_FROM = 64 << 10
_LOW_WATER = 4 << 20


class _SocketReader(io.RawIOBase):
    """The raw side of a connection's buffered reader: ``recv_into`` on the socket (cooperative under gevent), with
    the socket's low-water mark raised while a large body is read.

    ``expect`` is the body still to come. A read asks the kernel to wake it only once ``min(len(buffer), expect,
    _LOW_WATER)`` bytes are there; the buffered reader asks for no more than the body it still misses (plus, at the
    end, a buffer's worth when less than ``_LOW_WATER_FROM`` is left, when the mark is back at 1 byte), so the mark
    never waits for bytes the server will not send. A reply cut short still ends the wait (end of stream)."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__()
        self._sock = sock
        self.expect = 0
        self._low_water = 1
        self._settable = hasattr(socket, "SO_RCVLOWAT")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        self._mark(min(len(buffer), self.expect, _LOW_WATER) if self.expect >= _LOW_WATER_FROM else 1)
        count = self._sock.recv_into(buffer)
        self.expect = max(self.expect - count, 0)
        return count

    def done(self) -> None:
        """The body is read: back to waking for any byte, so an idle connection that the server closed, or that
        received anything, reads as readable again."""
        self.expect = 0
        self._mark(1)

    def _mark(self, low_water: int) -> None:
        if low_water != self._low_water and self._settable:
            try:
                self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, max(low_water, 1))
                self._low_water = low_water
            except OSError:  # a platform without it: every read wakes as before
                self._settable = False


class _Connection:
    """One kept-alive connection: its socket and the buffered reader its replies are read with."""

    def __init__(self, sock: socket.socket) -> None:
        try:  # as http.client: a small request is not held back waiting for the last reply's ACK
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError as error:
            if error.errno != errno.ENOPROTOOPT:
                sock.close()
                raise
        self.sock = sock
        self.raw = _SocketReader(sock)
        self.reader = io.BufferedReader(self.raw)

    def close(self) -> None:
        self.reader.close()
        self.sock.close()

    def _line(self, what: str) -> bytes:
        line = self.reader.readline(_MAX_LINE + 1)
        if len(line) > _MAX_LINE:
            raise http.client.LineTooLong(what)
        return line

    def read_response(self) -> tuple[int, bytes, bool]:
        """The reply's status, its body and whether the connection must close after it."""
        while True:
            version, status = self._status_line()
            length, chunked, close = self._headers()
            if status != http.client.CONTINUE:
                break
        will_close = close or version != "HTTP/1.1"
        if status in _NO_BODY or 100 <= status < 200:
            return status, b"", will_close
        if chunked:
            return status, self._chunked(), will_close
        if length is None:  # no length: the body runs to the end of the connection
            return status, self.reader.read(), True
        self.raw.expect = length  # at most 8 KiB more than the socket still holds: some may be buffered already
        try:
            body = self.reader.read(length) if length else b""
        finally:
            self.raw.done()
        if len(body) < length:
            raise http.client.IncompleteRead(body, length - len(body))
        return status, body, will_close

    def _status_line(self) -> tuple[str, int]:
        line = self._line("status line")
        if not line:
            # As http.client: the server closed the connection before answering.
            raise http.client.RemoteDisconnected("Remote end closed connection without response")
        text = line.decode("iso-8859-1")
        fields = text.split(None, 2)
        if len(fields) < 2 or not fields[0].startswith("HTTP/"):
            raise http.client.BadStatusLine(text)
        try:
            status = int(fields[1])
        except ValueError:
            raise http.client.BadStatusLine(text) from None
        if not 100 <= status <= 999:
            raise http.client.BadStatusLine(text)
        return fields[0], status

    def _headers(self) -> tuple[int | None, bool, bool]:
        """Content-Length (None when absent), chunked, and Connection: close."""
        length: int | None = None
        chunked = close = False
        for _ in range(_MAX_HEADERS + 1):
            line = self._line("header line")
            if line in (b"\r\n", b"\n", b""):
                return length, chunked, close
            name, _, value = line.partition(b":")
            name = name.strip().lower()
            if name == b"content-length":
                try:
                    length = int(value)
                except ValueError:
                    length = None
                else:
                    length = length if length >= 0 else None
            elif name == b"transfer-encoding":
                chunked = value.strip().lower() == b"chunked"
            elif name == b"connection":
                close = b"close" in value.lower()
        raise http.client.HTTPException(f"got more than {_MAX_HEADERS} headers")

    def _chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            line = self._line("chunk size")
            try:
                size = int(line.split(b";", 1)[0], 16)
            except ValueError:
                raise http.client.IncompleteRead(b"".join(parts)) from None
            if size == 0:
                while self._line("trailer line") not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            chunk = self.reader.read(size)
            if len(chunk) < size:
                raise http.client.IncompleteRead(b"".join(parts) + chunk, size - len(chunk))
            parts.append(chunk)
            self.reader.read(2)  # the CRLF after the chunk


def _json_object(route: str, payload: bytes) -> dict[str, Any]:
    try:
        document = json.loads(payload)
    except ValueError:
        raise ValueError(f"{route}: reply is not JSON: {payload[:200]!r}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{route}: reply is not a JSON object: {payload[:200]!r}")
    return document
