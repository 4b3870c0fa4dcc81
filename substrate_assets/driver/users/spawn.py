"""One batch of upstream's ``spawn`` family: how long a cohort of new actors takes to answer its first ping.

One batch per process (run it with one user): the first ``iterate`` runs it, later ones only sleep. The batch
books ``CreateAtespace`` (AlreadyExists counts as success; any other failure books a failure
``summary,TimeToAllReady`` of latency 0 and ends the batch), then starts ``total_actors`` actors
``spawn-<run8>-<n>`` (n = 1..total) of the glutton template, with ``workers`` workers pulling the next index.
Each actor, within its own ``actor_deadline``:

1. ``CreateActor``, retried with a backoff from 50 ms doubling to 1 s plus up to 5 ms of jitter until a terminal
   code (NotFound, DataLoss, AlreadyExists, FailedPrecondition, InvalidArgument, PermissionDenied,
   Unauthenticated, Unimplemented, Aborted mentioning "crashed" in any case); AlreadyExists on a retry means an
   earlier attempt landed, so it counts as created. Every attempt is its own ``grpc`` row.
2. ``ResumeActor``, retried the same way, with the conflict retry inside each timed attempt; a crashed actor
   books ``actor,CrashCount`` and gives up.
3. ``GluttonPing`` (a uuid message) every 100 ms until one answers; every attempt is an ``http`` row whose
   response length is the reply's body bytes.

A ready actor books ``summary,TimeToReady_<k>pct`` (time since the batch began) for each decile k whose
threshold ceil(k·total/100) is its ready rank, then ``summary,ActorTimeToReady`` (its own create + resume + ping
time); any failure books a failure ``ActorTimeToReady`` with the time spent so far. The batch ends with
``summary,TimeToAllReady``: the latest ready time, or a failure "no actors became ready". gRPC rows are the client
wall clock, as upstream books them (spawn.go @ 25c82b95).

Once ``stopped()`` is true (or ``stop`` has begun) no row is booked and the workers take no new actor. ``stop``
(Locust's on_stop) waits up to 2 s for the workers, then deletes every actor the batch named with
``DeleteActor(any_state)``, 32 at a time; upstream cancels its run before it deletes, so these calls are not
booked either. The deadline and every wait use the injected ``clock`` and ``sleep``; a call already in flight
when the deadline passes runs to its own timeout, where upstream's would be cancelled.

Nothing here knows Locust: the workers are threads (greenlets once gevent has patched ``threading``), rows go to
the injected ``record``.
"""

from __future__ import annotations

import logging
import queue
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from functools import partial

import grpc

from substrate_assets.driver.clients import ControlClient, RouterClient
from substrate_assets.driver.failures import retry_on_conflict, rpc_details
from substrate_assets.driver.users.base import CRASHED_MESSAGE, CrashedActor, Record
from substrate_assets.driver.users.cohort import (
    DELETE_CONCURRENCY,
    Cancelled,
    CohortUser,
    backoff_delays,
    create_landed,
    jitter,
    spawn_crashed,
    spawn_terminal,
)
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.protos import glutton_pb2 as g

log = logging.getLogger(__name__)

PING_INTERVAL_S = 0.1
DECILES = tuple(range(10, 101, 10))
NO_ACTOR_READY = "no actors became ready"


