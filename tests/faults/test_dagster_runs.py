"""Fault: ``substrate-bench run`` killed with SIGKILL while its trial holds the one-slot ``trials`` pool, and runs
waiting for that pool asked to stop. A real Dagster instance in a project of its own, real processes, real signals.

The run holding the pool runs a suite that lasts ten minutes; every test ends it long before that, by SIGKILL or
by a signal it handles, and whatever is left of its process tree is killed by pid at teardown.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import psutil
import pytest

from substrate_assets.app.pool_slots import pool_holders, wait_for_pools
from substrate_assets.defs.runs.owners import OWNER_PID_TAG, free_dead_runs, owner_tags
from substrate_assets.defs.trials.jobs import TRIAL_TAG
from substrate_assets.processes.owner import Owner
from substrate_assets.project import INSTANCE_CONFIG
from tests.support.projects import project_env
from tests.support.run_worker_jobs import nothing_job
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "substrate-bench")
SUITES = """\
suites:
  - name: long
    script: quick-session
    users: 1
    spawn_rate: 1
    duration: 10m
    think_scale: 0.2
    workers: 2
    repeat: 1
"""
TRIAL_CHILD = "substrate_assets.app.pipes_trial"
# A waiting run sleeps a second between looks at the pool and exits as soon as a signal arrives; the rest of this
# bound is room for a machine busy with other work.
PROMPT_S = 30.0


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(ROOT / "scripts", root / "scripts")
    (root / "suites.yaml").write_text(SUITES)
    (root / ".dagster_home").mkdir()
    (root / ".dagster_home" / "dagster.yaml").write_text(INSTANCE_CONFIG)
    return root


@pytest.fixture(scope="module")
def instance(project: Path) -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.from_config(str(project / ".dagster_home")) as opened:
        yield opened


@dataclass
class Command:
    """A ``substrate-bench`` process of the test, its output in files (Dagster's logs would fill a pipe)."""

    process: subprocess.Popen[bytes]
    stdout: Path
    stderr: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def out(self) -> str:
        return self.stdout.read_text()

    def err(self) -> str:
        return self.stderr.read_text()

    def trial_child(self) -> psutil.Process | None:
        """The trial's Pipes subprocess, once the job has started it (ahead of the trial's run)."""
        try:
            children = psutil.Process(self.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            return None
        for child in children:
            try:
                if TRIAL_CHILD in child.cmdline():
                    return child
            except psutil.NoSuchProcess:
                continue
        return None


class Processes:
    """Starts the test's commands and, at teardown, kills by pid whatever of their trees is still running."""

    def __init__(self, project: Path, logs: Path) -> None:
        self.project = project
        self.logs = logs
        self.commands: list[Command] = []
        self.seen: list[psutil.Process] = []

    def start(self, *args: str) -> Command:
        env = project_env(self.project)
        name = f"{len(self.commands)}-{'-'.join(args)}"
        stdout, stderr = self.logs / f"{name}.out", self.logs / f"{name}.err"
        with stdout.open("wb") as out, stderr.open("wb") as err:
            process = subprocess.Popen([CLI, *args], stdout=out, stderr=err, env=env, cwd=self.project,
                                       start_new_session=True)
        command = Command(process, stdout, stderr)
        self.commands.append(command)
        return command

    def remember_tree(self, command: Command) -> list[psutil.Process]:
        """The command's descendants now, kept so they can be killed after the command itself is gone."""
        try:
            tree = psutil.Process(command.pid).children(recursive=True)
        except psutil.NoSuchProcess:
            tree = []
        self.seen.extend(tree)
        return tree

    def kill_trees(self) -> None:
        for command in self.commands:
            self.remember_tree(command)
            if command.process.poll() is None:
                command.process.kill()
            command.process.wait()
        alive = [process for process in self.seen if process.is_running()]
        for process in alive:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()
        psutil.wait_procs(alive, timeout=30)


@pytest.fixture
def processes(project: Path, tmp_path: Path) -> Iterator[Processes]:
    started = Processes(project, tmp_path)
    try:
        yield started
    finally:
        started.kill_trees()


def runs_of(instance: dg.DagsterInstance, command: Command) -> list[dg.DagsterRun]:
    return list(instance.get_runs(filters=dg.RunsFilter(tags={OWNER_PID_TAG: str(command.pid)})))


def trials_slot_holders(instance: dg.DagsterInstance) -> list[str]:
    return [slot.run_id for slot in instance.event_log_storage.get_concurrency_info("trials").claimed_slots]


def trial_running(instance: dg.DagsterInstance, command: Command) -> str | None:
    """The run of ``command`` that is STARTED, holds the trials slot and has named its trial (registered the trial's
    partition), once its trial's process is up. The process alone says too little: the job starts it ahead, before the
    run takes the slot and names the trial."""
    for run_id in trials_slot_holders(instance):
        run = instance.get_run_by_id(run_id)
        if run and run.tags.get(OWNER_PID_TAG) == str(command.pid) and run.status == dg.DagsterRunStatus.STARTED \
                and TRIAL_TAG in run.tags and command.trial_child() is not None:
            return run_id
    return None


def measuring(project: Path) -> bool:
    """Locust has appended a stats-history row of the trial being assembled in the project's store."""
    return any(len(path.read_text().splitlines()) > 1
               for path in (project / "store" / ".staging").glob("*/.work/*stats_history*"))


def failure_messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    return [entry.dagster_event.message or "" for entry in instance.all_logs(run_id)
            if entry.dagster_event and entry.dagster_event.event_type == dg.DagsterEventType.RUN_FAILURE]


def stop(command: Command, signum: signal.Signals, processes: Processes) -> float:
    """Send ``signum`` and wait for the command to exit; how long it took."""
    processes.remember_tree(command)
    sent = time.monotonic()
    command.process.send_signal(signum)
    command.process.wait(timeout=120)
    return time.monotonic() - sent


def assert_stopped_cleanly(instance: dg.DagsterInstance, command: Command, signum: signal.Signals) -> None:
    assert command.process.returncode == 128 + signum, command.err()[-3000:]
    assert command.err().splitlines()[-1] == (f"stopped by {signum.name}; any run this command had started is "
                                              "marked failed or canceled and its pool slots are freed")
    statuses = {run.run_id: run.status for run in runs_of(instance, command)}
    assert all(status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
               for status in statuses.values()), statuses
    assert not set(trials_slot_holders(instance)) & statuses.keys()
    assert not instance.event_log_storage.get_concurrency_run_ids() & statuses.keys()


def test_a_run_killed_by_sigkill_is_failed_and_its_slot_freed_by_the_next_run(instance, processes, project):
    killed = processes.start("run", "long")
    dead_run = wait_until(lambda: trial_running(instance, killed), "the first run's trial holding the trials slot")
    wait_until(lambda: measuring(project), "the first run's trial to log requests")
    orphan = killed.trial_child()
    processes.remember_tree(killed)
    killed.process.send_signal(signal.SIGKILL)
    killed.process.wait()
    # The fault as it is: nobody is left to end the run, so it stays STARTED with the pool's only slot.
    assert instance.get_run_by_id(dead_run).status == dg.DagsterRunStatus.STARTED
    assert trials_slot_holders(instance) == [dead_run]
    # Its trial does not run on unowned: told by the kernel that its parent died, it stops as on SIGTERM (once, however many times the kernel says so) and lands
    # what it measured, marked interrupted.
    wait_until(lambda: not orphan.is_running() or orphan.status() == psutil.STATUS_ZOMBIE,
               "the killed run's trial child to stop by itself")
    trial_id = instance.get_run_by_id(dead_run).tags["substrate/trial"]  # run_trial names its trial on the run
    landed = [json.loads(path.read_text()) for path in (project / "store" / "runs").glob("**/trial.json")]
    assert [(trial["trial_id"], trial["interrupted"]) for trial in landed] == [(trial_id, True)]

    successor = processes.start("run", "long")
    line = (f"run {dead_run} (pid {killed.pid}, gone) was still marked STARTED and held pool trials: "
            "marked failed, slot freed")
    wait_until(lambda: line in successor.out().splitlines(), "the next run to say it freed the dead run's slot")
    assert instance.get_run_by_id(dead_run).status == dg.DagsterRunStatus.FAILURE
    assert any(message.startswith(f"the process executing this run, pid {killed.pid} on {socket.gethostname()} "
                                  "(substrate-bench run long) started ") and "is gone" in message
               and f"found by substrate-bench (pid {successor.pid} on" in message
               for message in failure_messages(instance, dead_run))
    wait_until(lambda: trial_running(instance, successor), "the next run's trial holding the trials slot")
    assert "waiting for pool" not in successor.out()

    # SIGTERM while the trial runs inside Dagster: the run ends failed and gives its slot back.
    stop(successor, signal.SIGTERM, processes)
    assert_stopped_cleanly(instance, successor, signal.SIGTERM)
    assert trials_slot_holders(instance) == []


def test_a_run_waiting_for_a_live_run_says_so_and_stops_on_a_signal(instance, processes):
    holder = processes.start("run", "long")
    held_by = wait_until(lambda: trial_running(instance, holder), "the holder's trial holding the trials slot")
    partitions = set(instance.get_dynamic_partitions("trial"))
    waiting = (f"waiting for pool trials: its only slot is held by run {held_by} (substrate-bench pid "
               f"{holder.pid}, STARTED); Ctrl-C or SIGTERM stops waiting")

    # Both start at once: most of a command's start is importing Dagster, and they wait for the same slot.
    waiters = {signum: processes.start("run", "long") for signum in (signal.SIGTERM, signal.SIGINT)}
    for waiter in waiters.values():
        wait_until(lambda waiter=waiter: waiting in waiter.out().splitlines(), f"a waiting run to say ({waiting})")
    for signum, waiter in waiters.items():
        assert stop(waiter, signum, processes) < PROMPT_S
        assert_stopped_cleanly(instance, waiter, signum)
        assert trials_slot_holders(instance) == [held_by]
    assert set(instance.get_dynamic_partitions("trial")) == partitions  # no trial was registered for them

    # The reminder, in-process, without waiting 30 s for it.
    said: list[str] = []

    class Enough(Exception):
        pass

    def listen(line: str) -> None:
        said.append(line)
        if len(said) == 3:
            raise Enough

    with pytest.raises(Enough):
        wait_for_pools(instance, ["trials"], listen, poll_s=0.05, remind_s=0.1)
    assert said[0] == waiting
    for reminder in said[1:]:
        assert reminder.startswith("still waiting after ")
        assert reminder.endswith(f" for pool trials: its only slot is held by run {held_by} (substrate-bench pid "
                                 f"{holder.pid}, STARTED)")

    stop(holder, signal.SIGINT, processes)
    assert_stopped_cleanly(instance, holder, signal.SIGINT)
    assert trials_slot_holders(instance) == []


def test_who_counts_as_gone_and_what_is_freed(tmp_path):
    """In-process, runs written straight into an instance: a pid reused by another process is not the owner, a run
    that has ended gives its slot back, and live, foreign and daemon-launched runs are left alone."""
    (tmp_path / "dagster.yaml").write_text(INSTANCE_CONFIG)
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        storage = instance.event_log_storage
        storage.set_concurrency_slots("trials", 2)
        storage.set_concurrency_slots("duckdb", 1)
        here = Owner.this_process()

        def started(tags: dict[str, str], status: dg.DagsterRunStatus = dg.DagsterRunStatus.STARTED) -> str:
            return instance.create_run_for_job(job_def=nothing_job, status=status, tags=tags).run_id

        reused_pid = started(owner_tags(Owner(socket.gethostname(), os.getpid(), here.started - 100)))
        ended = started(owner_tags(here), dg.DagsterRunStatus.SUCCESS)
        elsewhere = started(owner_tags(Owner("elsewhere.example", 4242, 0.0)))
        from_the_ui = started({})
        alive = started(owner_tags(here))
        for run_id, pool in ((reused_pid, "trials"), (elsewhere, "trials"), (ended, "duckdb"), (from_the_ui, "duckdb")):
            storage.claim_concurrency_slot(pool, run_id, "_nothing")

        lines = {freed.line() for freed in free_dead_runs(instance)}

        assert lines == {f"run {reused_pid} (pid {os.getpid()}, gone) was still marked STARTED and held pool trials: "
                         "marked failed, slot freed",
                         f"run {ended} had ended (SUCCESS) but still held pool duckdb: slot freed"}
        assert [run.run_id for run in instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE]))] \
            == [reused_pid]
        assert pool_holders(instance, "trials") == []  # one of its two slots is free
        assert [holder.describe() for holder in pool_holders(instance, "duckdb")] == \
            [f"run {from_the_ui} (STARTED, its process not yet recorded)"]
        storage.set_concurrency_slots("trials", 1)
        assert [holder.describe() for holder in pool_holders(instance, "trials")] == \
            [f"run {elsewhere} (run worker pid 4242 on elsewhere.example, STARTED)"]
        assert instance.get_run_by_id(alive).status == dg.DagsterRunStatus.STARTED
        assert free_dead_runs(instance) == []
