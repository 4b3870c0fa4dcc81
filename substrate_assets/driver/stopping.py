"""How a trial stops: on SIGINT and SIGTERM alike, and together with the process that started it.

A trial stopped by a service manager or ``kill`` lands what it measured exactly as one stopped with Ctrl-C does.
The Dagster Pipes child of a ``run`` that is killed outright is sent :data:`PARENT_DIED`
(:func:`~substrate_assets.processes.parent_death.stop_when_parent_dies`) and stops its trial the same way.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

from substrate_assets.processes.parent_death import PARENT_DIED
from substrate_assets.processes.stop_signals import STOP_SIGNALS, exit_code, signal_name

TRIAL_STOP_SIGNALS = (*STOP_SIGNALS, PARENT_DIED)


class StopRequest:
    """The stop signal that arrived first while :func:`signals_stop_the_trial` held, if any."""

    def __init__(self) -> None:
        self.signum: int | None = None

    @property
    def signal_name(self) -> str:
        return signal_name(self.signum if self.signum is not None else signal.SIGINT)

    @property
    def exit_code(self) -> int:
        return exit_code(self.signum if self.signum is not None else signal.SIGINT)


@contextlib.contextmanager
def signals_stop_the_trial() -> Iterator[StopRequest]:
    """SIGINT, SIGTERM and SIGHUP all raise KeyboardInterrupt in the main thread, so a trial stopped by a service
    manager, ``kill``, a closed terminal or its launcher's death lands what it measured exactly as one stopped with
    Ctrl-C does. A second stop request while it lands gives up the landing; a repeated SIGHUP (:data:`PARENT_DIED`)
    is no such request and is ignored. Signals reach only the main thread: elsewhere nothing is installed."""
    request = StopRequest()
    if threading.current_thread() is not threading.main_thread():
        yield request
        return

    def stop(signum: int, _frame: object) -> None:
        if signum == PARENT_DIED and request.signum is not None:
            return
        if request.signum is None:
            request.signum = signum
        raise KeyboardInterrupt(signal_name(signum))

    previous = {signum: signal.signal(signum, stop) for signum in TRIAL_STOP_SIGNALS}
    try:
        yield request
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
