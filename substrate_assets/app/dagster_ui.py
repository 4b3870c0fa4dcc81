"""The Dagster UI as a child the command owns: ``dagster dev`` (webserver, daemon, code server) in a session of its
own, stopped with every process it started when the command is asked to stop.

``dagster dev`` exec'd in place of the command inherits whatever the shell left: started in the background by a
script, SIGINT is ignored, and SIGTERM reached the parent alone while its children ran on. Here the command keeps
the signals: SIGINT, SIGTERM or SIGHUP (a closed terminal) asks ``dagster dev`` to shut down with SIGTERM, and whatever
of its process tree is left after a grace period is killed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from collections.abc import Callable

import psutil

from substrate_assets.app.code_location import ui_workspace
from substrate_assets.app.stopped import Stopped, stopping_on_signals
from substrate_assets.processes.ui_scratch import discard_unless_in_use, new_scratch, own, sweep_ui_leftovers

# dagster dev stops its webserver, daemon and code server in a few seconds; a machine busy with other work gets more.
SHUTDOWN_GRACE_S = 30.0


def ui_command(dagster: str, port: int) -> list[str]:
    return [dagster, "dev", *ui_workspace(), "-h", "127.0.0.1", "-p", str(port)]


def run_ui(command: list[str], cwd: str, env: dict[str, str], say: Callable[[str], None]) -> int:
    """Run ``command`` until it ends (its exit code) or this process is asked to stop (128 + the signal's number,
    after the whole tree has gone). It gets a temporary directory of its own (``ui_scratch``), removed when it ends,
    and what killed ones left is removed first."""
    for line in sweep_ui_leftovers():
        say(line)
    scratch = new_scratch()
    hang_up = signal.signal(signal.SIGHUP, _stop_on_hang_up)
    try:
        with stopping_on_signals():
            # Signals this process handles are reset to their defaults in the child at exec: ignored ones would not.
            process = subprocess.Popen(command, cwd=cwd, env={**env, "TMPDIR": str(scratch)}, start_new_session=True)
            own(scratch, process.pid)
            try:
                return process.wait()
            except Stopped as stopped:
                # The shutdown is bounded by its grace period: a second request must not cut it short and leave
                # processes behind.
                for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
                    signal.signal(signum, signal.SIG_IGN)
                say(f"stopping the Dagster UI ({stopped.signal_name})")
                stop_tree(process, SHUTDOWN_GRACE_S)
                return stopped.exit_code
    finally:
        signal.signal(signal.SIGHUP, hang_up)
        # A run left by a ``dagster dev`` killed alone may still be finishing its trial in there: then the
        # directory goes to the next start's sweep.
        discard_unless_in_use(scratch)


def _stop_on_hang_up(signum: int, _frame: object) -> None:
    # The child is in a session of its own: a closed terminal's SIGHUP reaches this process only.
    raise Stopped(signum)


def stop_tree(process: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM to ``process``'s session, then SIGKILL to what of its tree is left after ``grace_s``."""
    try:
        tree = [psutil.Process(process.pid), *psutil.Process(process.pid).children(recursive=True)]
    except psutil.NoSuchProcess:
        tree = []
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    _gone, alive = psutil.wait_procs(tree, timeout=grace_s)
    for leftover in alive:
        with contextlib.suppress(psutil.NoSuchProcess):
            leftover.kill()
    psutil.wait_procs(alive, timeout=grace_s)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()
