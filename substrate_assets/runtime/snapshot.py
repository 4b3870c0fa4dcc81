"""Actor snapshots on disk: the RAM image, the data files and a manifest, written atomically.

Layout of one snapshot directory::

    manifest.json   arrays (key, offset, length, rotate cursor), files (key, size), counters, the UseCPU load,
                    the sweperf service's finished jobs
    pages.img       every RAM array, concatenated
    files/<key>     the data directory's files

A snapshot is written to a sibling temporary directory and renamed into place,
so a reader never sees half of one; with ``fsync`` it is durable before the
rename.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from substrate_assets.runtime.cpu_load import CpuLoadSettings
from substrate_assets.runtime.glutton import Glutton, RamArray

MANIFEST = "manifest.json"
PAGES = "pages.img"
FILES = "files"
FORMAT = 1


@dataclass(frozen=True)
class SnapshotSizes:
    """Bytes per snapshot part, labelled like upstream's ``atelet_snapshot_size_bytes{file_name}``."""

    pages: int
    files: int

    @property
    def total(self) -> int:
        return self.pages + self.files


def _fsync_path(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_snapshot(glutton: Glutton, target: Path, *, fsync: bool,
                   jobs: Sequence[Mapping[str, Any]] = ()) -> SnapshotSizes:
    """Checkpoint ``glutton``'s RAM arrays and data files into ``target`` (which must not exist), with the
    sweperf service's ``jobs`` (none for a glutton actor)."""
    staging = target.with_name(f".{target.name}.partial-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    (staging / FILES).mkdir(parents=True)
    arrays = []
    offset = 0
    with (staging / PAGES).open("wb") as pages:
        for key, array in glutton.arrays.items():
            pages.write(array.data)
            arrays.append({"key": key, "offset": offset, "length": len(array.data), "cursor": array.cursor})
            offset += len(array.data)
        if fsync:
            pages.flush()
            os.fsync(pages.fileno())
    files = []
    file_bytes = 0
    for key in sorted(glutton.file_sizes):
        destination = staging / FILES / key
        shutil.copyfile(glutton.data_dir / key, destination)
        size = destination.stat().st_size
        files.append({"key": key, "size": size})
        file_bytes += size
        if fsync:
            _fsync_path(destination)
    manifest = {"format": FORMAT, "created_at": time.time(), "arrays": arrays, "files": files,
                "pings": glutton.pings, "ram_written": glutton.ram_written,
                "cpu_load": glutton.cpu_load.settings.as_dict() if glutton.cpu_load.settings else None,
                "jobs": [dict(job) for job in jobs]}
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=1))
    if fsync:
        _fsync_path(staging / MANIFEST)
        _fsync_path(staging / FILES)
        _fsync_path(staging)
    os.rename(staging, target)
    if fsync:
        _fsync_path(target.parent)
    return SnapshotSizes(offset, file_bytes)


def restore_snapshot(source: Path, glutton: Glutton) -> SnapshotSizes:
    """Load a snapshot into a fresh ``glutton``: RAM arrays (with cursors) into memory, files into its data dir."""
    manifest = json.loads((source / MANIFEST).read_text())
    if manifest.get("format") != FORMAT:
        raise ValueError(f"{source}: unknown snapshot format {manifest.get('format')!r}")
    pages_bytes = 0
    with (source / PAGES).open("rb", buffering=0) as pages:
        for entry in manifest["arrays"]:
            data = bytearray(entry["length"])
            pages.seek(entry["offset"])
            view = memoryview(data)
            filled = 0
            while filled < len(data):
                read = pages.readinto(view[filled:])
                if not read:
                    raise ValueError(f"{source / PAGES}: truncated at array {entry['key']!r}")
                filled += read
            glutton.arrays[entry["key"]] = RamArray(data, entry["cursor"])
            pages_bytes += len(data)
    file_bytes = 0
    for entry in manifest["files"]:
        shutil.copyfile(source / FILES / entry["key"], glutton.data_dir / entry["key"])
        glutton.file_sizes[entry["key"]] = entry["size"]
        file_bytes += entry["size"]
    glutton.pings = manifest.get("pings", 0)
    glutton.ram_written = manifest.get("ram_written", 0)
    if manifest.get("cpu_load"):  # UseCPU's load outlives a suspend: the restored actor runs it again
        glutton.cpu_load.apply(CpuLoadSettings(**manifest["cpu_load"]))
    return SnapshotSizes(pages_bytes, file_bytes)


def snapshot_jobs(source: Path) -> list[dict[str, Any]]:
    """The sweperf service's finished jobs a snapshot holds (none in one written before they were kept)."""
    jobs = json.loads((source / MANIFEST).read_text()).get("jobs")
    return list(jobs) if isinstance(jobs, list) else []


def snapshot_bytes(source: Path) -> int:
    """Total bytes a restore of ``source`` reads."""
    total = (source / PAGES).stat().st_size
    return total + sum(p.stat().st_size for p in (source / FILES).iterdir())
