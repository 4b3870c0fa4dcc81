"""A job's dead time: its parts tile the wall time from the process's start to the moment of measuring, each read
from the records of real Dagster runs and the trial's own start and end."""

import json
import os
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from substrate_assets.app.dead_time import LANDING, TRIAL_START, TrialLoad, measure_dead_time


@dg.op
def trial() -> None:
    pass


@dg.op
def load_trial() -> int:
    return 1


@dg.op
def marts(rows: int) -> int:
    return rows


@dg.job
def trial_job() -> None:
    trial()


@dg.job
def load_job() -> None:
    marts(load_trial())


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z")


def _trial(instance: dg.DagsterInstance, directory: Path, wait_s: float) -> TrialLoad:
    ran = trial_job.execute_in_process(instance=instance)
    record = instance.get_run_record_by_id(ran.run_id)
    assert record is not None and record.start_time is not None and record.end_time is not None
    # The load inside the trial's run: from a third of it to two thirds (the rest is start and landing).
    span = record.end_time - record.start_time
    started, ended = record.start_time + span / 3, record.start_time + 2 * span / 3
    directory.mkdir(parents=True)
    (directory / "trial.json").write_text(json.dumps({
        "trial_id": directory.name, "started_at": _iso(started), "ended_at": _iso(ended), "machine_wait_s": wait_s}))
    loaded = load_job.execute_in_process(instance=instance)
    return TrialLoad(directory.name, directory, ran.run_id, loaded.run_id)


def test_the_parts_and_the_load_add_up_to_the_wall_time(tmp_path: Path):
    with dg.DagsterInstance.ephemeral() as instance:
        loads = [_trial(instance, tmp_path / "t1", 0.0), _trial(instance, tmp_path / "t2", 0.0)]
        records = [instance.get_run_record_by_id(load.trial_run) for load in loads]
        begun = records[0].create_timestamp.timestamp() - 2.5  # the process started before its first run
        last = instance.get_run_record_by_id(loads[-1].load_run)
        now = last.end_time + 1.25
        dead = measure_dead_time(instance, begun, loads, now)

    manifests = [json.loads((load.trial_dir / "trial.json").read_text()) for load in loads]
    expected_load = sum(datetime.fromisoformat(m["ended_at"].replace("Z", "+00:00")).timestamp()
                        - datetime.fromisoformat(m["started_at"].replace("Z", "+00:00")).timestamp()
                        for m in manifests)
    assert dead.load_s == pytest.approx(expected_load, abs=1e-6)
    assert dead.wall_s == pytest.approx(now - begun)
    assert sum(dead.parts.values()) + dead.load_s == pytest.approx(dead.wall_s, abs=1e-6)
    assert all(seconds >= 0 for seconds in dead.parts.values()), dead.parts
    assert dead.parts["start"] == pytest.approx(2.5, abs=1e-3)
    assert dead.parts["end"] == pytest.approx(1.25)
    assert dead.parts["raw tables"] > 0 and dead.parts["marts"] > 0
    assert dead.parts[TRIAL_START] > 0 and dead.parts[LANDING] > 0
    assert dead.line().startswith(f"dead time: {dead.dead_s:.1f} s beyond {dead.load_s:.1f} s of load (")


def test_a_wait_for_the_machine_is_its_own_part(tmp_path: Path):
    with dg.DagsterInstance.ephemeral() as instance:
        loads = [_trial(instance, tmp_path / "t1", 0.01)]
        record = instance.get_run_record_by_id(loads[0].trial_run)
        begun = record.create_timestamp.timestamp()
        dead = measure_dead_time(instance, begun, loads, instance.get_run_record_by_id(loads[0].load_run).end_time)
    assert dead.parts["machine wait"] == pytest.approx(0.01)
    assert sum(dead.parts.values()) + dead.load_s == pytest.approx(dead.wall_s, abs=1e-6)


def test_a_load_outside_a_run_is_raw_tables_and_the_gap_before_it_dagster(tmp_path: Path):
    with dg.DagsterInstance.ephemeral() as instance:
        ran = _trial(instance, tmp_path / "t1", 0.0)
        trial_end = instance.get_run_record_by_id(ran.trial_run).end_time
        runless = TrialLoad(ran.trial_id, ran.trial_dir, ran.trial_run, None, (trial_end + 0.25, trial_end + 1.0))
        begun = instance.get_run_record_by_id(ran.trial_run).create_timestamp.timestamp()
        dead = measure_dead_time(instance, begun, [runless], trial_end + 1.5)
        with pytest.raises(ValueError, match="neither a load run nor when"):
            measure_dead_time(instance, begun, [TrialLoad(ran.trial_id, ran.trial_dir, ran.trial_run, None)], 0.0)
    assert dead.parts["raw tables"] == pytest.approx(0.75) and dead.parts["Dagster"] == pytest.approx(0.25)
    assert dead.parts["marts"] == 0 and dead.parts["end"] == pytest.approx(0.5)
    assert sum(dead.parts.values()) + dead.load_s == pytest.approx(dead.wall_s, abs=1e-6)


def test_a_process_start_is_read_to_the_tick_not_to_the_boot_times_second():
    """The start lies after a moment its parent took before starting it and before the child's own first reading
    of the clock. psutil's create_time, which adds a boot time kept in whole seconds, was 0.38 s early here."""
    child = "import time; t = time.time(); from substrate_assets.app.dead_time import process_started; " \
            "print(process_started(), t)"
    before = time.time()
    started, first_reading = map(float, subprocess.run([sys.executable, "-c", child], check=True, capture_output=True,
                                                       text=True).stdout.split())
    tick = 1 / os.sysconf("SC_CLK_TCK")
    assert before - tick <= started <= first_reading
