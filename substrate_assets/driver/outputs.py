"""What every trial leaves, whatever ran it: what Locust left gathered and read once, server telemetry measured over
the steady window and each ladder step (:func:`measure_trial`), then load_steps.json, server_summary.json, stats.jsonl,
status.json, logs.txt and the trial.json manifest, written in one go (:func:`write_trial_files`), each atomically into
the trial's staging dir; and what the run returns."""

from __future__ import annotations

import math
import os
import platform
import socket
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any, TypedDict

import polars as pl

from substrate_assets.analysis.disturbance import disturbed_because, is_disturbed
from substrate_assets.driver.users.session import SESSION_START_FAILED
from substrate_assets.families import ATESPACE, HEADLINE_ROWS
from substrate_assets.project import code_version
from substrate_assets.results.atomic import json_text
from substrate_assets.results.landing import StagedTrial, gather, write_trial
from substrate_assets.results.layout import TrialKey
from substrate_assets.results.load_steps import LoadStep, StepSpan, load_steps_text
from substrate_assets.results.server_summary import flatten, unmeasured_server_summary
from substrate_assets.results.stats_jsonl import data_timestamp, per_request_rows, stats_jsonl_text
from substrate_assets.results.status import stats_generated, status_text
from substrate_assets.results.summary import RequestSummary
from substrate_assets.results.trial_directory import (
    LOAD_STEPS_JSON,
    LOGS_TXT,
    RUNTIME_EVENTS_PARQUET,
    RUNTIME_SAMPLES_PARQUET,
    SERVER_SUMMARY_JSON,
    STATS_JSONL,
    STATUS_JSON,
    trial_completed,
)
from substrate_assets.results.trial_summary import trial_summary_row
from substrate_assets.suites import Suite
from substrate_assets.telemetry.driver_load import DriverLoad
from substrate_assets.telemetry.local import local_server_summary
from substrate_assets.telemetry.machine_load import MachineLoad
from substrate_assets.telemetry.prometheus import harvest_server_summary
from substrate_assets.telemetry.window import SteadyWindow, TrialWindows, trial_windows
from substrate_assets.workload import ScriptFile

_PACKAGES = ("substrate-bench", "locust", "dagster", "grpcio", "protobuf", "duckdb", "polars", "gevent")


def sut_version(suite: Suite, backend: str, tag: str) -> str | None:
    """The version of the system under test: what the suite names (``sut_version``, ``--sut-version``: a Substrate
    commit or image digest), else — on the embedded runtime, which is this checkout — the project's commit, else the
    run tag (upstream tags a run with the commit under test)."""
    if suite.sut_version:
        return suite.sut_version
    return code_version() if backend == "local" else tag


def versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for package in _PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


@dataclass(frozen=True)
class TrialResult:
    key: TrialKey
    trial_dir: Path | str  # a directory of the local store, or the trial's URL in an object store
    locust_exit_code: int
    completed: bool
    summary: RequestSummary
    warnings: tuple[str, ...] = ()
    failure: str | None = None
    # trial.json's machine_load: how busy the machine was with other work, and whether that disturbed the trial.
    machine_load: dict[str, Any] | None = None

    @property
    def disturbed(self) -> bool:
        return bool(self.machine_load and self.machine_load.get("disturbed"))

    @property
    def trial_id(self) -> str:
        return self.key.trial_id


