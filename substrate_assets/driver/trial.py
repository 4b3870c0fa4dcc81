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
import hashlib
import os
import platform
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from substrate_assets.driver.samples import Sampler
from substrate_assets.facts.local import local_cluster_facts
from substrate_assets.results import layout
from substrate_assets.results.atomic import write_json, write_text
from substrate_assets.results.layout import RunStore, TrialKey
from substrate_assets.results.request_log import merge_parts
from substrate_assets.results.stats_jsonl import data_timestamp, per_request_rows, write_stats_jsonl
from substrate_assets.results.status import stats_generated, write_status
from substrate_assets.results.summary import RequestSummary
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
from substrate_assets.suites import Suite
from substrate_assets.telemetry.local import local_server_summary
from substrate_assets.telemetry.prometheus import harvest_server_summary
from substrate_assets.telemetry.summary import flatten
from substrate_assets.telemetry.window import window_from_history
from substrate_assets.workload import ScriptFile, ScriptLibrary

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
ATESPACE = "benchmark"
SHUTDOWN_GRACE_S = 120.0
_WORK = ".work"
_PACKAGES = ("substrate-bench", "locust", "dagster", "grpcio", "protobuf", "duckdb", "polars", "gevent")


@dataclass(frozen=True)
class Progress:
    phase: str
    elapsed_s: float
    duration_s: int
    users: int | None = None
    requests: int | None = None
    failures: int | None = None
    running_actors: int | None = None


@dataclass(frozen=True)
class TrialResult:
    key: TrialKey
    trial_dir: Path
    locust_exit_code: int
    completed: bool
    summary: RequestSummary

    @property
    def trial_id(self) -> str:
        return self.key.trial_id


def _versions() -> dict[str, str | None]:
    found: dict[str, str | None] = {"python": platform.python_version()}
    for package in _PACKAGES:
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


class TrialExists(FileExistsError):
    """A trial's results are never rewritten."""


def _claim(store: RunStore, key: TrialKey) -> None:
    if store.trial_dir(key).exists():
        raise TrialExists(f"trial {key.trial_id} already ran ({store.trial_dir(key)}); results are never rewritten")
    try:
        store.staging_dir(key).mkdir(parents=True)
    except FileExistsError:
        raise TrialExists(f"trial {key.trial_id} is being assembled in {store.staging_dir(key)} by another run "
                          "(or was interrupted there)") from None


def propose_trial_key(store: RunStore, suite: Suite, taken: set[str] | None = None) -> TrialKey:
    """A key for a trial of ``suite`` starting now, unused in ``store`` and not among ``taken`` ids."""
    run_ts = int(time.time())
    while True:
        key = TrialKey(suite.name, run_ts, suite.tag)
        unused = not (store.trial_dir(key).exists() or store.staging_dir(key).exists())
        if unused and key.trial_id not in (taken or set()):
            return key
        run_ts += 1


def new_trial_key(store: RunStore, suite: Suite) -> TrialKey:
    """Claim a key for a trial of ``suite`` starting now (two trials of a suite never share a second)."""
    while True:
        key = propose_trial_key(store, suite)
        try:
            _claim(store, key)
            return key
        except TrialExists:
            continue


def _latest_history(path: Path) -> dict[str, str] | None:
    """The last Aggregated row Locust appended to its stats history, if any."""
    try:
        with path.open(newline="") as handle:
            rows = list(csv.DictReader(handle))
    except OSError:
        return None
    aggregated = [row for row in rows if row.get("Name") in ("Aggregated", "Total", "")]
    return aggregated[-1] if aggregated else None


def _int(value: str | None) -> int | None:
    try:
        return int(float(value)) if value not in (None, "", "N/A") else None
    except ValueError:
        return None


def locust_command(suite: Suite, script_file: Path, work: Path, runtime: EmbeddedRuntime) -> list[str]:
    return [
        sys.executable, "-m", "locust", "-f", str(LOCUSTFILE), "--headless", "--only-summary",
        "-u", str(suite.users), "-r", f"{suite.spawn_rate:g}", "-t", f"{suite.duration_s}s",
        "--csv", str(work / "locust"), "--loglevel", "INFO",
        "--agentsession-script-file", str(script_file),
        "--agentsession-think-scale", f"{suite.think_scale:g}",
        "--lifecycle-mode", suite.lifecycle_mode, "--resume-mode", suite.resume_mode,
        "--control-endpoint", runtime.control_address, "--router-url", runtime.router_url,
        "--atespace", ATESPACE, "--request-log-dir", str(work / "requests"),
    ]


