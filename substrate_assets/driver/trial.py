"""One trial on the local backend: the embedded runtime, Locust headless as a subprocess, a whole trial directory.

The trial is assembled in ``<store>/.staging/<trial id>/`` while it runs —
Locust writes its CSVs and the request log's Parquet parts there — and, once
everything is written (each file atomically), the directory is renamed to its
Hive path under ``runs/``. A Locust that dies mid-run still yields a trial
with what it measured and a ``status.json`` that says it did not complete.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import polars as pl

from substrate_assets.driver.locust_command import locust_command, workload_line
from substrate_assets.driver.locust_process import drive_locust
from substrate_assets.driver.machine_lock import hold_machine
from substrate_assets.driver.outputs import TrialRecord, TrialResult, measure_trial, write_trial_files
from substrate_assets.driver.preflight import Landing, TrialRefused, check_before_load, trial_disk_needs
from substrate_assets.driver.progress import Progress, progress_reporter
from substrate_assets.driver.samples import Sampler
from substrate_assets.facts.local import local_cluster_facts
from substrate_assets.processes.host_guard import free_port
from substrate_assets.results.layout import RunStore, TrialKey
from substrate_assets.results.request_log import STOP_REASON_FILE, stop_reason
from substrate_assets.results.trial_directory import WORK, WORK_SCRIPT
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
from substrate_assets.runtime.scratch_dirs import sweep_runtime_leftovers
from substrate_assets.suites import Suite
from substrate_assets.telemetry.driver_load import driver_load
from substrate_assets.telemetry.machine_load import machine_load
from substrate_assets.workload import ScriptFile, ScriptLibrary

log = logging.getLogger(__name__)

# What a live trial says before its load starts.
LIVE_LINE = "live charts: Locust's web UI on {url} while the load runs (read-only)"


def run_local_trial(suite: Suite, store: RunStore, library: ScriptLibrary, *,
                    on_progress: Callable[[Progress], None] | None = None,
                    runtime_overrides: dict[str, Any] | None = None, key: TrialKey | None = None,
                    wait_for_machine: bool = True, wait_at_most_s: float | None = None,
                    on_notice: Callable[[str], None] | None = None, group: str | None = None,
                    live: bool = False) -> TrialResult:
    """Run ``suite`` once against the embedded runtime and return its finished trial directory.

    ``key`` fixes the trial's id and path (a Dagster trial partition does); by default the
    current second is used. ``group`` names the group of repeated trials it is one of (trial.json's ``group``).

    One local trial runs on a machine at a time (``machine_lock``): when another holds it, this one queues for it
    (at most ``wait_at_most_s``), or with ``wait_for_machine`` False raises ``MachineBusy`` (a ``TrialRefused``)
    having run nothing; the wait is kept beside the load's start in trial.json (``machine_wait_s``). Holding it,
    the trial first removes what dead trials and runtimes left (their staging, state and live directories).
    Both say so in one line each through ``on_notice`` (default: the log). With ``live``, Locust's own web UI
    shows the load's charts while it runs, read-only, on a free port of 127.0.0.1 (:data:`LIVE_LINE` says where,
    through ``on_notice``); the trial lands as a headless one does.
    """
    loaded = library.load(suite.script) if suite.script is not None else None
    say = on_notice or log.warning
    with hold_machine(wait=wait_for_machine, on_wait=say, wait_at_most_s=wait_at_most_s, suite=suite.name,
                      load_s=suite.duration_s) as machine:
        for line in [*store.sweep_dead_staging(), *sweep_runtime_leftovers()]:
            say(line)
        if key is None:
            key = store.claim_new(suite.name, suite.tag)
        else:
            store.claim(key)
        machine.name_trial(key.trial_id)
        live_port = free_port() if live else None
        if live_port is not None:
            say(LIVE_LINE.format(url=f"http://127.0.0.1:{live_port}/"))
        try:
            return run_claimed_trial(suite, store, loaded, key, on_progress=on_progress,
                                     runtime_overrides=runtime_overrides, group=group,
                                     machine_wait_s=machine.waited_s, on_load_start=machine.load_started,
                                     live_port=live_port)
        except KeyboardInterrupt:
            # Stopped before Locust measured anything, or a second time while landing: a staging directory is
            # not a trial, and removing it frees the trial id to run again.
            shutil.rmtree(store.staging_dir(key), ignore_errors=True)
            raise


def run_claimed_trial(suite: Suite, store: RunStore, loaded: ScriptFile | None, key: TrialKey, *,
                      on_progress: Callable[[Progress], None] | None = None,
                      runtime_overrides: dict[str, Any] | None = None, group: str | None = None,
                      machine_wait_s: float | None = None,
                      on_load_start: Callable[[float], None] | None = None,
                      live_port: int | None = None) -> TrialResult:
    """The trial in ``key``'s claimed staging directory, from the runtime's start to the rename into runs/: the
    local counterpart of ``run_cluster_trial``, which likewise runs a trial whose key was settled before it
    (:func:`run_local_trial` holds the machine and claims the key; a caller of this must hold both).

    The trial started when its load did (``on_load_start`` hears when), whenever its key was minted: a Dagster
    partition's key is, before the trial waits for the machine; ``machine_wait_s`` is how long it waited."""
    staging = store.staging_dir(key)
    work = staging / WORK
    work.mkdir(exist_ok=True)  # the claim made it, to hold the owner record
    script_file = work / WORK_SCRIPT if loaded is not None else None
    if script_file is not None and loaded is not None:
        script_file.write_text(loaded.text)
    notes: list[str] = [f"trial {key.trial_id}: suite {suite.name}, {workload_line(suite, loaded)}, backend local"]
    config = runtime_config(suite, runtime_overrides)
    report = progress_reporter(on_progress, suite.duration_s)
    facts = local_cluster_facts(config.workers, config.actors_per_worker)
    # The first Parquet write costs the process ~13 MB once (polars' writer); spilling every four minutes makes it
    # part of a trial's first minutes, not a step in the middle of a soak.
    sampler = Sampler(spill_dir=work / "runtime-samples", spill_every=240)
    clock = time.monotonic()
    report("starting", clock)
    with EmbeddedRuntime(config) as runtime, Landing(staging) as landing:
        assert runtime.state_dir is not None
        try:
            check_before_load(loaded, runtime.control_address, runtime.router_url, template=suite.template,
                              disk=trial_disk_needs(suite, loaded.script if loaded is not None else None, staging,
                                                    runtime.state_dir, runtime.live_dir, config.capacity,
                                                    config.actor_memory))
        except TrialRefused:
            shutil.rmtree(staging)  # nothing ran: no trial to keep
            raise
        # Kept off the store's filesystem: when a full store stops the run, the reason still gets through.
        stop_reason_file = runtime.state_dir / STOP_REASON_FILE
        command = locust_command(suite, script_file, work, runtime.control_address, runtime.router_url,
                                 extra=["--stop-reason-file", str(stop_reason_file)], live_port=live_port)
        notes.append("locust: " + " ".join(command))
        def sample(users: int | None) -> dict[str, Any]:
            state: dict[str, Any] = runtime.snapshot_state()
            sampler.take(state, users)
            return state

        started = datetime.now(UTC)
        if on_load_start is not None:
            on_load_start(started.timestamp())
        locust = drive_locust(command, work, suite, clock, report, sample, on_start=sampler.watch_driver)
        exit_code, interrupted = locust.exit_code, locust.cut_short
        ended = datetime.now(UTC)
        landing.stopped = stop_reason(stop_reason_file, exit_code)
        if landing.stopped:
            notes.append(f"stopped: {landing.stopped}")
        report("finalizing", clock)
        events, samples = runtime.events_frame(), sampler.frame()
        notes.extend(locust.notes())
        runtime_settings = {"workers": config.workers, "actors_per_worker": config.actors_per_worker,
                            "actor_memory_bytes": config.actor_memory, "warm_hosts": config.warm_hosts,
                            "snapshot_fsync": config.snapshot_fsync,
                            "inject_wake_delay_ms": config.inject_wake_delay_ms}
        record = TrialRecord(key, suite, loaded, "local", command, exit_code, started, ended, interrupted, facts,
                             runtime_settings, notes, warnings=host_start_warnings(events), group=group,
                             machine_wait_s=machine_wait_s)
        if locust.overran:
            record.warnings.append(locust.overrun_warning())
        if landing.stopped:
            record.warnings.append(f"trial stopped before its run time: {landing.stopped}")
        # Harvested while the runtime still serves /metrics, as a cluster's exporters outlive a trial: once a
        # target is gone, Prometheus marks its series stale and the window's late edge would read nothing.
        landed = measure_trial(staging, work, record, runtime_frames=(events, samples))
        _measure_driver_load(record, samples)
        if record.steady is not None:
            record.judge_machine_load(machine_load(samples, record.steady))
    with landing:
        outcome = write_trial_files(staging, record, landed)
        trial_dir = store.land(key)
    assert outcome.requests is not None, "measure_trial always merges the request log"
    return TrialResult(key, trial_dir, exit_code, outcome.completed, outcome.requests, tuple(record.warnings),
                       outcome.failure, record.machine_load_json())


