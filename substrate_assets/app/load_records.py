"""The Dagster records of a load outside a run (an import), written by a process of their own.

Importing Dagster and opening the instance take about as long as copying and loading one run, and both mostly run
Python, so a thread beside the load only takes turns with it. :class:`RecordWriter` starts a child that imports
Dagster and opens the instance while the parent loads; the parent hands it what the load did once the load has
committed, and waits until every record is written. The child reads its work from its stdin: when the parent ends
without handing any (nothing loaded, an error, a signal), the child is ended having written nothing.

Only this project's own processes speak over the pipe (a pickle of :class:`LoadRecord`), never a file or input."""

from __future__ import annotations

import pickle
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from substrate_assets.processes.parent_death import dying_with_this_process
from substrate_assets.processes.quick_exit import exit_now

if TYPE_CHECKING:  # the child imports them with Dagster's side, not before it
    from substrate_assets.warehouse.checks import TestOutcome
    from substrate_assets.warehouse.models.tables import BuiltTable
    from substrate_assets.warehouse.trial_writes import LoadedTable


class RecordNotWritten(RuntimeError):
    """The child writing a load's Dagster records failed; the message holds what it said."""


@dataclass(frozen=True)
class LoadRecord:
    """What one load did, as its Dagster records tell it: the trials loaded (their directories), each raw table's
    load, each model built, each column test, metadata for every table of a trial (``extra``), and each trial's
    figures and suite for its trial_manifests record."""

    trial_dirs: list[Path]
    raw: Mapping[str, LoadedTable]
    models: Sequence[BuiltTable]
    tests: Sequence[TestOutcome] = ()
    extra: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    densities: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)
    suites: Mapping[str, str | None] = field(default_factory=dict)


def write_record(instance: Any, record: LoadRecord) -> int:
    """Record ``record`` on ``instance`` (a ``dagster.DagsterInstance``) as the assets record a load in a run; the
    number of events written."""
    from substrate_assets.defs.warehouse.metadata import figure_metadata, report_loads
    from substrate_assets.results.trial_directory import TrialDirectory

    return report_loads(instance, [TrialDirectory(path) for path in record.trial_dirs], record.raw, record.models,
                        record.tests, extra=record.extra, figures=figure_metadata(record.densities, record.suites))


class RecordWriter:
    """A child process ready to write one load's records on the project's instance (``$DAGSTER_HOME`` as this
    process has it). Use as a context manager: leaving it without :meth:`write` lets the child end having written
    nothing."""

    def __init__(self) -> None:
        # -P: the directory the command runs in (an upstream tree someone sent) is not on the child's path. The
        # child dies with this process, however it ends (kill -9 too).
        self._child = subprocess.Popen(dying_with_this_process([sys.executable, "-P", "-m", __name__]),
                                       stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)

    def write(self, record: LoadRecord) -> None:
        """Hand ``record`` to the child and wait until it is written; RecordNotWritten when the child failed."""
        _, said = self._child.communicate(pickle.dumps(record))
        if self._child.returncode != 0:
            # The child's traceback ends with the error itself; the rest is for a debugger, not for this line.
            last = (said.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
            raise RecordNotWritten("the load is in the warehouse, but its Dagster records were not written "
                                   f"(exit {self._child.returncode}): {last}")

    def __enter__(self) -> RecordWriter:
        return self

    def __exit__(self, *_: object) -> None:
        # A child still running was handed no work, or only part of it (a signal interrupted write()): it has written
        # nothing, and waiting for it to finish importing Dagster would only keep this process.
        if self._child.returncode is None:
            self._child.kill()
            self._child.wait()


def _serve(stdin: IO[bytes]) -> None:
    import substrate_assets.defs.warehouse.metadata  # noqa: F401 - what write_record needs, imported ahead
    from substrate_assets.app.instance import project_instance

    # Before the parent hands its work: the slow part, done while it loads.
    instance = project_instance()
    work = stdin.read()
    if work:
        write_record(instance, pickle.loads(work))


if __name__ == "__main__":
    _serve(sys.stdin.buffer)
    # Every record is committed: the interpreter's teardown of Dagster's modules (a few tenths of a second) would
    # only keep the parent waiting.
    exit_now()
