"""Owned scratch directories, and the sweep that removes those whose owner process is gone.

A runtime's state directory (``$TMPDIR/substrate-runtime-*``), its live directory
(``/dev/shm/substrate-live-*``) and a trial's staging directory are removed by their owner when it stops.
An owner killed with SIGKILL (or the OOM killer, or a power cut of the process) cannot, so each directory
carries an owner record: host name, pid and the process's start time from ``/proc/<pid>/stat``, which a
reused pid does not share. The next trial or runtime start removes a directory only when its record names
a process of this host that is gone; a directory without a record (being created, or made by an older
version) is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

OWNER_FILE = "owner.json"
STATE_PREFIX = "substrate-runtime-"
LIVE_PREFIX = "substrate-live-"
SHM = Path("/dev/shm")


def _process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (``/proc/<pid>/stat`` field 22); None when there is no
    such process (or no /proc, or it is a zombie: dead, only waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: the fields after it follow the last ')'.
    fields = stat[stat.rindex(")") + 2:].split()
    if fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    started: int | None
    command: str

    @classmethod
    def this_process(cls) -> Owner:
        return cls(socket.gethostname(), os.getpid(), _process_start(os.getpid()),
                   " ".join([Path(sys.argv[0]).name, *sys.argv[1:]])[:200] if sys.argv else "python")

    def gone(self) -> bool:
        """Whether the owner is known to have exited. An owner on another host (a store shared over a network
        filesystem) is never taken for gone: its pids mean nothing here."""
        if self.host != socket.gethostname():
            return False
        if Path("/proc/self/stat").exists():
            started = _process_start(self.pid)
            return started is None or (self.started is not None and started != self.started)
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False


def mark(directory: Path) -> None:
    """Record this process as ``directory``'s owner (written whole: a reader never sees half a record)."""
    owner = Owner.this_process()
    partial = directory / f".{OWNER_FILE}.{os.getpid()}"
    partial.write_text(json.dumps({"host": owner.host, "pid": owner.pid, "started": owner.started,
                                   "command": owner.command}))
    os.replace(partial, directory / OWNER_FILE)


def owner_of(directory: Path) -> Owner | None:
    try:
        record = json.loads((directory / OWNER_FILE).read_text())
        return Owner(str(record["host"]), int(record["pid"]), record.get("started"), str(record.get("command", "")))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def size_of(directory: Path) -> int:
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def megabytes(size: int) -> str:
    return f"{size / 1e6:.1f} MB"


@dataclass(frozen=True)
class Leftover:
    """A directory whose owner is gone, found by a sweep and removed."""

    path: Path
    owner: Owner
    size: int

    def describe(self, what: str) -> str:
        return (f"removed leftovers of a dead {what}: {self.path} (owner pid {self.owner.pid} gone: "
                f"{self.owner.command}; {megabytes(self.size)})")


def dead_owned(directories: Iterable[Path], marker_dir: str = "") -> list[Leftover]:
    """Those of ``directories`` (this user's) whose owner record, in ``<directory>/<marker_dir>``, names a process
    that is gone."""
    found = []
    uid = os.getuid()
    for directory in directories:
        try:
            if directory.is_symlink() or not directory.is_dir() or directory.stat().st_uid != uid:
                continue
        except OSError:
            continue
        owner = owner_of(directory / marker_dir if marker_dir else directory)
        if owner is not None and owner.gone():
            found.append(Leftover(directory, owner, size_of(directory)))
    return found


def remove(leftovers: Iterable[Leftover], what: str) -> list[str]:
    """Remove each leftover; one line per directory removed, for the caller to say."""
    said = []
    for leftover in leftovers:
        shutil.rmtree(leftover.path, ignore_errors=True)
        if leftover.path.exists():
            continue
        said.append(leftover.describe(what))
    return said


def runtime_directories() -> list[Path]:
    """Where runtimes put what they own when not told otherwise: state dirs in the temporary directory, live
    dirs on /dev/shm."""
    found = list(Path(tempfile.gettempdir()).glob(f"{STATE_PREFIX}*"))
    if SHM.is_dir():
        found += SHM.glob(f"{LIVE_PREFIX}*")
    return found


def sweep_runtime_leftovers() -> list[str]:
    """Remove the state and live directories of runtimes that died without stopping; one line each."""
    return remove(dead_owned(runtime_directories()), "runtime")
