"""Upstream's ``burst`` family: one cohort of glutton actors resumed, loaded and suspended all at once, batch after
batch, timed per actor and as a cohort.

One cohort per process (run it with one user): the first ``iterate`` runs everything, later ones only sleep.
The cohort is ``total_actors`` actors ``burst-<run8>-<n>`` of the glutton template. ``CreateAtespace`` is
retried with a backoff (50 ms doubling to 1 s, plus up to 5 ms of jitter, until a terminal code or the actor
deadline, as spawn's) and the run does not start without it. Setup creates every actor at once, each retried the
same way (AlreadyExists on a retry is an earlier attempt that landed); an actor that cannot be created is retired
and deleted. Then, batch after batch, until a stop or until no actor is left:

1. before every batch but the first, a wait of U[min_wait, max_wait];
2. the resume burst: every active actor at once resumes (``ResumeActorFirstResume`` in batch 1, then
   ``ResumeActor``; the conflict retry inside, a crash booked on ``actor,CrashCount``), retried with the backoff,
   then pings ``GluttonReadyPing`` every 100 ms until one answers (each ping a row);
3. the churn: one live window U[min_live, max_live] for the whole batch. Batch 1 fills RAM (``GluttonFillRAM``)
   and starts the CPU load (``GluttonUseCPU``); either failing retires the actor (``actor,RetiredSetup``). Later
   batches read (``GluttonReadRAM``) and churn (``GluttonChurnRAM``) the RAM; a failed step is only its row, but
   a step still running at the actor deadline retires the actor (``actor,RetiredChurn``). Each actor then pings
   (``GluttonPing``) as glutton does within the window, whose rest is slept out;
4. the suspend burst: ``SuspendActor`` (``PauseActor`` in pause mode) with the backoff.

Every burst books, per actor, ``summary,<ActorTimeTo…>`` (its own operation's time; a failure retires it), then,
over the successes' times from the burst's start, ``<prefix>_<k>pct`` for each decile k at rank ceil(k·n/100)
(n = the actors the burst began with) and the all-done row at the last success, or a failure all-done row of
latency 0 when none succeeded:

- batch 1 resume: ``ActorTimeToFirstResume``, ``TimeToFirstResume_<k>pct``, ``TimeToAllFirstResumed``;
- batch 1 suspend: ``ActorTimeToFirstSuspend``, ``TimeToFirstSuspend_<k>pct``, ``TimeToAllFirstSuspended``;
- later resumes: ``ActorTimeToResume``, ``TimeToResume_<k>pct``, ``TimeToAllResumed``;
- later suspends: ``ActorTimeToSuspend``, ``TimeToSuspend_<k>pct``, ``TimeToAllSuspended``.

Retired actors are deleted after each burst, and the rest when the run ends, ``DeleteActor(any_state)`` 32 at a
time within 60 s, each retried with the backoff (NotFound counts as deleted). Once ``stopped()`` is true (or
``stop`` has begun) burst books none of its own rows (summary, ``GluttonReadyPing``, ``Retired*``), starts no
new call of a burst and ends the run; the glutton actor's rows (lifecycle calls, ``GluttonPing`` and the workload
steps, ``CrashCount``) and the teardown's deletes are still booked, as upstream's (burst.go @ 8e89f4d9, its rows
as burst_test.go @ 9fda9502 counts them). Deadlines and waits read the injected ``clock`` and ``sleep``; a call
already in flight at a deadline or a stop runs to its own timeout, where upstream's would be cancelled. Every row's
``lap`` is the batch (0 in setup); none is a wake; ``GluttonReadyPing`` books no length, as upstream's. The
atespace is the glutton knobs' one.

Nothing here knows Locust: the burst's workers are threads (greenlets once gevent has patched ``threading``),
rows go to the injected ``record``, which must accept rows from several threads.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import grpc

from substrate_assets.driver.clients import ControlClient, RouterClient
from substrate_assets.driver.failures import rpc_code
from substrate_assets.driver.users.base import Record
from substrate_assets.driver.users.cohort import (
    DELETE_CONCURRENCY,
    Cancelled,
    CohortUser,
    RetryBudget,
    create_landed,
    retry_with_backoff,
)
from substrate_assets.driver.users.glutton import GluttonActor, GluttonCallError
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.driver.users.spawn import fired_deciles
from substrate_assets.protos import glutton_pb2 as g

log = logging.getLogger(__name__)

READY_PING_GAP_S = 0.1
DELETE_BUDGET_S = 60.0
# A stop cuts the waits between and within batches short at this granularity.
STOP_POLL_S = 1.0
NO_ACTOR_SUCCEEDED = "no actor succeeded"


def _never() -> bool:
    return False


class ActorRetired(Exception):
    """Why an actor left the cohort: the failure booked on ``RetiredSetup`` and ``RetiredChurn``."""


@dataclass(frozen=True)
class BurstPhase:
    """The rows of one kind of burst: per actor, the k% marks' prefix, and the all-done row."""

    actor_row: str
    decile_prefix: str
    all_row: str


