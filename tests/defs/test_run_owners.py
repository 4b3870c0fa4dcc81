"""Runs launched by anyone but ``substrate-bench`` (the UI, a sensor, a schedule) are owned by their run worker: when
it is killed with SIGKILL, the next run's worker or the daemon's sensor ``dead_runs`` marks the run failed, frees its
``trials`` slot and removes its Pipes scratch directory. A real instance in a temporary DAGSTER_HOME, real run
workers (``dagster job execute``, which launches with no owner tags), a real SIGKILL; every wait is on a condition."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from substrate_assets.defs.runs.owners import (
    OWNER_PID_TAG,
    PARENT_RUN_TAG,
    free_dead_runs,
    owner_of_run,
    owner_tags,
)
from substrate_assets.defs.runs.scratch import PIPES_PREFIX, sweep_pipes_leftovers
from substrate_assets.defs.runs.sensors import dead_runs_sensor
from substrate_assets.processes.owner import Owner
from substrate_assets.project import DAGSTER_HOME_ENV, INSTANCE_CONFIG
from tests.support.run_worker_jobs import READY_ENV, nothing_job
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).parent / "dagster")
JOBS = "tests.support.run_worker_jobs"


class Workers:
    """Run workers started by the test; any still running at teardown is killed by pid."""

    def __init__(self, home: Path, scratch: Path) -> None:
        self.home, self.scratch = home, scratch
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, job: str, ready: Path | None = None) -> subprocess.Popen[bytes]:
        env = {**os.environ, DAGSTER_HOME_ENV: str(self.home), "TMPDIR": str(self.scratch),
               "PYTHONPATH": str(ROOT), **({READY_ENV: str(ready)} if ready else {})}
        log = self.home / f"{len(self.started)}-{job}.log"
        with log.open("wb") as out:
            worker = subprocess.Popen([DAGSTER, "job", "execute", "-m", JOBS, "-j", job], env=env, cwd=ROOT,
                                      stdout=out, stderr=subprocess.STDOUT)
        self.started.append(worker)
        return worker

    def kill_all(self) -> None:
        for worker in self.started:
            if worker.poll() is None:
                worker.kill()
            worker.wait()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "dagster.yaml").write_text(INSTANCE_CONFIG)
    return tmp_path / "home"


@pytest.fixture
def scratch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The test's own temporary directory, for its workers and for the sweeps it runs in-process."""
    (tmp_path / "tmp").mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    return tmp_path / "tmp"


@pytest.fixture
def workers(home: Path, scratch: Path) -> Iterator[Workers]:
    started = Workers(home, scratch)
    try:
        yield started
    finally:
        started.kill_all()


@pytest.fixture
def instance(home: Path) -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.from_config(str(home)) as opened:
        yield opened


def slot_holders(instance: dg.DagsterInstance) -> list[str]:
    return [slot.run_id for slot in instance.event_log_storage.get_concurrency_info("trials").claimed_slots]


def holding_run(instance: dg.DagsterInstance, worker: subprocess.Popen[bytes]) -> dg.DagsterRun | None:
    """The worker's run once it holds the trials slot and has tagged itself as the run's owner."""
    for run_id in slot_holders(instance):
        run = instance.get_run_by_id(run_id)
        if run is not None and run.tags.get(OWNER_PID_TAG) == str(worker.pid):
            return run
    return None


def failure_message(instance: dg.DagsterInstance, run_id: str) -> str:
    return next(entry.dagster_event.message or "" for entry in instance.all_logs(run_id)
                if entry.dagster_event and entry.dagster_event.event_type == dg.DagsterEventType.RUN_FAILURE)


def killed_holder(instance: dg.DagsterInstance, workers: Workers, scratch: Path) -> tuple[dg.DagsterRun, int]:
    """A run that held the trials slot and its Pipes scratch directory when its worker was killed with SIGKILL."""
    ready = scratch.parent / "ready"
    worker = workers.start("holding_trial", ready)
    wait_until(lambda: ready.exists() or worker.poll() is not None,
               "the holding run's op to hold the pool and its Pipes scratch directory")
    assert worker.poll() is None, (workers.home / "0-holding_trial.log").read_text()[-3000:]
    run = wait_until(lambda: holding_run(instance, worker), "the run worker to record itself as the run's owner")
    # Launched without owner tags: the worker recorded its own host, pid and start.
    assert owner_of_run(run, instance) == Owner(socket.gethostname(), worker.pid, owner_of_run(run).started,
                                               owner_of_run(run).command)
    assert len(list(scratch.glob(f"{PIPES_PREFIX}*"))) == 1
    # A live worker's run is never swept, nor its scratch directory.
    assert free_dead_runs(instance) == []
    assert sweep_pipes_leftovers(scratch) == []
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED
    assert slot_holders(instance) == [run.run_id]
    return run, worker.pid


