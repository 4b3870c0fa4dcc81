"""What the runtime knows of atespaces and actors: their records, states and names, as the control API shows them.

A record changes under its actor's lock (held by :mod:`lifecycle`), except that a host exiting unasked marks its
actor CRASHED at once; ``inflight`` and ``idle`` let a suspend wait for the requests the router is forwarding to
finish.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import grpc
from google.protobuf.message import Message
from google.protobuf.timestamp_pb2 import Timestamp

from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.runtime.config import TemplateConfig
from substrate_assets.runtime.hosts import HostProcess
from substrate_assets.workload.model import RFC1123_LABEL

NAME_PATTERN = RFC1123_LABEL
State = pb.ActorState
STATE_NAMES = {value: name for name, value in pb.ActorState.items()}


class LifecycleError(Exception):
    """An RPC-level failure: a gRPC status code and its message."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def check_name(kind: str, name: str) -> None:
    if not NAME_PATTERN.fullmatch(name or ""):
        raise LifecycleError(grpc.StatusCode.INVALID_ARGUMENT,
                             f"{kind} name {name!r} must be an RFC 1123 label ([a-z0-9-], at most 63 characters)")


def _timestamp(seconds: float) -> Timestamp:
    stamp = Timestamp()
    stamp.FromNanoseconds(int(seconds * 1e9))
    return stamp


@dataclass
class Atespace:
    name: str
    uid: str
    created: float

    def message(self) -> Message:
        """The atespace as the control API shows it (a ``pb.Atespace``)."""
        return pb.Atespace(metadata=pb.ResourceMetadata(name=self.name, uid=self.uid, version=1,
                                                        create_time=_timestamp(self.created),
                                                        update_time=_timestamp(self.created)))


@dataclass(eq=False)
class ActorRecord:
    atespace: str
    name: str
    template: TemplateConfig
    uid: str = field(default_factory=lambda: str(uuid.uuid4()))
    state: int = State.ACTOR_STATE_SUSPENDED
    version: int = 1
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    snapshot: Path | None = None
    generation: int = 0
    host: HostProcess | None = None
    port: int | None = None
    worker: int | None = None
    session: aiohttp.ClientSession | None = None
    inflight: int = 0
    deleted: bool = False
    crash_reason: str | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    idle: asyncio.Event = field(default_factory=asyncio.Event)
    flight: asyncio.Task[bool] | None = None

    def __post_init__(self) -> None:
        self.idle.set()

    @property
    def key(self) -> str:
        return f"{self.atespace}/{self.name}"

    @property
    def crashed(self) -> bool:
        return bool(self.state == State.ACTOR_STATE_CRASHED)

    @property
    def serving(self) -> bool:
        return self.state == State.ACTOR_STATE_RUNNING and self.port is not None and self.session is not None

    def set_state(self, state: int) -> None:
        self.state = state
        self.version += 1
        self.updated = time.time()

    def message(self) -> Message:
        """The actor as the control API shows it (a ``pb.Actor``)."""
        return pb.Actor(
            metadata=pb.ResourceMetadata(atespace=self.atespace, name=self.name, uid=self.uid, version=self.version,
                                         create_time=_timestamp(self.created), update_time=_timestamp(self.updated)),
            actor_template=pb.ObjectRef(atespace=self.template.atespace, name=self.template.name),
            status=pb.ActorStatus(state=self.state),
        )

    def begin_request(self) -> None:
        self.inflight += 1
        self.idle.clear()

    def end_request(self) -> None:
        self.inflight -= 1
        if self.inflight == 0:
            self.idle.set()
