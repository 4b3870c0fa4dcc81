"""Where the package keeps what it derives once and reuses between processes."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path

CACHE_ENV = "SUBSTRATE_BENCH_CACHE"


def cache_directory(kind: str) -> Path:
    """A writable directory for what the package derives once and keeps between processes (generated protobuf
    modules, the tables each SQL model reads, the warehouse's columns): ``$SUBSTRATE_BENCH_CACHE/<kind>``, else
    ``$XDG_CACHE_HOME/substrate-bench/<kind>`` (``~/.cache``), else one under the system's temporary directory."""
    configured = os.environ.get(CACHE_ENV)
    if configured:
        return Path(configured) / kind
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    base = Path(xdg) / "substrate-bench" / kind
    try:
        base.mkdir(parents=True, exist_ok=True)
        if os.access(base, os.W_OK):
            return base
    except OSError:
        pass
    return Path(tempfile.gettempdir()) / f"substrate-bench-{os.getuid()}" / kind


def read_cached(path: Path) -> object | None:
    """The JSON a cache file holds; None when it is missing or does not read (the caller derives it again)."""
    try:
        value: object = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return value


def write_cached(path: Path, value: object) -> None:
    """Write ``value`` as JSON to a temporary file renamed over ``path``: a reader sees the old cache or the new one.
    A cache that cannot be written is left as it is (what it holds is derived again)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".writing-", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(handle, "w") as file:
            json.dump(value, file, sort_keys=True)
        os.replace(temporary, path)
    except OSError:
        Path(temporary).unlink(missing_ok=True)


def files_digest(files: Iterable[Path], root: Path) -> str:
    """A sha256 of ``files`` (under ``root``): each one's path relative to ``root`` and its bytes, in path order. What
    is derived from code or models is kept under it, and derived again when any of them changed."""
    digest = hashlib.sha256()
    for path in sorted(files, key=lambda path: path.relative_to(root)):
        digest.update(f"{path.relative_to(root)}\n".encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()
