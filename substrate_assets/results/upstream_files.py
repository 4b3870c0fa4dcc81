"""What an upstream run may bring into the store: the files upstream's runner writes, each by name and under a size
cap, taken as regular files only — never through a symbolic link, never a FIFO, device or a file hard-linked from
elsewhere — and where its run directory may be (the partition grammar, component by component).

An upstream run comes from other people's machines and buckets. Everything here is decided from the listing
(``lstat``: nothing is followed) before a byte is copied, and copying re-checks the file it opened is the one listed.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path

from substrate_assets.results.trial_directory import (
    EXCEPTIONS_CSV,
    FAILURES_CSV,
    LOAD_STEPS_JSON,
    LOGS_TXT,
    SERVER_SUMMARY_JSON,
    STATS_CSV,
    STATS_HISTORY_CSV,
    STATS_JSONL,
    STATUS_JSON,
)
from substrate_assets.results.trial_key import EARLIEST_TS, LATEST_TS, TrialKey

MIB = 1 << 20
# Each file upstream's runner uploads, and the most it is taken at: far above what a day-long run writes, far
# below what would exhaust the machine reading it.
KNOWN_FILES: dict[str, int] = {
    STATUS_JSON: 1 * MIB,
    SERVER_SUMMARY_JSON: 16 * MIB,
    LOAD_STEPS_JSON: 16 * MIB,
    STATS_CSV: 64 * MIB,
    FAILURES_CSV: 64 * MIB,
    EXCEPTIONS_CSV: 64 * MIB,
    STATS_HISTORY_CSV: 512 * MIB,
    STATS_JSONL: 512 * MIB,
    LOGS_TXT: 512 * MIB,
    "traces.txt": 512 * MIB,
    "actors_history.csv": 512 * MIB,
}
# Locust's CSVs also arrive in their local form, ``<test name>_<kind>.csv``.
_PREFIXED = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}_(?P<name>stats|stats_history|failures|exceptions)\.csv")
# Every run has its status.json ("always", upstream's runner): a directory without one is not a run.
REQUIRED = STATUS_JSON

_SUITE = re.compile(r"[a-z0-9][a-z0-9_-]{0,99}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
_TS = re.compile(r"[1-9]\d{0,10}")
_TAG = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
PARTITIONS = ("runs", "<name>", "run_date=", "run_ts=", "run_tag=")


def cap_of(name: str) -> int | None:
    """The size cap of a file upstream writes by this name; None for a name it does not write."""
    if name in KNOWN_FILES:
        return KNOWN_FILES[name]
    match = _PREFIXED.fullmatch(name)
    return KNOWN_FILES[f"{match['name']}.csv"] if match else None


# Locust's CSVs have 4 to 30-odd columns; a header far past that, or too long to be one line of names, is refused
# before a reader builds a frame of it (a million columns took 107 s and 1.9 GB to read).
MAX_CSV_COLUMNS = 128
MAX_CSV_HEADER_BYTES = 16 * 1024


def check_csv_header(path: Path) -> None:
    """ValueError naming the file when ``path``, one of the CSVs upstream writes, has a header no Locust CSV has."""
    with open(path, "rb") as reading:
        head = reading.read(MAX_CSV_HEADER_BYTES + 1)
    line, newline, _ = head.partition(b"\n")
    if not newline and len(head) > MAX_CSV_HEADER_BYTES:
        raise ValueError(f"{path.name}: its header is longer than {MAX_CSV_HEADER_BYTES // 1024} KiB; no Locust "
                         "CSV's is")
    columns = line.count(b",") + 1
    if columns > MAX_CSV_COLUMNS:
        raise ValueError(f"{path.name}: a header of {columns:,} columns or more; a Locust CSV has at most "
                         f"{MAX_CSV_COLUMNS}")


def partition_problem(level: str, component: str) -> str | None:
    """What is wrong with one component of a run's path at a level of ``PARTITIONS`` (``<name>``, ``run_date=``…),
    or None."""
    if level == "<name>":
        return None if _SUITE.fullmatch(component) else "a run's name is [a-z0-9_-], starting with a letter or digit"
    value = component.removeprefix(level)
    if not component.startswith(level):
        return f"not a {level}… directory"
    if level == "run_date=":
        return None if _DATE.fullmatch(value) else "not a date (YYYY-MM-DD)"
    if level == "run_ts=":
        if not _TS.fullmatch(value) or not EARLIEST_TS <= int(value) < LATEST_TS:
            return "not a run time (whole Unix seconds from 2000 to 2100)"
        return None
    if level == "run_tag=":
        return None if _TAG.fullmatch(value) else "a tag is [A-Za-z0-9._-], starting with a letter or digit"
    raise ValueError(f"no partition level {level!r}")


def run_key(components: tuple[str, ...]) -> TrialKey:
    """The key of a run directory from its path's last four components (``<name>``, ``run_date=``, ``run_ts=``,
    ``run_tag=``), each checked exactly; ValueError naming the first that is wrong."""
    for level, component in zip(PARTITIONS[1:], components, strict=True):
        problem = partition_problem(level, component)
        if problem is not None:
            raise ValueError(f"{component!r}: {problem}")
    name, date, ts, tag = components
    key = TrialKey(name, int(ts.removeprefix("run_ts=")), tag.removeprefix("run_tag="))
    if key.run_date != date.removeprefix("run_date="):
        raise ValueError(f"{date!r} is not the date of {ts!r} ({key.run_date}, UTC)")
    return key


def kind_of(mode: int) -> str:
    """What a non-regular directory entry is, in words."""
    for test, words in ((stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"),
                        (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                        (stat.S_ISDIR, "a directory")):
        if test(mode):
            return words
    return "not a regular file"


@dataclass(frozen=True)
class Listed:
    """A file of a run to copy: its name, size, and (local files) the inode it was listed with."""

    name: str
    size: int
    inode: tuple[int, int] | None = None


def take_local(source: Path, listed: Listed, target: Path) -> None:
    """Copy ``listed`` from the local run directory ``source`` into ``target`` (a new file of this process, its mode
    the project's): opened without following a link, and refused (ValueError) if it is no longer the regular file
    that was listed, or has grown past its cap."""
    cap = cap_of(listed.name) or 0
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        descriptor = os.open(source / listed.name, flags)
    except OSError as error:
        raise ValueError(f"{listed.name}: cannot be opened ({error.strerror})") from None
    with os.fdopen(descriptor, "rb") as reading:
        opened = os.fstat(reading.fileno())
        if not stat.S_ISREG(opened.st_mode) or (opened.st_dev, opened.st_ino) != listed.inode:
            raise ValueError(f"{listed.name}: changed between listing and copying")
        copied = 0
        with open(target, "xb") as writing:
            while chunk := reading.read(MIB):
                copied += len(chunk)
                if copied > cap:
                    raise ValueError(f"{listed.name}: over its cap of {cap // MIB} MiB")
                writing.write(chunk)
