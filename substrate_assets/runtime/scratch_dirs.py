"""Where runtimes keep what they own, and the sweep of what dead runtimes left there.

A runtime's state directory (``$TMPDIR/substrate-runtime-*``) and its live directory (``substrate-live-*`` on tmpfs:
``$SUBSTRATE_BENCH_LIVE_ROOT``, else ``/dev/shm``) carry an owner record (:mod:`substrate_assets.processes.leftovers`);
a runtime killed before it could remove them leaves them to the next trial or runtime start, which removes those
whose owner is gone.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from substrate_assets.processes.leftovers import dead_owned, remove

STATE_PREFIX = "substrate-runtime-"
LIVE_PREFIX = "substrate-live-"
# Where live directories go, as $TMPDIR is where state directories go: a machine's other tmpfs, or a directory of
# its own for a process whose runtimes and sweeps must not meet another's.
LIVE_ROOT_ENV = "SUBSTRATE_BENCH_LIVE_ROOT"


def live_root() -> Path:
    """Where runtimes put their live directories: ``$SUBSTRATE_BENCH_LIVE_ROOT``, else ``/dev/shm``."""
    return Path(os.environ.get(LIVE_ROOT_ENV) or "/dev/shm")


def runtime_directories() -> list[Path]:
    """Where runtimes put what they own when not told otherwise: state dirs in the temporary directory, live
    dirs in :func:`live_root`."""
    found = list(Path(tempfile.gettempdir()).glob(f"{STATE_PREFIX}*"))
    shm = live_root()
    if shm.is_dir():
        found += shm.glob(f"{LIVE_PREFIX}*")
    return found


def sweep_runtime_leftovers() -> list[str]:
    """Remove the state and live directories of runtimes that died without stopping; one line each."""
    return remove(dead_owned(runtime_directories()), "runtime")
