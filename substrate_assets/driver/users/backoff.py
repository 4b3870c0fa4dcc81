"""The retries of the cohort families (spawn and burst), as upstream's: 50 ms doubling to 1 s between attempts,
plus up to 5 ms of jitter, until a terminal code or the actor's deadline; which codes are terminal; a create that
landed on an earlier attempt; and the budget (deadline and stop) each attempt checks.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import grpc

from substrate_assets.driver.failures import rpc_code, rpc_details

INITIAL_BACKOFF_S = 0.050
MAX_BACKOFF_S = 1.0
BACKOFF_JITTER_S = 0.005
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