@dataclass
class TrialRecord:
    """Everything trial.json says about a trial, besides what the files themselves hold."""

    key: TrialKey
    suite: Suite
    script: ScriptFile | None  # None: the suite's family runs no script
    backend: str
    command: list[str]
    exit_code: int
    started: datetime
    ended: datetime
    interrupted: bool
    facts: dict[str, Any]
    runtime: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)
    # What changed the measurement without stopping the trial; in logs.txt and trial.json, never only in a log.
    warnings: list[str] = field(default_factory=list)
    # The steady window measure_server_summary found, and the driver's CPU over it (local trials; else not measured).
    steady: tuple[int, int] | None = None
    driver_load: DriverLoad | None = None
    # How busy the machine was with other work over the steady window, and whether that disturbed the trial.
    machine_load: MachineLoad | None = None
    disturbed: bool | None = None
    disturbed_because: list[str] = field(default_factory=list)
    # The group of repeated trials this one belongs to (``substrate-bench run --repeat``, ``ab``); None alone.
    group: str | None = None
    # How long a local trial waited in the machine's queue before its load started; None where there is none.
    machine_wait_s: float | None = None

    @property
    def run_start(self) -> int:
        """The run window's first second: when the load started (a key may be minted before the trial waited)."""
        return int(self.started.timestamp())

    @property
    def run_end(self) -> int:
        return int(self.ended.timestamp())

    def judge_machine_load(self, load: MachineLoad | None) -> None:
        """Keep ``load`` and judge it by the suite's disturbance limits: a disturbed trial says so in a warning."""
        self.machine_load = load
        if load is None:
            return
        self.disturbed_because = disturbed_because(load.measured(), self.suite.disturbance)
        self.disturbed = is_disturbed(load.measured(), self.suite.disturbance)
        if self.disturbed:
            self.warnings.append(f"disturbed: the machine was busy with other work ({'; '.join(self.disturbed_because)}"
                                 "): this trial is left out of noise estimates and verdicts")

    def machine_load_json(self) -> dict[str, Any] | None:
        """trial.json's ``machine_load``."""
        if self.machine_load is None:
            return None
        load = self.machine_load
        return {"window_start_ts": load.window_start_ts, "window_end_ts": load.window_end_ts, **load.measured(),
                "limits": self.suite.disturbance.model_dump(), "disturbed": self.disturbed,
                "disturbed_because": self.disturbed_because}


@dataclass(frozen=True)
class TrialOutcome:
    """How a trial ended: whether it completed (ran to its end; failed requests are ``requests.failures``, apart),
    and why it failed when nothing could be measured."""

    completed: bool
    failure: str | None = None
    requests: RequestSummary | None = None  # the request log's figures; None without a log


@dataclass(frozen=True)
class MeasuredTrial:
    """What :func:`measure_trial` found, for :func:`write_trial_files`: what the staging directory held, read once,
    the server summary over the steady window, a ladder's load steps (None: no load_steps.json to write) and the
    embedded runtime's events and samples (a local trial's), which the trial keeps as they are."""

    staged: StagedTrial
    server_summary: dict[str, Any]
    load_steps: list[LoadStep] | None = None
    runtime_frames: tuple[pl.DataFrame, pl.DataFrame] | None = None


def no_session_failure(started: int | None, locust_log: str) -> str | None:
    """Why a trial in which no session ever started measured nothing, quoting the sessions' first refusal."""
    if started != 0:
        return None
    reasons = (line.split(f"{SESSION_START_FAILED}: ", 1)[1] for line in locust_log.splitlines()
               if f"{SESSION_START_FAILED}: " in line)
    reason = next(reasons, None)
    return "no session ever started" + (f": {reason}" if reason else " (no CreateActor succeeded)")


def trial_manifest(record: TrialRecord, completed: bool | None, sessions: int | None, failure: str | None,
                   requests: RequestSummary | None) -> dict[str, Any]:
    """trial.json, but for the digests of the trial's files, which are taken once they are all written."""
    key, suite, started = record.key, record.suite, record.started
    return {
        "trial_id": key.trial_id,
        "group": record.group,
        "suite": suite.name,
        "tag": key.tag,
        "backend": record.backend,
        "run_ts": key.run_ts,
        "run_date": key.run_date,
        "data_timestamp": data_timestamp(started),
        "started_at": started.isoformat().replace("+00:00", "Z"),
        "machine_wait_s": None if record.machine_wait_s is None else round(record.machine_wait_s, 3),
        "ended_at": record.ended.isoformat().replace("+00:00", "Z"),
        "completed": completed,
        "interrupted": record.interrupted,
        "sessions_started": sessions,
        "failure": failure,
        # Apart from completed: a trial that ran to its end may have failed requests (the request log's count).
        "failed_requests": None if requests is None else requests.failures,
        "warnings": record.warnings,
        "locust_exit_code": record.exit_code,
        "script": None if record.script is None else {
            "name": record.script.script.name, "sha256": record.script.sha256, "text": record.script.text,
            "path": str(record.script.path)},
        "knobs": {**suite.recorded_knobs(), "atespace": ATESPACE},
        "cluster_facts": record.facts,
        "run_start": record.run_start,
        "run_end": record.run_end,
        "suite_config": suite.model_dump(),
        "metadata": suite.metadata,
        "runtime": record.runtime,
        "driver_load": None if record.driver_load is None else record.driver_load.as_json(),
        "machine_load": record.machine_load_json(),
        "locust_command": record.command,
        "versions": versions(),
        "sut_version": sut_version(suite, record.backend, key.tag),
        "host": {"hostname": socket.gethostname(), "platform": platform.platform(), "cpu_count": os.cpu_count()},
    }


