"""One local trial at a time on a machine: two trials side by side load the same cores and measure each other.

The lock is an ``flock`` on one file every user of the machine shares (``/tmp/substrate-bench-trial.lock``, or
``$SUBSTRATE_BENCH_TRIAL_LOCK``), held for the whole trial and released by the kernel when its holder dies, however
it dies: a lock is never stale. The holder writes into the file its pid, its trial id, how long its load lasts and
when it started, so a trial that finds the machine taken can say who holds it and when its load ends.

Trials that wait form a queue in ``<lock>.queue/``: each holds an ``flock`` on a ticket of its own, named by when it
arrived, saying its pid, its suite and its load's length. A ticket whose holder died has a free ``flock`` and is
passed over (and removed). Only the first live ticket tries the machine's lock, and a trial that finds a queue
joins its end, so the machine passes in arrival order and each waiter knows its position and the loads ahead of it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from substrate_assets.driver.preflight import TrialRefused

LOCK_ENV = "SUBSTRATE_BENCH_TRIAL_LOCK"
DEFAULT_LOCK = Path("/tmp/substrate-bench-trial.lock")
POLL_S = 0.5


def lock_path() -> Path:
    configured = os.environ.get(LOCK_ENV)
    return Path(configured) if configured else DEFAULT_LOCK


def queue_path(lock: Path | None = None) -> Path:
    lock = lock or lock_path()
    return lock.with_name(lock.name + ".queue")


class MachineBusy(TrialRefused):
    """Another local trial holds the machine and this one was not asked to wait, or waited as long as it may."""


def duration_text(seconds: float) -> str:
    minutes, seconds = divmod(max(0, round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    if hours:
        return f"{hours}h{minutes:02d}m{seconds:02d}s"
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def _clock_text(moment: float) -> str:
    return datetime.fromtimestamp(moment, UTC).strftime("%H:%M:%S UTC")


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _record(text: str | bytes) -> dict[str, Any]:
    """What a holder or a waiter wrote (JSON); empty when it wrote nothing readable. Another user may write it."""
    try:
        record = json.loads(text or "{}")
    except ValueError:
        return {}
    return record if isinstance(record, dict) else {}


def _pid(record: dict[str, Any]) -> int | None:
    pid = record.get("pid")
    return pid if isinstance(pid, int) and not isinstance(pid, bool) else None


def _text(record: dict[str, Any], key: str) -> str | None:
    return record[key] if isinstance(record.get(key), str) else None


@dataclass(frozen=True)
class Holder:
    """What the holding trial wrote into the lock file; every field None when it did not say (yet)."""

    pid: int | None = None
    trial_id: str | None = None
    load_s: float | None = None
    load_started_at: float | None = None

    @classmethod
    def read(cls, path: Path) -> Holder:
        try:
            record = _record(path.read_text())
        except OSError:
            return cls()
        return cls(_pid(record), _text(record, "trial_id"), _number(record.get("load_s")),
                   _number(record.get("load_started_at")))

    def load_ends_at(self) -> float | None:
        if self.load_started_at is None or self.load_s is None:
            return None
        return self.load_started_at + self.load_s

    def phrase(self, now: float) -> str:
        """``trial X, pid N, its load ends at 17:25:03 UTC (in 2m10s)``, as much as the holder said."""
        parts = [f"trial {self.trial_id}" if self.trial_id else None, f"pid {self.pid}" if self.pid else None]
        ends = self.load_ends_at()
        if ends is not None:
            parts.append(f"its load ends at {_clock_text(ends)} ({_relative(ends - now)})")
        elif self.load_s is not None:
            parts.append(f"its load of {duration_text(self.load_s)} has not started")
        return ", ".join(part for part in parts if part) or "holder unknown"


def _relative(seconds: float) -> str:
    return f"in {duration_text(seconds)}" if seconds >= 0.5 else f"{duration_text(-seconds)} ago, landing now"


class MachineLock:
    """The held lock: :meth:`name_trial` and :meth:`load_started` tell waiting trials who holds it and until when;
    ``waited_s`` is how long this trial waited for it."""

    def __init__(self, descriptor: int, waited_s: float, load_s: float | None) -> None:
        self._descriptor = descriptor
        self.waited_s = waited_s
        self._record: dict[str, Any] = {"pid": os.getpid(), "trial_id": None, "since": time.time(), "load_s": load_s}
        self._write()

    def name_trial(self, trial_id: str | None) -> None:
        self._record["trial_id"] = trial_id
        self._write()

    def load_started(self, at: float) -> None:
        self._record["load_started_at"] = at
        self._write()

    def _write(self) -> None:
        record = json.dumps(self._record).encode()
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


def _try_lock(descriptor: int, how: int = fcntl.LOCK_EX) -> bool:
    try:
        fcntl.flock(descriptor, how | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EWOULDBLOCK, errno.EACCES):
            return False
        raise
    return True


@dataclass(frozen=True)
class Waiter:
    """A live ticket of the queue: who waits, and for how long a load."""

    name: str
    pid: int | None
    suite: str | None
    load_s: float | None


class Queue:
    """The queue directory, opened without following a link (it sits in a world-writable /tmp)."""

    def __init__(self, path: Path) -> None:
        with contextlib.suppress(FileExistsError):
            os.mkdir(path, 0o777)
            with contextlib.suppress(OSError):
                os.chmod(path, 0o1777)  # every user queues here; sticky, so none removes another's live ticket
        try:
            self.directory = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as error:
            if error.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            raise MachineBusy(f"the machine's trial queue {path} is a link or not a directory, and is never "
                              "followed: remove it") from None

    def close(self) -> None:
        os.close(self.directory)

    def waiters(self) -> list[Waiter]:
        """The live tickets in arrival order; dead ones are removed (where this user may) and passed over."""
        live = []
        for name in sorted(os.listdir(self.directory)):
            if not name.endswith(".ticket"):
                continue
            try:
                descriptor = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                                     dir_fd=self.directory)
            except OSError:
                continue
            try:
                if _try_lock(descriptor, fcntl.LOCK_SH):  # nobody holds it: its waiter is gone
                    with contextlib.suppress(OSError):
                        os.unlink(name, dir_fd=self.directory)
                    continue
                record = _record(os.read(descriptor, 4096))
                live.append(Waiter(name, _pid(record), _text(record, "suite"), _number(record.get("load_s"))))
            finally:
                os.close(descriptor)
        return live

    def join(self, suite: str | None, load_s: float | None) -> Ticket:
        stem = f"{time.time_ns():020d}-{os.getpid()}"
        # Written and locked under a name no reader takes for a ticket, then renamed: a ticket is never seen
        # unlocked while its waiter lives (it would be taken for a dead one and removed).
        descriptor = os.open(f"{stem}.new", os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                             0o644, dir_fd=self.directory)
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        os.write(descriptor, json.dumps({"pid": os.getpid(), "suite": suite, "load_s": load_s}).encode())
        os.rename(f"{stem}.new", f"{stem}.ticket", src_dir_fd=self.directory, dst_dir_fd=self.directory)
        return Ticket(self, f"{stem}.ticket", descriptor)


@dataclass
class Ticket:
    """This trial's place in the queue, held until it takes the machine or stops waiting."""

    queue: Queue
    name: str
    descriptor: int

    def ahead(self) -> list[Waiter]:
        return [waiter for waiter in self.queue.waiters() if waiter.name < self.name]

    def leave(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.name, dir_fd=self.queue.directory)
        os.close(self.descriptor)


