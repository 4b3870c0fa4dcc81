"""Owned scratch directories, and the sweep that removes those whose owner process is gone.

A directory a process removes when it stops (a runtime's state and live directories, a trial's staging directory)
is left behind when its owner is killed with SIGKILL (or the OOM killer, or a power cut of the process). So each
carries an owner record: host name, pid, the process's start in clock ticks since boot (which a reused pid does
not share) and its command line. A sweep removes a directory only when its record names a process of this host
that is gone; a directory without a record (being created, or made by an older version) is never touched.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from substrate_assets.processes.owner import Owner, ticks_per_second

OWNER_FILE = "owner.json"


def mark(directory: Path, owner: Owner | None = None) -> None:
    """Record ``owner`` (default: this process) as ``directory``'s owner (written whole: a reader never sees half a
    record)."""
    owner = owner or Owner.this_process()
    partial = directory / f".{OWNER_FILE}.{os.getpid()}"
    partial.write_text(json.dumps({"host": owner.host, "pid": owner.pid, "started": owner.start_ticks,
                                   "command": owner.command}))
    os.replace(partial, directory / OWNER_FILE)


def owner_of(directory: Path) -> Owner | None:
    try:
        record = json.loads((directory / OWNER_FILE).read_text())
        ticks = record.get("started")
        started = None if ticks is None else int(ticks) / ticks_per_second()
        return Owner(str(record["host"]), int(record["pid"]), started, str(record.get("command", "")))
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
        if owner is not None and owner.is_gone():
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
