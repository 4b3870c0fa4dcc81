"""The guard in front of the Dagster UI, in front of a real HTTP server of the test's own: requests addressed to this
machine pass with their bytes unchanged (a keep-alive connection's later requests too; the UI test's browser
drives Dagster's websockets through it), any other Host is answered 421 and never reaches the server."""

import http.client
import http.server
import socket
import threading
from collections.abc import Iterator
from typing import ClassVar

import pytest

from substrate_assets.processes.host_guard import HostGuard, is_local, listening_socket, request_host


@pytest.mark.parametrize(("host", "local"), [
    ("127.0.0.1:8123", True), ("localhost:8123", True), ("LOCALHOST:8123", True), ("[::1]:8123", True),
    ("127.0.0.1", False), ("127.0.0.1:80", False), ("localhost:8124", False), ("attacker.example:8123", False),
    ("127.0.0.1.attacker.example:8123", False), ("localhost.:8123", False), ("[::1]", False), (None, False),
    ("", False), ("127.0.0.1:8123:8123", False),
])
def test_only_this_machine_at_the_guards_port_is_local(host, local):
    assert is_local(host, 8123) is local


def test_a_request_has_one_host_or_none():
    assert request_host(b"GET / HTTP/1.1\r\nhOsT:  localhost:1 \r\n\r\n") == "localhost:1"
    assert request_host(b"GET / HTTP/1.1\r\nAccept: */*\r\n\r\n") is None
    assert request_host(b"GET / HTTP/1.1\r\nHost: localhost:1\r\nHost: attacker.example\r\n\r\n") is None


class Echo(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    seen: ClassVar[list[str]] = []

    def do_GET(self) -> None:
        Echo.seen.append(self.path)
        body = f"{self.path} {self.headers['Host']}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def guarded() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    refused: list[str | None] = []
    guard = HostGuard(listening_socket(0), server.server_address[1], on_refused=refused.append).start()
    Echo.seen = []
    try:
        yield guard.port
    finally:
        guard.stop()
        server.shutdown()
        server.server_close()


def test_requests_to_this_machine_pass_and_others_never_reach_the_server(guarded):
    connection = http.client.HTTPConnection("127.0.0.1", guarded, timeout=30)
    for path in ("/first", "/second"):  # one keep-alive connection: the second request passes unread
        connection.request("GET", path)
        response = connection.getresponse()
        assert (response.status, response.read()) == (200, f"{path} 127.0.0.1:{guarded}".encode())
    connection.close()

    refused = http.client.HTTPConnection("127.0.0.1", guarded, timeout=30)
    refused.request("GET", "/launch", headers={"Host": f"attacker.example:{guarded}"})
    response = refused.getresponse()
    assert response.status == 421
    assert b"attacker.example" in response.read()
    refused.close()
    assert Echo.seen == ["/first", "/second"]


def test_a_head_that_never_ends_is_not_buffered_without_bound(guarded):
    with socket.create_connection(("127.0.0.1", guarded), timeout=30) as raw:
        raw.sendall(b"GET / HTTP/1.1\r\nX: " + b"a" * (128 * 1024))
        raw.shutdown(socket.SHUT_WR)
        assert raw.recv(1024) == b""  # closed, nothing passed on
    assert Echo.seen == []
