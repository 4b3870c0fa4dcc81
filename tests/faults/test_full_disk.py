"""Fault: a full disk. A trial whose store lacks room is refused up front; a store that fills mid-run stops the
trial at once, in one line, leaving nothing half-written. The trial is the real ``substrate-bench trial`` command
and the disk a small tmpfs (root only).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from substrate_assets.results.layout import STAGING, RunStore
from substrate_assets.results.trial_directory import REQUEST_LOG, WORK
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "substrate-bench")
MiB = 1 << 20

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs (a disk that fills) needs root")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[callable]:
    """Mounts tmpfs filesystems of a given size under tmp_path; every one is unmounted at teardown."""
    mounted: list[Path] = []

    def mount(size: str) -> Path:
        point = tmp_path / f"disk-{len(mounted)}"
        point.mkdir()
        subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(point)], check=True)
        mounted.append(point)
        return point

    yield mount
    for point in reversed(mounted):
        subprocess.run(["umount", "-l", str(point)], check=False)


# Before its own line, a trial may say it waited for the machine (an earlier test's trial still ending) and what
# killed trials left that it swept, one line each.
NOTICES = ("removed leftovers of a dead ", "another trial is running on this machine",
           "the machine is free: this trial starts")


def own_lines(stderr: str) -> list[str]:
    """The trial's own lines of ``stderr``; the whole of it when there is not exactly one."""
    lines = [line for line in stderr.strip().splitlines() if not line.startswith(NOTICES)]
    assert len(lines) == 1, stderr
    return lines


def _files(root: Path) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file()]


@needs_root
def test_a_store_without_room_for_the_trial_is_refused_before_any_load(small_disk):
    store = small_disk("16m")  # below the store's 32 MiB floor for Locust's files and the trial's own
    # --wait: a trial another test runs holds the machine; this one queues rather than being refused for it.
    done = subprocess.run([CLI, "trial", "quick-smoke", "--store", str(store), "--duration", "60s", "--wait"],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2, done.stderr
    [line] = own_lines(done.stderr)
    assert line.startswith(f"trial refused, nothing was run: not enough free space on {store}: "), line
    assert "the trial needs about" in line and "the run store" in line
    assert RunStore(store).trial_dirs() == []
    assert _files(store) == []


@needs_root
def test_a_store_that_fills_mid_run_stops_the_trial_at_once_in_one_line(small_disk):
    store = small_disk("64m")  # passes the check (~36 MiB for a minute of quick-smoke), then the test fills it
    duration_s = 60
    stderr_path = store.parent / "stderr.txt"
    with stderr_path.open("w") as stderr:
        trial = subprocess.Popen([CLI, "trial", "quick-smoke", "--store", str(store), "--duration", f"{duration_s}s",
                                  "--wait"],
                                 stdout=subprocess.DEVNULL, stderr=stderr, cwd=ROOT, start_new_session=True)
    try:
        # Running means logging: Locust has written a request-log part into the staging directory.
        wait_until(lambda: any(store.glob(f"{STAGING}/*/{WORK}/{REQUEST_LOG}/part-*.parquet")),
                   "the trial to write its first request-log part", timeout_s=180)
        filled_at = started = time.monotonic()
        with (store / "filler").open("wb") as filler:
            block = b"\0" * MiB
            with pytest.raises(OSError):
                while True:
                    filler.write(block)
                    filler.flush()
        trial.wait(timeout=45)
        stopped_after = time.monotonic() - filled_at
    finally:
        if trial.poll() is None:
            os.killpg(trial.pid, signal.SIGKILL)
            trial.wait()
    stderr_text = stderr_path.read_text()
    assert trial.returncode == 1, stderr_text
    # Promptly: the request log flushes every 2 s and Locust tears down in a few; nowhere near the run time.
    assert stopped_after < duration_s / 2, stopped_after
    assert time.monotonic() - started < duration_s, "the trial ran to its duration after it had started"
    assert "Traceback" not in stderr_text
    [line] = own_lines(stderr_text)
    assert line.startswith("trial stopped: no space left on device writing "), line
    assert "nothing landed (the store's filesystem is full)" in line
    # Nothing half-written and no staging left: the only file on the disk is the test's own filler.
    assert RunStore(store).trial_dirs() == []
    assert _files(store) == [store / "filler"]