def test_the_next_runs_worker_fails_a_killed_workers_run_and_takes_its_slot(instance, workers, scratch):
    dead, pid = killed_holder(instance, workers, scratch)

    following = workers.start("next_trial")
    assert following.wait(timeout=120) == 0, "the next run never got the trials slot"

    assert instance.get_run_by_id(dead.run_id).status == dg.DagsterRunStatus.FAILURE
    message = failure_message(instance, dead.run_id)
    assert f"pid {pid} on {socket.gethostname()}" in message and "is gone" in message
    assert f"found by run {instance.get_runs(limit=1)[0].run_id}'s worker as it started (pid {following.pid}" \
        in message
    assert slot_holders(instance) == []
    assert list(scratch.glob(f"{PIPES_PREFIX}*")) == []


def test_the_daemons_sensor_fails_a_killed_workers_run_without_a_new_run(instance, workers, scratch):
    dead, pid = killed_holder(instance, workers, scratch)

    result = dead_runs_sensor()(dg.build_sensor_context(instance=instance))

    assert isinstance(result, dg.SkipReason)
    assert result.skip_message.startswith(f"run {dead.run_id} (pid {pid}, gone) was still marked STARTED and held "
                                          "pool trials: marked failed, slot freed; removed leftovers of a dead run "
                                          f"worker's Pipes session: {scratch}/{PIPES_PREFIX}")
    assert "found by the daemon's sensor dead_runs" in failure_message(instance, dead.run_id)
    assert slot_holders(instance) == []
    assert list(scratch.glob(f"{PIPES_PREFIX}*")) == []
    assert dead_runs_sensor()(dg.build_sensor_context(instance=instance)).skip_message == \
        "no dead run holds anything"


def test_a_reexecution_is_not_owned_by_its_parents_process(tmp_path):
    """Re-executing a run copies its tags: until its own worker records itself, the copy names the parent's (dead)
    process and must not get the new run failed."""
    (tmp_path / "dagster.yaml").write_text(INSTANCE_CONFIG)
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        gone = owner_tags(Owner(socket.gethostname(), os.getpid(), Owner.this_process().started - 100))
        parent = instance.create_run_for_job(job_def=nothing_job, status=dg.DagsterRunStatus.FAILURE, tags=gone)
        child = instance.create_run_for_job(job_def=nothing_job, status=dg.DagsterRunStatus.STARTED,
                                            tags={**gone, PARENT_RUN_TAG: parent.run_id})

        assert owner_of_run(child, instance) is None
        assert free_dead_runs(instance) == []
        assert instance.get_run_by_id(child.run_id).status == dg.DagsterRunStatus.STARTED


def test_the_trials_of_ended_runs_are_recorded_or_forgotten(tmp_path):
    """A run_trial run that ended without recording its trial leaves a partition that would hold the warehouse's
    automation back forever: a trial that landed anyway is recorded, one that never landed is forgotten, one still
    being assembled is left alone, and a recorded one is not touched."""
    from substrate_assets.defs.partitions import trial_partitions
    from substrate_assets.defs.trials.jobs import TRIAL_TAG, run_trial_job
    from substrate_assets.defs.trials.unlanded import settle_unlanded_trials
    from substrate_assets.results.layout import RunStore, TrialKey

    (tmp_path / "dagster.yaml").write_text(INSTANCE_CONFIG)
    store = RunStore(tmp_path / "store")
    keys = {name: TrialKey("smoke", 1_700_000_000 + index * 100, "t") for index, name in
            enumerate(("landed", "never", "assembling", "recorded"))}
    for name in ("landed", "recorded"):
        store.trial_dir(keys[name]).mkdir(parents=True)
        (store.trial_dir(keys[name]) / "trial.json").write_text("{}")
    (store.root / ".staging" / keys["assembling"].trial_id).mkdir(parents=True)
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        ids = {name: key.trial_id for name, key in keys.items()}
        instance.add_dynamic_partitions(trial_partitions.name, list(ids.values()))
        instance.report_runless_asset_event(dg.AssetMaterialization("trial_run", partition=ids["recorded"]))
        runs = {name: instance.create_run_for_job(job_def=run_trial_job, status=dg.DagsterRunStatus.FAILURE,
                                                  tags={TRIAL_TAG: trial_id}, run_config={}).run_id
                for name, trial_id in ids.items()}

        lines = settle_unlanded_trials(instance, store)

        assert sorted(lines) == sorted([
            f"trial {ids['landed']} landed but its run {runs['landed']} ended before recording it: recorded",
            f"trial {ids['never']} of run {runs['never']} never landed: its trial_run partition removed"])
        assert set(instance.get_dynamic_partitions(trial_partitions.name)) == {ids["landed"], ids["assembling"],
                                                                               ids["recorded"]}
        assert instance.get_materialized_partitions(dg.AssetKey("trial_run")) == {ids["landed"], ids["recorded"]}
        assert settle_unlanded_trials(instance, store) == []