def fired_deciles(rank: int, total: int) -> list[int]:
    """The deciles (10..100) whose readiness threshold ceil(k·total/100) is ``rank``."""
    if total <= 0 or rank <= 0:
        return []
    return [k for k in DECILES if (k * total + 99) // 100 == rank]


class SpawnVU(CohortUser):
    """The one user of a spawn run: a single batch of ``total_actors`` new actors, timed until each is ready."""

    family = "spawn"

    def __init__(self, control: ControlClient, router: RouterClient, knobs: WorkerKnobs, record: Record,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
                 clock: Callable[[], float] = time.monotonic, stopped: Callable[[], bool] = lambda: False) -> None:
        super().__init__(control, router, knobs, record, sleep, rng, clock, stopped)
        self.actor_names: list[str] = []
        self._lock = threading.Lock()
        self._next_index = 0
        self._ready_count = 0
        self._last_ready_s = 0.0
        self._workers: list[threading.Thread] = []

    def run_cohort(self) -> None:
        self.run_batch()

    def threads(self) -> list[threading.Thread]:
        return self._workers

    def teardown(self) -> None:
        """Every actor the batch named deleted, unbooked (the stop came first)."""
        self._delete_all()

    # -- the batch --------------------------------------------------------

    def run_batch(self) -> None:
        error = self.ensure_atespace()
        if error is not None:
            log.error("spawn: CreateAtespace %s failed: %s", self.knobs.atespace, rpc_details(error))
            self.book("summary", "TimeToAllReady", time.time(), 0.0, error)
            return

        batch_epoch, batch_start = time.time(), self.clock()
        self.cohort_id = uuid.uuid4().hex[:8]
        self._workers = [threading.Thread(target=self._work, args=(batch_epoch, batch_start),
                                          name=f"spawn-{self.cohort_id}-worker-{n}", daemon=True)
                         for n in range(self.knobs.spawn_workers)]
        for worker in self._workers:
            worker.start()
        for worker in self._workers:
            worker.join()
        if self.stopping:
            return
        if self._ready_count > 0:
            self.book("summary", "TimeToAllReady", batch_epoch, self._last_ready_s, None)
        else:
            self.book("summary", "TimeToAllReady", batch_epoch, self.clock() - batch_start,
                       Cancelled(NO_ACTOR_READY))

    def _work(self, batch_epoch: float, batch_start: float) -> None:
        while True:
            with self._lock:
                self._next_index += 1
                index = self._next_index
            if index > self.knobs.total_actors or self.stopping:
                return
            actor = f"spawn-{self.cohort_id}-{index}"
            try:
                self._run_actor(actor, batch_epoch, batch_start)
            except Exception:  # a worker must outlive one actor's surprise, as each actor is booked on its own
                log.exception("spawn: actor %s failed unexpectedly", actor)

    def _run_actor(self, actor: str, batch_epoch: float, batch_start: float) -> None:
        with self._lock:
            self.actor_names.append(actor)
        actor_epoch, actor_start = time.time(), self.clock()
        until = actor_start + self.knobs.actor_deadline
        try:
            self._create(actor, until)
            self._resume(actor, until)
            self._ping_until_ready(actor, until)
        except (grpc.RpcError, Cancelled) as error:
            self.book("summary", "ActorTimeToReady", actor_epoch, self.clock() - actor_start, error, actor)
            return
        now = self.clock()
        ready_s, actor_s = now - batch_start, now - actor_start
        with self._lock:
            # The latest, not the last to finish: workers finish out of order.
            self._last_ready_s = max(self._last_ready_s, ready_s)
            self._ready_count += 1
            rank = self._ready_count
        for k in fired_deciles(rank, self.knobs.total_actors):
            self.book("summary", f"TimeToReady_{k}pct", batch_epoch, ready_s, None)
        self.book("summary", "ActorTimeToReady", actor_epoch, actor_s, None, actor)

    # -- one actor --------------------------------------------------------

    def _create(self, actor: str, until: float) -> None:
        atespace = self.knobs.atespace
        for attempt, delay in enumerate(self._backoffs(actor, until)):
            error = self.timed_rpc("CreateActor", lambda: self.control.create_actor(atespace, actor), actor)
            if create_landed(attempt, error):
                return
            assert error is not None
            if spawn_terminal(error):
                raise error
            self._pause(delay + jitter(self.rng), until)

    def _resume(self, actor: str, until: float) -> None:
        atespace = self.knobs.atespace
        for delay in self._backoffs(actor, until):
            error = self.timed_rpc("ResumeActor", lambda: retry_on_conflict(
                lambda: self.control.resume(atespace, actor), self.sleep), actor)
            if error is None:
                return
            if spawn_crashed(error):
                self.book("actor", "CrashCount", time.time(), 0.0, CrashedActor(CRASHED_MESSAGE), actor)
                raise error
            if spawn_terminal(error):
                raise error
            self._pause(delay + jitter(self.rng), until)

    def _ping_until_ready(self, actor: str, until: float) -> None:
        body = g.PingRequest(message=str(uuid.uuid4())).SerializeToString()
        target = f"{self.knobs.atespace}/{actor}"
        while True:
            self._check(actor, until)
            started, clock = time.time(), time.perf_counter()
            try:
                reply = self.router.post(target, "/ping", body)
                g.PingResponse.FromString(reply)
            except Exception as error:  # router statuses, transport errors and bad replies: each a failed attempt
                self.book("http", "GluttonPing", started, time.perf_counter() - clock, error, actor)
                self._pause(PING_INTERVAL_S, until)
                continue
            self.book("http", "GluttonPing", started, time.perf_counter() - clock, None, actor,
                      response_length=len(reply))
            return

    def _backoffs(self, actor: str, until: float) -> Iterator[float]:
        """The pause before each retry (50 ms doubling to 1 s, jitter added apart); every attempt first checks the
        deadline and the stop."""
        for delay in backoff_delays():
            self._check(actor, until)
            yield delay

    def _pause(self, seconds: float, until: float) -> None:
        """Sleep, cut short at the actor's deadline (the next check then ends the actor)."""
        self.sleep(max(0.0, min(seconds, until - self.clock())))

    def _check(self, actor: str, until: float) -> None:
        if self.stopping:
            raise Cancelled(f"actor {actor}: context canceled (the run was stopped)")
        if self.clock() >= until:
            raise Cancelled(f"actor {actor}: context deadline exceeded (actor deadline "
                                 f"{self.knobs.actor_deadline:g} s)")

    # -- teardown ---------------------------------------------------------

    def _delete_all(self) -> None:
        with self._lock:
            names, self.actor_names = self.actor_names, []
        if not names:
            return
        pending: queue.SimpleQueue[str] = queue.SimpleQueue()
        for name in names:
            pending.put(name)
        atespace = self.knobs.atespace

        def delete() -> None:
            while True:
                try:
                    name = pending.get_nowait()
                except queue.Empty:
                    return
                # Booked through the gate like upstream's tracedCall; the stop came first, so it drops them.
                self.timed_rpc("DeleteActor", partial(self.control.delete, atespace, name, any_state=True), name)

        deleters = [threading.Thread(target=delete, name=f"spawn-{self.cohort_id}-delete-{n}", daemon=True)
                    for n in range(min(DELETE_CONCURRENCY, len(names)))]
        for deleter in deleters:
            deleter.start()
        for deleter in deleters:
            deleter.join()

    # -- rows -------------------------------------------------------------

    def book(self, request_type: str, name: str, started: float, elapsed_s: float, error: BaseException | None,
             actor: str | None = None, *, wake: bool = False, response_length: int = 0,
             lap: int | None = None) -> None:
        """Book a row unless the run is stopping; the check and the row are one step, so none slips past a stop."""
        with self._gate:
            if self.stopping:
                return
            super().book(request_type, name, started, elapsed_s, error, actor, wake=wake,
                         response_length=response_length, lap=lap)
