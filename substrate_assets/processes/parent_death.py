"""A child that dies, or is told to stop, with the process that started it (Linux's PR_SET_PDEATHSIG).

The kernel sends the chosen signal when the *thread* that started the child exits, once per thread of the dying
parent as the child is handed on to the next. A parent that died while the child was still starting is told apart
from the process the child has been reparented to by its pid, which the parent names.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PARENT_PID_ENV = "SUBSTRATE_BENCH_PARENT_PID"
# The signal a trial's process asks for: it stops the trial once, and its repeats are not a second request to stop.
PARENT_DIED = signal.SIGHUP
_LINUX = sys.platform.startswith("linux")
# Sets PR_SET_PDEATHSIG to SIGKILL, then becomes the command: the setting survives exec. A launcher rather than a
# preexec_fn, which would make the parent fork (not vfork) its gRPC-threaded process between fork and exec. It also
# gives SIGTERM, the polite stop, its default action: an ignored signal survives exec, and Dagster's interrupt
# capture leaves SIGTERM as SIGINT was, ignored in a command a script started in the background.
_DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "signal.signal(signal.SIGTERM, signal.SIG_DFL)\n"
    f"ctypes.CDLL(None).prctl({PR_SET_PDEATHSIG}, signal.SIGKILL)\n"
    "if os.getppid() != int(sys.argv[1]): os._exit(1)  # the parent died before the prctl\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def signal_on_parent_death(signum: int, parent: int | None) -> bool:
    """Have the kernel send ``signum`` to this process when its parent dies (Linux; elsewhere nothing); whether
    ``parent``, the pid this process was started by, is already gone, so that no signal will come."""
    if not _LINUX:
        return False
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum)
    return parent is not None and os.getppid() != parent


def stop_when_parent_dies(signum: int = PARENT_DIED) -> None:
    """Be sent ``signum`` when the process that started this one dies (Linux; elsewhere nothing), at once if it
    already has: a Pipes child of a killed ``run`` then stops its trial, lands what it measured and frees the
    machine, instead of running on unowned beside the next trial. The parent names itself in
    ``$SUBSTRATE_BENCH_PARENT_PID``."""
    expected = os.environ.get(PARENT_PID_ENV)
    if signal_on_parent_death(signum, None if expected is None else int(expected)):
        os.kill(os.getpid(), signum)


def dying_with_this_process(command: list[str]) -> list[str]:
    """``command``, SIGKILLed when this process dies (Linux; elsewhere unchanged).

    The signal fires when the thread that started the child exits: start it from a thread that outlives the child.
    """
    if not _LINUX:
        return command
    return [sys.executable, "-I", "-S", "-c", _DIE_WITH_PARENT, str(os.getpid()), *command]
