"""Atomic file writes: a temporary name in the same directory, then a rename, so a reader never sees half a file."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it is renamed to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    os.fchmod(handle, 0o644)  # mkstemp's 0600 would make results unreadable to other users
    os.close(handle)
    partial = Path(name)
    try:
        yield partial
        os.replace(partial, path)
    except BaseException:
        partial.unlink(missing_ok=True)
        raise


def write_bytes(path: Path, data: bytes) -> Path:
    with atomic_path(path) as partial:
        partial.write_bytes(data)
    return path


def write_text(path: Path, text: str) -> Path:
    return write_bytes(path, text.encode())


def write_parquet(path: Path, frame: pl.DataFrame) -> Path:
    with atomic_path(path) as partial:
        frame.write_parquet(partial)
    return path


def write_json(path: Path, value: Any) -> Path:
    """Pretty JSON (indent 2) with a trailing newline, as upstream writes its JSON files."""
    return write_text(path, json.dumps(value, indent=2, sort_keys=False) + "\n")