def _turn_estimate(holding: Holder, ahead: list[Waiter], now: float) -> str:
    """When this waiter's turn comes at the earliest: the holder's load end and the loads queued before it (their
    start-up and landing come on top, so it is a lower bound)."""
    ends = holding.load_ends_at()
    if ends is None and holding.load_s is not None:
        ends = now + holding.load_s
    if ends is None or any(waiter.load_s is None for waiter in ahead):
        return "its turn cannot be estimated (the holder or a trial ahead did not say how long its load lasts)"
    turn = max(ends, now) + sum(waiter.load_s or 0.0 for waiter in ahead)
    if turn - now < 0.5:
        return "its turn comes once that trial has landed"
    return f"its turn not before {_clock_text(turn)} (in {duration_text(turn - now)})"


def _queue_line(holding: Holder, ahead: list[Waiter], now: float) -> str:
    position = len(ahead) + 1
    before = "" if not ahead else " behind " + ", ".join(
        f"{waiter.suite or 'a trial'} (pid {waiter.pid})" if waiter.pid else (waiter.suite or "a trial")
        for waiter in ahead)
    return (f"another trial is running on this machine ({holding.phrase(now)}): waiting, number {position} in the "
            f"queue{before}; {_turn_estimate(holding, ahead, now)} (Ctrl-C to stop)")


