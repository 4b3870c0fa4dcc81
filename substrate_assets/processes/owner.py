"""Who owns something: a process, named by host, pid and start time, so that a pid the system has since given to
another process is not taken for the owner.

The start is kept as seconds since boot. On Linux it is read from ``/proc/<pid>/stat`` (field 22, clock ticks
since boot): exact and unmoved by clock adjustments, so an owner record that keeps the ticks tells a reused pid
apart to the tick. psutil's ``create_time`` adds the boot time by the wall clock, which clock adjustments move by
a second or so, and does not give the ticks themselves; elsewhere than Linux it is what there is. A start
recorded by the wall clock (a Dagster run's tags) is compared with the slack such adjustments need.
"""

from __future__ import annotations

import functools
import os
import socket
import sys
from dataclasses import dataclass
from pathlib import Path

import psutil

_LINUX = sys.platform.startswith("linux")
# How far apart two readings of one process's start by the wall clock may be: clock adjustments move the boot time
# by about a second, far below the time a pid takes to be reused.
WALL_CLOCK_SLACK_S = 1.0


@functools.cache
def ticks_per_second() -> int:
    return os.sysconf("SC_CLK_TCK") if _LINUX else 100


@functools.cache
def _boot_time() -> float:
    """The boot time by the wall clock, read once: one process's starts then convert the same way every time."""
    return float(psutil.boot_time())


def _start_ticks(pid: int) -> int | None:
    """``/proc/<pid>/stat`` field 22; None when there is no such process or it is a zombie (dead, only waiting to
    be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


class _Unknown(Exception):
    """The process exists but its start cannot be read (another user's, elsewhere than Linux)."""


def _started(pid: int) -> float | None:
    """Seconds since boot when ``pid`` started; None when there is no such process or it is a zombie."""
    if _LINUX:
        ticks = _start_ticks(pid)
        return None if ticks is None else ticks / ticks_per_second()
    try:
        process = psutil.Process(pid)
        if process.status() == psutil.STATUS_ZOMBIE:
            return None
        return float(process.create_time()) - _boot_time()
    except psutil.NoSuchProcess:
        return None
    except psutil.AccessDenied as error:
        raise _Unknown from error


def _command() -> str:
    return " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:200] if sys.argv else "python"


@dataclass(frozen=True)
class Owner:
    """A process of ``host``: its pid, its start in seconds since boot (None: not recorded, then any process with
    the pid is taken for it) and, where recorded, its command line."""

    host: str
    pid: int
    started: float | None
    command: str = ""

    @classmethod
    def this_process(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid(), _started(os.getpid()), _command())

    @classmethod
    def of_process(cls, pid: int) -> Owner:
        """The live process ``pid`` of this host (a child this process started); its start None if it is gone."""
        try:
            started = _started(pid)
        except _Unknown:
            started = None
        return cls(socket.gethostname(), pid, started)

    @classmethod
    def started_at(cls, host: str, pid: int, epoch_s: float) -> Owner:
        """The owner whose start was recorded by the wall clock, in seconds since the epoch."""
        return cls(host, pid, epoch_s - _boot_time())

    @property
    def start_epoch_s(self) -> float | None:
        """The start by the wall clock, in seconds since the epoch (as psutil's ``create_time`` gives it); None
        when it was not recorded."""
        return None if self.started is None else self.started + _boot_time()

    @property
    def start_ticks(self) -> int | None:
        """The start in clock ticks since boot, as ``/proc/<pid>/stat`` gives it."""
        return None if self.started is None else round(self.started * ticks_per_second())

    @property
    def is_here(self) -> bool:
        return self.host == socket.gethostname()

    def is_gone(self, slack_s: float = 0.0) -> bool:
        """This host has no such process: the pid is free, a zombie, or now a process started at another time
        (more than ``slack_s`` apart). An owner on another host is never taken for gone: its pids mean nothing
        here."""
        if not self.is_here:
            return False
        if not _LINUX:
            slack_s = max(slack_s, WALL_CLOCK_SLACK_S)  # the start was read by the wall clock
        try:
            started = _started(self.pid)
        except _Unknown:
            return False  # it exists
        return started is None or (self.started is not None and abs(started - self.started) > slack_s)

    def describe(self) -> str:
        return f"pid {self.pid}" if self.is_here else f"pid {self.pid} on {self.host}"
