"""One local trial at a time on a machine: two trials side by side load the same cores and measure each other.

The lock is an ``flock`` on one file every user of the machine shares (``/tmp/substrate-bench-trial.lock``, or
``$SUBSTRATE_BENCH_TRIAL_LOCK``), held for the whole trial and released by the kernel when its holder dies, however
it dies: a lock is never stale. The holder writes its pid and trial id into the file, so a trial that finds the
machine taken can say which trial holds it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from substrate_assets.driver.preflight import TrialRefused

LOCK_ENV = "SUBSTRATE_BENCH_TRIAL_LOCK"
DEFAULT_LOCK = Path("/tmp/substrate-bench-trial.lock")


def lock_path() -> Path:
    configured = os.environ.get(LOCK_ENV)
    return Path(configured) if configured else DEFAULT_LOCK


class MachineBusy(TrialRefused):
    """Another local trial holds the machine and this one was not asked to wait."""


class MachineLock:
    """The held lock: :meth:`name_trial` tells a waiting trial who holds it."""

    def __init__(self, descriptor: int) -> None:
        self._descriptor = descriptor

    def name_trial(self, trial_id: str | None) -> None:
        record = json.dumps({"pid": os.getpid(), "trial_id": trial_id, "since": time.time()}).encode()
        os.ftruncate(self._descriptor, 0)
        os.pwrite(self._descriptor, record, 0)


def _open(path: Path) -> int:
    # Opened without O_CREAT first: in a sticky world-writable /tmp (fs.protected_regular), creating-opening a
    # file another user made is refused even when its mode allows writing.
    try:
        return os.open(path, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        pass
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o666)
    with contextlib.suppress(OSError):
        os.fchmod(descriptor, 0o666)  # the umask would keep other users out of the machine's one lock
    return descriptor


def holder(path: Path | None = None) -> str:
    """Who holds the machine, as the waiting message says it: ``trial X, pid N`` (what the holder wrote)."""
    try:
        record = json.loads((path or lock_path()).read_text() or "{}")
    except (OSError, ValueError):
        record = {}
    parts = [f"trial {record['trial_id']}" if record.get("trial_id") else None,
             f"pid {record['pid']}" if record.get("pid") else None]
    return ", ".join(part for part in parts if part) or "holder unknown"


def _try_lock(descriptor: int) -> bool:
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EACCES):
            return False
        raise
    return True


@contextlib.contextmanager
def hold_machine(*, wait: bool, on_wait: Callable[[str], None]) -> Iterator[MachineLock]:
    """Hold the machine's trial lock for the ``with`` block.

    Taken: raise :class:`MachineBusy` (nothing was run), or with ``wait`` say once through ``on_wait`` who holds
    it and wait for it; Ctrl-C or SIGTERM while waiting ends the wait (the blocking ``flock`` is interrupted by
    the signal handler's exception).
    """
    path = lock_path()
    descriptor = _open(path)
    held = False
    try:
        if not _try_lock(descriptor):
            taken = f"another trial is running on this machine ({holder(path)})"
            if not wait:
                raise MachineBusy(f"{taken}; pass --wait to queue behind it")
            on_wait(f"{taken}: waiting for it to end (Ctrl-C to stop)")
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            on_wait("the machine is free: this trial starts")
        held = True
        lock = MachineLock(descriptor)
        lock.name_trial(None)
        yield lock
    finally:
        if held:  # a holder that is gone must not be named to the next trial that waits
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, 0)
        os.close(descriptor)  # releases the lock, as the holder's death would
