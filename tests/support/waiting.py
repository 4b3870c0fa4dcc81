"""Waiting in tests for a condition, never for a length of time.

A test that sleeps a fixed time and then looks depends on how busy the machine is. These helpers poll
the condition itself and give up only after a deadline far beyond any normal wait, with a message that
says what never happened.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# Far beyond any normal wait (milliseconds to a few seconds), well inside pytest-timeout's 300 s per test.
GENEROUS_S = 60.0


def wait_until(condition: Callable[[], T], what: str, timeout_s: float = GENEROUS_S, interval_s: float = 0.05) -> T:
    """Poll ``condition`` until it returns something truthy and return that; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout_s
    while True:
        found = condition()
        if found:
            return found
        if time.monotonic() >= deadline:
            raise AssertionError(f"after {timeout_s:g}s still waiting for {what}")
        time.sleep(interval_s)
