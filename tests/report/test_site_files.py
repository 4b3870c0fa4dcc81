"""A site's pages are drawn two at a time, each thread through a cursor of its own on the database the site's
connection reads (a lake's connection reads an attached database, not the instance's default), with the warehouse's
macros; after an error, or a signal to the process, no page is begun, and the error is raised."""

import os
import subprocess
import sys
import threading

import duckdb
import pytest

from substrate_assets.report.site_files import PAGES_AT_ONCE, PageSet, SitePages


@pytest.fixture()
def connection(tmp_path):
    """As a lake's reader is: an in-memory instance with the warehouse attached, and that database in use."""
    with duckdb.connect() as connection:
        connection.execute(f"ATTACH '{tmp_path / 'lake.duckdb'}' AS lake")
        connection.execute("CREATE TABLE lake.pages AS SELECT range AS number FROM range(6)")
        connection.execute("USE lake")
        yield connection


def test_every_page_is_drawn_from_the_database_in_use_two_at_a_time(connection, tmp_path):
    built = tmp_path / "built"
    pages = SitePages(tmp_path / "site", built)
    both_in = threading.Barrier(PAGES_AT_ONCE, timeout=60)
    threads = set()

    def render(number: int):
        def texts(cursor: duckdb.DuckDBPyConnection) -> list[str]:
            threads.add(threading.get_ident())
            if number < PAGES_AT_ONCE:
                both_in.wait()  # the first two pages are drawn at once, or this times out
            # The warehouse's macros, which a cursor does not have from its connection.
            (found,) = cursor.execute("SELECT number FROM pages WHERE number = ? AND is_wake(NULL, 'WakeFirstTouch')",
                                      [number]).fetchone()
            return [f"page {found}"]
        return texts

    pages.put(connection, [PageSet([f"trials/{number}.html"], f"fingerprint {number}", render(number))
                           for number in range(6)])
    assert len(threads) == PAGES_AT_ONCE
    assert {path.name: path.read_text() for path in (built / "trials").iterdir()} == {
        f"{number}.html": f"page {number}" for number in range(6)}
    assert set(pages.recorded) == {f"trials/{number}.html" for number in range(6)}
    assert connection.execute("SELECT current_database()").fetchone() == ("lake",)  # the site's own is untouched


def test_after_an_error_no_page_is_begun_and_the_error_is_raised(connection, tmp_path):
    pages = SitePages(tmp_path / "site", tmp_path / "built")
    begun = []

    def render(number: int):
        def texts(_cursor: duckdb.DuckDBPyConnection) -> list[str]:
            begun.append(number)
            if number == 0:
                second_begun.wait(60)
                raise RuntimeError("the first page cannot be drawn")
            second_begun.set()
            assert pages.failed.wait(60), "the first page's error was not seen"
            return [f"page {number}"]
        return texts

    second_begun = threading.Event()
    with pytest.raises(RuntimeError, match="the first page cannot be drawn"):
        pages.put(connection, [PageSet([f"trials/{number}.html"], None, render(number)) for number in range(20)])
    # The other thread finished the page it had begun, and began none after.
    assert sorted(begun) == [0, 1]
    assert (tmp_path / "built" / "trials" / "1.html").read_text() == "page 1"


INTERRUPTED = """
import os, signal, threading, duckdb
from pathlib import Path
from substrate_assets.report.site_files import PageSet, SitePages

root = Path(os.environ["SITE_ROOT"])
pages = SitePages(root / "site", root / "built")
begun = []
both_begun = threading.Event()

def render(number):
    def texts(_cursor):
        begun.append(number)
        if number == 0:
            assert both_begun.wait(60), "the second thread did not begin a page"
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C, or Dagster ending the run
        else:
            both_begun.set()
        assert pages.failed.wait(60), "the signal was not seen"
        return [f"page {number}"]
    return texts

with duckdb.connect() as connection:
    try:
        pages.put(connection, [PageSet([f"trials/{number}.html"], None, render(number)) for number in range(20)])
    except KeyboardInterrupt:
        print("interrupted", sorted(begun))
"""


def test_a_signal_while_pages_are_drawn_begins_no_page_after_it(tmp_path):
    """In a process of its own: the signal goes to the whole process, as Ctrl-C does."""
    done = subprocess.run([sys.executable, "-c", INTERRUPTED], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "SITE_ROOT": str(tmp_path)})
    assert done.stdout.strip() == "interrupted [0, 1]", done.stderr[-2000:]
