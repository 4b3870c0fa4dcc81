"""A runtime's event log holds a bounded number of events in memory however long it runs, and loses none."""

import pytest

from substrate_assets.runtime.events import EventLog, RuntimeEvent


def event(number: int, kind: str = "checkpoint") -> RuntimeEvent:
    return RuntimeEvent(kind, "default", f"agent-{number % 7}", 1_764_547_200.0 + number, 0.001 * number,
                        bytes=number * 4096 if kind == "checkpoint" else None, worker=number % 3,
                        detail="boot" if number % 11 == 0 else None)


def test_spilled_events_leave_memory_and_read_back_in_order(tmp_path):
    log = EventLog(spill_every=100)
    log.spill_to(tmp_path / "events")
    appended = [event(n, "checkpoint" if n % 2 else "restore") for n in range(1_050)]
    most = 0
    for one in appended:
        log.append(one)
        most = max(most, log.held_in_memory)
    assert most == 99 and log.held_in_memory == 50
    assert len(list((tmp_path / "events").glob("events-*.parquet"))) == 10
    assert log.events() == appended
    frame = log.frame()
    assert frame.height == 1_050 and frame["actor"].to_list() == [one.actor for one in appended]
    assert frame["bytes"].null_count() == 525  # not moved stays null, not 0


def test_kept_in_memory_before_its_directory_goes(tmp_path):
    log = EventLog(spill_every=10)
    log.spill_to(tmp_path / "events")
    for n in range(25):
        log.append(event(n))
    log.keep_in_memory()
    for part in (tmp_path / "events").iterdir():
        part.unlink()
    log.append(event(25))
    assert log.events() == [event(n) for n in range(26)] and log.held_in_memory == 26


def test_without_a_directory_nothing_is_spilled():
    log = EventLog(spill_every=5)
    for n in range(12):
        log.append(event(n))
    assert log.held_in_memory == 12 and log.frame().height == 12


def test_an_unknown_kind_is_refused():
    with pytest.raises(ValueError, match="unknown event kind"):
        EventLog().append(event(1, kind="nap"))
