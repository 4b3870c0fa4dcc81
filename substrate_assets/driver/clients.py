"""The two endpoints a session talks to: the control API (gRPC) and the router (HTTP with protobuf bodies)."""

from __future__ import annotations

from urllib.parse import urlsplit

import grpc
from geventhttpclient import HTTPClient

from substrate_assets.driver.failures import RouterError
from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import ateapi_pb2_grpc

CONTROL_DEADLINE_S = 60.0
ROUTER_TIMEOUT_S = 30.0
TEMPLATE = ("benchmark-workloads", "glutton")
TARGET_HEADER = "ate-target-actor"
READ_BLOCK = 256 * 1024


class ControlClient:
    """The lifecycle calls a session makes, each with upstream's 60 s deadline."""

    def __init__(self, endpoint: str, deadline_s: float = CONTROL_DEADLINE_S, tls: bool = False) -> None:
        # TLS trusts the system roots, or the file named by GRPC_DEFAULT_SSL_ROOTS_FILE_PATH (a cluster CA).
        self.channel = (grpc.secure_channel(endpoint, grpc.ssl_channel_credentials()) if tls
                        else grpc.insecure_channel(endpoint))
        self.stub = ateapi_pb2_grpc.ControlStub(self.channel)
        self.deadline_s = deadline_s

    @staticmethod
    def ref(atespace: str, name: str) -> pb.ObjectRef:
        return pb.ObjectRef(atespace=atespace, name=name)

    def get_template(self, atespace: str = TEMPLATE[0], name: str = TEMPLATE[1]) -> pb.ActorTemplate:
        return self.stub.GetActorTemplate(pb.GetActorTemplateRequest(actor_template=self.ref(atespace, name)),
                                          timeout=self.deadline_s)

    def create_atespace(self, name: str) -> pb.Atespace:
        request = pb.CreateAtespaceRequest(atespace=pb.Atespace(metadata=pb.ResourceMetadata(name=name)))
        return self.stub.CreateAtespace(request, timeout=self.deadline_s)

    def create_actor(self, atespace: str, name: str) -> pb.Actor:
        actor = pb.Actor(metadata=pb.ResourceMetadata(atespace=atespace, name=name),
                         actor_template=self.ref(*TEMPLATE))
        return self.stub.CreateActor(pb.CreateActorRequest(actor=actor), timeout=self.deadline_s)

    def resume(self, atespace: str, name: str) -> pb.ResumeActorResponse:
        return self.stub.ResumeActor(pb.ResumeActorRequest(actor=self.ref(atespace, name)), timeout=self.deadline_s)

    def suspend(self, atespace: str, name: str) -> pb.SuspendActorResponse:
        return self.stub.SuspendActor(pb.SuspendActorRequest(actor=self.ref(atespace, name)), timeout=self.deadline_s)

    def pause(self, atespace: str, name: str) -> pb.PauseActorResponse:
        return self.stub.PauseActor(pb.PauseActorRequest(actor=self.ref(atespace, name)), timeout=self.deadline_s)

    def delete(self, atespace: str, name: str, any_state: bool = True) -> pb.Actor:
        request = pb.DeleteActorRequest(actor=self.ref(atespace, name), any_state=any_state)
        return self.stub.DeleteActor(request, timeout=self.deadline_s)

    def get_actor(self, atespace: str, name: str) -> pb.Actor:
        return self.stub.GetActor(pb.GetActorRequest(actor=self.ref(atespace, name)), timeout=self.deadline_s)

    def close(self) -> None:
        self.channel.close()


class RouterClient:
    """POSTs protobuf bodies through the router to one actor (``ate-target-actor``), over kept-alive connections."""

    def __init__(self, url: str, timeout_s: float = ROUTER_TIMEOUT_S) -> None:
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"router URL {url!r} must be http://host[:port]")
        # Bodies run to tens of MiB (ingest, read_disk_data); 4 KiB reads would cost the driver ~10x more CPU.
        self.http = HTTPClient(parts.hostname, parts.port or 80, connection_timeout=timeout_s,
                               network_timeout=timeout_s, concurrency=2, block_size=READ_BLOCK)
        self.prefix = parts.path.rstrip("/")

    def post(self, actor: str, route: str, body: bytes) -> bytes:
        headers = {TARGET_HEADER: actor, "Content-Type": "application/x-protobuf"}
        response = self.http.request("POST", self.prefix + route, body=body, headers=headers)
        try:
            payload = response.read()
        finally:
            response.release()
        if response.status_code >= 400:
            raise RouterError(route, response.status_code, payload)
        return payload

    def close(self) -> None:
        self.http.close()
