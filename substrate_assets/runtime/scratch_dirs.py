"""Where runtimes keep what they own, and the sweep of what dead runtimes left there.

A runtime's state directory (``$TMPDIR/substrate-runtime-*``) and its live directory (``/dev/shm/substrate-live-*``)
carry an owner record (:mod:`substrate_assets.processes.leftovers`); a runtime killed before it could remove them
leaves them to the next trial or runtime start, which removes those whose owner is gone.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from substrate_assets.processes.leftovers import dead_owned, remove

STATE_PREFIX = "substrate-runtime-"
LIVE_PREFIX = "substrate-live-"
SHM = Path("/dev/shm")


def runtime_directories() -> list[Path]:
    """Where runtimes put what they own when not told otherwise: state dirs in the temporary directory, live
    dirs on /dev/shm."""
    found = list(Path(tempfile.gettempdir()).glob(f"{STATE_PREFIX}*"))
    if SHM.is_dir():
        found += SHM.glob(f"{LIVE_PREFIX}*")
    return found


def sweep_runtime_leftovers() -> list[str]:
    """Remove the state and live directories of runtimes that died without stopping; one line each."""
    return remove(dead_owned(runtime_directories()), "runtime")
