"""The files of a site being built: each page rendered, or carried over from the site it replaces when nothing it
shows changed, and the whole swapped in at once.

Pages are drawn two at a time. A page's charts are rendered in the renderer's process (``renderer``), and its
tables and charts are built here in Python (DuckDB, Altair): while one page's charts render, the other page is
built.
Each of the two threads reads through a cursor of its own (a DuckDB connection is not shared between threads), on
the database the site's connection reads."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import threading
from collections.abc import Callable, Sequence
from concurrent import futures
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from substrate_assets.warehouse.connection import prepare

SITE_MARK = ".substrate-bench-site"
# Two: the renderer is one worker, so a third page would only wait for it or for the interpreter's lock.
PAGES_AT_ONCE = 2
# How long a signal (Ctrl-C, a run's termination) may wait to be seen while pages are drawn.
SIGNALS_SEEN_S = 0.2

Render = Callable[[duckdb.DuckDBPyConnection], list[str]]


@dataclass(frozen=True)
class PageSet:
    """Pages drawn together (paths in the site; the first names the set): their fingerprint (None: always drawn) and
    how to render their texts, in order, from a connection to the warehouse."""

    names: Sequence[str]
    fingerprint: str | None
    render: Render


def _previous_pages(directory: Path) -> dict[str, Any]:
    """What the site in ``directory`` recorded of its pages (each one's fingerprint and its files' digests); none
    when it cannot be read."""
    try:
        recorded = json.loads((directory / SITE_MARK).read_text())
    except (OSError, ValueError):
        return {}
    pages = recorded.get("pages") if isinstance(recorded, dict) else None
    return pages if isinstance(pages, dict) else {}


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def write_page(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def swap_in(built: Path, directory: Path) -> None:
    """``built`` becomes ``directory``; the site it replaces is removed after, never before."""
    if not directory.exists():
        os.replace(built, directory)
        return
    old = directory.with_name(f".{directory.name}.old-{os.getpid()}")
    os.replace(directory, old)
    os.replace(built, directory)
    shutil.rmtree(old, ignore_errors=True)


def _cursors(connection: duckdb.DuckDBPyConnection, count: int) -> list[duckdb.DuckDBPyConnection]:
    """``count`` cursors on ``connection``'s database, one per thread, with the warehouse's macros (a connection's
    own, not its cursors'). A cursor starts in the instance's default database, which is not the one in use on a
    lake's connection."""
    row = connection.execute("SELECT current_database()").fetchone()
    assert row is not None, "a connection always has a database in use"
    use = 'USE "{}"'.format(str(row[0]).replace('"', '""'))
    cursors: list[duckdb.DuckDBPyConnection] = []
    try:
        for _ in range(count):
            cursors.append(connection.cursor())
            prepare(cursors[-1].execute(use), python_functions=False)
    except BaseException:
        for cursor in cursors:
            cursor.close()
        raise
    return cursors


class SitePages:
    """The pages of a site being built in ``built``: each rendered, or carried over from ``directory`` (the site it
    replaces) when its fingerprint is the one that site recorded for it and its files still hold what that site
    wrote (a page changed, replaced or linked elsewhere since is drawn again: nothing but a page of ours is copied)."""

    def __init__(self, directory: Path, built: Path) -> None:
        self.directory, self.built = directory, built
        self.previous = _previous_pages(directory)
        self.recorded: dict[str, dict[str, Any]] = {}
        self.kept: set[str] = set()
        # Set when a page of the sets being put failed: no set is begun after it.
        self.failed = threading.Event()

    def _unchanged(self, key: str, names: Sequence[str], fingerprint: str) -> dict[str, bytes] | None:
        before = self.previous.get(key)
        if not isinstance(before, dict) or before.get("fingerprint") != fingerprint:
            return None
        listed = before.get("files")
        files = listed if isinstance(listed, dict) else {}
        kept = {}
        for name in names:
            try:
                data = (self.directory / name).read_bytes()
            except OSError:
                return None
            if files.get(name) != _digest(data):
                return None
            kept[name] = data
        return kept

    def _put(self, connection: duckdb.DuckDBPyConnection, pages: PageSet) -> None:
        key = pages.names[0]
        kept = None if pages.fingerprint is None else self._unchanged(key, pages.names, pages.fingerprint)
        if kept is not None:
            self.kept.add(key)
        else:
            kept = {name: text.encode() for name, text in zip(pages.names, pages.render(connection), strict=True)}
        for name, data in kept.items():
            write_page(self.built / name, data)
        if pages.fingerprint is not None:
            self.recorded[key] = {"fingerprint": pages.fingerprint,
                                  "files": {name: _digest(data) for name, data in kept.items()}}

    def put(self, connection: duckdb.DuckDBPyConnection, sets: Sequence[PageSet]) -> None:
        """Each set's pages, :data:`PAGES_AT_ONCE` sets at a time, in order; after an error no set is begun, and it
        is raised once the sets being drawn have ended."""
        pending = iter(sets)
        taking = threading.Lock()
        failed = self.failed = threading.Event()

        def draw(cursor: duckdb.DuckDBPyConnection) -> None:
            try:
                while not failed.is_set():
                    with taking:
                        pages = next(pending, None)
                    if pages is None:
                        return
                    self._put(cursor, pages)
            except BaseException:
                failed.set()
                raise

        cursors = _cursors(connection, min(PAGES_AT_ONCE, len(sets)))
        try:
            with ThreadPoolExecutor(max_workers=len(cursors) or 1, thread_name_prefix="site-page") as pool:
                try:
                    drawing = [pool.submit(draw, cursor) for cursor in cursors]
                    # Woken every so often: a signal the kernel handed to a page's thread is handled only by this
                    # one, and only once it runs.
                    while not all(drawn.done() for drawn in drawing):
                        futures.wait(drawing, timeout=SIGNALS_SEEN_S)
                    for drawn in drawing:
                        drawn.result()
                except BaseException:
                    failed.set()  # this thread's own interruption too (a signal): no page is begun after it
                    raise
        finally:
            for cursor in cursors:
                cursor.close()

    def mark(self, moment: datetime) -> None:
        (self.built / SITE_MARK).write_text(json.dumps({
            "built_by": "substrate-bench site", "generated_at": moment.isoformat(), "pages": self.recorded},
            indent=1, sort_keys=True) + "\n")