FIRST_RESUME = BurstPhase("ActorTimeToFirstResume", "TimeToFirstResume", "TimeToAllFirstResumed")
RESUME = BurstPhase("ActorTimeToResume", "TimeToResume", "TimeToAllResumed")
FIRST_SUSPEND = BurstPhase("ActorTimeToFirstSuspend", "TimeToFirstSuspend", "TimeToAllFirstSuspended")
SUSPEND = BurstPhase("ActorTimeToSuspend", "TimeToSuspend", "TimeToAllSuspended")


@dataclass(eq=False)
class BurstActor(GluttonActor):
    """A cohort member: a glutton actor, and whether it may exist, is deleted, or has left the cohort."""

    created: bool = False
    delete_done: bool = False
    retired: bool = False


class BurstVU(CohortUser):
    """The one user of a burst run: its cohort, batch after batch, then its teardown."""

    family = "burst"

    def __init__(self, control: ControlClient, router: RouterClient, knobs: WorkerKnobs, record: Record,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
                 clock: Callable[[], float] = time.monotonic, stopped: Callable[[], bool] = lambda: False) -> None:
        super().__init__(control, router, knobs, record, sleep, rng, clock, stopped)
        self.batch = 0
        self.actors: list[BurstActor] = []
        self._teardown_lock = threading.Lock()
        self._threads_lock = threading.Lock()
        self._threads: set[threading.Thread] = set()

    def _is_stopping(self) -> bool:
        return self.stopping

    def run_cohort(self) -> None:
        self.run()
        self.teardown()

    def threads(self) -> list[threading.Thread]:
        with self._threads_lock:
            return list(self._threads)

    # -- the run ----------------------------------------------------------

    def run(self) -> None:
        """Create the cohort, then resume, churn and suspend it until a stop or until no actor is left."""
        self.cohort_id = uuid.uuid4().hex[:8]
        self.actors = [BurstActor(self, f"burst-{self.cohort_id}-{n}")
                       for n in range(1, self.knobs.total_actors + 1)]
        log.info("burst %s: %d actors, deadline %gs, lifecycle mode %r, mem target %r, %d cpu cores", self.cohort_id,
                 self.knobs.total_actors, self.knobs.actor_deadline, self.knobs.lifecycle_mode,
                 self.knobs.mem_target, self.knobs.cpu_cores)
        error = retry_with_backoff(lambda _: self.ensure_atespace(lap=0), self._budget(), self.rng)
        if error is not None:
            log.error("burst %s: not started: CreateAtespace failed: %s", self.cohort_id, error)
            return
        self.setup()
        while not self.stopping:
            active = [actor for actor in self.actors if not actor.retired]
            if not active:
                log.warning("burst %s: every actor is retired; the run is over", self.cohort_id)
                return
            if self.batch > 0 and not self._wait(self.knobs.wait_seconds(self.rng)):
                return
            self.batch += 1
            first = self.batch == 1
            for actor in active:
                actor.lap = self.batch
            resumed = self.burst(FIRST_RESUME if first else RESUME, active, self.resume_one)
            live = self.churn(resumed, first)
            if self.stopping:
                return
            suspended = self.burst(FIRST_SUSPEND if first else SUSPEND, live, self.suspend_one)
            log.info("burst %s: batch %d: %d active, %d resumed, %d after the churn, %d suspended", self.cohort_id,
                     self.batch, len(active), len(resumed), len(live), len(suspended))

    def setup(self) -> None:
        """Create every actor at once; one that cannot be created is retired (its CreateActor rows say why)."""

        def create(budget: RetryBudget, _: int, actor: BurstActor) -> None:
            def attempt(number: int) -> BaseException | None:
                actor.created = True  # sent: it may exist from here on, so the teardown deletes it
                error = actor.create()
                return None if create_landed(number, error) else error

            actor.retired = retry_with_backoff(attempt, budget, self.rng) is not None

        self._for_each(self.actors, self.knobs.actor_deadline, create)
        self._delete_retired()

    # -- one burst ----------------------------------------------------------

    def burst(self, phase: BurstPhase, actors: list[BurstActor],
              op: Callable[[RetryBudget, BurstActor], BaseException | None]) -> list[BurstActor]:
        """Run ``op`` on every actor at once, retire the ones it failed on, book the phase; the ones it
        succeeded on."""
        if not actors:
            return []
        epoch, start = time.time(), self.clock()
        done_at: list[float | None] = [None] * len(actors)

        def one(budget: RetryBudget, index: int, actor: BurstActor) -> None:
            actor_epoch, op_start = time.time(), self.clock()
            try:
                error = op(budget, actor)
            except Exception as unexpected:  # a surprise fails this actor's op, not the burst
                log.exception("burst %s: %s of %s failed unexpectedly", self.cohort_id, phase.actor_row, actor.name)
                error = unexpected
            now = self.clock()
            if error is not None:
                actor.retired = True
                self._book_own("summary", phase.actor_row, actor_epoch, now - op_start, error, actor.name)
                return
            done_at[index] = now - start
            self._book_own("summary", phase.actor_row, actor_epoch, now - op_start, None, actor.name)

        self._for_each(actors, self.knobs.actor_deadline, one)
        self._delete_retired()
        self.book_phase(phase, len(actors), sorted(t for t in done_at if t is not None), epoch)
        return [actor for actor, done in zip(actors, done_at, strict=True) if done is not None]

    def book_phase(self, phase: BurstPhase, cohort: int, times: list[float], epoch: float) -> None:
        """The k% marks and the last success of one burst over ``cohort`` actors; ``times`` sorted."""
        if not times:
            self._book_own("summary", phase.all_row, epoch, 0.0, Cancelled(NO_ACTOR_SUCCEEDED))
            return
        for rank, elapsed in enumerate(times, start=1):
            for k in fired_deciles(rank, cohort):
                self._book_own("summary", f"{phase.decile_prefix}_{k}pct", epoch, elapsed, None)
        self._book_own("summary", phase.all_row, epoch, times[-1], None)

    def resume_one(self, budget: RetryBudget, actor: BurstActor) -> BaseException | None:
        """Resume the actor (with the backoff), then ping it every 100 ms until it answers."""
        error = retry_with_backoff(lambda _: actor.resume(), budget, self.rng)
        if error is not None:
            return error
        while True:
            failure = self.ready_ping(actor)
            if failure is None:
                return None
            if not budget.pause(READY_PING_GAP_S):
                return Cancelled(f"not ready before the deadline: {failure}")

    def ready_ping(self, actor: BurstActor) -> BaseException | None:
        """One ping booked on burst's own ``GluttonReadyPing`` row; its failure, if any."""
        message = str(uuid.uuid4())
        started, clock = time.time(), time.perf_counter()
        try:
            echoed = actor.request("/ping", g.PingRequest(message=message), g.PingResponse).message
            if echoed != message:
                raise GluttonCallError(f"ping echo mismatch: sent={message!r} recv={echoed!r}")
        except Exception as error:  # router statuses, transport errors, bad replies: not ready yet
            self._book_own("http", "GluttonReadyPing", started, time.perf_counter() - clock, error, actor.name)
            return error
        self._book_own("http", "GluttonReadyPing", started, time.perf_counter() - clock, None, actor.name)
        return None

    def suspend_one(self, budget: RetryBudget, actor: BurstActor) -> BaseException | None:
        return retry_with_backoff(lambda _: actor.hibernate(), budget, self.rng)

    # -- the churn ----------------------------------------------------------

    def churn(self, actors: list[BurstActor], first: bool) -> list[BurstActor]:
        """The batch's workload and one live window for all; the actors still in the cohort."""
        if not actors:
            return []
        clock = self.clock
        window = self.knobs.live_seconds(self.rng)
        end = clock() + window

        def one(budget: RetryBudget, _: int, actor: BurstActor) -> None:
            if self.work(budget, actor, first) and budget.expired() is None:
                actor.ping_window(end, self.knobs.pings_per_wake, wake=False,
                                  going=lambda: budget.expired() is None)

        self._for_each(actors, self.knobs.actor_deadline + window, one)
        self._wait(end - clock())
        self._delete_retired()
        return [actor for actor in actors if not actor.retired]

    def work(self, budget: RetryBudget, actor: BurstActor, first: bool) -> bool:
        """The actor's workload steps under the actor deadline; whether it stays in the cohort.

        Batch 1 fills RAM, then starts the CPU load, so the first suspend snapshots the whole working set; either
        failing retires the actor. Later batches read what the snapshot kept, then churn part of it; a failed step
        is only its row, and only a step still running at the deadline retires the actor."""
        budget = budget.within(self.knobs.actor_deadline)
        if first:
            actor.ensure_ram_filled()
            if actor.ram_filled:
                actor.ensure_cpu_load()
            if not actor.ram_filled:
                self._retire(actor, "RetiredSetup", "GluttonFillRAM failed")
            elif not actor.cpu_loaded:
                self._retire(actor, "RetiredSetup", "GluttonUseCPU failed")
            return not actor.retired
        actor.read_ram()
        if budget.expired() is None:
            actor.churn_ram()
        if budget.deadline_passed():
            self._retire(actor, "RetiredChurn", "a workload step was still running at the actor deadline")
            return False
        return True

    def _retire(self, actor: BurstActor, reason: str, message: str) -> None:
        actor.retired = True
        self._book_own("actor", reason, time.time(), 0.0, ActorRetired(message), actor.name)

    # -- deleting -----------------------------------------------------------

    def teardown(self) -> None:
        """Delete every actor not yet deleted, in one round of its own that a stop does not cut short."""
        with self._teardown_lock:
            left = self._delete_actors(self.actors, self._budget(DELETE_BUDGET_S, stoppable=False))
        if left:
            log.warning("burst %s: %d actors were not deleted and may leak", self.cohort_id, left)

    def _delete_retired(self) -> None:
        """Delete the actors retired so far, so a stuck one does not hold its worker; a stop ends the round and
        leaves them to the teardown."""
        if self.stopping:
            return
        self._delete_actors([actor for actor in self.actors if actor.retired], self._budget(DELETE_BUDGET_S))

    def _delete_actors(self, actors: list[BurstActor], budget: RetryBudget) -> int:
        """Delete the listed actors that may exist and are not deleted yet, 32 at a time, each retried with the
        backoff (NotFound: already gone); how many are still not deleted."""
        todo = [actor for actor in actors if actor.created and not actor.delete_done]

        def delete(index: int) -> None:
            actor = todo[index]
            error = retry_with_backoff(lambda _: actor.delete(), budget, self.rng)
            actor.delete_done = error is None or rpc_code(error) == grpc.StatusCode.NOT_FOUND

        self._run_each(len(todo), DELETE_CONCURRENCY, delete, lambda: budget.expired() is not None)
        return sum(not actor.delete_done for actor in todo)

    # -- running at once ------------------------------------------------------

    def _budget(self, seconds: float | None = None, stoppable: bool = True) -> RetryBudget:
        """A budget of ``seconds`` (the actor deadline by default) from now; a stop ends it unless unstoppable."""
        until = self.clock() + (self.knobs.actor_deadline if seconds is None else seconds)
        return RetryBudget(self.clock, self.sleep, until, self._is_stopping if stoppable else _never)

    def _for_each(self, actors: list[BurstActor], seconds: float,
                  call: Callable[[RetryBudget, int, BurstActor], None]) -> None:
        """``call`` on every actor at once, each with its own budget of ``seconds``; returns when all are done."""
        self._run_each(len(actors), len(actors), lambda index: call(self._budget(seconds), index, actors[index]),
                       self._is_stopping)

    def _run_each(self, count: int, workers: int, call: Callable[[int], None], done: Callable[[], bool]) -> None:
        """``call`` for every index below ``count``, at most ``workers`` at a time, none started once ``done()``."""
        lock = threading.Lock()
        cursor = [0]

        def work() -> None:
            while True:
                with lock:
                    index = cursor[0]
                    cursor[0] += 1
                if index >= count or done():
                    return
                try:
                    call(index)
                except Exception:  # a worker outlives one actor's surprise; the actor's rows say what happened
                    log.exception("burst %s: a worker's call failed unexpectedly", self.cohort_id)

        threads = [threading.Thread(target=work, name=f"burst-{self.cohort_id}-{n}", daemon=True)
                   for n in range(min(workers, count))]
        with self._threads_lock:
            self._threads.update(threads)
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        with self._threads_lock:
            self._threads.difference_update(threads)

    def _wait(self, seconds: float) -> bool:
        """Sleep ``seconds``, cut short by a stop; whether it ran its course."""
        left = seconds
        while left > 0:
            if self.stopping:
                return False
            step = min(left, STOP_POLL_S)
            self.sleep(step)
            left -= step
        return not self.stopping

    # -- rows -------------------------------------------------------------

    def _book_own(self, request_type: str, name: str, started: float, elapsed_s: float,
                  error: BaseException | None, actor: str | None = None) -> None:
        """Book one of burst's own rows unless the run is stopping; check and row in one step, so none slips past
        a stop."""
        with self._gate:
            if self.stopping:
                return
            self.book(request_type, name, started, elapsed_s, error, actor, lap=self.batch)
