"""The temporary directory of a ``dagster dev``: where it, its webserver, daemon and code servers, and the runs they
launch put their scratch files (code-server sockets, the workspace it writes, a trial's Pipes files and runtime state).

``dagster dev`` removes its own temporary files when it stops; killed with SIGKILL it removes nothing, and its
``tmpXXXX`` directories cannot be told from anyone else's. So each ``dagster dev`` gets a ``$TMPDIR/substrate-ui-*``
of its own, owned by its pid, and the next ``substrate-bench ui`` removes those whose ``dagster dev`` is gone — unless
a process of theirs that owns something inside (a run still finishing its trial) is alive.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from substrate_assets.processes.leftovers import OWNER_FILE, dead_owned, mark, owner_of, remove
from substrate_assets.processes.owner import Owner

UI_PREFIX = "substrate-ui-"


def new_scratch() -> Path:
    return Path(tempfile.mkdtemp(prefix=UI_PREFIX))


def own(directory: Path, pid: int) -> None:
    """Record ``pid``, the ``dagster dev`` just started, as ``directory``'s owner."""
    mark(directory, Owner.of_process(pid))


def _in_use(directory: Path) -> bool:
    """Something inside is owned by a live process (a run worker's Pipes files, a runtime's state)."""
    for record in directory.rglob(OWNER_FILE):
        owner = owner_of(record.parent)
        if record.parent != directory and owner is not None and not owner.is_gone():
            return True
    return False


def sweep_root() -> Path:
    """Where ``dagster dev`` scratch directories are: this process's temporary directory, or the one it is in when
    this process runs under a ``dagster dev`` (a run worker, a sensor)."""
    here = Path(tempfile.gettempdir())
    return here.parent if here.name.startswith(UI_PREFIX) else here


def sweep_ui_leftovers() -> list[str]:
    """Remove the scratch directories of ``dagster dev`` processes that are gone; one line each."""
    found = dead_owned(sweep_root().glob(f"{UI_PREFIX}*"))
    return remove([leftover for leftover in found if not _in_use(leftover.path)], "Dagster UI")


def discard_unless_in_use(directory: Path) -> None:
    if not _in_use(directory):
        shutil.rmtree(directory, ignore_errors=True)
