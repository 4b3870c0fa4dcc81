"""What every family's virtual user holds and does alike: its clients, knobs, rows, time and chance; a control
call timed and booked as a row; the atespace booked once; the wait between iterations; a new actor's name; and,
for the families that keep one actor and start it over when its start fails, the start-and-retry loop.

Rows go to the injected ``record`` with a context of the actor (``session_id``), whether the row is the
family's wake, the reply's bytes (``response_length``) and, where the family counts them, the actor's ``lap``.
gRPC rows are the client's wall clock around the whole call.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from typing import Protocol

import grpc

from substrate_assets.driver.clients import ControlClient, RouterClient
from substrate_assets.driver.users.knobs import WorkerKnobs

log = logging.getLogger(__name__)

CRASHED_MESSAGE = "actor entered ACTOR_STATE_CRASHED"


class Record(Protocol):
    def __call__(self, request_type: str, name: str, started: float, elapsed_s: float,
                 error: BaseException | None, context: dict[str, object]) -> None: ...


class CrashedActor(Exception):
    """The failure booked on ``CrashCount`` rows."""


class StartFailed(Exception):
    """A user's actor could not be created or brought up; the user waits and starts over."""


def new_actor_name() -> str:
    """A new actor's name, ``sb-<uuid4>`` as upstream names them."""
    return f"sb-{uuid.uuid4()}"


class VirtualUser:
    """One virtual user of a family: what it talks to, the knobs it reads (at every use, so a caller may swap them
    between iterations, as upstream's live config), where its rows go, and its injected time and chance."""

    family = ""

    def __init__(self, control: ControlClient, router: RouterClient, knobs: WorkerKnobs, record: Record,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.control = control
        self.router = router
        self.knobs = knobs
        self.record = record
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.clock = clock

    def iterate(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        """Locust's on_stop: what the family tears down."""

    def book(self, request_type: str, name: str, started: float, elapsed_s: float, error: BaseException | None,
             actor: str | None = None, *, wake: bool = False, response_length: int = 0,
             lap: int | None = None) -> None:
        """One row; ``lap`` is left out for the families that do not count laps."""
        context: dict[str, object] = {"session_id": actor, "wake": wake, "response_length": response_length}
        if lap is not None:
            context["lap"] = lap
        self.record(request_type, name, started, elapsed_s, error, context)

    def timed_rpc(self, name: str, call: Callable[[], object], actor: str | None = None,
                  lap: int | None = None) -> grpc.RpcError | None:
        """One control call booked with its client wall clock; its error, or None."""
        started, clock = time.time(), time.perf_counter()
        error: grpc.RpcError | None = None
        try:
            call()
        except grpc.RpcError as failed:
            error = failed
        self.book("grpc", name, started, time.perf_counter() - clock, error, actor, lap=lap)
        return error

    def ensure_atespace(self, lap: int | None = None) -> grpc.RpcError | None:
        """``CreateAtespace``; AlreadyExists (another user made it) is booked and taken as success."""
        atespace = self.knobs.atespace
        return self.timed_rpc("CreateAtespace", lambda: self.control.ensure_atespace(atespace), lap=lap)

    def wait(self) -> None:
        """The wait between iterations, U[min_wait, max_wait]."""
        self.sleep(self.knobs.wait_seconds(self.rng))


class RestartingUser(VirtualUser):
    """A user that starts its actor on its first iteration, and again after a start that failed; every
    iteration, whichever way it went, ends with the wait (on a failing start it keeps the user from hammering
    the API)."""

    def started(self) -> bool:
        raise NotImplementedError

    def start(self) -> None:
        """Bring the actor up, or raise :class:`StartFailed`."""
        raise NotImplementedError

    def step(self) -> None:
        raise NotImplementedError

    def iterate(self) -> None:
        if not self.started():
            try:
                self.start()
            except StartFailed as error:
                log.warning("%s start failed; the next iteration tries again: %s", self.family, error)
                self.wait()
                return
        self.step()
        self.wait()
