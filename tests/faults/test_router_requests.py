"""Fault: hostile router traffic — bodies over the cap, bodies that never arrive, malformed requests. The runtime
under test is its own process (so its memory is measured alone), reached over real sockets.
"""

from __future__ import annotations

import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from substrate_assets.protos import ateapi_pb2 as api
from substrate_assets.protos import ateapi_pb2_grpc
from substrate_assets.protos import glutton_pb2 as pb
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
MiB = 1 << 20
ATESPACE = "benchmark"
BODY_CAP = 128 * MiB
BODY_TIMEOUT_S = 1.0
_RUNTIME = f"""
import logging, sys
logging.basicConfig(level=logging.WARNING, stream=sys.stderr, format="%(levelname)s %(name)s %(message)s")
logging.getLogger("substrate_assets.runtime.router").setLevel(logging.INFO)
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
EmbeddedRuntime(RuntimeConfig(workers=4, actors_per_worker=4, warm_hosts=1, actor_memory=512 << 20,
                              router_max_body={BODY_CAP}, router_body_timeout_s={BODY_TIMEOUT_S})
                ).run_until_signalled()
"""


class RuntimeProcess:
    def __init__(self, directory: Path) -> None:
        self.log = directory / "runtime.log"
        with self.log.open("w") as log:
            self.process = subprocess.Popen([sys.executable, "-c", _RUNTIME], stdout=subprocess.PIPE, stderr=log,
                                            text=True, cwd=ROOT)
        assert self.process.stdout is not None
        # It announces "control  <host:port>  (...)" then "router   http://<host:port>  (...)".
        control = self.process.stdout.readline().split()[1]
        self.port = int(self.process.stdout.readline().split()[1].rsplit(":", 1)[1])
        self.control = grpc.insecure_channel(control)
        stub = ateapi_pb2_grpc.ControlStub(self.control)
        stub.CreateAtespace(api.CreateAtespaceRequest(atespace=api.Atespace(metadata=api.ResourceMetadata(
            name=ATESPACE))))
        self.stub = stub
        self.actors = 0

    def new_actor(self) -> str:
        self.actors += 1
        name = f"body-{self.actors}"
        self.stub.CreateActor(api.CreateActorRequest(actor=api.Actor(
            metadata=api.ResourceMetadata(atespace=ATESPACE, name=name),
            actor_template=api.ObjectRef(atespace="benchmark-workloads", name="glutton"))))
        return name

    def rss(self) -> int:
        """The runtime process's resident memory, bytes (its actor hosts are processes of their own)."""
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def stop(self) -> None:
        self.control.close()
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def runtime(tmp_path_factory) -> Iterator[RuntimeProcess]:
    started = RuntimeProcess(tmp_path_factory.mktemp("router"))
    yield started
    started.stop()


def _head(route: str, actor: str | None, extra: str = "") -> bytes:
    target = f"ate-target-actor: {ATESPACE}/{actor}\r\n" if actor else ""
    return (f"POST {route} HTTP/1.1\r\nHost: router\r\nContent-Type: application/x-protobuf\r\n{target}{extra}"
            "\r\n").encode()


def _connect(runtime: RuntimeProcess) -> socket.socket:
    return socket.create_connection(("127.0.0.1", runtime.port), timeout=30)


