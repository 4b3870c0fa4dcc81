"""The kubernetes backend's in-pod trial runner, run on this machine with the embedded runtime standing in for
the cluster's control API and router, and a file:// URL for the object-store run store."""

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from substrate_assets.driver.kubernetes.cluster_trial import run_cluster_trial
from substrate_assets.driver.kubernetes.pods import worker_command
from substrate_assets.driver.locust_command import LOCUSTFILE
from substrate_assets.driver.outputs import TrialResult
from substrate_assets.facts.kubernetes import Discovery
from substrate_assets.results.importer import fetch_trial
from substrate_assets.results.layout import RunStore, TrialKey
from substrate_assets.results.load_steps import read_load_steps
from substrate_assets.results.readers import read_json, read_requests, read_stats, read_stats_history
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
from substrate_assets.suites import Suite

ROOT = Path(__file__).resolve().parents[2]


def suite_for(runtime: EmbeddedRuntime, store: str, workers: int) -> Suite:
    return Suite(name="cluster-smoke", script="quick-session", users=2, spawn_rate=2, duration="10s", think_scale=0.2,
                 backend="kubernetes", kubernetes={"image": "registry.example/substrate-bench:test", "store": store,
                                                   "control_endpoint": runtime.control_address,
                                                   "router_url": runtime.router_url, "locust_workers": workers,
                                                   "cluster_facts": False, "control_tls": False})


def run_with_workers(suite: Suite, key: TrialKey, tmp_path: Path, workers: int) -> TrialResult:
    """The in-pod trial, with ``workers`` Locust worker processes standing in for the worker pods."""
    processes = [subprocess.Popen(
        [sys.executable, "-m", *worker_command(suite, key.trial_id, locustfile=str(LOCUSTFILE),
                                               script_file=str(ROOT / "scripts" / "quick-session.yaml"),
                                               master="127.0.0.1", request_log_dir=str(tmp_path / f"worker-{i}"))],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for i in range(workers)]
    try:
        return run_cluster_trial(suite, key, ROOT / "scripts" / "quick-session.yaml", master_bind_host="127.0.0.1",
                                 discovery=Discovery(enabled=False))
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=60)


@pytest.mark.parametrize("workers", [0, 2])
def test_a_cluster_trial_lands_in_the_object_store(tmp_path, workers):
    store_url = (tmp_path / "bucket").as_uri()
    with EmbeddedRuntime(RuntimeConfig(workers=4, actors_per_worker=2, warm_hosts=1)) as runtime:
        suite = suite_for(runtime, store_url, workers)
        key = TrialKey.from_trial_id("cluster-smoke-20261130t101500z", suite.tag)
        result = run_with_workers(suite, key, tmp_path, workers)
    assert result.trial_dir == f"{store_url}/{key.relative_path}"
    assert result.completed and result.summary.failures == 0 and result.summary.wake_n > 0
    local = fetch_trial(store_url, key, RunStore(tmp_path / "mirror"))
    names = {path.name for path in local.trial_dir.iterdir()}
    assert {"stats.csv", "stats_history.csv", "requests.parquet", "stats.jsonl", "status.json", "trial.json",
            "server_summary.json", "logs.txt"} <= names
    assert "runtime_events.parquet" not in names  # the cluster's own events are Prometheus's to tell
    manifest = read_json(local.trial_dir / "trial.json")
    assert manifest["backend"] == "kubernetes" and manifest["runtime"]["locust_workers"] == workers
    assert set(manifest["cluster_facts"].values()) == {None}  # discovery switched off: every key null
    # No Prometheus to harvest the nodes' pressure from: how busy the machine was is not measured, nor judged.
    assert manifest["machine_load"] is None and not result.disturbed
    logs = (local.trial_dir / "logs.txt").read_text()
    if workers:  # every worker's last part, sent after the master quit, made it into the trial
        assert f"request log: {workers} of {workers} Locust workers sent all their parts" in logs
    requests = read_requests(local.trial_dir / "requests.parquet")
    # The summary counts the wakes Locust counted: all of them with workers (unknown which, so all kept), the
    # first stats.csv Request Count of them without (a wake that ended after Locust's last write is not).
    wakes = requests.filter(pl.col("name") == "WakeFirstTouch")
    assert wakes["locust_counted"].is_null().all() == bool(workers)
    stats = read_stats(local.trial_dir / "stats.csv").filter(pl.col("name") == "WakeFirstTouch")
    counted = wakes.filter(pl.col("locust_counted").ne_missing(False)).height
    assert counted == result.summary.wake_n
    if not workers:
        assert counted == stats["request_count"].item()
    assert sorted(requests.filter(pl.col("name") == "CreateActor")["session_id"].to_list()) == \
        sorted(requests.filter(pl.col("name") == "DeleteActor")["session_id"].to_list())
    summary = read_json(local.trial_dir / "server_summary.json")
    assert summary["metadata"]["prom_url"] is None and summary["snapshots"]["checkpoint_mb_s"] is None
    assert not (tmp_path / "bucket" / ".staging" / key.trial_id).exists()  # the workers' parts were taken in
    with pytest.raises(FileExistsError):
        from substrate_assets.results.importer import upload_trial

        upload_trial(local.trial_dir, store_url, key)


