"""RouterClient over a real local HTTP server: kept-alive connections reused, one the server closed while idle
replaced without a failed request, bodies sent and replies read whole (with a length, chunked, or up to the
connection's end; a large body with the socket's low-water mark raised, never above what is still to come),
statuses of 400 or more raised, and a broken reply raised as http.client raises it."""

from __future__ import annotations

import http.client
import socket
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest

from substrate_assets.driver.clients import TARGET_HEADER, RouterClient
from substrate_assets.driver.failures import RouterError


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, as the router
    seen: ClassVar[list[tuple[str, str, str, int, int]]] = []  # (method, path, actor, body length, client port)

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length)
        Handler.seen.append((self.command, self.path, self.headers[TARGET_HEADER], len(body), self.client_address[1]))
        if self.path == "/hangup":  # closes without a word
            self.close_connection = True
            return
        if self.path == "/short":  # promises more than it sends, then closes
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc")
            self.close_connection = True
            return
        if self.path == "/short-big":  # a large body cut short: 5 of the 8 MiB promised
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % (8 << 20) + bytes(5 << 20))
            self.close_connection = True
            return
        if self.path == "/trickle":  # a large body in pieces, its last few bytes on their own
            self.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % ((5 << 20) + 3))
            for piece in (bytes(3 << 20), b"\x01" * (2 << 20), b"end"):
                self.wfile.flush()
                self.event.wait(0.05)  # lets the client wait for more than it has
                self.wfile.write(piece)
            return
        if self.path == "/chunked":
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for part in (body, b"-", body[::-1]):
                self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
            self.wfile.write(b"0\r\nX-Trailer: yes\r\n\r\n")
            return
        if self.path == "/until-close":  # HTTP/1.0 style: no length, the end of the connection ends the body
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body * 3)
            self.close_connection = True
            return
        if self.path == "/missing":
            reply, status = b"no such actor", 404
        elif self.path == "/big":
            reply, status = bytes(range(256)) * (6 << 12), 200  # 6 MiB
        else:
            reply, status = body[::-1], 200
        self.send_response(status)
        self.send_header("Content-Length", str(len(reply)))
        if self.path == "/close":
            self.send_header("Connection", "close")
            self.close_connection = True
        self.end_headers()
        self.wfile.write(reply)

    do_POST = do_GET = _answer
    event = threading.Event()  # never set: a pause between pieces

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    Handler.seen = []
    started = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=started.serve_forever, daemon=True)
    thread.start()
    yield started
    started.shutdown()
    started.server_close()
    thread.join()


def url(server: ThreadingHTTPServer) -> str:
    return f"http://127.0.0.1:{server.server_address[1]}"


def test_requests_share_one_kept_alive_connection(server):
    client = RouterClient(url(server))
    body = bytes(range(256)) * 4096  # 1 MiB, sent as it is
    assert client.post("space/actor", "/echo", body) == body[::-1]
    assert client.post("space/actor", "/echo", b"ab") == b"ba"
    assert len(client.request("GET", "space/actor", "/big")) == 6 << 20
    assert [(method, path, actor, length) for method, path, actor, length, _ in Handler.seen] == [
        ("POST", "/echo", "space/actor", 1 << 20), ("POST", "/echo", "space/actor", 2), ("GET", "/big", "space/actor", 0)]
    assert len({port for *_, port in Handler.seen}) == 1
    client.close()


def test_a_connection_the_server_closed_is_replaced_before_the_next_request(server):
    client = RouterClient(url(server))
    assert client.post("space/actor", "/close", b"xy") == b"yx"  # the server closes after answering
    assert client.post("space/actor", "/echo", b"xy") == b"yx"
    first, second = (port for *_, port in Handler.seen)
    assert first != second
    client.close()


def test_a_status_of_400_or_more_is_a_router_error_and_the_connection_stays_usable(server):
    client = RouterClient(url(server))
    with pytest.raises(RouterError) as raised:
        client.post("space/actor", "/missing", b"x")
    assert (raised.value.status, raised.value.body, str(raised.value)) == (
        404, "no such actor", "POST /missing: HTTP 404: no such actor")
    assert client.post("space/actor", "/echo", b"x") == b"x"
    assert len({port for *_, port in Handler.seen}) == 1
    client.close()