def _answer(connection: socket.socket) -> tuple[int, bytes]:
    """Status and the whole answer, read until the router closes or the declared body is in."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(65536)
        if not chunk:
            break
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                   if line.lower().startswith(b"content-length:")), 0)
    while len(body) < length:
        chunk = connection.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(head.split()[1]), body


def _post(runtime: RuntimeProcess, actor: str, route: str, message: bytes) -> tuple[int, bytes]:
    with _connect(runtime) as connection:
        connection.sendall(_head(route, actor, f"Content-Length: {len(message)}\r\n") + message)
        return _answer(connection)


def test_a_declared_length_over_the_cap_is_refused_before_a_byte_is_read(runtime):
    actor = runtime.new_actor()
    with _connect(runtime) as connection:
        connection.sendall(_head("/ingest", actor, f"Content-Length: {3 << 30}\r\n"))
        status, body = _answer(connection)
    assert status == 413
    assert f"over the router's limit of {BODY_CAP} bytes".encode() in body


def test_a_chunked_body_growing_past_the_cap_is_refused_without_being_held(runtime):
    actor = runtime.new_actor()
    assert _post(runtime, actor, "/ping", pb.PingRequest(message="awake").SerializeToString())[0] == 200
    before = runtime.rss()
    block = os.urandom(MiB)
    chunk = f"{len(block):x}\r\n".encode() + block + b"\r\n"
    sent = 0
    with _connect(runtime) as connection:
        connection.sendall(_head("/ingest", actor, "Transfer-Encoding: chunked\r\n"))
        while sent < 300 * MiB:  # more than twice the cap; stop as soon as the router answers
            readable, writable, _ = select.select([connection], [connection], [], 30)
            if readable:
                break
            assert writable, "the router neither read nor answered for 30 s"
            connection.sendall(chunk)
            sent += len(block)
        status, body = _answer(connection)
    assert status == 413, body
    assert sent < 300 * MiB, "the router read the whole body before refusing it"
    grown = runtime.rss() - before
    assert grown < 64 * MiB, f"the runtime grew by {grown / MiB:.0f} MiB for a body it refused"


def test_a_large_body_within_the_cap_streams_through_without_being_held(runtime):
    actor = runtime.new_actor()
    payload = os.urandom(120 * MiB)
    message = pb.IngestRequest(key="big", payload=payload).SerializeToString()
    assert _post(runtime, actor, "/ping", pb.PingRequest(message="awake").SerializeToString())[0] == 200
    before = runtime.rss()
    status, body = _post(runtime, actor, "/ingest", message)
    assert status == 200, body
    answer = pb.IngestResponse.FromString(body)
    assert answer.size == len(payload)
    grown = runtime.rss() - before
    assert grown < 48 * MiB, f"the runtime grew by {grown / MiB:.0f} MiB forwarding a 120 MiB body"


def test_a_chunked_request_goes_through_to_the_actor(runtime):
    actor = runtime.new_actor()
    message = pb.PingRequest(message="in pieces").SerializeToString()
    pieces = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in (message[:3], message[3:]))
    with _connect(runtime) as connection:
        connection.sendall(_head("/ping", actor, "Transfer-Encoding: chunked\r\n") + pieces + b"0\r\n\r\n")
        status, body = _answer(connection)
    assert status == 200, body
    assert pb.PingResponse.FromString(body).message == "in pieces"


@pytest.mark.parametrize("declared, sent", [(1000, 10), (64 * MiB, 2 * MiB)], ids=["small", "streamed"])
def test_a_body_that_stops_arriving_is_timed_out_and_its_connection_closed(runtime, declared, sent):
    actor = runtime.new_actor()
    assert _post(runtime, actor, "/ping", pb.PingRequest(message="awake").SerializeToString())[0] == 200
    with _connect(runtime) as connection:
        connection.sendall(_head("/ingest", actor, f"Content-Length: {declared}\r\n") + b"x" * sent)
        began = time.monotonic()
        status, body = _answer(connection)
        waited = time.monotonic() - began
        connection.settimeout(10)
        closed = connection.recv(1) == b""
    assert status == 408, body
    assert b"request body stalled" in body
    # At the timeout, give or take a busy machine; never the router's 30 s deadline or aiohttp's 10 s linger.
    assert BODY_TIMEOUT_S * 0.9 <= waited < BODY_TIMEOUT_S + 5, waited
    assert closed
    # The router stays up: the same actor answers at once.
    assert _post(runtime, actor, "/ping", pb.PingRequest(message="still here").SerializeToString())[0] == 200


@pytest.mark.parametrize("request_bytes", [
    b"NOT A REQUEST LINE\r\n\r\n",
    b"POST /ping HTTP/1.1\r\nHost: router\r\nContent-Length: ten\r\n\r\n",
], ids=["request-line", "content-length"])
def test_a_malformed_request_is_one_log_line_not_a_traceback(runtime, request_bytes):
    lines_before = runtime.log.read_text().count("\n")
    with _connect(runtime) as connection:
        connection.sendall(request_bytes)
        status, _ = _answer(connection)
    assert status == 400
    new = wait_until(lambda: [line for line in runtime.log.read_text().splitlines()[lines_before:]
                              if "malformed request" in line], "the router to log the malformed request")
    assert len(new) == 1, new
    log = runtime.log.read_text()
    assert "Traceback" not in log, log
    actor = runtime.new_actor()
    assert _post(runtime, actor, "/ping", pb.PingRequest(message="up").SerializeToString())[0] == 200


@pytest.mark.parametrize("declared, sent", [(1000, 10), (64 * MiB, 2 * MiB)], ids=["small", "streamed"])
def test_a_client_that_leaves_mid_body_is_one_line_not_a_traceback(runtime, declared, sent):
    """A driver stopping its users (the end of a ladder step, a stopped trial) drops requests mid-body."""
    actor = runtime.new_actor()
    assert _post(runtime, actor, "/ping", pb.PingRequest(message="awake").SerializeToString())[0] == 200
    lines_before = runtime.log.read_text().count("\n")
    connection = _connect(runtime)
    connection.sendall(_head("/ingest", actor, f"Content-Length: {declared}\r\n") + b"x" * sent)
    connection.close()
    new = wait_until(lambda: [line for line in runtime.log.read_text().splitlines()[lines_before:]
                              if "left mid-body" in line], "the router to log the client leaving")
    assert len(new) == 1, new
    assert "Traceback" not in runtime.log.read_text()
    assert _post(runtime, actor, "/ping", pb.PingRequest(message="still here").SerializeToString())[0] == 200
