"""The harvest against a real Prometheus serving series with known answers (built with promtool)."""

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from substrate_assets.results.server_summary import FLAT_KEYS, flatten
from substrate_assets.telemetry.prometheus import Harvest, Prometheus, harvest_server_summary, instant_value
from tests.support.prometheus import binaries, create_blocks, prometheus_server

MiB = 1024 * 1024
STEP = 10
# Old enough to be backfilled (nothing in the head block's last hours), young enough for retention.
T0 = (int(time.time()) - 6 * 3600) // 60 * 60
START, END = T0 + 100, T0 + 700
LAG = 20
STEADY = (T0 + 180, T0 + 600)
START_AT, END_AT = STEADY[0] + LAG // 2, STEADY[1] + LAG // 2


class Series:
    def __init__(self) -> None:
        self.families: dict[str, list[str]] = {}

    def add(self, name: str, labels: dict[str, str], value_at, times=range(T0, T0 + 801, STEP)) -> None:
        label_text = ",".join(f'{key}="{value}"' for key, value in labels.items())
        lines = self.families.setdefault(name, [])
        for at in times:
            value = value_at(at)
            if value is not None:
                lines.append(f"{name}{{{label_text}}} {value} {at}")

    def text(self) -> str:
        return "".join("\n".join(lines) + "\n" for lines in self.families.values()) + "# EOF\n"


def growth(base: float, total: float):
    """A counter at ``base`` until START_AT, rising evenly to ``base + total`` at END_AT, flat after."""
    def value(at: int) -> float:
        if at <= START_AT:
            return base
        if at >= END_AT:
            return base + total
        return base + total * (at - START_AT) / (END_AT - START_AT)

    return value


def histogram(series: Series, name: str, labels: dict[str, str], bounds: list[float], base: dict[float, float],
              added: dict[float, float], sum_base: float, sum_added: float) -> None:
    """Cumulative buckets: ``base`` and ``added`` give observations per upper bound (not cumulative)."""
    running_base = running_added = 0.0
    for bound in [*bounds, float("inf")]:
        running_base += base.get(bound, 0)
        running_added += added.get(bound, 0)
        le = "+Inf" if bound == float("inf") else repr(float(bound))
        series.add(f"{name}_bucket", {**labels, "le": le}, growth(running_base, running_added))
    series.add(f"{name}_count", labels, growth(sum(base.values()), sum(added.values())))
    series.add(f"{name}_sum", labels, growth(sum_base, sum_added))


POOL_STATES = {"idle": (3, 1), "partial": (1, 1), "at_capacity": (0, 2)}  # (before T0+400, from T0+400)


def pool_states(at: int) -> dict[str, int]:
    return {state: early if at < T0 + 400 else late for state, (early, late) in POOL_STATES.items()}