def runtime_config(suite: Suite, overrides: dict[str, Any] | None = None) -> RuntimeConfig:
    """The embedded runtime a trial of ``suite`` runs on: its pool, its template's memory, any wake delay it
    injects; ``overrides`` (tests) on top."""
    return RuntimeConfig(workers=suite.workers, actors_per_worker=suite.actors_per_worker,
                         actor_memory=suite.actor_memory_bytes, inject_wake_delay_ms=suite.inject_wake_delay_ms or 0,
                         **(overrides or {}))


def _measure_driver_load(record: TrialRecord, samples: pl.DataFrame) -> None:
    """The driver's CPU and the machine's saturation over the steady window, and a warning when the driver took more
    than its share of the cores."""
    if record.steady is None:
        return
    record.driver_load = driver_load(samples, record.steady, os.cpu_count() or 1)
    warning = None if record.driver_load is None else record.driver_load.warning()
    if warning is not None:
        record.warnings.append(warning)


def host_start_warnings(events: pl.DataFrame) -> list[str]:
    """What the runtime's event log says changed the wakes: warm hosts that failed to start."""
    failed = events.filter(pl.col("kind") == "host_start_failed")
    if failed.is_empty():
        return []
    return [f"the warm pool failed to start {failed.height} host(s) (first: {failed['detail'][0]}): wakes that "
            f"found no warm host waited for a cold start"]
