"""The machine's trial queue: a waiting trial says its place, who holds the machine and when its turn comes at the
earliest; the machine passes in arrival order; a dead waiter is passed over; a wait limit ends the wait.

Every holder and waiter here is a real lock or ticket (an flock on a real file), held by this process; time is a
clock the test moves, and each "sleep" of the waiting trial is the test's next move, so nothing depends on how
fast the machine is.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from substrate_assets.driver.machine_lock import (
    LOCK_ENV,
    MachineBusy,
    MachineLock,
    Queue,
    duration_text,
    hold_machine,
    queue_path,
)

T0 = 1_796_002_400.0  # 2026-11-30 01:33:20 UTC


@pytest.fixture
def lock(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "trial.lock"
    monkeypatch.setenv(LOCK_ENV, str(path))
    return path


class Moves:
    """The waiting trial's clock and sleeps: each sleep advances the clock and makes the test's next move."""

    def __init__(self, *moves: Callable[[], None], step_s: float = 5.0) -> None:
        self.now = T0
        self.moves = list(moves)
        self.step_s = step_s
        self.slept = 0

    def clock(self) -> float:
        return self.now

    def sleep(self, _seconds: float) -> None:
        self.slept += 1
        self.now += self.step_s
        if self.moves:
            self.moves.pop(0)()


@contextlib.contextmanager
def holding(trial_id: str, load_s: float, load_started_at: float | None) -> Iterator[contextlib.ExitStack]:
    """The machine held by another trial of this process (its own open file: flock locks conflict across them)."""
    with contextlib.ExitStack() as stack:
        machine: MachineLock = stack.enter_context(hold_machine(wait=False, on_wait=_unheard, load_s=load_s))
        machine.name_trial(trial_id)
        if load_started_at is not None:
            machine.load_started(load_started_at)
        yield stack


def _unheard(line: str) -> None:
    raise AssertionError(f"the holder took a free machine and had nothing to say: {line}")


def test_a_waiter_says_its_place_the_holder_and_its_turn_and_takes_the_machine_in_order(lock: Path) -> None:
    said: list[str] = []
    queue = Queue(queue_path(lock))
    with holding("glutton-baseline-20261130t013300z", 60, load_started_at=T0 - 10) as holder:
        ahead = queue.join("spawn-smoke", 90)

        def first_look() -> None:
            # Second in the queue: the holder's load ends in 50 s, then the 90 s queued before this one.
            assert re.fullmatch(
                r"another trial is running on this machine \(trial glutton-baseline-20261130t013300z, pid \d+, its "
                r"load ends at 01:34:10 UTC \(in 50s\)\): waiting, number 2 in the queue behind spawn-smoke "
                r"\(pid \d+\); its turn not before 01:35:40 UTC \(in 2m20s\) \(Ctrl-C to stop\)", said[-1]), said
            ahead.leave()  # the one ahead gave up

        def second_look() -> None:
            assert len(said) == 2 and "number 1 in the queue;" in said[-1], said
            assert "its turn not before 01:34:10 UTC (in 45s)" in said[-1], said
            holder.close()  # the holder's trial ends

        moves = Moves(first_look, second_look)
        with hold_machine(wait=True, on_wait=said.append, suite="quick-smoke", load_s=30, clock=moves.clock,
                          sleep=moves.sleep) as machine:
            assert machine.waited_s == 10.0 and moves.slept == 2
            assert said[-1] == "the machine is free after 10s in the queue: this trial starts"
            # Now it is the holder others read: its trial and its load's end once the load starts.
            machine.name_trial("quick-smoke-20261130t013330z")
            machine.load_started(T0 + 12)
            record = json.loads(lock.read_text())
            assert record["trial_id"] == "quick-smoke-20261130t013330z" and record["load_s"] == 30
            assert record["load_started_at"] == T0 + 12 and record["pid"] == os.getpid()
    assert [name for name in os.listdir(queue.directory)] == []  # every ticket left with its waiter
    queue.close()


def test_a_line_only_when_the_place_or_the_holder_changes(lock: Path) -> None:
    said: list[str] = []
    with holding("quick-smoke-20261130t013300z", 30, load_started_at=None) as holder:
        moves = Moves(lambda: None, lambda: None, holder.close)
        with hold_machine(wait=True, on_wait=said.append, load_s=30, clock=moves.clock, sleep=moves.sleep):
            pass
    # Before its load starts, the holder's end is not known; the turn is counted from now, a lower bound.
    assert said == ["another trial is running on this machine (trial quick-smoke-20261130t013300z, pid "
                    f"{os.getpid()}, its load of 30s has not started): waiting, number 1 in the queue; its turn not "
                    "before 01:33:50 UTC (in 30s) (Ctrl-C to stop)",
                    "the machine is free after 15s in the queue: this trial starts"]


def test_a_trial_that_finds_a_queue_joins_its_end_even_when_the_machine_is_free(lock: Path) -> None:
    queue = Queue(queue_path(lock))
    first = queue.join("quick-smoke", 30)
    with pytest.raises(MachineBusy, match=r"\(holder unknown, 1 trial queued for it\); pass --wait"), \
            hold_machine(wait=False, on_wait=_unheard):
        pass
    said: list[str] = []
    moves = Moves(first.leave)
    with hold_machine(wait=True, on_wait=said.append, clock=moves.clock, sleep=moves.sleep) as machine:
        assert moves.slept == 1 and machine.waited_s == 5.0
    assert "waiting, number 2 in the queue behind quick-smoke" in said[0], said
    queue.close()


def test_a_dead_waiter_is_passed_over_and_its_ticket_removed(lock: Path) -> None:
    queue_dir = queue_path(lock)
    Queue(queue_dir).close()
    # A ticket whose waiter died holding it: nobody holds its flock any more.
    (queue_dir / "00000000000000000001-999999.ticket").write_text(json.dumps({"pid": 999999, "load_s": 60}))
    with hold_machine(wait=False, on_wait=_unheard) as machine:
        assert machine.waited_s == 0.0
    assert not list(queue_dir.iterdir())


def test_a_waiter_stops_at_its_limit_having_run_nothing(lock: Path) -> None:
    said: list[str] = []
    with holding("soak-20261130t013300z", 3600, load_started_at=T0 - 600):
        moves = Moves(step_s=30.0)
        with pytest.raises(MachineBusy) as refused, hold_machine(wait=True, on_wait=said.append, wait_at_most_s=90,
                                                                clock=moves.clock, sleep=moves.sleep):
            raise AssertionError("the machine was never free")
    assert moves.slept == 3 and len(said) == 1
    assert re.fullmatch(r"waited 1m30s for the machine, as long as --wait-at-most allows: another trial is running "
                        r"on it \(trial soak-20261130t013300z, pid \d+, its load ends at 02:23:20 UTC \(in 48m30s\)\), "
                        r"number 1 in the queue", str(refused.value)), str(refused.value)
    assert not list(queue_path(lock).iterdir())  # its ticket went with it
    with hold_machine(wait=False, on_wait=_unheard):
        pass  # and the machine is free for the next


def test_a_queue_that_is_a_link_is_not_followed(lock: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    queue_path(lock).symlink_to(elsewhere)
    with pytest.raises(MachineBusy, match=r"the machine's trial queue .*trial.lock.queue is a link or not a "
                       "directory, and is never followed: remove it"), hold_machine(wait=False, on_wait=_unheard):
        pass
    assert not list(elsewhere.iterdir())


@pytest.mark.parametrize(("seconds", "text"), [(0, "0s"), (59.4, "59s"), (60, "1m00s"), (3725, "1h02m05s")])
def test_durations_read_as_people_write_them(seconds: float, text: str) -> None:
    assert duration_text(seconds) == text
