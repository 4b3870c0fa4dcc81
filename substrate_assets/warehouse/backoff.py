"""Waiting for a warehouse another process holds (a file's lock, a lake's writer lock): try, and while it is held
try again after a pause that doubles up to a ceiling, until a deadline; the first wait is told once."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

FIRST_PAUSE_S, LONGEST_PAUSE_S = 0.05, 2.0

Held = TypeVar("Held")


class StillHeld(Exception):
    """An attempt found the warehouse held; its text says by whom or how."""


def with_backoff(attempt: Callable[[], Held], wait_s: float, *, waiting: Callable[[str], None] | None,
                 busy: Callable[[str], Exception], sleep: Callable[[float], None],
                 clock: Callable[[], float]) -> Held:
    """``attempt()``'s value once it does not raise :class:`StillHeld`; ``waiting`` hears the first refusal's text,
    once; past ``wait_s`` the exception ``busy`` makes of the last refusal's text is raised."""
    deadline = clock() + wait_s
    pause = FIRST_PAUSE_S
    told = False
    while True:
        try:
            return attempt()
        except StillHeld as held:
            if clock() >= deadline:
                raise busy(str(held)) from None
            if waiting is not None and not told:
                waiting(str(held))
                told = True
        sleep(min(pause, max(deadline - clock(), 0.0)))
        pause = min(pause * 2, LONGEST_PAUSE_S)
