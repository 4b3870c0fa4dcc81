"""The ``Control`` gRPC service of protos/ateapi.proto over the runtime's lifecycle."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeAlias, TypeVar

import grpc
from google.protobuf.message import Message

from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import ateapi_pb2_grpc
from substrate_assets.runtime.actors import LifecycleError
from substrate_assets.runtime.lifecycle import Lifecycle
from substrate_assets.workload.quantity import format_binary_si

T = TypeVar("T")
Context: TypeAlias = grpc.aio.ServicerContext
ELAPSED_TRAILER = "x-server-elapsed-us"


def _ignore_outcome(operation: asyncio.Future[Any]) -> None:
    """Nobody waits for an operation whose caller left: its error, if any, is not a loose end."""
    if not operation.cancelled():
        operation.exception()


# Generated when protos is first imported, so the checker knows nothing of it.
_Servicer: Any = ateapi_pb2_grpc.ControlServicer


class ControlService(_Servicer):  # type: ignore[misc]  # the generated servicer is Any to the checker
    """Each RPC takes its request (a CreateActorRequest for CreateActor, …) and returns the response protos/ateapi.proto
    names (an Actor, a ResumeActorResponse, …): :mod:`~substrate_assets.protos` generates their classes at import, so
    to the checker each is a protobuf Message."""

    def __init__(self, lifecycle: Lifecycle) -> None:
        self.lifecycle = lifecycle

    async def _call(self, context: Context, work: Callable[[], Awaitable[T]]) -> T:
        started = time.perf_counter()
        operation = asyncio.ensure_future(work())
        try:
            # A caller that leaves (a driver stopped mid-call) or a server that stops cancels the call, never the
            # operation: a checkpoint cut off half-way would leave an actor with neither host nor snapshot, a crash
            # nobody caused. The runtime's stop waits for operations in progress.
            result = await asyncio.shield(operation)
        except asyncio.CancelledError:
            operation.add_done_callback(_ignore_outcome)
            raise
        except LifecycleError as error:
            # Before abort, which ends the call: a refused call carries the server's time too.
            _set_elapsed(context, started)
            await context.abort(error.code, error.message)
            raise  # abort raises; this line is never reached
        _set_elapsed(context, started)
        return result

    async def CreateAtespace(self, request: Message, context: Context) -> Message:
        async def work() -> Message:
            return self.lifecycle.create_atespace(request.atespace.metadata.name).message()

        return await self._call(context, work)

    async def CreateActor(self, request: Message, context: Context) -> Message:
        async def work() -> Message:
            actor = request.actor
            template = (actor.actor_template.atespace, actor.actor_template.name)
            return self.lifecycle.create_actor(actor.metadata.atespace, actor.metadata.name, template).message()

        return await self._call(context, work)

    async def GetActor(self, request: Message, context: Context) -> Message:
        async def work() -> Message:
            return self.lifecycle.actor(request.actor.atespace, request.actor.name).message()

        return await self._call(context, work)

    async def ResumeActor(self, request: Message, context: Context) -> Message:
        async def work() -> Message:
            record = self.lifecycle.actor(request.actor.atespace, request.actor.name)
            resumed = await self.lifecycle.resume(record)
            return pb.ResumeActorResponse(actor=record.message(), resumed=resumed)

        return await self._call(context, work)

    async def SuspendActor(self, request: Message, context: Context) -> Message:
        async def work() -> Message:
            record = self.lifecycle.actor(request.actor.atespace, request.actor.name)
            return pb.SuspendActorResponse(actor=(await self.lifecycle.suspend(record)).message())

        return await self._call(context, work)

    async def PauseActor(self, request: Message, context: Context) -> Message:
        async def work() -> Message:
            record = self.lifecycle.actor(request.actor.atespace, request.actor.name)
            return pb.PauseActorResponse(actor=(await self.lifecycle.pause(record)).message())

        return await self._call(context, work)

    async def RevertActor(self, request: Message, context: Context) -> Message:
        async def work() -> Message:
            record = self.lifecycle.actor(request.actor.atespace, request.actor.name)
            return pb.RevertActorResponse(actor=(await self.lifecycle.revert(record)).message())

        return await self._call(context, work)

    async def DeleteActor(self, request: Message, context: Context) -> Message:
        async def work() -> Message:
            record = self.lifecycle.actor(request.actor.atespace, request.actor.name)
            return (await self.lifecycle.delete(record, request.any_state)).message()

        return await self._call(context, work)

    async def GetActorTemplate(self, request: Message, context: Context) -> Message:
        async def work() -> Message:
            ref = request.actor_template
            template = self.lifecycle.template(ref.atespace, ref.name)
            limits = []
            if template.memory_limit is not None:
                limits.append(pb.ResourceLimit(name="memory", quantity=format_binary_si(template.memory_limit)))
            return pb.ActorTemplate(metadata=pb.ResourceMetadata(atespace=template.atespace, name=template.name),
                                    resources=pb.ResourceRequirements(limits=limits))

        return await self._call(context, work)


def _set_elapsed(context: Context, started: float) -> None:
    context.set_trailing_metadata(((ELAPSED_TRAILER, str(int((time.perf_counter() - started) * 1e6))),))