def write_trial_files(staging: Path, record: TrialRecord, measured: MeasuredTrial) -> TrialOutcome:
    """The runtime's events and samples (a local trial's) and requests.parquet as gathered, then load_steps.json (a
    ladder's), server_summary.json, stats.jsonl, status.json, logs.txt and, last, trial.json; how the trial ended."""
    key, suite, started, files = record.key, record.suite, record.started, measured.staged.files
    generated = stats_generated(files.stats, record.warnings)
    locust_log = measured.staged.locust_log
    headline = HEADLINE_ROWS[record.suite.family]
    requests = None if files.requests is None else RequestSummary.of(files.requests, headline)
    sessions = None if requests is None else requests.sessions
    failure = no_session_failure(sessions, locust_log)
    completed = trial_completed(record.exit_code, generated, record.interrupted, sessions)
    manifest = trial_manifest(record, completed, sessions, failure, requests)
    envelope = {"timestamp": data_timestamp(started), "tag": key.tag, "test_name": suite.name}
    rows = [*per_request_rows(files.stats.records, **envelope), trial_summary_row(
        envelope, stats=files.stats, history=files.history, facts=record.facts, run_start=record.run_start,
        run_end=record.run_end, metadata=suite.metadata, users=suite.peak_users,
        actors_per_user=suite.actors_per_user)
    ] if generated and files.stats is not None else []
    rows.append({**envelope, "metric": "server_summary", "measurements": flatten(measured.server_summary)})
    ladder = suite.ladder
    documents = {} if ladder is None or measured.load_steps is None else {
        LOAD_STEPS_JSON: load_steps_text(ladder.locust_spec(), suite.spawn_rate, measured.load_steps)}
    documents[SERVER_SUMMARY_JSON] = json_text(measured.server_summary)
    documents[STATS_JSONL] = stats_jsonl_text(rows)
    documents[STATUS_JSON] = status_text(record.exit_code, generated)
    documents[LOGS_TXT] = ("".join(f"{line}\n" for line in record.notes)
                           + (f"failed: {failure}\n" if failure else "")
                           + "".join(f"warning: {line}\n" for line in record.warnings)
                           + "".join(f"[locust] {line}\n" for line in locust_log.splitlines()))
    frames = {} if measured.runtime_frames is None else dict(
        zip((RUNTIME_EVENTS_PARQUET, RUNTIME_SAMPLES_PARQUET), measured.runtime_frames, strict=True))
    write_trial(staging, {**frames, **measured.staged.to_write}, documents, manifest)
    return TrialOutcome(bool(completed), failure, requests)


def measure_server_summary(record: TrialRecord, window: SteadyWindow, *,
                           runtime_frames: tuple[pl.DataFrame, pl.DataFrame] | None = None) -> dict[str, Any]:
    """Server telemetry inside the run's steady ``window``, as upstream's server_summary.json: harvested from the
    suite's Prometheus when it has one, else — on the local backend — computed from the embedded runtime's exact
    events and per-second samples (``runtime_frames``), else not measured (nulls)."""
    if window.whole_run_because is not None:
        record.warnings.append(f"the steady window is the whole run [{record.run_start}, {record.run_end}], because "
                               f"{window.whole_run_because}: windowed telemetry includes ramp-up and teardown")
    record.steady = window.span
    return _server_summary(record, record.run_start, record.run_end, window.span, runtime_frames)


