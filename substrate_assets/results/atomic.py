"""Atomic file writes: a temporary name in the same directory, then a rename, so a reader never sees half a file.

A write that fails (a full disk, above all) leaves nothing behind and raises :class:`WriteFailed`, an
``OSError`` whose message is one line naming the file: ``no space left on device writing <path>``.
"""

from __future__ import annotations

import errno
import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import polars as pl

# Polars reports an I/O failure as a ComputeError whose text ends with the OS error: "... (os error 28)".
_POLARS_OS_ERROR = re.compile(r"os error (\d+)")


class WriteFailed(OSError):
    """A file could not be written (nothing of it is left); ``str()`` is one line: ``<reason> writing <path>``."""

    def __init__(self, code: int, path: Path) -> None:
        super().__init__(code, os.strerror(code), str(path))

    def __str__(self) -> str:
        reason = self.strerror or "write failed"
        return f"{reason[:1].lower()}{reason[1:]} writing {self.filename}"

    @property
    def disk_full(self) -> bool:
        return self.errno in (errno.ENOSPC, errno.EDQUOT)


def write_error(error: BaseException, path: Path) -> WriteFailed | None:
    """``error`` as a :class:`WriteFailed` for ``path`` if it is an I/O failure (from the OS or from Polars)."""
    if isinstance(error, WriteFailed):
        return error
    if isinstance(error, OSError) and error.errno is not None:
        return WriteFailed(error.errno, path)
    if isinstance(error, pl.exceptions.PolarsError) and (found := _POLARS_OS_ERROR.search(str(error))):
        return WriteFailed(int(found[1]), path)
    return None


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it is renamed to ``path``.

    On failure the temporary file is removed; an I/O failure is raised as :class:`WriteFailed`."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".partial", dir=path.parent)
    except OSError as error:
        failed = write_error(error, path)
        if failed is None:
            raise
        raise failed from error
    os.fchmod(handle, 0o644)  # mkstemp's 0600 would make results unreadable to other users
    os.close(handle)
    partial = Path(name)
    try:
        yield partial
        os.replace(partial, path)
    except BaseException as error:
        partial.unlink(missing_ok=True)
        failed = write_error(error, path) if isinstance(error, Exception) else None
        if failed is not None and failed is not error:
            raise failed from error
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
    return write_text(path, json_text(value))


def json_text(value: Any) -> str:
    """Pretty JSON (indent 2) with a trailing newline, as upstream writes its JSON files."""
    return json.dumps(value, indent=2, sort_keys=False) + "\n"
