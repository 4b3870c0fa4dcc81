"""RouterClient over a real local HTTP server: kept-alive connections reused, one the server closed while idle
replaced without a failed request, bodies sent and replies read whole, and statuses of 400 or more raised."""

from __future__ import annotations

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
