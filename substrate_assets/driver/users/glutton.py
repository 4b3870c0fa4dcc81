"""One virtual user of upstream's ``glutton`` family, and the glutton actor that ``burst`` shares with it.

A VU owns ``actors_per_user`` actors ``sb-<uuid4>`` of the glutton template and serves them round robin, one
per iteration. Its first iteration books ``CreateAtespace`` (once per VU; AlreadyExists counts as success) and
one ``CreateActor`` per actor; a create that fails keeps the actors made so far, and with none the next
iteration starts over. One iteration, in upstream's order (lifecycle.go, the ``ResumeActorFirstResume``
version):

1. a crashed actor whose replacement could not be created is replaced (see below), and that is all;
2. an actor whose last hibernate failed is only hibernated again;
3. ``ResumeActorFirstResume`` (its first resume) or ``ResumeActor``, the conflict retry inside the timed call.
   A crashed actor books ``actor,CrashCount`` (latency 0, "actor entered ACTOR_STATE_CRASHED");
4. ``GluttonFillRAM`` once per actor: one WriteRAM TRUNCATE of key ``memload``, ``mem_target`` sent verbatim
   (glutton parses it), retried on later iterations until it succeeds; nothing when ``mem_target`` is empty;
5. ``GluttonUseCPU`` once per actor when ``cpu_cores`` > 0 (``/usecpu``: the load survives suspends);
6. ``GluttonReadRAM`` (``mem_read``; ``all`` walks the whole array) and 7. ``GluttonChurnRAM`` (WriteRAM
   OVERWRITE_ROTATE of ``mem_churn``), each cycle once the fill has succeeded;
8. the live window, U[min_live, max_live]: one ``GluttonPing`` (a uuid, its echo checked; the wake row), then up
   to ``max_pings_per_wake`` − 1 more after gaps of U[200 ms, 1 s) while the next gap ends inside the window,
   whose rest is slept out;
9. ``SuspendActor``, or ``PauseActor`` in pause mode.

Every iteration ends with a wait of U[min_wait, max_wait], whichever way it ended. Only resume and hibernate
errors count against an actor (upstream's classification: replace now, retry later, or replace after three in
a row; a successful resume or hibernate clears the count); a failed hibernate leaves the actor to be hibernated
again next time. Replacing an actor books a ``DeleteActor`` with ``any_state`` (once) and a ``CreateActor`` of a
new actor in the same slot. ``stop`` (Locust's on_stop) hibernates the actors still running, then deletes each.
gRPC rows are the client wall clock, all conflict retries included; HTTP rows the client latency up to the whole
reply; ``GluttonPing`` and ``GluttonReadRAM`` book the reply's body bytes and the bytes walked. A row's ``lap`` is
its actor's cycle (1 from its first resume on; 0 for its create); the first ping of each cycle is the wake. As
upstream's, a resume that finds the actor crashed replaces it at once (a crash is "replace now"), and a crash
the VU caused itself (a fill above the memory limit) is met by the hibernate, which then replaces the actor with
no ``CrashCount``.

Nothing here knows Locust: rows go to the injected ``record``; ``sleep``, the random source and the live
window's ``clock`` are injected.
"""

from __future__ import annotations

import logging
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from substrate_assets.driver.clients import ControlClient, RouterClient
from substrate_assets.driver.failures import (
    MAX_CONSECUTIVE_FAILURES,
    Action,
    RouterError,
    classify,
    is_crashed,
    retry_on_conflict,
)
from substrate_assets.driver.users.base import (
    CRASHED_MESSAGE,
    CrashedActor,
    Record,
    RestartingUser,
    StartFailed,
    VirtualUser,
    new_actor_name,
)
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.protos import glutton_pb2 as g

log = logging.getLogger(__name__)

MEMLOAD_KEY = "memload"
MIN_PING_GAP_S = 0.2
MAX_PING_GAP_S = 1.0


class GluttonCallError(Exception):
    """A glutton request that failed on its way, or whose reply was not what was sent for."""


