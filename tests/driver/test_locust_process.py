"""Locust as a child process, driven with stand-in commands that are real processes: a Locust that never stops by
itself is stopped once its run time and the grace after it have passed, and the trial says it overran."""

import signal
import sys
import time

from substrate_assets.driver import locust_process
from substrate_assets.driver.locust_process import drive_locust
from substrate_assets.suites import Suite

NEVER_STOPS = [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"]
ENDS_AT_ONCE = [sys.executable, "-c", "raise SystemExit(1)"]


def _suite() -> Suite:
    return Suite(name="overrun", script="quick-session", users=1, duration="1s")


def _ignore(*_args: object, **_figures: object) -> None:
    pass


def test_a_locust_that_overruns_its_run_time_is_stopped_and_the_trial_is_not_run_to_its_end(tmp_path, monkeypatch):
    monkeypatch.setattr(locust_process, "SHUTDOWN_GRACE_S", 0.5)
    ended = drive_locust(NEVER_STOPS, tmp_path, _suite(), time.monotonic(), _ignore)
    assert ended.overran and not ended.interrupted and ended.cut_short
    assert ended.exit_code == -15  # SIGTERM: stopped gently, as Locust is
    assert ended.notes() == ["Locust did not stop within 0.5s after its run time and was stopped: the trial did "
                             "not run to its end"]


def test_a_locust_started_while_sigterm_is_ignored_is_still_stopped_gently(tmp_path, monkeypatch):
    """An ignored signal survives exec, and Dagster's interrupt capture leaves SIGTERM ignored in a process whose
    SIGINT was (a command a script started in the background): Locust must not inherit that, or the polite stop
    would go unheard and Locust be killed a minute later without writing its CSVs."""
    monkeypatch.setattr(locust_process, "SHUTDOWN_GRACE_S", 0.5)
    previous = signal.signal(signal.SIGTERM, signal.SIG_IGN)
    try:
        ended = drive_locust(NEVER_STOPS, tmp_path, _suite(), time.monotonic(), _ignore)
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert ended.overran and ended.exit_code == -15


def test_a_locust_that_ends_by_itself_ran_to_its_end(tmp_path):
    ended = drive_locust(ENDS_AT_ONCE, tmp_path, _suite(), time.monotonic(), _ignore)
    assert (ended.exit_code, ended.interrupted, ended.overran, ended.notes()) == (1, False, False, [])