class _SummaryCommon(TypedDict):
    # What every way of measuring the server summary is told of the trial.
    start_ts: int
    end_ts: int
    steady: tuple[int, int]
    test_name: str
    tag: str
    data_timestamp: str


def _server_summary(record: TrialRecord, start_ts: int, end_ts: int, steady: tuple[int, int],
                    runtime_frames: tuple[pl.DataFrame, pl.DataFrame] | None) -> dict[str, Any]:
    key, suite = record.key, record.suite
    common: _SummaryCommon = {"start_ts": start_ts, "end_ts": end_ts, "steady": steady, "test_name": suite.name,
                              "tag": key.tag, "data_timestamp": data_timestamp(record.started)}
    if suite.prometheus_url:
        return harvest_server_summary(suite.prometheus_url, lag_s=suite.atelet_lag_s, **common)
    if runtime_frames is not None:
        events, samples = runtime_frames
        return local_server_summary(events=events, samples=samples, **common)
    return unmeasured_server_summary(**common)


def measure_load_steps(record: TrialRecord, spans: list[StepSpan], windows: TrialWindows, *,
                       runtime_frames: tuple[pl.DataFrame, pl.DataFrame] | None = None) -> list[LoadStep]:
    """For a ladder suite, ``load_steps.json``'s steps: each step that started (``spans``), its steady part (its ramp
    cut by the steady-window rule, applied within the step: ``windows.steps``) and the server telemetry over it, from
    the same source as server_summary.json."""
    ladder = record.suite.ladder
    assert ladder is not None, "only a ladder suite has load steps"
    missing = sorted(set(range(1, len(ladder.steps) + 1)) - {span.step for span in spans})
    if missing:
        record.warnings.append(f"the ladder ran {len(spans)} of its {len(ladder.steps)} steps: no load point for "
                               f"step(s) {', '.join(map(str, missing))}, which never started or whose start was not "
                               "recorded")
    cut = [span.step for span in spans if not span.complete]
    if cut:
        record.warnings.append(f"load step {cut[0]} was cut short when the trial stopped: it is not complete and "
                               "slo_capacity does not judge it")
    if windows.unread:
        record.warnings.append(f"{windows.unread}: each load point is its whole step")
    steps = []
    for span, window in zip(spans, windows.steps, strict=True):
        if window.whole_run_because is not None:
            record.warnings.append(f"load step {span.step}: the steady window is the whole step, because "
                                   f"{window.whole_run_because}")
        # The step's own bounds, as a trial's are the run's: the harvest waits out the lag from the step's end.
        summary = _server_summary(record, math.floor(span.started_at), math.ceil(span.ended_at), window.span,
                                  runtime_frames)
        steps.append(LoadStep(span.step, span.target_users, span.hold_s, span.started_at, span.ended_at,
                              window.start, window.end, window.whole_run_because, summary, span.complete))
    record.notes.append(f"{LOAD_STEPS_JSON}: {len(steps)} load steps")
    return steps


def measure_trial(staging: Path, work: Path, record: TrialRecord, *request_log_dirs: Path,
                  runtime_frames: tuple[pl.DataFrame, pl.DataFrame] | None = None) -> MeasuredTrial:
    """What Locust and the servers measured, the same for both backends: what Locust left gathered into the staging
    directory and read once, the server summary over the steady window, and a ladder's load steps. A flat suite has
    no load steps: its one load point is the trial's steady window."""
    ladder = record.suite.ladder
    holds = None if ladder is None else [(users, ladder.hold_s) for users in ladder.steps]
    staged = gather(staging, work, record.notes, *request_log_dirs, ladder=holds, trial_end=record.ended.timestamp())
    windows = trial_windows(staged.files.history, record.run_start, record.run_end,
                            [(span.started_at, span.ended_at) for span in staged.spans])
    telemetry = measure_server_summary(record, windows.run, runtime_frames=runtime_frames)
    steps = None if ladder is None else measure_load_steps(record, staged.spans, windows,
                                                             runtime_frames=runtime_frames)
    return MeasuredTrial(staged, telemetry, steps, runtime_frames)