def ping_gap(rng: random.Random) -> float:
    """The gap before another ping of the live window, U[200 ms, 1 s)."""
    return MIN_PING_GAP_S + rng.random() * (MAX_PING_GAP_S - MIN_PING_GAP_S)


@dataclass(eq=False)
class GluttonActor:
    """One glutton actor's lifetime: its lifecycle calls and its workload steps, each booked as its own row.

    Used by one thread at a time (its user's iteration, or one worker of a burst phase)."""

    user: VirtualUser
    name: str
    first_resume: bool = True
    running: bool = False
    ram_filled: bool = False
    cpu_loaded: bool = False
    crashed: bool = False
    hibernate_pending: bool = False
    deleted: bool = False
    consecutive_failures: int = 0
    lap: int = 0

    @property
    def target(self) -> str:
        return f"{self.user.knobs.atespace}/{self.name}"

    # -- lifecycle ---------------------------------------------------------

    def create(self) -> grpc.RpcError | None:
        atespace = self.user.knobs.atespace
        return self._rpc("CreateActor", lambda: self.user.control.create_actor(atespace, self.name))

    def resume(self) -> grpc.RpcError | None:
        """Resume, the conflict retry inside the timed call; a crash marks the actor and books ``CrashCount``."""
        name = "ResumeActorFirstResume" if self.first_resume else "ResumeActor"
        control, atespace, sleep = self.user.control, self.user.knobs.atespace, self.user.sleep
        error = self._rpc(name, lambda: retry_on_conflict(lambda: control.resume(atespace, self.name), sleep))
        if error is not None:
            if is_crashed(error):
                self.crashed = True
                self.user.book("actor", "CrashCount", time.time(), 0.0, CrashedActor(CRASHED_MESSAGE), self.name,
                                 lap=self.lap)
                log.warning("glutton actor %s crashed: %s", self.name, error)
            return error
        self.first_resume = False
        self.running = True
        self.consecutive_failures = 0
        return None

    def hibernate(self) -> grpc.RpcError | None:
        """``PauseActor`` in pause mode, else ``SuspendActor``; a failure leaves the hibernate pending."""
        control, atespace = self.user.control, self.user.knobs.atespace
        if self.user.knobs.pause:
            error = self._rpc("PauseActor", lambda: control.pause(atespace, self.name))
        else:
            error = self._rpc("SuspendActor", lambda: control.suspend(atespace, self.name))
        # Upstream's flag: whatever the outcome, this VU does not count the actor as running any more.
        self.running = False
        self.hibernate_pending = error is not None
        if error is None:
            self.consecutive_failures = 0
        return error

    def delete(self) -> grpc.RpcError | None:
        control, atespace = self.user.control, self.user.knobs.atespace
        return self._rpc("DeleteActor", lambda: control.delete(atespace, self.name, any_state=True))

    def note_failure(self, error: BaseException) -> bool:
        """Count a failed resume or hibernate; whether the actor should be replaced."""
        action = classify(error)
        if action is Action.REPLACE_NOW:
            return True
        if action is Action.RETRY_LATER:
            return False
        self.consecutive_failures += 1
        if self.consecutive_failures < MAX_CONSECUTIVE_FAILURES:
            return False
        log.warning("glutton actor %s failed %d times in a row; replacing it: %s", self.name,
                    self.consecutive_failures, error)
        return True

    # -- workload ----------------------------------------------------------

    def ensure_ram_filled(self) -> None:
        """One WriteRAM TRUNCATE of ``mem_target``, once per actor; a failure is tried again next time."""
        if self.ram_filled:
            return
        target = self.user.knobs.mem_target
        if not target:
            self.ram_filled = True
            return
        if self._step("GluttonFillRAM", lambda: self._write_ram(target, g.WRITE_MODE_TRUNCATE)):
            self.ram_filled = True

    def ensure_cpu_load(self) -> None:
        """Start ``cpu_cores`` spinning threads at ``cpu_duty_cycle``, once per actor (they survive suspends)."""
        if self.cpu_loaded:
            return
        knobs = self.user.knobs
        if knobs.cpu_cores == 0:
            self.cpu_loaded = True
            return
        request = g.UseCPURequest(num_cores=knobs.cpu_cores, duty_cycle=knobs.cpu_duty_cycle)
        if self._step("GluttonUseCPU", lambda: self._call("/usecpu", request, g.UseCPUResponse)):
            self.cpu_loaded = True

    def read_ram(self) -> None:
        """Walk ``mem_read`` of the filled array: right after a resume, the cost of paging the snapshot back."""
        knobs = self.user.knobs
        if not knobs.mem_read or not self.ram_filled:
            return
        request = g.ReadRAMRequest(key=MEMLOAD_KEY, size=knobs.read_size)
        self._step("GluttonReadRAM", lambda: self.request("/readram", request, g.ReadRAMResponse).size)

    def churn_ram(self) -> None:
        """Rewrite ``mem_churn`` bytes from glutton's rotating cursor, so every snapshot carries dirty pages."""
        churn = self.user.knobs.mem_churn
        if not churn or not self.ram_filled:
            return
        self._step("GluttonChurnRAM", lambda: self._write_ram(churn, g.WRITE_MODE_OVERWRITE_ROTATE))

    def ping(self, wake: bool = False) -> bool:
        """One ``GluttonPing`` with a uuid, its echo checked; the row's length is the reply's body bytes."""
        message = str(uuid.uuid4())
        body = g.PingRequest(message=message).SerializeToString()
        started, clock = time.time(), time.perf_counter()
        try:
            reply = self.user.router.post(self.target, "/ping", body)
            echoed = g.PingResponse.FromString(reply).message
            if echoed != message:
                raise GluttonCallError(f"ping echo mismatch: sent={message!r} recv={echoed!r}")
        except Exception as error:  # router statuses, transport errors, bad replies: each a failed ping
            self.user.book("http", "GluttonPing", started, time.perf_counter() - clock, error, self.name, wake=wake,
                             lap=self.lap)
            return False
        self.user.book("http", "GluttonPing", started, time.perf_counter() - clock, None, self.name, wake=wake,
                         response_length=len(reply), lap=self.lap)
        return True

    def ping_window(self, end: float, max_pings: int, wake: bool, going: Callable[[], bool] = lambda: True) -> None:
        """Ping now, then up to ``max_pings`` − 1 more, each after a gap of U[200 ms, 1 s), while the next gap ends
        by ``end`` (on the user's clock) and ``going()`` holds. Only the first ping may be the wake."""
        self.ping(wake=wake)
        for _ in range(1, max(1, max_pings)):
            gap = ping_gap(self.user.rng)
            if self.user.clock() + gap > end:
                return
            self.user.sleep(gap)
            if not going():
                return
            self.ping()

    # -- plumbing ----------------------------------------------------------

    def _rpc(self, name: str, call: Callable[[], object]) -> grpc.RpcError | None:
        return self.user.timed_rpc(name, call, self.name, lap=self.lap)

    def _step(self, name: str, call: Callable[[], int]) -> bool:
        """Book one workload request; ``call`` returns the row's response length."""
        started, clock = time.time(), time.perf_counter()
        try:
            length = call()
        except Exception as error:  # any failure of a workload step is its row, never the actor's count
            self.user.book("http", name, started, time.perf_counter() - clock, error, self.name, lap=self.lap)
            return False
        self.user.book("http", name, started, time.perf_counter() - clock, None, self.name,
                         response_length=length, lap=self.lap)
        return True

    def _write_ram(self, size: str, mode: int) -> int:
        request = g.WriteRAMRequest(key=MEMLOAD_KEY, size=size, write_mode=mode)
        try:
            return self._call("/writeram", request, g.WriteRAMResponse)
        except Exception as error:  # named as upstream names it, whatever failed
            raise GluttonCallError(f"WriteRAM {MEMLOAD_KEY} ({size}): {error}") from error

    def _call(self, route: str, request: Any, response_type: Any) -> int:
        """A request whose row books no length."""
        self.request(route, request, response_type)
        return 0

    def request(self, route: str, request: Any, response_type: Any) -> Any:
        """POST one glutton request to the actor through the router; its reply, decoded."""
        try:
            reply = self.user.router.post(self.target, route, request.SerializeToString())
            return response_type.FromString(reply)
        except RouterError:
            raise
        except DecodeError as error:
            raise GluttonCallError(f"{route}: reply is not a {response_type.__name__}: {error}") from error
        except Exception as error:  # transport errors carry no route of their own
            raise GluttonCallError(f"POST {route}: {error}") from error


