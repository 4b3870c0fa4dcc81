"""One trial on the local backend: the embedded runtime, Locust headless as a subprocess, a whole trial directory.

The trial is assembled in ``<store>/.staging/<trial id>/`` while it runs —
Locust writes its CSVs and the request log's Parquet parts there — and, once
everything is written (each file atomically), the directory is renamed to its
Hive path under ``runs/``. A Locust that dies mid-run still yields a trial
with what it measured and a ``status.json`` that says it did not complete.
"""

from __future__ import annotations

import contextlib
import csv
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import polars as pl

from substrate_assets.driver.outputs import TrialRecord, collect_locust_outputs, locust_command, write_trial_files
from substrate_assets.driver.progress import Progress, progress_reporter
from substrate_assets.driver.samples import Sampler
from substrate_assets.facts.local import local_cluster_facts
from substrate_assets.results.layout import RunStore, TrialKey
from substrate_assets.results.server_summary import unmeasured_server_summary
from substrate_assets.results.stats_jsonl import data_timestamp
from substrate_assets.results.summary import RequestSummary
from substrate_assets.results.trial_directory import (
    LOCUST_LOG,
    REQUESTS_PARQUET,
    RUNTIME_EVENTS_PARQUET,
    RUNTIME_SAMPLES_PARQUET,
    STATS_HISTORY_CSV,
    TOTAL_ROW_NAMES,
    WORK,
    WORK_SCRIPT,
    locust_csv,
)
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
from substrate_assets.suites import Suite
from substrate_assets.telemetry.local import local_server_summary
from substrate_assets.telemetry.prometheus import harvest_server_summary
from substrate_assets.telemetry.window import window_from_history
from substrate_assets.workload import ScriptLibrary

SHUTDOWN_GRACE_S = 120.0


@dataclass(frozen=True)
class TrialResult:
    key: TrialKey
    trial_dir: Path | str  # a directory of the local store, or the trial's URL in an object store
    locust_exit_code: int
    completed: bool
    summary: RequestSummary

    @property
    def trial_id(self) -> str:
        return self.key.trial_id


def _latest_history(path: Path) -> dict[str, str] | None:
    """The last Aggregated row Locust appended to its stats history, if any."""
    try:
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError:
        return None
    aggregated = [row for row in rows if row.get("Name") in TOTAL_ROW_NAMES]
    return aggregated[-1] if aggregated else None


def _int(value: str | None) -> int | None:
    try:
        return int(float(value)) if value not in (None, "", "N/A") else None
    except ValueError:
        return None


def run_local_trial(suite: Suite, store: RunStore, library: ScriptLibrary, *,
                    on_progress: Callable[[Progress], None] | None = None,
                    runtime_overrides: dict[str, Any] | None = None, key: TrialKey | None = None) -> TrialResult:
    """Run ``suite`` once against the embedded runtime and return its finished trial directory.

    ``key`` fixes the trial's id and path (a Dagster trial partition does); by default the
    current second is used.
    """
    loaded = library.load(suite.script)
    if key is None:
        key = store.claim_new(suite.name, suite.tag)
    else:
        store.claim(key)
    staging = store.staging_dir(key)
    work = staging / WORK
    work.mkdir()
    script_file = work / WORK_SCRIPT
    script_file.write_text(loaded.text)
    started = datetime.fromtimestamp(key.run_ts, UTC)
    notes: list[str] = [f"trial {key.trial_id}: suite {suite.name}, script {loaded.script.name} "
                        f"(sha256 {loaded.sha256[:12]}), backend local"]
    config = RuntimeConfig(workers=suite.workers, actors_per_worker=suite.actors_per_worker,
                           actor_memory=suite.actor_memory_bytes, **(runtime_overrides or {}))
    report = progress_reporter(on_progress, suite.duration_s)
    facts = local_cluster_facts(config.workers, config.actors_per_worker)
    sampler = Sampler()
    clock = time.monotonic()
    report("starting", clock)
    with EmbeddedRuntime(config) as runtime:
        command = locust_command(suite, script_file, work, runtime.control_address, runtime.router_url)
        notes.append("locust: " + " ".join(command))
        def sample(users: int | None) -> dict[str, Any]:
            state = runtime.snapshot_state()
            sampler.take(state, users)
            return state

        exit_code, interrupted = drive_locust(command, work, suite, clock, report, sample)
        ended = datetime.now(UTC)
        report("finalizing", clock)
        runtime.write_events_parquet(staging / RUNTIME_EVENTS_PARQUET)
        if interrupted:
            notes.append("interrupted: Locust was asked to stop before its run time")
        sampler.write_parquet(staging / RUNTIME_SAMPLES_PARQUET)
        runtime_settings = {"workers": config.workers, "actors_per_worker": config.actors_per_worker,
                            "actor_memory_bytes": config.actor_memory, "warm_hosts": config.warm_hosts,
                            "snapshot_fsync": config.snapshot_fsync}
        record = TrialRecord(key, suite, loaded, "local", command, exit_code, started, ended, interrupted, facts,
                             runtime_settings, notes)
        collect_locust_outputs(staging, work, record.notes)
        # Harvested while the runtime still serves /metrics, as a cluster's exporters outlive a trial: once a
        # target is gone, Prometheus marks its series stale and the window's late edge would read nothing.
        telemetry = server_summary(staging, record, local_events=True)
    completed = write_trial_files(staging, work, record, telemetry)
    trial_dir = _finalize(store, staging, work, key)
    summary = RequestSummary.of_file(trial_dir / REQUESTS_PARQUET)
    return TrialResult(key, trial_dir, exit_code, completed, summary)