def test_concurrency_bounds_the_connections(server):
    client = RouterClient(url(server), concurrency=3)
    workers = [threading.Thread(target=lambda: [client.post("space/actor", "/echo", b"x") for _ in range(20)])
               for _ in range(6)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert len(Handler.seen) == 120
    assert len({port for *_, port in Handler.seen}) <= 3
    client.close()


def test_chunked_and_until_close_replies_are_read_whole(server):
    client = RouterClient(url(server))
    assert client.post("space/actor", "/chunked", b"abc") == b"abc-cba"
    assert client.post("space/actor", "/echo", b"xy") == b"yx"  # the same connection, after the trailer
    assert client.post("space/actor", "/until-close", b"ab") == b"ababab"
    assert client.post("space/actor", "/echo", b"xy") == b"yx"  # a new connection
    ports = [port for *_, port in Handler.seen]
    assert ports[0] == ports[1] == ports[2] != ports[3]  # closed after the reply that ran to its end
    client.close()


def test_a_large_body_arriving_in_pieces_is_read_whole_and_the_connection_then_wakes_for_any_byte(server):
    """A large body is read with the socket's low-water mark raised; it never waits for more than is still to
    come, and is back at one byte once the body is read (an idle connection the server closes reads as such)."""
    client = RouterClient(url(server))
    body = client.request("GET", "space/actor", "/trickle")
    assert body == bytes(3 << 20) + b"\x01" * (2 << 20) + b"end"
    (connection,) = client._idle
    assert connection.sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT) == 1
    assert len(client.request("GET", "space/actor", "/big")) == 6 << 20
    assert client.post("space/actor", "/echo", b"xy") == b"yx"
    assert len({port for *_, port in Handler.seen}) == 1
    with pytest.raises(http.client.IncompleteRead) as short:
        client.request("GET", "space/actor", "/short-big")
    assert str(short.value) == f"IncompleteRead({5 << 20} bytes read, {3 << 20} more expected)"
    client.close()


def test_a_broken_reply_raises_what_http_client_raises(server):
    client = RouterClient(url(server))
    with pytest.raises(http.client.RemoteDisconnected) as hung_up:
        client.post("space/actor", "/hangup", b"x")
    assert str(hung_up.value) == "Remote end closed connection without response"
    with pytest.raises(http.client.IncompleteRead) as short:
        client.post("space/actor", "/short", b"x")
    assert str(short.value) == "IncompleteRead(3 bytes read, 7 more expected)"
    assert client.post("space/actor", "/echo", b"x") == b"x"
    client.close()


def test_the_request_head_is_the_one_http_client_sends():
    """The exact bytes on the wire, against a listening socket: request line, Host, Accept-Encoding,
    Content-Length (0 for a POST without a body, none for a GET), the target, the content type, then the body."""
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    received: list[bytes] = []

    def serve() -> None:
        connection, _ = listener.accept()
        with connection, connection.makefile("rb") as reader:
            for _ in range(3):
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    head += reader.readline()
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                received.append(head + reader.read(length))
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = RouterClient(f"http://127.0.0.1:{port}/base")
    assert client.post("space/actor", "/ping", b"\x0a\x01x") == b"ok"
    assert client.request("POST", "space/actor", "/go") == b"ok"
    assert client.request("GET", "space/actor", "/status?x=1") == b"ok"
    thread.join()
    client.close()
    listener.close()
    assert received == [
        b"POST /base/ping HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept-Encoding: identity\r\nContent-Length: 3\r\n"
        b"ate-target-actor: space/actor\r\nContent-Type: application/x-protobuf\r\n\r\n\x0a\x01x" % port,
        b"POST /base/go HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept-Encoding: identity\r\nContent-Length: 0\r\n"
        b"ate-target-actor: space/actor\r\n\r\n" % port,
        b"GET /base/status?x=1 HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept-Encoding: identity\r\n"
        b"ate-target-actor: space/actor\r\n\r\n" % port]
