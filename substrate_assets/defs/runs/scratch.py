"""The Pipes scratch directory of a local trial, owned by the run worker that launches the trial, and the sweep of
those whose worker is gone.

Dagster's default Pipes client writes the trial's context and messages to directories of ``tempfile.mkdtemp``, which
it removes when the trial ends; a worker killed with SIGKILL removes nothing, and a bare ``tmpXXXX`` directory cannot
be told from anyone else's. Here both files live in one directory named ``substrate-pipes-*`` that carries an owner
record (``processes.leftovers``), so the next run's sweep removes it once its owner is gone.
"""

from __future__ import annotations

import contextlib
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import dagster as dg

from substrate_assets.processes.leftovers import dead_owned, mark, remove

PIPES_PREFIX = "substrate-pipes-"
CONTEXT_FILE = "context.json"
MESSAGES_FILE = "messages"


def scratch_root() -> Path:
    """Where Pipes scratch directories go: this process's temporary directory (``$TMPDIR``, else ``/tmp``)."""
    return Path(tempfile.gettempdir())


@contextlib.contextmanager
def owned_pipes_client(client: dg.PipesSubprocessClient) -> Iterator[dg.PipesSubprocessClient]:
    """``client``'s settings, with its context and messages in a scratch directory this process owns; the directory
    is removed when the block ends."""
    directory = Path(tempfile.mkdtemp(prefix=PIPES_PREFIX, dir=scratch_root()))
    try:
        mark(directory)
        yield dg.PipesSubprocessClient(
            env=client.env, cwd=client.cwd,
            context_injector=dg.PipesFileContextInjector(str(directory / CONTEXT_FILE)),
            message_reader=dg.PipesFileMessageReader(str(directory / MESSAGES_FILE)),
            forward_termination=client.forward_termination, forward_stdio=client.forward_stdio,
            termination_timeout_seconds=client.termination_timeout_seconds)
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def sweep_pipes_leftovers(root: Path | None = None) -> list[str]:
    """Remove the Pipes scratch directories under ``root`` (default: this process's temporary directory) whose
    owner is gone; one line per directory removed."""
    directories = (root or scratch_root()).glob(f"{PIPES_PREFIX}*")
    return remove(dead_owned(directories), "run worker's Pipes session")
