"""The two endpoints a virtual user talks to: the control API (gRPC) and the router (HTTP: protobuf bodies for
glutton, JSON for sweperf's trajectory service)."""

from __future__ import annotations

import http.client
import json
import select
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import grpc

from substrate_assets.driver.failures import RouterError, rpc_code
from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import ateapi_pb2_grpc

CONTROL_DEADLINE_S = 60.0
ROUTER_TIMEOUT_S = 30.0
TEMPLATE = ("benchmark-workloads", "glutton")
TARGET_HEADER = "ate-target-actor"
ELAPSED_TRAILER = "x-server-elapsed-us"


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

    def ensure_atespace(self, name: str) -> None:
        """CreateAtespace, where AlreadyExists (another user made it first) is success, as every driver takes it."""
        try:
            self.create_atespace(name)
        except grpc.RpcError as error:
            if rpc_code(error) != grpc.StatusCode.ALREADY_EXISTS:
                raise

    def create_actor(self, atespace: str, name: str, template: tuple[str, str] = TEMPLATE) -> pb.Actor:
        return self.stub.CreateActor(self.create_request(atespace, name, template), timeout=self.deadline_s)

    @classmethod
    def create_request(cls, atespace: str, name: str, template: tuple[str, str] = TEMPLATE) -> pb.CreateActorRequest:
        return pb.CreateActorRequest(actor=pb.Actor(metadata=pb.ResourceMetadata(atespace=atespace, name=name),
                                                    actor_template=cls.ref(*template)))

    def revert(self, atespace: str, name: str) -> pb.RevertActorResponse:
        return self.stub.RevertActor(pb.RevertActorRequest(actor=self.ref(atespace, name)), timeout=self.deadline_s)

    def timed(self, rpc: str, request: Any) -> tuple[Any, float | None]:
        """Call ``rpc`` (``"ResumeActor"``, …) and return its response with the server's own elapsed time in
        seconds, from the ``x-server-elapsed-us`` trailer (None when the server sent none). A failed call raises
        its ``grpc.RpcError``; :func:`server_elapsed_s` reads the trailer off it too."""
        method: Callable[..., Any] = getattr(self.stub, rpc)
        response, call = method.with_call(request, timeout=self.deadline_s)
        return response, server_elapsed_s(call)

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
    """Requests through the router to one actor (``ate-target-actor``), over kept-alive connections.

    The standard library's ``http.client`` (cooperative once Locust's gevent has patched ``socket``): it sends a
    large body as it is and reads a reply with a Content-Length into one buffer. geventhttpclient, used before,
    copied each body behind the request head and each reply through a growing bytearray and again out of it:
    reading 16 MiB cost the driver 49 ms of CPU, against 9 ms here.
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
        # Looked up on the module at call time: gevent's patched classes under Locust, the OS's in plain tests.
        self._slots = threading.BoundedSemaphore(concurrency)
        self._idle: list[http.client.HTTPConnection] = []
        self._closed = False

    def post(self, actor: str, route: str, body: bytes) -> bytes:
        """POST a protobuf body; the reply's body, or :class:`RouterError` for a status of 400 or more."""
        return self.request("POST", actor, route, body, "application/x-protobuf")

    def request(self, method: str, actor: str, route: str, body: bytes = b"",
                content_type: str | None = None) -> bytes:
        headers = {TARGET_HEADER: actor}
        if content_type is not None:
            headers["Content-Type"] = content_type
        with self._slots:
            connection = self._connection()
            try:
                connection.request(method, self.prefix + route, body=body or None, headers=headers)
                response = connection.getresponse()
                payload = response.read()
            except BaseException:
                connection.close()  # a request cut short leaves the connection in an unknown state
                raise
            if response.will_close or self._closed:
                connection.close()
            else:
                self._idle.append(connection)
        if response.status >= 400:
            raise RouterError(route, response.status, payload, method)
        return payload

    def _connection(self) -> http.client.HTTPConnection:
        """The most recently used idle connection that the router has not closed meanwhile, else a new one."""
        if self._closed:
            raise RuntimeError("router client closed")
        while self._idle:
            connection = self._idle.pop()
            sock = connection.sock
            try:
                # An idle keep-alive connection has nothing to read; readable means closed (or garbage).
                if sock is not None and not select.select([sock], [], [], 0.0)[0]:
                    return connection
            except (OSError, ValueError):
                pass
            connection.close()
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)

    def post_json(self, actor: str, route: str, document: dict[str, Any]) -> tuple[dict[str, Any], int]:
        """POST a JSON document; the JSON reply and its length in bytes."""
        payload = self.request("POST", actor, route, json.dumps(document).encode(), "application/json")
        return _json_object(route, payload), len(payload)

    def get_json(self, actor: str, route: str) -> dict[str, Any]:
        """GET ``route`` (with its query string); the JSON reply."""
        return _json_object(route, self.request("GET", actor, route))

    def close(self) -> None:
        self._closed = True
        while self._idle:
            self._idle.pop().close()


def _json_object(route: str, payload: bytes) -> dict[str, Any]:
    try:
        document = json.loads(payload)
    except ValueError:
        raise ValueError(f"{route}: reply is not JSON: {payload[:200]!r}") from None
    if not isinstance(document, dict):
        raise ValueError(f"{route}: reply is not a JSON object: {payload[:200]!r}")
    return document