def test_a_cluster_ladder_runs_its_shape_on_the_master(tmp_path):
    """Locust's LoadTestShape runs where the master runs, in the driver pod; its workers spawn what it asks."""
    store_url = (tmp_path / "bucket").as_uri()
    with EmbeddedRuntime(RuntimeConfig(workers=4, actors_per_worker=2, warm_hosts=1)) as runtime:
        flat = suite_for(runtime, store_url, 2)
        suite = Suite.model_validate({**flat.model_dump(exclude={"users", "duration"}), "name": "cluster-ladder",
                                      "ladder": {"users": [1, 2], "hold": "6s"}})
        key = TrialKey.from_trial_id("cluster-ladder-20261130t101500z", suite.tag)
        result = run_with_workers(suite, key, tmp_path, 2)
    assert result.completed, result
    local = fetch_trial(store_url, key, RunStore(tmp_path / "mirror"))
    manifest = read_json(local.trial_dir / "trial.json")
    assert "--ladder" in manifest["locust_command"] and "1:6s,2:6s" in manifest["locust_command"]
    steps = read_load_steps(local.trial_dir / "load_steps.json")
    assert [(step.step, step.target_users) for step in steps] == [(1, 1), (2, 2)]
    assert all(step.server_summary is not None for step in steps)  # not measured (no Prometheus), but recorded
    history = read_stats_history(local.trial_dir / "stats_history.csv")
    top = history.filter(pl.col("timestamp").is_between(steps[1].window_start, steps[1].window_end))
    assert top["user_count"].max() == 2


class Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def info(self, message: str) -> None:
        self.lines.append(("info", message))

    def warning(self, message: str) -> None:
        self.lines.append(("warning", message))


def test_a_launch_submits_runs_removes_and_mirrors(tmp_path, kubernetes_api_server):
    """The launch around the driver pod, through the official client against tests/support/kubernetes_api.py (no
    Kubernetes API server can run here); the driver pod's own work runs in-process, as the pod would run it."""
    from substrate_assets.driver.kubernetes.api import kubernetes_api
    from substrate_assets.driver.kubernetes.cluster_trial import launch_cluster_trial
    from substrate_assets.results.layout import TrialExists

    store_url = (tmp_path / "bucket").as_uri()
    api = kubernetes_api(kubeconfig=kubernetes_api_server.kubeconfig)
    log = Log()
    pods: list[tuple[dict, dict, int]] = []
    with EmbeddedRuntime(RuntimeConfig(workers=4, actors_per_worker=2, warm_hosts=1)) as runtime:
        suite = suite_for(runtime, store_url, workers=0)
        key = TrialKey.from_trial_id("cluster-smoke-20261130t101500z", suite.tag)
        script = ROOT / "scripts" / "quick-session.yaml"

        def driver_pod(meta: dict, spec: dict, timeout_s: int):
            pods.append((meta, spec, timeout_s))
            return run_cluster_trial(suite, key, script, master_bind_host="127.0.0.1",
                                     discovery=Discovery(enabled=False))

        result = launch_cluster_trial(suite, key, script.read_text(), driver_pod, log=log,
                                      mirror_into=RunStore(tmp_path / "local"), api=api)
    assert result.completed
    [(meta, spec, timeout_s)] = pods
    assert meta["labels"]["substrate-bench/trial"] == key.trial_id and "ownerReferences" not in meta  # not in a pod
    assert spec["containers"][0]["command"][-1] == "substrate_assets.app.pipes_trial" and timeout_s == 10 + 1800
    calls = [(call.method, call.rbac()[1]) for call in kubernetes_api_server.calls]
    assert calls == [("POST", "configmaps"), ("DELETE", "pods"), ("DELETE", "services"), ("DELETE", "configmaps")]
    assert RunStore(tmp_path / "local").find(key.trial_id).is_dir()  # mirrored for the raw assets to load
    assert any("mirrored from" in message for _, message in log.lines)
    with pytest.raises(TrialExists, match="already exists"):  # results are never rewritten
        launch_cluster_trial(suite, key, "", driver_pod, log=log, api=api)
    assert len(pods) == 1


def test_a_failed_driver_pod_still_removes_what_the_launch_submitted(tmp_path, kubernetes_api_server):
    from substrate_assets.driver.kubernetes.api import kubernetes_api
    from substrate_assets.driver.kubernetes.cluster_trial import launch_cluster_trial

    suite = Suite(name="cluster-smoke", script="quick-session", users=2, duration="10s", backend="kubernetes",
                  kubernetes={"image": "r/substrate-bench:1", "store": (tmp_path / "bucket").as_uri(),
                              "locust_workers": 2})
    key = TrialKey.from_trial_id("cluster-smoke-20261130t101500z", suite.tag)
    log = Log()

    def broken_pod(meta: dict, spec: dict, timeout_s: int):
        raise RuntimeError("the driver pod failed")

    with pytest.raises(RuntimeError, match="the driver pod failed"):
        launch_cluster_trial(suite, key, "name: x\n", broken_pod, log=log,
                             api=kubernetes_api(kubeconfig=kubernetes_api_server.kubeconfig))
    posted = [call.body["kind"] for call in kubernetes_api_server.calls if call.method == "POST"]
    deleted = [call.rbac()[:2] for call in kubernetes_api_server.calls if call.method == "DELETE"]
    assert posted == ["ConfigMap", "Service", "Pod", "Pod"]
    assert deleted == [("deletecollection", "pods"), ("delete", "services"), ("delete", "configmaps")]
    assert log.lines == [("info", f"submitting 4 objects to namespace benchmarking for trial {key.trial_id}")]
