"""A trial's processes under signals: SIGTERM stops it as Ctrl-C does, a terminal's Ctrl-C fakes no crash, a kill -9
takes Locust and the hosts with it and the next trial sweeps what it left, and one machine runs one trial at a time.

Each test runs the real command with a 1 h run time that no test reaches, so every stop is the test's own signal,
sent once the trial is measuring; state directories go to the test's own TMPDIR and the machine lock to its own
file, so other trials on this machine neither see nor block these.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import polars as pl
import psutil
import pytest

from substrate_assets.driver.machine_lock import LOCK_ENV, MachineBusy, hold_machine
from substrate_assets.processes import leftovers
from substrate_assets.results.layout import RunStore
from substrate_assets.runtime.scratch_dirs import LIVE_ROOT_ENV
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "substrate-bench")
DEADLINE_S = 150.0


class Trial:
    """``substrate-bench trial quick-smoke`` with one user, in its own session as a shell's foreground job is."""

    def __init__(self, base: Path, name: str, *options: str, duration: str = "1h") -> None:
        self.store = base / "store"
        self.temp, self.live = base / "tmp", base / "shm"
        self.temp.mkdir(exist_ok=True)
        self.live.mkdir(exist_ok=True)
        self.output = base / f"{name}.out"
        # Its own temporary and live roots: another test's runtime start sweeps the machine's, and would take what
        # this test's dead trial left before the trial that should.
        self.env = {**os.environ, "TMPDIR": str(self.temp), LIVE_ROOT_ENV: str(self.live),
                    LOCK_ENV: str(base / "trial.lock")}
        with self.output.open("wb") as output:
            self.process = subprocess.Popen(
                [CLI, "trial", "quick-smoke", "--store", str(self.store), "--users", "1", "--duration", duration,
                 *options], cwd=ROOT, env=self.env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True)

    @property
    def said(self) -> str:
        return self.output.read_text(errors="replace")

    def children(self) -> list[psutil.Process]:
        with contextlib.suppress(psutil.NoSuchProcess):
            return [child for child in psutil.Process(self.process.pid).children(recursive=True)
                    if _running(child)]
        return []

    def measuring(self) -> list[psutil.Process] | None:
        """Locust and the actor hosts, once Locust has written request-log parts; None before."""
        if self.process.poll() is not None:
            raise AssertionError(f"the trial exited with {self.process.returncode}:\n{self.said}")
        children = self.children()
        commands = [" ".join(_cmdline(child)) for child in children]
        parts = list(self.store.glob(".staging/*/.work/requests/part-*.parquet"))
        if parts and any("-m locust" in c for c in commands) and any("actor_host" in c for c in commands):
            return children
        return None

    def wait_measuring(self) -> list[psutil.Process]:
        return wait_until(self.measuring, "Locust and the hosts running, requests logged", DEADLINE_S, 0.2)

    def wait(self) -> int:
        try:
            return self.process.wait(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            self.kill()
            raise

    def kill(self) -> None:
        children = self.children()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for child in children:
            with contextlib.suppress(psutil.NoSuchProcess):
                child.kill()
        self.process.wait()

    def runtime_dirs(self) -> list[Path]:
        """The state and live directories this trial's runtime owns."""
        return [path for path in [*self.temp.glob("substrate-runtime-*"), *self.live.glob("substrate-live-*")]
                if (owner := leftovers.owner_of(path)) is not None and owner.pid == self.process.pid]


def _cmdline(process: psutil.Process) -> list[str]:
    with contextlib.suppress(psutil.Error):
        return process.cmdline()
    return []


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.fixture
def trials(tmp_path):
    started: list[Trial] = []

    def start(name: str, *options: str, duration: str = "1h") -> Trial:
        trial = Trial(tmp_path, name, *options, duration=duration)
        started.append(trial)
        return trial

    yield start
    for trial in started:  # a failed test leaves no trial, Locust or host running
        if trial.process.poll() is None or trial.children():
            trial.kill()
        for path in trial.runtime_dirs():
            leftovers.remove([leftovers.Leftover(path, leftovers.owner_of(path), 0)], "runtime")


def _landed(store: Path) -> Path:
    [trial_dir] = RunStore(store).trial_dirs()
    return trial_dir


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT-to-the-group"])
def test_a_signal_stops_the_trial_which_keeps_what_it_measured(trials, signum):
    trial = trials("stopped")
    children = trial.wait_measuring()
    assert all(os.getpgid(child.pid) != trial.process.pid for child in children)  # out of the terminal's reach
    dirs = trial.runtime_dirs()
    assert len(dirs) == 2
    if signum == signal.SIGINT:
        os.killpg(trial.process.pid, signal.SIGINT)  # what a terminal's Ctrl-C does: the whole foreground group
    else:
        trial.process.send_signal(signal.SIGTERM)
    assert trial.wait() == 128 + signum, trial.said
    name = signal.Signals(signum).name
    assert f"stopped by {name} before its run time; it keeps what was measured until then (status: interrupted)" \
        in trial.said
    trial_dir = _landed(trial.store)
    manifest = json.loads((trial_dir / "trial.json").read_text())
    assert manifest["interrupted"] is True and manifest["completed"] is False
    assert pl.read_parquet(trial_dir / "requests.parquet").height > 0
    events = pl.read_parquet(trial_dir / "runtime_events.parquet")
    assert events.filter(pl.col("kind") == "crash").is_empty(), events.filter(pl.col("kind") == "crash")
    assert not list(trial.store.glob(".staging/*"))
    assert not [child for child in children if _running(child)]  # reaped by the trial before it exited
    assert not [path for path in dirs if path.exists()]


def test_one_trial_at_a_time_and_a_kill_9_leaves_nothing_running_and_nothing_the_next_cannot_sweep(trials):
    first = trials("first")
    children = first.wait_measuring()
    dirs = first.runtime_dirs()
    [staging] = first.store.glob(".staging/*")
    trial_id, pid = staging.name, first.process.pid

    refused = trials("refused")
    assert refused.wait() == 2, refused.said
    holding = rf"trial {trial_id}, pid {pid}, its load ends at \d\d:\d\d:\d\d UTC \(in 59m\d\ds\)"
    assert re.search(rf"trial refused, nothing was run: another trial is running on this machine \({holding}\); "
                     "pass --wait to queue behind it", refused.said), refused.said
    launched_at = time.time()
    queued = trials("queued", "--wait", duration="3s")
    wait_until(lambda: "in the queue" in queued.said, "the queued trial to say it waits")
    seen_waiting_at = time.time()
    assert re.search(rf"another trial is running on this machine \({holding}\): waiting, number 1 in the queue; "
                     r"its turn not before \d\d:\d\d:\d\d UTC \(in 59m\d\ds\) \(Ctrl-C to stop\)", queued.said), \
        queued.said
    assert not queued.children() and list(first.store.glob(".staging/*")) == [staging]  # nothing started

    killed_at = time.time()
    first.process.kill()
    assert first.wait() == -signal.SIGKILL
    wait_until(lambda: not [child for child in children if _running(child)],
               "Locust and the hosts to die with their trial", timeout_s=30)
    # The kernel freed the lock with its holder; the queued trial, now holding it, removes what the dead one left.
    assert queued.wait() in (0, 1), queued.said
    said = queued.said
    assert re.search(r"the machine is free after \d+s in the queue: this trial starts", said), said
    for path in [staging, *dirs]:
        assert not path.exists()
        what = "trial" if path == staging else "runtime"
        assert f"removed leftovers of a dead {what}: {path} (owner pid {pid} gone: " in said, said
    assert said.index("the machine is free") < said.index("removed leftovers")
    landed = _landed(queued.store)
    assert landed.name != trial_id and not list(queued.store.glob(".staging/*"))
    # It started when its load did, after the wait, which is kept beside it.
    manifest = json.loads((landed / "trial.json").read_text())
    started = datetime.fromisoformat(manifest["started_at"]).timestamp()
    assert started >= killed_at and manifest["run_start"] == int(started)
    assert killed_at - seen_waiting_at <= manifest["machine_wait_s"] <= started - launched_at


def test_the_lock_names_its_holder_and_is_free_again_after_it(tmp_path, monkeypatch):
    monkeypatch.setenv(LOCK_ENV, str(tmp_path / "trial.lock"))
    said: list[str] = []
    with hold_machine(wait=False, on_wait=said.append) as lock:
        lock.name_trial("quick-smoke-20261130t101502z")
        with pytest.raises(MachineBusy, match=rf"\(trial quick-smoke-20261130t101502z, pid {os.getpid()}\)"), \
                hold_machine(wait=False, on_wait=said.append):
            pass
    with hold_machine(wait=False, on_wait=said.append):
        pass
    assert said == []
    assert (tmp_path / "trial.lock").read_text() == ""  # a holder that is gone is named to no one
