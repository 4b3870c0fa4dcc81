"""A real embedded runtime per test module, and thin clients for its control API and router."""

import itertools
from http.client import HTTPConnection

import grpc
import pytest

from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import ateapi_pb2_grpc
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig

ATESPACE = "benchmark"
TEMPLATE = pb.ObjectRef(atespace="benchmark-workloads", name="glutton")
_names = itertools.count(1)


class Control:
    def __init__(self, runtime: EmbeddedRuntime) -> None:
        self.channel = grpc.insecure_channel(runtime.control_address)
        self.stub = ateapi_pb2_grpc.ControlStub(self.channel)
        try:
            self.stub.CreateAtespace(pb.CreateAtespaceRequest(atespace=pb.Atespace(
                metadata=pb.ResourceMetadata(name=ATESPACE))))
        except grpc.RpcError as error:
            assert error.code() == grpc.StatusCode.ALREADY_EXISTS

    def new_actor(self, prefix: str = "actor") -> str:
        name = f"{prefix}-{next(_names)}"
        self.stub.CreateActor(pb.CreateActorRequest(actor=pb.Actor(
            metadata=pb.ResourceMetadata(atespace=ATESPACE, name=name), actor_template=TEMPLATE)))
        return name

    @staticmethod
    def ref(name: str) -> pb.ObjectRef:
        return pb.ObjectRef(atespace=ATESPACE, name=name)

    def state(self, name: str) -> str:
        return pb.ActorState.Name(self.stub.GetActor(pb.GetActorRequest(actor=self.ref(name))).status.state)

    def resume(self, name: str) -> pb.ResumeActorResponse:
        return self.stub.ResumeActor(pb.ResumeActorRequest(actor=self.ref(name)))

    def suspend(self, name: str) -> pb.SuspendActorResponse:
        return self.stub.SuspendActor(pb.SuspendActorRequest(actor=self.ref(name)))

    def pause(self, name: str) -> pb.PauseActorResponse:
        return self.stub.PauseActor(pb.PauseActorRequest(actor=self.ref(name)))

    def delete(self, name: str, any_state: bool = False) -> pb.Actor:
        return self.stub.DeleteActor(pb.DeleteActorRequest(actor=self.ref(name), any_state=any_state))


def rpc_error(call) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as caught:
        call()
    return caught.value


class Router:
    def __init__(self, runtime: EmbeddedRuntime) -> None:
        self.port = runtime.router_port

    def post(self, actor: str | None, route: str, message=None, headers=None, timeout: float = 60):
        connection = HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        sent = {"Content-Type": "application/x-protobuf", **(headers or {})}
        if actor is not None:
            sent["ate-target-actor"] = f"{ATESPACE}/{actor}"
        connection.request("POST", route, body=message.SerializeToString() if message else b"", headers=sent)
        response = connection.getresponse()
        body = response.read()
        connection.close()
        return response.status, body


@pytest.fixture(scope="module")
def runtime():
    with EmbeddedRuntime(RuntimeConfig(workers=3, actors_per_worker=2, warm_hosts=1)) as started:
        yield started


@pytest.fixture(scope="module")
def control(runtime):
    return Control(runtime)


@pytest.fixture(scope="module")
def router(runtime):
    return Router(runtime)
