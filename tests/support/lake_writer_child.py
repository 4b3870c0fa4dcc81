"""A writer of the shared warehouse in a process of its own, for the tests that kill it, race it or read beside it:

    python -m tests.support.lake_writer_child hold              # hold the writer lock until a line on stdin
    python -m tests.support.lake_writer_child mid-load TRIAL_DIR  # write a trial's raw rows, uncommitted, and wait

The warehouse is the environment's (``SUBSTRATE_BENCH_WAREHOUSE``). Each says what it is doing on stdout, one line,
once it is doing it."""

import sys
from pathlib import Path

from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.connection import connect, transaction
from substrate_assets.warehouse.location import warehouse_location
from substrate_assets.warehouse.trial_rows import read_trials
from substrate_assets.warehouse.trial_writes import write_trials


def main() -> None:
    mode = sys.argv[1]
    warehouse = warehouse_location()
    if mode == "hold":
        with connect(warehouse):
            print("holding", flush=True)
            sys.stdin.readline()
        return
    read, unreadable = read_trials([TrialDirectory(Path(sys.argv[2]))])
    assert not unreadable, unreadable
    with connect(warehouse) as connection, transaction(connection):
        write_trials(connection, read)
        print("mid-load", flush=True)
        sys.stdin.readline()  # killed here


if __name__ == "__main__":
    main()