def run_local_trial(suite: Suite, store: RunStore, library: ScriptLibrary, *,
                    on_progress: Callable[[Progress], None] | None = None,
                    runtime_overrides: dict[str, Any] | None = None, key: TrialKey | None = None) -> TrialResult:
    """Run ``suite`` once against the embedded runtime and return its finished trial directory.

    ``key`` fixes the trial's id and path (a Dagster trial partition does); by default the
    current second is used.
    """
    loaded = library.load(suite.script)
    if key is None:
        key = new_trial_key(store, suite)
    else:
        _claim(store, key)
    staging = store.staging_dir(key)
    work = staging / _WORK
    work.mkdir()
    script_file = work / "script.yaml"
    script_file.write_text(loaded.text)
    started = datetime.fromtimestamp(key.run_ts, UTC)
    notes: list[str] = [f"trial {key.trial_id}: suite {suite.name}, script {loaded.script.name} "
                        f"(sha256 {loaded.sha256[:12]}), backend local"]
    config = RuntimeConfig(workers=suite.workers, actors_per_worker=suite.actors_per_worker,
                           actor_memory=suite.actor_memory_bytes, **(runtime_overrides or {}))

    def report(phase: str, clock: float, **figures: Any) -> None:
        if on_progress is not None:
            on_progress(Progress(phase, time.monotonic() - clock, suite.duration_s, **figures))

    facts = local_cluster_facts(config.workers, config.actors_per_worker)
    sampler = Sampler()
    clock = time.monotonic()
    report("starting", clock)
    with EmbeddedRuntime(config) as runtime:
        command = locust_command(suite, script_file, work, runtime)
        notes.append("locust: " + " ".join(command))
        exit_code, interrupted = _drive(command, work, runtime, sampler, suite, clock, report)
        report("finalizing", clock)
        runtime.write_events_parquet(staging / layout.RUNTIME_EVENTS_PARQUET)
    ended = datetime.now(UTC)
    if interrupted:
        notes.append("interrupted: Locust was asked to stop before its run time")
    sampler.write_parquet(staging / "runtime_samples.parquet")
    trial_dir = _finalize(store, key, staging, work, suite, loaded, config, facts, command, exit_code, started,
                          ended, interrupted, notes)
    summary = RequestSummary.of_file(trial_dir / layout.REQUESTS_PARQUET)
    return TrialResult(key, trial_dir, exit_code, exit_code == 0 and not interrupted, summary)


def _drive(command: list[str], work: Path, runtime: EmbeddedRuntime, sampler: Sampler, suite: Suite,
           clock: float, report: Callable[..., None]) -> tuple[int, bool]:
    """Run Locust to the end (or until interrupted), sampling the runtime once a second."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    history = work / "locust_stats_history.csv"
    interrupted = False
    with (work / "locust.log").open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=work,
                                   start_new_session=True)
        deadline = clock + suite.duration_s + SHUTDOWN_GRACE_S
        try:
            while process.poll() is None:
                state = runtime.snapshot_state()
                latest = _latest_history(history) or {}
                users = _int(latest.get("User Count"))
                sampler.take(state, users)
                report("running", clock, users=users, requests=_int(latest.get("Total Request Count")),
                       failures=_int(latest.get("Total Failure Count")),
                       running_actors=state.get("running_actors"))
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


def _file_digest(path: Path) -> dict[str, Any]:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return {"bytes": path.stat().st_size, "sha256": digest.hexdigest()}


def _server_summary(staging: Path, key: TrialKey, suite: Suite, started: datetime, ended: datetime) -> dict[str, Any]:
    """Server telemetry inside the steady-state window, as upstream's server_summary.json: harvested from the
    suite's Prometheus when it has one, else computed from the runtime's exact events and the trial's samples."""
    start_ts, end_ts = key.run_ts, int(ended.timestamp())
    steady = window_from_history(staging / layout.STATS_HISTORY_CSV, start_ts, end_ts)
    if suite.prometheus_url:
        return harvest_server_summary(suite.prometheus_url, start_ts=start_ts, end_ts=end_ts, steady=steady,
                                      lag_s=suite.atelet_lag_s, test_name=suite.name, tag=key.tag,
                                      data_timestamp=data_timestamp(started))
    return local_server_summary(
        events=pl.read_parquet(staging / layout.RUNTIME_EVENTS_PARQUET),
        samples=pl.read_parquet(staging / "runtime_samples.parquet"),
        steady=steady, start_ts=start_ts, end_ts=end_ts, test_name=suite.name,
        tag=key.tag, data_timestamp=data_timestamp(started))


