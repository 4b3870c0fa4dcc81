"""Locust headless as a child process: run to its end or until interrupted, its progress read once a second from
what it appended to its stats history since the second before, stopped gently (SIGTERM: it tears its sessions
down and writes its CSVs) and then, if need be, for good.

Locust runs in a session of its own, so a terminal's Ctrl-C reaches only the trial, which stops Locust gently; and
it dies with the trial's process (:func:`~substrate_assets.processes.parent_death.dying_with_this_process`), so a
trial killed outright leaves no Locust calling a runtime that is gone. The kernel's signal fires when the thread that
started Locust exits; :func:`drive_locust` never returns before Locust has exited, so in practice it fires when the
trial's process dies.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from substrate_assets.processes.child_env import child_environment
from substrate_assets.processes.parent_death import dying_with_this_process
from substrate_assets.results.history_tail import StatsHistoryTail
from substrate_assets.results.trial_directory import LOCUST_LOG, locust_csv
from substrate_assets.suites import Suite

SHUTDOWN_GRACE_S = 120.0
class LocustEnd(NamedTuple):
    """How Locust ended: its exit code; whether it was asked to stop before its run time (Ctrl-C, SIGTERM); whether
    it overran its run time by SHUTDOWN_GRACE_S and was stopped. Either way the trial did not run to its end."""

    exit_code: int
    interrupted: bool
    overran: bool

    @property
    def cut_short(self) -> bool:
        return self.interrupted or self.overran

    def notes(self) -> list[str]:
        said = ["interrupted: Locust was asked to stop before its run time"] if self.interrupted else []
        return [*said, self.overrun_warning()] if self.overran else said

    @staticmethod
    def overrun_warning() -> str:
        return (f"Locust did not stop within {SHUTDOWN_GRACE_S:g}s after its run time and was stopped: the trial "
                "did not run to its end")


def drive_locust(command: list[str], work: Path, suite: Suite, clock: float, report: Callable[..., None],
                 sample: Callable[[int | None], dict[str, Any]] | None = None,
                 on_start: Callable[[int], None] | None = None) -> LocustEnd:
    """Run Locust to its end (or until interrupted), reporting progress and taking a sample once a second;
    ``on_start`` is told Locust's process id (the launcher execs Locust in place) before the first sample."""
    env = child_environment({"PYTHONUNBUFFERED": "1"})
    history = StatsHistoryTail(locust_csv(work, "stats_history"))
    interrupted = overran = False
    with (work / LOCUST_LOG).open("wb") as output:
        process = subprocess.Popen(dying_with_this_process(command), stdout=output, stderr=subprocess.STDOUT, env=env,
                                   cwd=work, start_new_session=True)
        if on_start is not None:
            on_start(process.pid)
        deadline = clock + suite.duration_s + SHUTDOWN_GRACE_S
        try:
            while process.poll() is None:
                totals = history.latest_totals()
                state = sample(totals.get("users")) if sample is not None else {}
                report("running", clock, **totals, running_actors=state.get("running_actors"))
                if time.monotonic() > deadline:
                    overran = True
                    _stop(process)
                    break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=1.0)
        except KeyboardInterrupt:
            interrupted = True
            report("stopping", clock)
            _stop(process)
        finally:
            if process.poll() is None:
                _stop(process)
    return LocustEnd(process.returncode, interrupted, overran)


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM lets Locust tear its sessions down and write its CSVs; SIGKILL if it does not."""
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()