def known_series() -> str:
    series = Series()
    for state in POOL_STATES:
        pool = {"ate_workerpool_name": "benchmark-ateom", "ate_workerpool_namespace": "benchmark-workloads",
                "ate_worker_state": state}
        series.add("ate_workerpool_workers", {**pool, "exported_instance": "ateapi-live", "instance": "collector:8888"},
                   lambda at, s=state: pool_states(at)[s])
        # An exited ateapi, still re-exported by the collector for a while: all idle, never the one to trust.
        series.add("ate_workerpool_workers", {**pool, "exported_instance": "ateapi-exited",
                                              "instance": "collector:8888"},
                   lambda at, s=state: 4 if s == "idle" else 0, times=range(T0, T0 + 301, STEP))
        # Another pool whose name extends ours: not the benchmark's, so none of its workers count.
        for process in ("ateapi-live", "ateapi-exited"):
            series.add("ate_workerpool_workers", {**pool, "ate_workerpool_name": "benchmark-ateom-other",
                                                  "exported_instance": process, "instance": "collector:8888"},
                       lambda at, s=state: {"idle": 5, "partial": 0, "at_capacity": 7}[s])
        # A pool of our name in another namespace, reported by the live ateapi: the reference keys series by
        # process and state only, so of the two series per state the later in Prometheus' label order wins at
        # each step ("ate-system" sorts before "benchmark-workloads": ours), and neither is added to the other.
        series.add("ate_workerpool_workers", {**pool, "ate_workerpool_namespace": "ate-system",
                                              "exported_instance": "ateapi-live", "instance": "collector:8888"},
                   lambda at, s=state: {"idle": 0, "partial": 6, "at_capacity": 6}[s])
    pod = {"pod": "benchmark-ateom-abc", "id": "/kubepods/burstable/pod1234", "namespace": "benchmark-workloads"}
    for resource, node_rate, pod_rate in (("cpu", 0.25, 0.10), ("memory", 0.05, 0.02)):
        name = f"container_pressure_{resource}_waiting_seconds_total"
        series.add(name, {"container": "node", "instance": "node-a"}, lambda at, r=node_rate: r * (at - T0))
        series.add(name, {"container": "node", "instance": "node-system"}, lambda at: 0.9 * (at - T0))
        series.add(name, {**pod, "instance": "node-a"}, lambda at, r=pod_rate: r * (at - T0))
    bounds = [MiB, 2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB]
    histogram(series, "atelet_snapshot_size_bytes", {"file_name": "pages.img"}, bounds, {2 * MiB: 10},
              {16 * MiB: 100}, 15 * MiB, 1200 * MiB)
    series.add("atelet_snapshot_size_bytes_sum", {"file_name": "files"}, growth(0, 800 * MiB))
    series.add("ate_actor_checkpoint_duration_seconds_sum", {"ate_snapshot_phase": "total"}, growth(50, 1000))
    histogram(series, "rpc_server_call_duration_seconds", {"rpc_method": "atelet.AteomHerder/Restore"},
              [0.05, 0.1, 0.25, 0.5, 1.0], {0.05: 5}, {0.25: 200}, 0.1, 40.0)
    # A checkpoint RPC histogram whose atelet restarted inside the window: every counter went down.
    histogram(series, "rpc_server_call_duration_seconds", {"rpc_method": "atelet.AteomHerder/Checkpoint"},
              [0.5, 1.0, 2.0], {1.0: 500}, {1.0: -480}, 400.0, -390.0)
    return series.text()


@pytest.fixture(scope="module")
def prometheus(tmp_path_factory):
    binaries()
    storage = tmp_path_factory.mktemp("tsdb") / "data"
    create_blocks(known_series(), storage)
    with prometheus_server(storage) as url:
        yield url


@pytest.fixture(scope="module")
def summary(prometheus):
    return harvest_server_summary(prometheus, start_ts=START, end_ts=END, steady=STEADY, lag_s=LAG, test_name="t",
                                  tag="x", data_timestamp="2026-11-30T00:00:00Z", wait=False)


def test_packing_trusts_the_live_ateapi_in_the_one_pool(summary):
    packing = summary["cluster_packing"]
    # 22 steady samples at 1/4 busy, 21 at 3/4: floor-index over exact ratios.
    assert packing["summary"] == {"min": 0.25, "p50": 0.25, "p90": 0.75, "p95": 0.75, "p99": 0.75, "max": 0.75,
                                  "avg": 0.4942}
    # Every 10 s step of the run, not only the window, and only the live ateapi's benchmark-ateom workers.
    expected = []
    for at in range(START, END + 1, STEP):
        states = pool_states(at)
        busy, total = float(states["partial"] + states["at_capacity"]), float(sum(states.values()))
        expected.append({"timestamp": at, "busy_workers": busy, "total_workers": total,
                         "packing_ratio": round(busy / total, 4)})
    assert packing["timeseries"] == expected


def test_node_and_pod_psi(summary):
    node, pod = summary["node_psi"], summary["pod_psi"]
    assert node["nodes"] == 1  # the system node hosts no worker pod and is left out
    assert node["cpu_stall_pct"]["p50"] == pytest.approx(25.0) and node["cpu_stall_pct"]["max"] == pytest.approx(25.0)
    assert node["mem_stall_pct"]["p50"] == pytest.approx(5.0)
    assert node["io_stall_pct"]["p50"] is None  # no io series: not measured
    assert pod["pods"] == 1
    assert pod["cpu_stall_pct"]["p99"] == pytest.approx(10.0) and pod["mem_stall_pct"]["min"] == pytest.approx(2.0)


