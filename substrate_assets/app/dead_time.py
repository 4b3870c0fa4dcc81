"""Where a job's seconds went outside its trials' load: a group's dead time, part by part.

Every moment is read from what recorded it: the process's start from the kernel, each run's creation, start, end and
steps from its Dagster record and events, each trial's load from its trial.json (``started_at`` to ``ended_at``:
Locust's start to its exit, so its ramp and stop are load, not dead time). The parts tile the job's wall time from
the process's start to the moment of measuring: nothing is counted twice or left out."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import psutil

from substrate_assets.analysis.comparison import Comparison
from substrate_assets.processes.owner import Owner
from substrate_assets.results.trial_directory import TRIAL_JSON, TrialDirectory, parse_moment

TARGET_SHARE = 0.10  # issue 43: a group's dead time at most a tenth of its trials' load time

# What a load run's steps are called here, by step key; any other step by its key.
RAW_TABLES = "raw tables"  # a trial's raw tables loaded: its load run's step, or its load outside a run
SITE = "site"
VERDICT = "verdict"
STEP_PARTS = {"load_trial": RAW_TABLES, "marts": "marts", "benchmark_site": SITE,
              "trial_run_no_regression_against_history": VERDICT}
# The parts (docs/benchmarks.md says what each holds).
STARTING = "start"  # the process's start to its first trial's run: imports, the instance, the script's validation
MACHINE_WAIT = "machine wait"  # a trial queued behind another on the machine
TRIAL_START = "trial start"  # a trial's run created to its load's start: the run, the runtime, Locust
LANDING = "landing"  # the load's end to the trial's run's end: its files written
DAGSTER = "Dagster"  # between a trial's run and its load's run, and the load run's own events outside its steps
# A trial loaded whole outside a run (``whole_loads``): its one transaction, its tables' records, then the site and
# the verdict while its checks' records are written, and what of those was left after them.
LOADED = "raw tables and marts"
RECORDED = "records"
CHECKS = "checks"
BETWEEN = "between trials"
ENDING = "end"  # the last load to the measure: the verdict, the tables printed


@dataclass(frozen=True)
class TrialLoad:
    """One trial of a job: its id and directory, the run_trial run that ran it and the run that loaded it; or, for a
    trial loaded outside a run, when that load began and ended, and where its seconds went when it was loaded whole
    (``load_parts``; a group's earlier trial loads its raw tables only)."""

    trial_id: str
    trial_dir: Path
    trial_run: str
    load_run: str | None
    loaded_between: tuple[float, float] | None = None
    load_parts: Mapping[str, float] | None = None
    # A whole load's comparison of the trial against its history, for what the job prints after.
    comparison: Comparison | None = None


@dataclass(frozen=True)
class DeadTime:
    """A job's wall time, its trials' load time, and the rest by part (seconds, in the order they happened)."""

    wall_s: float
    load_s: float
    parts: dict[str, float]

    @property
    def dead_s(self) -> float:
        return self.wall_s - self.load_s

    def line(self) -> str:
        share = self.dead_s / self.load_s if self.load_s > 0 else float("inf")
        over = f", over the {TARGET_SHARE * 100:.0f} % substrate-bench aims for" if share > TARGET_SHARE else ""
        # A negative part is shown, not hidden: a trial's clock (a driver pod's) behind this machine's makes one.
        parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in self.parts.items() if abs(seconds) >= 0.05)
        return (f"dead time: {self.dead_s:.1f} s beyond {self.load_s:.1f} s of load ({share * 100:.0f} %{over}): "
                f"{parts}")


def process_started() -> float:
    """When this process started (Unix seconds), as the kernel recorded it: the imports before any code of ours ran
    are part of a job's wall time.

    The kernel keeps the start in clock ticks since boot; psutil's ``create_time`` adds a boot time that the kernel
    gives in whole seconds, which put the start up to a second off (0.38 s early on the machine that found it, all of
    it counted as dead time). Here the process's age is read on the boot clock and taken from now."""
    since_boot = Owner.this_process().started
    if since_boot is None or not hasattr(time, "CLOCK_BOOTTIME"):
        return float(psutil.Process().create_time())
    return time.time() - (time.clock_gettime(time.CLOCK_BOOTTIME) - since_boot)


def _seconds(trial: TrialDirectory, key: str) -> float:
    moment = parse_moment(trial.manifest.get(key))
    if moment is None:
        raise ValueError(f"{trial.path / TRIAL_JSON} records no {key}")
    return moment.timestamp()


@dataclass(frozen=True)
class _Run:
    created: float
    ended: float
    steps: dict[str, float]  # seconds in each step, by step key


def _run(instance: dg.DagsterInstance, run_id: str) -> _Run:
    record = instance.get_run_record_by_id(run_id)
    if record is None or record.end_time is None:
        raise ValueError(f"run {run_id} has not ended")
    begun: dict[str, float] = {}
    steps: dict[str, float] = {}
    for entry in instance.all_logs(run_id, of_type={dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS,
                                                    dg.DagsterEventType.STEP_FAILURE}):
        if entry.step_key is None:
            continue
        if entry.dagster_event_type == dg.DagsterEventType.STEP_START:
            begun[entry.step_key] = entry.timestamp
        elif entry.step_key in begun:
            steps[entry.step_key] = steps.get(entry.step_key, 0.0) + entry.timestamp - begun.pop(entry.step_key)
    return _Run(record.create_timestamp.timestamp(), record.end_time, steps)


def measure_dead_time(instance: dg.DagsterInstance, process_started: float, loads: Sequence[TrialLoad],
                      now: float) -> DeadTime:
    """The dead time of a job whose process started at ``process_started`` and ran ``loads`` in order, up to
    ``now`` (Unix seconds)."""
    parts = dict.fromkeys([STARTING, MACHINE_WAIT, TRIAL_START, LANDING, DAGSTER, RAW_TABLES, LOADED, RECORDED,
                           "marts", SITE, VERDICT, CHECKS, BETWEEN], 0.0)
    load_s = 0.0
    moment = process_started
    for number, load in enumerate(loads):
        trial = TrialDirectory(load.trial_dir)
        started, ended = _seconds(trial, "started_at"), _seconds(trial, "ended_at")
        waited = float(trial.manifest.get("machine_wait_s") or 0.0)
        trial_run = _run(instance, load.trial_run)
        parts[STARTING if number == 0 else BETWEEN] += trial_run.created - moment
        parts[MACHINE_WAIT] += waited
        parts[TRIAL_START] += started - trial_run.created - waited
        load_s += ended - started
        parts[LANDING] += trial_run.ended - ended
        if load.load_run is None:
            if load.loaded_between is None:
                raise ValueError(f"trial {load.trial_id} names neither a load run nor when it was loaded")
            began, moment = load.loaded_between
            parts[DAGSTER] += began - trial_run.ended
            for part, seconds in (load.load_parts or {RAW_TABLES: moment - began}).items():
                parts[part] = parts.get(part, 0.0) + seconds
            continue
        load_run = _run(instance, load.load_run)
        in_steps = 0.0
        for step, seconds in load_run.steps.items():
            part = STEP_PARTS.get(step, step)
            parts[part] = parts.get(part, 0.0) + seconds
            in_steps += seconds
        parts[DAGSTER] += load_run.ended - trial_run.ended - in_steps
        moment = load_run.ended
    parts[ENDING] = now - moment
    return DeadTime(now - process_started, load_s, parts)
