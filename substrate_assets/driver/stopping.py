"""How a trial stops: on SIGINT and SIGTERM alike, and together with the process that started it.

A trial stopped by a service manager or ``kill`` lands what it measured exactly as one stopped with Ctrl-C does.
Its children die with it: Locust is SIGKILLed when the trial's process dies, and the Dagster Pipes child of a
``run`` that is killed outright stops its trial as if it had been sent SIGTERM.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
from collections.abc import Iterator

PR_SET_PDEATHSIG = 1
PARENT_PID_ENV = "SUBSTRATE_BENCH_PARENT_PID"
# The kernel tells a process its parent died once per thread of the dying parent, as each exits and the child is
# handed to the next: the signal it sends stops the trial once, and its repeats are not a second request to stop.
PARENT_DIED = signal.SIGHUP
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, PARENT_DIED)
# Sets PR_SET_PDEATHSIG (1) to SIGKILL, then becomes the command: the setting survives exec. A launcher rather
# than a preexec_fn, which would make the trial fork (not vfork) its gRPC-threaded process between fork and exec.
# It also gives SIGTERM, the driver's polite stop, its default action: an ignored signal survives exec, and Dagster's
# interrupt capture leaves SIGTERM as SIGINT was, ignored in a command a script started in the background.
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGKILL)\n"
    "if os.getppid() != int(sys.argv[1]): os._exit(1)  # the parent died before the prctl\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def dying_with_this_process(command: list[str]) -> list[str]:
    """``command``, SIGKILLed when this process dies (Linux; elsewhere unchanged).

    PR_SET_PDEATHSIG fires when the *thread* that started the child exits; drive_locust's thread never returns
    before Locust has exited, so in practice it fires when the trial's process dies.
    """
    if not sys.platform.startswith("linux"):
        return command
    return [sys.executable, "-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), *command]


class StopRequest:
    """The stop signal that arrived first while :func:`signals_stop_the_trial` held, if any."""

    def __init__(self) -> None:
        self.signum: int | None = None

    @property
    def signal_name(self) -> str:
        return signal.Signals(self.signum).name if self.signum is not None else "SIGINT"

    @property
    def exit_code(self) -> int:
        """The shell's code for a command stopped by the signal: 128 + its number (130 SIGINT, 143 SIGTERM)."""
        return 128 + (self.signum if self.signum is not None else signal.SIGINT)


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
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    try:
        yield request
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def stop_when_parent_dies(signum: int = PARENT_DIED) -> None:
    """Have the kernel send ``signum`` to this process when the process that started it dies (Linux; elsewhere
    nothing). A Pipes child of a killed ``run`` then stops its trial, lands what it measured and frees the machine,
    instead of running on unowned beside the next trial. The kernel sends it once per thread of the dying parent;
    :func:`signals_stop_the_trial` stops on the first and ignores the rest.

    The parent names itself in ``$SUBSTRATE_BENCH_PARENT_PID``: a parent that died while this process was still
    starting is told apart from the one it has been reparented to, and the signal is sent at once.
    """
    if not sys.platform.startswith("linux"):
        return
    ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signum)
    expected = os.environ.get(PARENT_PID_ENV)
    if expected is not None and os.getppid() != int(expected):
        os.kill(os.getpid(), signum)
