"""What the cohort families (spawn and burst) share: one user per process that runs its cohort once and then
idles, books no row of its own once the run stops, and at its stop winds its threads down before its teardown; and
upstream's retries: 50 ms doubling to 1 s between attempts, plus up to 5 ms of jitter, until a terminal code or the
actor's deadline; which codes are terminal; a create that landed on an earlier attempt; and the budget (deadline
and stop) each attempt checks.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import grpc

from substrate_assets.driver.clients import ControlClient, RouterClient
from substrate_assets.driver.failures import rpc_code, rpc_details
from substrate_assets.driver.users.base import Record, VirtualUser
from substrate_assets.driver.users.knobs import WorkerKnobs

INITIAL_BACKOFF_S = 0.050
MAX_BACKOFF_S = 1.0
BACKOFF_JITTER_S = 0.005
DELETE_CONCURRENCY = 32
STOP_WAIT_S = 2.0
# After its one run a cohort user has nothing left to do; upstream blocks its goroutine for good.
IDLE_S = 3600.0
TERMINAL_CODES = frozenset({
    grpc.StatusCode.NOT_FOUND, grpc.StatusCode.DATA_LOSS, grpc.StatusCode.ALREADY_EXISTS,
    grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNIMPLEMENTED,
})


class Cancelled(Exception):
    """An actor's attempts ended before it got there: its deadline passed, or the run was stopped."""


def backoff_delays() -> Iterator[float]:
    """The pause before each retry, jitter apart: 50 ms doubling to 1 s, then 1 s for good."""
    delay = INITIAL_BACKOFF_S
    while True:
        yield delay
        delay = min(delay * 2, MAX_BACKOFF_S)


def jitter(rng: random.Random) -> float:
    return rng.random() * BACKOFF_JITTER_S


def spawn_crashed(error: BaseException) -> bool:
    """Aborted mentioning "crashed" in any case (upstream's spawn lower-cases, unlike ``is_crashed``)."""
    return rpc_code(error) == grpc.StatusCode.ABORTED and "crashed" in rpc_details(error).lower()


def spawn_terminal(error: BaseException) -> bool:
    """Whether retrying cannot help; unlisted codes, ResourceExhausted included, are retried until the deadline."""
    return rpc_code(error) in TERMINAL_CODES or spawn_crashed(error)


def create_landed(attempt: int, error: BaseException | None) -> bool:
    """A create that succeeded, or AlreadyExists on a retry: names carry the run's id, so an earlier attempt of
    ours landed (on the first attempt it is a clash)."""
    return error is None or (attempt > 0 and rpc_code(error) == grpc.StatusCode.ALREADY_EXISTS)


@dataclass(frozen=True)
class RetryBudget:
    """What upstream's per-call context carries: a deadline on the injected clock, and the run's stop."""

    clock: Callable[[], float]
    sleep: Callable[[float], None]
    until: float
    stopping: Callable[[], bool]

    def expired(self) -> Cancelled | None:
        if self.stopping():
            return Cancelled("context canceled (the run was stopped)")
        if self.clock() >= self.until:
            return Cancelled("context deadline exceeded")
        return None

    def deadline_passed(self) -> bool:
        return self.clock() >= self.until and not self.stopping()

    def within(self, seconds: float) -> RetryBudget:
        return replace(self, until=min(self.until, self.clock() + seconds))

    def pause(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, no later than the deadline; whether the whole pause ran with time to spare."""
        if self.expired() is not None:
            return False
        left = self.until - self.clock()
        if seconds >= left:
            self.sleep(max(0.0, left))
            return False
        self.sleep(seconds)
        return self.expired() is None


def retry_with_backoff(call: Callable[[int], BaseException | None], budget: RetryBudget,
                       rng: random.Random) -> BaseException | None:
    """Call ``call(attempt)`` (attempt 0, 1, …) until it returns None, its error is terminal (spawn's list), or the
    budget ends. The last error, or why the budget ended."""
    for attempt, delay in enumerate(backoff_delays()):
        cut = budget.expired()
        if cut is not None:
            return cut
        error = call(attempt)
        if error is None:
            return None
        if spawn_terminal(error):
            return error
        if not budget.pause(delay + jitter(rng)):
            return budget.expired() or error
    raise AssertionError("backoff_delays never ends")


class CohortUser(VirtualUser):
    """The one user of a spawn or burst process: the first iteration runs the cohort, later ones only idle. Once
    ``stopped()`` is true (or ``stop`` has begun) the user books no row of its own; ``stop`` (Locust's on_stop)
    waits up to 2 s for its threads, then tears the cohort down."""

    def __init__(self, control: ControlClient, router: RouterClient, knobs: WorkerKnobs, record: Record,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
                 clock: Callable[[], float] = time.monotonic, stopped: Callable[[], bool] = lambda: False) -> None:
        super().__init__(control, router, knobs, record, sleep, rng, clock)
        self.stopped = stopped
        self.ran = False
        self.cohort_id = ""
        self._halted = threading.Event()
        self._gate = threading.Lock()

    @property
    def stopping(self) -> bool:
        return self._halted.is_set() or self.stopped()

    def run_cohort(self) -> None:
        raise NotImplementedError

    def teardown(self) -> None:
        raise NotImplementedError

    def threads(self) -> list[threading.Thread]:
        """The threads the cohort's work runs on now."""
        raise NotImplementedError

    def iterate(self) -> None:
        if self.ran:
            self.sleep(IDLE_S)
            return
        self.ran = True
        self.run_cohort()

    def stop(self) -> None:
        self._halted.set()
        until = time.monotonic() + STOP_WAIT_S
        for thread in self.threads():
            thread.join(timeout=max(0.0, until - time.monotonic()))
        self.teardown()
