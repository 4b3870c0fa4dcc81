"""Where the package keeps what it derives once and reuses between processes."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

CACHE_ENV = "SUBSTRATE_BENCH_CACHE"


def cache_directory(kind: str) -> Path:
    """A writable directory for what the package derives once and keeps between processes (generated protobuf
    modules, the tables each SQL model reads): ``$SUBSTRATE_BENCH_CACHE/<kind>``, else
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