def test_snapshot_quantiles_counts_and_throughput(summary):
    snapshots = summary["snapshots"]
    # 100 observations grew inside (8 MiB, 16 MiB]: linear interpolation within the bucket.
    assert (snapshots["size_p50_mb"], snapshots["size_p90_mb"], snapshots["size_p95_mb"], snapshots["size_p99_mb"]) \
        == (12.0, 15.2, 15.6, 15.92)
    assert snapshots["size_avg_mb"] == 12.0
    assert (snapshots["checkpoints_in_window"], snapshots["checkpoints_cumulative"]) == (100, 110)
    assert (snapshots["restore_p50_s"], snapshots["restore_p90_s"], snapshots["restore_p95_s"],
            snapshots["restore_p99_s"]) == (0.175, 0.235, 0.2425, 0.2485)
    assert snapshots["restore_mean_s"] == 0.2
    assert snapshots["checkpoint_mb_s"] == 2.0  # (1200 + 800) MiB over 1000 s
    assert snapshots["checkpoint_mean_s"] is None  # the counters reset: the delta is unknown, not 0


def test_flat_row_and_metadata(summary):
    row = flatten(summary)
    assert len(row) == len(FLAT_KEYS) == 45
    assert row["cluster_packing_p50"] == "0.25" and row["checkpoint_mb_s"] == "2.0"
    assert row["psi_io_stall_p50"] is None and row["checkpoint_mean_s"] is None
    assert summary["metadata"]["atelet_lag_s"] == LAG and summary["metadata"]["steady_start_ts"] == STEADY[0]


def test_window_delta_of_an_absent_series_is_growth_from_zero(prometheus):
    harvest = Harvest(Prometheus(prometheus))
    delta, total = harvest.window_delta('atelet_snapshot_size_bytes_sum{file_name="files"}', START_AT, END_AT)
    assert (delta, total) == (800 * MiB, 800 * MiB)
    assert harvest.window_delta("no_such_metric", START_AT, END_AT) == (None, None)


def test_unreachable_or_malformed_prometheus_gives_nulls_not_errors(tmp_path):
    summary = harvest_server_summary("http://127.0.0.1:9", start_ts=START, end_ts=END, steady=STEADY, lag_s=LAG,
                                     test_name="t", tag="x", data_timestamp="d", wait=False)
    assert set(flatten(summary).values()) == {None}
    assert summary["node_psi"]["nodes"] is None and summary["pod_psi"]["pods"] is None  # not measured, not 0
    assert summary["cluster_packing"]["timeseries"] == []
    for malformed in ([], [{"value": None}], [{"value": [1, None]}], [{"value": [1, "NaN"]}], [{}]):
        assert instant_value(malformed) is None


def test_the_harvest_waits_out_the_lag():
    slept = []
    harvest_server_summary("http://127.0.0.1:9", start_ts=100, end_ts=int(time.time()) + 5, steady=(100, 105),
                           lag_s=70, test_name="t", tag="x", data_timestamp="d", sleep=slept.append)
    assert len(slept) == 1 and 70 < slept[0] <= 76


