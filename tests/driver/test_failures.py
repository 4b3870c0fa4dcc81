"""Failure classification and the conflict retry, by the reference's tables."""

from concurrent import futures

import grpc
import pytest

from substrate_assets.driver.failures import (
    Action,
    RouterError,
    classify,
    classify_http,
    classify_status,
    is_crashed,
    retry_on_conflict,
)
from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import ateapi_pb2_grpc

C = grpc.StatusCode


@pytest.mark.parametrize(("code", "details", "action"), [
    (C.NOT_FOUND, "", Action.REPLACE_NOW), (C.DATA_LOSS, "", Action.REPLACE_NOW),
    (C.FAILED_PRECONDITION, "", Action.REPLACE_NOW), (C.ABORTED, "actor x is crashed", Action.REPLACE_NOW),
    (C.RESOURCE_EXHAUSTED, "", Action.RETRY_LATER), (C.UNAVAILABLE, "", Action.RETRY_LATER),
    (C.DEADLINE_EXCEEDED, "", Action.RETRY_LATER), (C.CANCELLED, "", Action.RETRY_LATER),
    (C.INVALID_ARGUMENT, "", Action.RETRY_LATER), (C.PERMISSION_DENIED, "", Action.RETRY_LATER),
    (C.UNAUTHENTICATED, "", Action.RETRY_LATER), (C.UNIMPLEMENTED, "", Action.RETRY_LATER),
    (C.UNKNOWN, "", Action.REPLACE_IF_PERSISTENT), (C.INTERNAL, "", Action.REPLACE_IF_PERSISTENT),
    (C.ABORTED, "concurrent update conflict, please retry", Action.REPLACE_IF_PERSISTENT),
    (C.ABORTED, "actor is Crashed", Action.REPLACE_IF_PERSISTENT),  # case-sensitive, as upstream
])
def test_grpc_codes(code, details, action):
    assert classify_status(code, details) is action


@pytest.mark.parametrize(("status", "action"), [
    (503, Action.RETRY_LATER), (504, Action.RETRY_LATER), (429, Action.RETRY_LATER), (404, Action.REPLACE_NOW),
    (400, Action.REPLACE_IF_PERSISTENT), (500, Action.REPLACE_IF_PERSISTENT), (502, Action.REPLACE_IF_PERSISTENT),
])
def test_router_statuses(status, action):
    assert classify_http(status) is action
    assert classify(RouterError("/ping", status, b"body")) is action


def test_transport_errors_may_persist():
    assert classify(TimeoutError("read timed out")) is Action.REPLACE_IF_PERSISTENT
    assert classify(ConnectionResetError()) is Action.REPLACE_IF_PERSISTENT


class Conflicting(ateapi_pb2_grpc.ControlServicer):
    """A real gRPC server whose ResumeActor answers a conflict a set number of times."""

    def __init__(self, conflicts: int, final_code: grpc.StatusCode | None = None) -> None:
        self.conflicts = conflicts
        self.final_code = final_code
        self.calls = 0

    def ResumeActor(self, request, context):
        self.calls += 1
        if self.calls <= self.conflicts:
            context.abort(C.ABORTED, "concurrent update conflict, please retry")
        if self.final_code is not None:
            context.abort(self.final_code, "actor benchmark/a is crashed (killed by SIGKILL)")
        return pb.ResumeActorResponse(resumed=True)


@pytest.fixture
def serve():
    servers = []

    def start(servicer):
        server = grpc.server(futures.ThreadPoolExecutor(2))
        ateapi_pb2_grpc.add_ControlServicer_to_server(servicer, server)
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        servers.append(server)
        return ateapi_pb2_grpc.ControlStub(grpc.insecure_channel(f"127.0.0.1:{port}"))

    yield start
    for server in servers:
        server.stop(None)


def test_conflicts_are_retried_up_to_five_attempts(serve):
    sleeps = []
    servicer = Conflicting(conflicts=4)
    stub = serve(servicer)
    assert retry_on_conflict(lambda: stub.ResumeActor(pb.ResumeActorRequest()), sleeps.append).resumed
    assert servicer.calls == 5
    # First retry immediately, then 50 ms + [0, 5 ms) apart.
    assert len(sleeps) == 3 and all(0.050 <= s < 0.055 for s in sleeps)

    servicer = Conflicting(conflicts=5)
    stub = serve(servicer)
    with pytest.raises(grpc.RpcError) as caught:
        retry_on_conflict(lambda: stub.ResumeActor(pb.ResumeActorRequest()), lambda s: None)
    assert servicer.calls == 5 and caught.value.code() == C.ABORTED


def test_other_errors_are_not_retried(serve):
    servicer = Conflicting(conflicts=0, final_code=C.ABORTED)
    stub = serve(servicer)
    with pytest.raises(grpc.RpcError) as caught:
        retry_on_conflict(lambda: stub.ResumeActor(pb.ResumeActorRequest()), lambda s: None)
    assert servicer.calls == 1
    assert is_crashed(caught.value) and classify(caught.value) is Action.REPLACE_NOW