def drive_locust(command: list[str], work: Path, suite: Suite, clock: float, report: Callable[..., None],
                 sample: Callable[[int | None], dict[str, Any]] | None = None) -> tuple[int, bool]:
    """Run Locust to its end (or until interrupted), reporting progress and taking a sample once a second."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    history = locust_csv(work, "stats_history")
    interrupted = False
    with (work / LOCUST_LOG).open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=work,
                                   start_new_session=True)
        deadline = clock + suite.duration_s + SHUTDOWN_GRACE_S
        try:
            while process.poll() is None:
                latest = _latest_history(history) or {}
                users = _int(latest.get("User Count"))
                state = sample(users) if sample is not None else {}
                report("running", clock, users=users, requests=_int(latest.get("Total Request Count")),
                       failures=_int(latest.get("Total Failure Count")), running_actors=state.get("running_actors"))
                if time.monotonic() > deadline:
                    _stop(process)
                    break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=1.0)
        except KeyboardInterrupt:
            interrupted = True
            report("stopping", clock)
            _stop(process)
        finally:
            if process.poll() is None:
                _stop(process)
    return process.returncode, interrupted


def _stop(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM lets Locust tear its sessions down and write its CSVs; SIGKILL if it does not."""
    with contextlib.suppress(ProcessLookupError):
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def server_summary(staging: Path, record: TrialRecord, *, local_events: bool) -> dict[str, Any]:
    """Server telemetry inside the steady-state window, as upstream's server_summary.json: harvested from the
    suite's Prometheus when it has one, else — on the local backend — computed from the runtime's exact events
    and the trial's samples, else not measured (nulls)."""
    key, suite = record.key, record.suite
    start_ts, end_ts = key.run_ts, int(record.ended.timestamp())
    steady = window_from_history(staging / STATS_HISTORY_CSV, start_ts, end_ts)
    common = {"start_ts": start_ts, "end_ts": end_ts, "steady": steady, "test_name": suite.name, "tag": key.tag,
              "data_timestamp": data_timestamp(record.started)}
    if suite.prometheus_url:
        return harvest_server_summary(suite.prometheus_url, lag_s=suite.atelet_lag_s, **common)
    if local_events:
        return local_server_summary(events=pl.read_parquet(staging / RUNTIME_EVENTS_PARQUET),
                                    samples=pl.read_parquet(staging / RUNTIME_SAMPLES_PARQUET), **common)
    return unmeasured_server_summary(**common)


def _finalize(store: RunStore, staging: Path, work: Path, key: TrialKey) -> Path:
    """The scratch area removed, the whole trial renamed into runs/."""
    shutil.rmtree(work)
    final = store.trial_dir(key)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.rename(staging, final)
    return final
