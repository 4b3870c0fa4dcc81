"""Glutton's HTTP face: routes, methods, status codes, protobuf bodies and the elapsed header."""

import shutil
import threading
from http.client import HTTPConnection

import pytest

from substrate_assets.protos import glutton_pb2 as pb
from substrate_assets.runtime.glutton import Glutton
from substrate_assets.runtime.glutton_http import ELAPSED_HEADER, GluttonServer


@pytest.fixture
def server(tmp_path):
    server = GluttonServer(("127.0.0.1", 0), Glutton(tmp_path / "data"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


def call(server, method, path, body=b""):
    connection = HTTPConnection("127.0.0.1", server.server_address[1], timeout=10)
    connection.request(method, path, body=body, headers={"Content-Type": "application/x-protobuf"})
    response = connection.getresponse()
    return response.status, response.read(), dict(response.getheaders())


def test_every_route_answers_its_response_type(server):
    cases = [
        ("/ping", pb.PingRequest(message="m"), pb.PingResponse),
        ("/writeram", pb.WriteRAMRequest(key="a", size="64Ki"), pb.WriteRAMResponse),
        ("/readram", pb.ReadRAMRequest(key="a"), pb.ReadRAMResponse),
        ("/writedisk", pb.WriteDiskRequest(key="f", size=1000), pb.WriteDiskResponse),
        ("/readdisk", pb.ReadDiskRequest(key="f"), pb.ReadDiskResponse),
        ("/ingest", pb.IngestRequest(key="g", payload=b"xyz"), pb.IngestResponse),
        ("/burncpu", pb.BurnCPURequest(duration_ms=10, parallelism=1), pb.BurnCPUResponse),
    ]
    for path, request, response_type in cases:
        status, body, headers = call(server, "POST", path, request.SerializeToString())
        assert status == 200, (path, body)
        assert headers[ELAPSED_HEADER].isdigit()  # whole microseconds
        if path == "/burncpu":  # the handler's own time includes the 10 ms it burned
            assert int(headers[ELAPSED_HEADER]) >= 10_000
        assert headers["Content-Type"] == "application/x-protobuf"
        response_type.FromString(body)
    assert pb.ReadRAMResponse.FromString(call(server, "POST", "/readram", pb.ReadRAMRequest(key="a")
                                              .SerializeToString())[1]).size == 65536


def test_status_codes(server):
    assert call(server, "GET", "/readyz")[0] == 200
    assert call(server, "GET", "/ping")[0] == 405
    assert call(server, "PUT", "/writeram")[0] == 405
    assert call(server, "POST", "/readyz")[0] == 405
    assert call(server, "POST", "/nope")[0] == 404
    assert call(server, "POST", "/ping", b"\xff\xff\xff")[0] == 400
    status, body, headers = call(server, "POST", "/readdisk", pb.ReadDiskRequest(key="missing").SerializeToString())
    assert (status, body) == (404, b'file "missing" not found') and ELAPSED_HEADER not in headers
    assert call(server, "POST", "/writedisk", pb.WriteDiskRequest(key="../x", size=1).SerializeToString())[0] == 400


def test_unforeseen_failures_are_500(server):
    shutil.rmtree(server.glutton.data_dir)
    status, body, _ = call(server, "POST", "/writedisk", pb.WriteDiskRequest(key="f", size=10).SerializeToString())
    assert status == 500 and b"FileNotFoundError" in body