def _finalize(store: RunStore, key: TrialKey, staging: Path, work: Path, suite: Suite, loaded: ScriptFile,
              config: RuntimeConfig, facts: dict[str, Any], command: list[str], exit_code: int, started: datetime,
              ended: datetime, interrupted: bool, notes: list[str]) -> Path:
    produced = []
    for kind, basename in layout.LOCUST_CSVS.items():
        source = work / f"locust_{kind}.csv"
        if source.is_file():
            os.replace(source, staging / basename)
            produced.append(basename)
        else:
            notes.append(f"{basename} not produced")
    rows = merge_parts(work / "requests", staging / layout.REQUESTS_PARQUET)
    notes.append(f"{layout.REQUESTS_PARQUET}: {rows} requests")
    generated = stats_generated(staging / layout.STATS_CSV)
    summary = _server_summary(staging, key, suite, started, ended)
    write_json(staging / layout.SERVER_SUMMARY_JSON, summary)
    envelope = {"timestamp": data_timestamp(started), "tag": key.tag, "test_name": suite.name}
    rows = per_request_rows(staging / layout.STATS_CSV, **envelope) if generated else []
    rows.append({**envelope, "metric": "server_summary", "measurements": flatten(summary)})
    write_stats_jsonl(staging / layout.STATS_JSONL, rows)
    write_status(staging / layout.STATUS_JSON, exit_code, generated)
    locust_log = (work / "locust.log").read_text(errors="replace") if (work / "locust.log").exists() else ""
    write_text(staging / layout.LOGS_TXT, "".join(f"{line}\n" for line in notes)
               + "".join(f"[locust] {line}\n" for line in locust_log.splitlines()))
    shutil.rmtree(work)
    files = {path.name: _file_digest(path) for path in sorted(staging.iterdir()) if path.is_file()}
    write_json(staging / layout.TRIAL_JSON, {
        "trial_id": key.trial_id,
        "suite": suite.name,
        "tag": key.tag,
        "backend": "local",
        "run_ts": key.run_ts,
        "run_date": key.run_date,
        "data_timestamp": data_timestamp(started),
        "started_at": started.isoformat().replace("+00:00", "Z"),
        "ended_at": ended.isoformat().replace("+00:00", "Z"),
        "completed": exit_code == 0 and not interrupted,
        "interrupted": interrupted,
        "locust_exit_code": exit_code,
        "script": {"name": loaded.script.name, "sha256": loaded.sha256, "text": loaded.text,
                   "path": str(loaded.path)},
        "knobs": {**suite.knobs(), "atespace": ATESPACE},
        "cluster_facts": facts,
        "run_start": key.run_ts,
        "run_end": int(ended.timestamp()),
        "suite_config": suite.model_dump(),
        "metadata": suite.metadata,
        "runtime": {"workers": config.workers, "actors_per_worker": config.actors_per_worker,
                    "actor_memory_bytes": config.actor_memory, "warm_hosts": config.warm_hosts,
                    "snapshot_fsync": config.snapshot_fsync},
        "locust_command": command,
        "versions": _versions(),
        "host": {"hostname": socket.gethostname(), "platform": platform.platform(),
                 "cpu_count": os.cpu_count()},
        "files": files,
    })
    final = store.trial_dir(key)
    final.parent.mkdir(parents=True, exist_ok=True)
    os.rename(staging, final)
    return final
