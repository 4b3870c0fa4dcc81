"""One trial on the ``kubernetes`` backend, from both sides of its driver pod.

- :func:`launch_cluster_trial`, where the trial is launched (Dagster's process): refuse a trial already
  in the object store, submit the script's ConfigMap (and, for distributed trials, the master Service
  and the worker pods), owned by this process's own pod when it runs in one; have the driver pod run;
  remove what was submitted, whatever happened; mirror the trial into a local store if asked.
- :func:`run_cluster_trial`, inside the driver pod: Locust against the cluster's control API and router —
  every user itself, or as the master of ``locust_workers`` worker pods, whose request-log parts arrive
  through the object store. Cluster facts come from the Kubernetes API, server telemetry from the suite's
  Prometheus. The finished trial is written to the object-store run store, ``trial.json`` last.

Nothing here opens the warehouse.
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

from substrate_assets.driver.kubernetes.api import (
    create_objects,
    delete_trial_objects,
    kubernetes_api,
    own_pod_reference,
    owned_by,
)
from substrate_assets.driver.kubernetes.pods import (
    MASTER_PORT,
    TRIAL_LABEL,
    driver_pod_meta,
    driver_pod_spec,
    pod_wait_timeout_s,
    request_log_url,
    settings_of,
    support_objects,
)
from substrate_assets.driver.locust_command import locust_command, workload_line
from substrate_assets.driver.locust_process import drive_locust
from substrate_assets.driver.outputs import TrialRecord, TrialResult, measure_trial, write_trial_files
from substrate_assets.driver.preflight import check_before_load
from substrate_assets.driver.progress import Progress, progress_reporter
from substrate_assets.facts.kubernetes import Discovery
from substrate_assets.results.importer import already_stored, fetch_trial, upload_trial
from substrate_assets.results.layout import RunStore, TrialExists, TrialKey
from substrate_assets.results.request_log import take_uploaded_parts
from substrate_assets.results.trial_directory import WORK
from substrate_assets.suites import Suite
from substrate_assets.telemetry.machine_load import cluster_machine_load
from substrate_assets.workload import load_script_file

# How long the driver waits for its workers' last request-log parts after Locust exits: their teardown
# (DeleteActor, a 60 s deadline) runs after the master has quit.
WORKER_REPORT_WAIT_S = 120.0
Outcome = TypeVar("Outcome")


class Log(Protocol):
    def info(self, message: str) -> object: ...

    def warning(self, message: str) -> object: ...


def launch_cluster_trial(suite: Suite, key: TrialKey, script_text: str | None,
                         run_driver_pod: Callable[[dict[str, Any], dict[str, Any], int], Outcome], *, log: Log,
                         mirror_into: RunStore | None = None, api: Any = None) -> Outcome:
    """Launch one kubernetes trial and return what ``run_driver_pod(pod_meta, pod_spec, pod_wait_timeout_s)``
    returns; it runs the driver pod to its end (Dagster's PipesK8sClient does). With ``mirror_into``, the
    finished trial is then copied from the object store into that local store."""
    settings = settings_of(suite)
    refusal = already_stored(settings.store, key)
    if refusal is not None:
        raise TrialExists(refusal)
    api = api or kubernetes_api()
    owner = own_pod_reference(api, settings.namespace)
    objects = owned_by(support_objects(suite, key.trial_id, script_text), owner)
    log.info(f"submitting {len(objects)} objects to namespace {settings.namespace} for trial {key.trial_id}")
    try:
        create_objects(api, objects)
        outcome = run_driver_pod(driver_pod_meta(key.trial_id, owner), driver_pod_spec(suite, key.trial_id),
                                 pod_wait_timeout_s(suite))
    finally:
        for problem in delete_trial_objects(api, settings.namespace, key.trial_id):
            log.warning(f"{problem}; remove it by hand (label {TRIAL_LABEL})")
    if mirror_into is not None:
        mirrored = fetch_trial(settings.store, key, mirror_into)
        log.info(f"trial {key.trial_id} mirrored from {mirrored.source} to {mirrored.trial_dir}")
    return outcome


def run_cluster_trial(suite: Suite, key: TrialKey, script_file: Path | None, *,
                      on_progress: Callable[[Progress], None] | None = None, master_bind_host: str = "0.0.0.0",
                      discovery: Discovery | None = None, group: str | None = None) -> TrialResult:
    """Run ``suite`` against the cluster named in its ``kubernetes`` section; the trial lands in its store.

    ``master_bind_host`` is where a distributed master listens for its workers: every interface in a
    pod (the workers are other pods); tests on one machine pass 127.0.0.1. ``group`` names the group of repeated
    trials it is one of.
    """
    settings = settings_of(suite)
    loaded = load_script_file(script_file) if script_file is not None else None
    check_before_load(loaded, settings.control_endpoint, settings.router_url, control_tls=settings.control_tls,
                      template=suite.template)
    root = Path(tempfile.mkdtemp(prefix="substrate-trial-"))
    staging = root / key.trial_id
    work = staging / WORK
    work.mkdir(parents=True)
    workers = settings.locust_workers
    notes = [f"trial {key.trial_id}: suite {suite.name}, {workload_line(suite, loaded)}, backend kubernetes, "
             f"{workers} Locust worker pods"]
    extra = []
    if workers:
        extra += ["--master", "--expect-workers", str(workers), "--expect-workers-max-wait",
                  str(settings.workers_wait_s), "--master-bind-host", master_bind_host,
                  "--master-bind-port", str(MASTER_PORT)]
    command = locust_command(suite, loaded.path if loaded is not None else None,
                             work, settings.control_endpoint, settings.router_url, extra,
                             control_tls=settings.control_tls)
    notes.append("locust: " + " ".join(command))
    facts = (discovery or Discovery(enabled=settings.cluster_facts)).facts()
    clock = time.monotonic()
    report = progress_reporter(on_progress, suite.duration_s)
    try:
        report("starting", clock)
        started = datetime.now(UTC)  # the load's start, not the partition's: a run may wait in Dagster's queue
        locust = drive_locust(command, work, suite, clock, report)
        exit_code, interrupted = locust.exit_code, locust.cut_short
        notes.extend(locust.notes())
        report("finalizing", clock)
        ended = datetime.now(UTC)
        remote = []
        if workers:
            taken = take_uploaded_parts(request_log_url(settings, key.trial_id), work / "remote-requests",
                                        writers=workers, wait_s=WORKER_REPORT_WAIT_S)
            remote.append(taken.directory)
            notes.append(f"request log: {taken.writers_done} of {workers} Locust workers sent all their parts "
                         f"({taken.rows_reported} requests)")
            if taken.writers_done < workers:
                notes.append(f"request log: {workers - taken.writers_done} workers did not report within "
                             f"{WORKER_REPORT_WAIT_S:.0f} s; their requests after their last part are missing")
        record = TrialRecord(key, suite, loaded, "kubernetes", command, exit_code, started, ended, interrupted, facts,
                             {"namespace": settings.namespace, "image": settings.image, "locust_workers": workers,
                              "control_endpoint": settings.control_endpoint, "router_url": settings.router_url},
                             notes, group=group)
        measured = measure_trial(staging, work, record, *remote)
        record.judge_machine_load(cluster_machine_load(measured.server_summary.get("node_psi", {})
                                                       .get("cpu_stall_pct", {}).get("avg")))
        outcome = write_trial_files(staging, record, measured)
        shutil.rmtree(work)
        location = upload_trial(staging, settings.store, key)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    assert outcome.requests is not None, "measure_trial always merges the request log"
    return TrialResult(key, location, exit_code, outcome.completed, outcome.requests, tuple(record.warnings),
                       outcome.failure, record.machine_load_json())
