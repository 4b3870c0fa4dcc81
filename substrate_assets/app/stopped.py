"""SIGINT and SIGTERM stop a command that runs Dagster in-process, wherever they arrive.

Outside Dagster's execution the handler raises ``Stopped`` at once. While ``dg.materialize`` executes, Dagster
holds both signals itself (it turns SIGTERM into SIGINT and raises it inside the running step, which fails the
run); the number of the signal is lost there, so a wakeup pipe records which signal arrived and
``raise_if_stopped`` raises ``Stopped`` once Dagster returns.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from substrate_assets.processes.stop_signals import STOP_SIGNALS, exit_code, signal_name


class Stopped(KeyboardInterrupt):
    """The command was asked to stop by ``signum``; it exits 128 + ``signum`` (130 for SIGINT, 143 for SIGTERM)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal_name(signum))
        self.signum = signum

    @property
    def signal_name(self) -> str:
        return signal_name(self.signum)

    @property
    def exit_code(self) -> int:
        return exit_code(self.signum)


_wakeup_pipe: tuple[int, int] | None = None


def _stop(signum: int, _frame: FrameType | None) -> None:
    _signals_received()  # this signal's byte is in the pipe too: it must not stop the command a second time
    raise Stopped(signum)


@contextmanager
def stopping_on_signals() -> Iterator[None]:
    """SIGINT and SIGTERM raise ``Stopped`` in the main thread; on the way out, the previous handlers are back."""
    global _wakeup_pipe
    previous = {signum: signal.getsignal(signum) for signum in STOP_SIGNALS}
    read_end, write_end = os.pipe()
    os.set_blocking(read_end, False)
    os.set_blocking(write_end, False)
    previous_wakeup = signal.set_wakeup_fd(write_end, warn_on_full_buffer=False)
    _wakeup_pipe = (read_end, write_end)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _stop)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        signal.set_wakeup_fd(previous_wakeup)
        _wakeup_pipe = None
        os.close(read_end)
        os.close(write_end)


def _signals_received() -> list[int]:
    if _wakeup_pipe is None:
        return []
    received = b""
    while True:
        try:
            chunk = os.read(_wakeup_pipe[0], 512)
        except BlockingIOError:
            break
        if not chunk:
            break
        received += chunk
    return [signum for signum in received if signum in STOP_SIGNALS]


def raise_if_stopped() -> None:
    """``Stopped`` for the last SIGINT or SIGTERM that arrived since the last look (Dagster may have swallowed it);
    nothing outside ``stopping_on_signals``."""
    received = _signals_received()
    if received:
        raise Stopped(received[-1])
