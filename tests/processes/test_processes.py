"""The processes layer with real processes: an owner is gone once its process has exited, an owner record survives
the trip through its file, and a child started through the parent-death launcher dies with its parent. Every wait
is on a process's state (its output, its exit), never on time passing."""

import json
import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from substrate_assets.processes import leftovers
from substrate_assets.processes.owner import WALL_CLOCK_SLACK_S, Owner, ticks_per_second
from substrate_assets.processes.parent_death import PARENT_PID_ENV
from substrate_assets.processes.stop_signals import exit_code, signal_name

linux_only = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")

# Marks the directory it is given as its own, says so, and lives until its stdin closes.
MARKING_CHILD = ("import sys; from pathlib import Path; from substrate_assets.processes.leftovers import mark; "
                 "mark(Path(sys.argv[1])); print('marked', flush=True); sys.stdin.read()")
# Says its pid, then waits for a signal.
SLEEPER = "import os, signal; print(os.getpid(), flush=True); signal.pause()"
# Starts SLEEPER through the launcher, says the sleeper's pid, and lives until its stdin closes.
LAUNCHING_PARENT = (
    "import subprocess, sys\n"
    "from substrate_assets.processes.parent_death import dying_with_this_process\n"
    f"child = subprocess.Popen(dying_with_this_process([sys.executable, '-c', {SLEEPER!r}]), stdout=subprocess.PIPE)\n"
    "print(child.stdout.readline().decode().strip(), flush=True)\n"
    "sys.stdin.read()\n"
)


def _wait_until_gone(owner: Owner, within_s: float = 60.0) -> None:
    """Wait for ``owner``'s process to end (exited, or a zombie nobody has reaped yet)."""
    deadline = time.monotonic() + within_s
    while not owner.is_gone():
        assert time.monotonic() < deadline, f"{owner.describe()} still running after {within_s:g}s"
        time.sleep(0.05)


def test_an_owner_is_gone_once_its_process_has_exited(tmp_path):
    owned = tmp_path / "trial"
    (owned / "work").mkdir(parents=True)
    (owned / "data").write_bytes(b"x" * 1000)
    child = subprocess.Popen([sys.executable, "-c", MARKING_CHILD, str(owned / "work")], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "marked\n"
        record = json.loads((owned / "work" / leftovers.OWNER_FILE).read_text())
        owner = leftovers.owner_of(owned / "work")
        assert owner is not None and owner.pid == child.pid == record["pid"] and owner.host == record["host"]
        assert isinstance(record["started"], int) and owner.start_ticks == record["started"]  # clock ticks since boot
        assert owner.command.startswith("-c ")
        assert not owner.is_gone() and leftovers.dead_owned([owned], marker_dir="work") == []
        one_tick_later = Owner(owner.host, owner.pid, (record["started"] + 1) / ticks_per_second())
        assert one_tick_later.is_gone()  # the same pid, started at another time: a reused pid
        assert not Owner("another-machine", owner.pid, None).is_gone()

        child.stdin.close()
        os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOWAIT)  # exited, not yet reaped: a zombie
        assert owner.is_gone()
    finally:
        child.kill()
        child.wait()
    assert owner.is_gone() and Owner(owner.host, owner.pid, None).is_gone()
    [found] = leftovers.dead_owned([owned], marker_dir="work")
    assert found.owner == owner and found.size > 1000
    assert leftovers.remove([found], "trial") == [
        f"removed leftovers of a dead trial: {owned} (owner pid {child.pid} gone: {owner.command}; 0.0 MB)"]
    assert not owned.exists()


def test_this_process_starts_when_psutil_says_it_did():
    me = Owner.this_process()
    assert me.pid == os.getpid() and not me.is_gone()
    assert abs(me.start_epoch_s - psutil.Process().create_time()) < 0.01
    by_the_wall_clock = Owner.started_at(me.host, me.pid, float(f"{me.start_epoch_s:.3f}"))
    assert abs(by_the_wall_clock.started - me.started) < 0.001 and not by_the_wall_clock.is_gone(WALL_CLOCK_SLACK_S)
    assert Owner.started_at(me.host, me.pid, me.start_epoch_s - 100).is_gone(WALL_CLOCK_SLACK_S)
    assert Owner(me.host, me.pid, None).start_epoch_s is None  # not recorded is not the boot time


@linux_only
def test_the_launcher_kills_the_child_when_its_parent_dies():
    parent = subprocess.Popen([sys.executable, "-c", LAUNCHING_PARENT], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    sleeper: Owner | None = None
    try:
        sleeper_pid = int(parent.stdout.readline())
        sleeper = Owner(Owner.this_process().host, sleeper_pid, None)
        assert not sleeper.is_gone()
        assert psutil.Process(sleeper_pid).ppid() == parent.pid  # the launcher became the sleeper
        parent.kill()
        parent.wait()
        _wait_until_gone(sleeper)
    finally:
        parent.kill()
        parent.wait()
        if sleeper is not None and not sleeper.is_gone():
            os.kill(sleeper.pid, signal.SIGKILL)


@linux_only
def test_a_child_whose_parent_already_died_is_signalled_at_once():
    script = ("import os, signal\n"
              "from substrate_assets.processes.parent_death import stop_when_parent_dies\n"
              "signal.signal(signal.SIGHUP, lambda *_: (print('signalled', flush=True), os._exit(0)))\n"
              "stop_when_parent_dies()\n"
              "print('not signalled', flush=True)\n")
    orphaned = subprocess.run([sys.executable, "-c", script], env={**os.environ, PARENT_PID_ENV: "1"},
                              capture_output=True, text=True, timeout=60)
    assert orphaned.returncode == 0 and orphaned.stdout == "signalled\n"
    parented = subprocess.run([sys.executable, "-c", script], env={**os.environ, PARENT_PID_ENV: str(os.getpid())},
                              capture_output=True, text=True, timeout=60)
    assert parented.returncode == 0 and parented.stdout == "not signalled\n"


def test_a_stopped_command_exits_as_a_shell_says():
    assert (exit_code(signal.SIGINT), exit_code(signal.SIGTERM), exit_code(signal.SIGHUP)) == (130, 143, 129)
    assert signal_name(signal.SIGTERM) == "SIGTERM"