class GluttonVU(RestartingUser):
    """One virtual user: ``actors_per_user`` glutton actors, one resume/load/ping/hibernate cycle per iteration."""

    family = "glutton"

    def __init__(self, control: ControlClient, router: RouterClient, knobs: WorkerKnobs, record: Record,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(control, router, knobs, record, sleep, rng, clock)
        self.actors: list[GluttonActor] | None = None
        self.next_index = 0

    # -- the loop ---------------------------------------------------------

    def started(self) -> bool:
        return self.actors is not None

    def step(self) -> None:
        assert self.actors is not None
        slot = self.next_index
        self.next_index = (self.next_index + 1) % len(self.actors)
        actor = self.actors[slot]
        if actor.crashed:
            self.replace(slot)
            return
        if actor.hibernate_pending:
            self.hibernate(slot)
            return
        actor.lap += 1
        error = actor.resume()
        if error is not None:
            if actor.note_failure(error):
                self.replace(slot)
            return
        actor.ensure_ram_filled()
        actor.ensure_cpu_load()
        actor.read_ram()
        actor.churn_ram()
        end = self.clock() + self.knobs.live_seconds(self.rng)
        actor.ping_window(end, self.knobs.pings_per_wake, wake=True)
        remaining = end - self.clock()
        if remaining > 0:
            self.sleep(remaining)
        self.hibernate(slot)

    def stop(self) -> None:
        """Locust's on_stop: hibernate the actors still running, then delete every one (both booked)."""
        for actor in self.actors or []:
            if actor.running:
                actor.hibernate()
            if not actor.deleted:
                actor.delete()
                actor.deleted = True
        self.actors = None

    # -- starting and replacing --------------------------------------------

    def start(self) -> None:
        """The VU's actors, or :class:`StartFailed` (and a retry next iteration) when the atespace or the first
        actor fails."""
        if self.ensure_atespace(lap=0) is not None:
            raise StartFailed(f"CreateAtespace {self.knobs.atespace} failed")
        actors: list[GluttonActor] = []
        for _ in range(self.knobs.actors_per_user):
            actor = self.new_actor()
            error = actor.create()
            if error is not None:
                log.warning("glutton: CreateActor failed after %d of %d actors: %s", len(actors),
                            self.knobs.actors_per_user, error)
                break
            actors.append(actor)
        if not actors:
            raise StartFailed("CreateActor of its first actor failed")
        self.actors = actors

    def new_actor(self) -> GluttonActor:
        return GluttonActor(self, new_actor_name())

    def hibernate(self, slot: int) -> None:
        assert self.actors is not None
        error = self.actors[slot].hibernate()
        if error is not None and self.actors[slot].note_failure(error):
            self.replace(slot)

    def replace(self, slot: int) -> None:
        """Delete the slot's actor (once, whatever its state) and create a new one in its place; if that create
        fails the old actor stays in the slot, and the next failure on it tries again."""
        assert self.actors is not None
        broken = self.actors[slot]
        if not broken.deleted:
            broken.delete()
            broken.deleted = True
        replacement = self.new_actor()
        error = replacement.create()
        if error is not None:
            log.warning("glutton: replacement of %s could not be created: %s", broken.name, error)
            return
        self.actors[slot] = replacement