def test_telemetry_command(prometheus, tmp_path):
    history = tmp_path / "stats_history.csv"
    rows = ["Timestamp,User Count,Type,Name"] + [f"{T0 + 100 + 10 * k},{min(k + 1, 10) if k <= 50 else 2},,"
                                                 "Aggregated" for k in range(61)]
    history.write_text("\n".join(rows) + "\n")
    out = tmp_path / "server_summary.json"
    executable = str(Path(sys.executable).parent / "substrate-bench")
    done = subprocess.run([executable, "telemetry", "--prometheus-url", prometheus, "--start", str(START), "--end",
                           str(END), "--stats-history", str(history), "--lag-s", str(LAG), "--out", str(out)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    row = json.loads(done.stdout)
    assert list(row) == list(FLAT_KEYS)
    assert row["cluster_packing_p50"] == "0.25" and row["snapshot_size_p50_mb"] == "12.0"
    written = json.loads(out.read_text())
    assert written["metadata"]["steady_start_ts"] == STEADY[0] and written["metadata"]["steady_end_ts"] == STEADY[1]


def test_the_embedded_runtime_scraped_live_during_a_trial(tmp_path):
    from substrate_assets.driver.trial import run_local_trial
    from substrate_assets.results.layout import RunStore
    from substrate_assets.results.readers import read_stats_jsonl
    from substrate_assets.suites import get_suite
    from substrate_assets.workload import ScriptLibrary
    from tests.support.ports import free_port

    metrics_port = free_port()
    root = Path(__file__).resolve().parents[2]
    with prometheus_server(tmp_path / "live", scrape_targets=[f"127.0.0.1:{metrics_port}"]) as url:
        suite = get_suite("quick-smoke", root / "suites.yaml").with_overrides(
            users=2, duration="12s", prometheus_url=url, atelet_lag_s=4)
        trial = run_local_trial(suite, RunStore(tmp_path / "store"), ScriptLibrary(root / "scripts"),
                                runtime_overrides={"metrics_port": metrics_port})
    summary = json.loads((trial.trial_dir / "server_summary.json").read_text())
    assert summary["metadata"]["prom_url"] == url and summary["metadata"]["atelet_lag_s"] == 4
    row = flatten(summary)
    for key in ("cluster_packing_p50", "cluster_packing_p99", "snapshot_size_p50_mb", "checkpoints_in_window",
                "restore_p50_s", "restore_mean_s", "checkpoint_p50_s", "checkpoint_mean_s", "checkpoint_mb_s"):
        assert row[key] is not None, key
    # Packing is sampled every 10 s: with 2 users both actors may be parked at every sample, so 0 is a fair
    # reading; what must hold is that all 8 workers were seen at every step.
    assert 0 <= float(row["cluster_packing_p50"]) <= 1 and int(row["checkpoints_in_window"]) > 0
    assert {point["total_workers"] for point in summary["cluster_packing"]["timeseries"]} == {8.0}
    assert row["psi_cpu_stall_p50"] is None and row["pod_psi_cpu_stall_p50"] is None  # no cAdvisor here
    [jsonl_row] = [r for r in read_stats_jsonl(trial.trial_dir / "stats.jsonl") if r["metric"] == "server_summary"]
    assert jsonl_row["measurements"] == row


def test_a_ladder_harvests_each_step_over_its_own_window(tmp_path):
    """Each load point's telemetry is asked of the suite's Prometheus over that step's steady window."""
    from substrate_assets.driver.trial import run_local_trial
    from substrate_assets.results.layout import RunStore
    from substrate_assets.results.load_steps import read_load_steps
    from substrate_assets.suites import Suite
    from substrate_assets.workload import ScriptLibrary
    from tests.support.ports import free_port

    metrics_port = free_port()
    root = Path(__file__).resolve().parents[2]
    with prometheus_server(tmp_path / "live", scrape_targets=[f"127.0.0.1:{metrics_port}"]) as url:
        suite = Suite.model_validate({"name": "ladder-live", "script": "quick-session", "think_scale": 0.2,
                                      "spawn_rate": 4, "ladder": {"users": [1, 2], "hold": "12s"},
                                      "prometheus_url": url, "atelet_lag_s": 2})
        trial = run_local_trial(suite, RunStore(tmp_path / "store"), ScriptLibrary(root / "scripts"),
                                runtime_overrides={"metrics_port": metrics_port})
    steps = read_load_steps(trial.trial_dir / "load_steps.json")
    assert [step.step for step in steps] == [1, 2]
    for step in steps:
        assert step.server_summary is not None
        metadata = step.server_summary["metadata"]
        assert metadata["prom_url"] == url and metadata["atelet_lag_s"] == 2
        assert (metadata["steady_start_ts"], metadata["steady_end_ts"]) == (step.window_start, step.window_end)
        assert metadata["start_ts"] <= step.started_at and step.ended_at <= metadata["end_ts"]
        # Every worker of the pool was seen at each range step of the step's span (as a run's series spans the
        # run; its figures are those inside the window), and none outside it.
        timeseries = step.server_summary["cluster_packing"]["timeseries"]
        assert timeseries and {point["total_workers"] for point in timeseries} == {8.0}
        assert all(metadata["start_ts"] <= point["timestamp"] <= metadata["end_ts"] for point in timeseries)