@contextlib.contextmanager
def hold_machine(*, wait: bool, on_wait: Callable[[str], None], wait_at_most_s: float | None = None,
                 suite: str | None = None, load_s: float | None = None,
                 clock: Callable[[], float] = time.time, sleep: Callable[[float], None] = time.sleep,
                 poll_s: float = POLL_S) -> Iterator[MachineLock]:
    """Hold the machine's trial lock for the ``with`` block.

    Taken (or others queued for it): raise :class:`MachineBusy` (nothing was run), or with ``wait`` join the queue,
    say through ``on_wait`` its position, who holds the machine and when its turn comes at the earliest (again
    whenever the position or the holder changes), and take the machine in turn. ``wait_at_most_s``: past that,
    stop waiting with :class:`MachineBusy`. ``suite`` and ``load_s`` (the load's length) are what this trial tells
    the others. Ctrl-C or SIGTERM while waiting ends the wait (the sleep is interrupted by the signal handler's
    exception); the ticket goes with it.
    """
    path = lock_path()
    descriptor = _open(path)
    try:
        queue = Queue(queue_path(path))
    except BaseException:
        os.close(descriptor)
        raise
    held = False
    began = clock()
    try:
        queued = len(queue.waiters())
        if not queued and _try_lock(descriptor):
            waited = 0.0
        else:
            now = clock()
            if not wait:
                behind = f", {queued} trial{'s' if queued != 1 else ''} queued for it" if queued else ""
                raise MachineBusy(f"another trial is running on this machine ({Holder.read(path).phrase(now)}"
                                  f"{behind}); pass --wait to queue behind it")
            waited = _wait_in_turn(descriptor, path, queue, on_wait, wait_at_most_s, suite, load_s, clock, sleep,
                                   poll_s, began)
        held = True
        yield MachineLock(descriptor, waited, load_s)
    finally:
        if held:  # a holder that is gone must not be named to the next trial that waits
            with contextlib.suppress(OSError):
                os.ftruncate(descriptor, 0)
        queue.close()
        os.close(descriptor)  # releases the lock, as the holder's death would


def _wait_in_turn(descriptor: int, path: Path, queue: Queue, on_wait: Callable[[str], None],
                  wait_at_most_s: float | None, suite: str | None, load_s: float | None,
                  clock: Callable[[], float], sleep: Callable[[float], None], poll_s: float, began: float) -> float:
    """Queue until the machine is this trial's; the seconds it waited. MachineBusy past ``wait_at_most_s``."""
    ticket = queue.join(suite, load_s)
    said: tuple[int, Holder] | None = None
    try:
        while True:
            ahead = ticket.ahead()
            if not ahead and _try_lock(descriptor):
                waited = clock() - began
                on_wait(f"the machine is free after {duration_text(waited)} in the queue: this trial starts")
                return waited
            now = clock()
            holding = Holder.read(path)
            if said != (len(ahead), holding):
                on_wait(_queue_line(holding, ahead, now))
                said = (len(ahead), holding)
            if wait_at_most_s is not None and now - began >= wait_at_most_s:
                raise MachineBusy(f"waited {duration_text(now - began)} for the machine, as long as --wait-at-most "
                                  f"allows: another trial is running on it ({holding.phrase(now)}), number "
                                  f"{len(ahead) + 1} in the queue")
            sleep(poll_s)
    finally:
        ticket.leave()
