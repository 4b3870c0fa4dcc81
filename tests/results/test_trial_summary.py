"""The trial_summary row, written as upstream's runner writes it: the reference's vectors, its key order, its byte
form, and its place in a trial's stats.jsonl."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from substrate_assets.results.landing import LocustCsv, StagedTrial
from substrate_assets.results.layout import TrialKey
from substrate_assets.results.readers import read_stats_jsonl
from substrate_assets.results.server_summary import unmeasured_server_summary
from substrate_assets.results.stats_jsonl import FACT_KEYS
from substrate_assets.results.trial_summary import (
    operation_key,
    trial_summary_measurements,
    trial_summary_row,
)

ROOT = Path(__file__).resolve().parents[2]
NEWEST = ROOT / "tests/data/upstream_runs/runs/glutton_baseline_5_users/run_date=2026-11-20/run_ts=1795132800/" \
    "run_tag=4f8a1c0d2b9e7f6a5c3d1e0f9a8b7c6d5e4f3a2b"
# One discovery: 10 users against 5 worker pods puts actors per pod at 2.0.
FACTS = {"machine_type": "c3-standard-4", "node_count": 1, "allocatable_cores": 3.92, "allocatable_ram_gb": 12.96,
         "worker_pod_count": 5}
EMPTY_FACTS = dict.fromkeys(FACT_KEYS)
STATS_HEADER = "Type,Name,Request Count,Failure Count\n"


def summarize(tmp_path: Path, facts: dict, *, stats: str | None = STATS_HEADER + ",Aggregated,100,25\n",
              users: int = 10, user_counts: list | None = None, actors_per_user: int | None = None,
              metadata: dict | None = None, run_start: int | None = None, run_end: int | None = None) -> dict:
    stats_csv = tmp_path / "stats.csv"
    if stats is not None:
        stats_csv.write_text(stats)
    history = tmp_path / "stats_history.csv"
    counts = [users] * 61 if user_counts is None else user_counts
    history.write_text("Timestamp,User Count,Type,Name,Requests/s,Failures/s\n"
                       + "".join(f"{1788914584 + i},{u},,Aggregated,1.0,0.0\n" for i, u in enumerate(counts)))
    return trial_summary_measurements(stats=LocustCsv.read(stats_csv), history=LocustCsv.read(history),
                                      facts=facts, run_start=run_start, run_end=run_end, metadata=metadata or {}, users=users,
                                      actors_per_user=actors_per_user)


def test_the_reference_fixture(tmp_path):
    m = summarize(tmp_path, FACTS)
    assert {key: m[key] for key in FACTS} == {key: str(value) for key, value in FACTS.items()}
    assert (m["actors_per_node"], m["actors_per_vcpu"], m["actors_per_gb_ram"], m["actors_per_pod_p50"]) == \
        ("10.0", "2.55", "0.77", "2.0")
    assert all(isinstance(value, str) for value in m.values() if value is not None)


def test_actors_per_pod_percentiles_and_the_observed_peak(tmp_path):
    m = summarize(tmp_path, FACTS, users=100, user_counts=[1, 50, 89, *range(100, 300)])
    assert (m["actors_per_pod_p50"], m["actors_per_pod_p90"], m["actors_per_pod_p99"]) == ("39.6", "55.8", "59.4")
    peak = summarize(tmp_path, FACTS, users=10, user_counts=[20, 40, 60])  # the observed peak, not -u
    assert (peak["actors_per_node"], peak["actors_per_pod_p50"]) == ("60.0", "8.0")
    unobserved = summarize(tmp_path, FACTS, users=10, user_counts=[])  # -u only when nothing was observed
    assert unobserved["actors_per_node"] == "10.0"
    assert [unobserved[f"actors_per_pod_{p}"] for p in ("p50", "p90", "p99")] == [None, None, None]


def test_an_empty_name_is_a_total_row(tmp_path):
    history = tmp_path / "stats_history.csv"
    history.write_text("Timestamp,User Count,Type,Name\n1,4,,\n2,10,,\n3,99,http,WakeFirstTouch\n")
    m = trial_summary_measurements(stats=None, history=LocustCsv.read(history), facts=FACTS, run_start=None,
                                   run_end=None, metadata={}, users=1)
    assert m["actors_per_node"] == "10.0"


def test_actors_per_user_scales_every_figure(tmp_path):
    m = summarize(tmp_path, FACTS, actors_per_user=3)
    assert (m["actors_per_node"], m["actors_per_vcpu"], m["actors_per_gb_ram"], m["actors_per_pod_p50"]) == \
        ("30.0", "7.65", "2.31", "6.0")
    assert summarize(tmp_path, FACTS, actors_per_user=1) == summarize(tmp_path, FACTS)  # unset is one per user


@pytest.mark.parametrize(("stats", "ratio"), [
    (STATS_HEADER + ",Aggregated,100,25\n", "0.25"),
    (STATS_HEADER + ",Aggregated,1708,0\n", "0.0"),  # a measured zero
    (STATS_HEADER + ",Aggregated,100\n", None),  # truncated
    (STATS_HEADER + ",Aggregated,bad,5\n", None),  # corrupt count
    (STATS_HEADER + ",Aggregated,0,0\n", None),  # no requests
    (None, None),  # no stats.csv
])
def test_aggregate_failure_ratio(tmp_path, stats, ratio):
    assert summarize(tmp_path, FACTS, stats=stats)["aggregate_failure_ratio"] == ratio


def test_per_operation_failure_ratios(tmp_path):
    m = summarize(tmp_path, FACTS, stats=STATS_HEADER + "grpc,ResumeActor,100,2\ngrpc,ResumeActorFirstResume,100,99\n"
                  "grpc,SuspendActor,200,0\nhttp,Idle,0,0\n,Aggregated,400,101\n")
    assert (m["resume_actor_failure_ratio"], m["resume_actor_first_resume_failure_ratio"],
            m["suspend_actor_failure_ratio"], m["aggregate_failure_ratio"]) == ("0.02", "0.99", "0.0", "0.2525")
    assert m["idle_failure_ratio"] is None  # ran no requests
    only_total = summarize(tmp_path, FACTS, stats=STATS_HEADER + ",Aggregated,10,0\n")
    assert "resume_actor_failure_ratio" not in only_total  # never ran: no key at all
    broken = summarize(tmp_path, FACTS, stats=STATS_HEADER + "grpc,ResumeActor,100,2\ngrpc,X,lots,1\n")
    assert [key for key in broken if key.endswith("failure_ratio")] == ["aggregate_failure_ratio"]


@pytest.mark.parametrize(("name", "key"), [
    ("ResumeActor", "resume_actor_failure_ratio"),
    ("ResumeActorFirstResume", "resume_actor_first_resume_failure_ratio"),
    ("DurDirWrite", "dur_dir_write_failure_ratio"),
    ("GluttonReadRAM", "glutton_read_ram_failure_ratio"),
    ("TimeToReady_10pct", "time_to_ready_10pct_failure_ratio"),
])
def test_operation_naming_rule(name, key):
    assert operation_key(name) == key


def test_metadata_keys(tmp_path):
    m = summarize(tmp_path, FACTS, metadata={"cluster_name": "sweperf-c3hm176nested", "nodes": 3,
                                            "labels": {"a": 1}, "unset": None})
    assert (m["metadata_cluster_name"], m["metadata_nodes"], m["metadata_labels"]) == \
        ("sweperf-c3hm176nested", "3", '{"a": 1}')
    assert "metadata_unset" not in m
    assert not [key for key in summarize(tmp_path, FACTS) if key.startswith("metadata_")]


def test_run_window_and_multi_actor_worker(tmp_path):
    m = summarize(tmp_path, {**FACTS, "worker_actor_capacity": 1000}, run_start=1788914580, run_end=1788915180)
    assert (m["run_start"], m["run_end"], m["worker_actor_capacity"], m["multi_actor_worker"]) == \
        ("1788914580", "1788915180", "1000", "true")
    one_per_pod = summarize(tmp_path, {**FACTS, "worker_pod_count": 10})
    assert one_per_pod["multi_actor_worker"] == "false" and one_per_pod["run_start"] is None
    unmeasured = summarize(tmp_path, EMPTY_FACTS)  # --no-cluster-facts: same keys, frontier null
    assert set(FACT_KEYS) <= set(unmeasured) and unmeasured["multi_actor_worker"] is None
    assert all(unmeasured[key] is None for key in unmeasured if key.startswith("actors_per_"))
    assert unmeasured["aggregate_failure_ratio"] == "0.25"  # failure ratios still computed


def test_key_order(tmp_path):
    m = summarize(tmp_path, {**EMPTY_FACTS, **FACTS}, metadata={"b": "x", "a": 1},
                  stats=STATS_HEADER + "grpc,SuspendActor,2,0\ngrpc,ResumeActor,2,1\n,Aggregated,4,1\n")
    assert list(m) == [*FACT_KEYS, "run_start", "run_end", "metadata_b", "metadata_a", "multi_actor_worker",
                       "actors_per_node", "actors_per_vcpu", "actors_per_gb_ram", "actors_per_pod_p50",
                       "actors_per_pod_p90", "actors_per_pod_p99", "aggregate_failure_ratio",
                       "suspend_actor_failure_ratio", "resume_actor_failure_ratio"]


def test_byte_form_of_a_whole_row():
    """The newest upstream run's own line, byte for byte, from its files, facts, window and metadata."""
    [line] = [line for line in (NEWEST / "stats.jsonl").read_text().splitlines() if '"trial_summary"' in line]
    facts = {**FACTS, "gke_version": "v1.33.5-gke.1080000", "worker_actor_capacity": "1000",
             "worker_memory_limit_gb": "16.0", "sandbox_class": "gvisor"}
    row = trial_summary_row({"timestamp": "2026-11-20T00:00:00Z", "tag": "4f8a1c0d2b9e7f6a5c3d1e0f9a8b7c6d5e4f3a2b",
                             "test_name": "glutton_baseline_5_users"},
                            stats=LocustCsv.read(NEWEST / "stats.csv"),
                            history=LocustCsv.read(NEWEST / "stats_history.csv"),
                            facts=facts, run_start=1795132800, run_end=1795132890, metadata={"runner": "nightly"},
                            users=10)
    assert json.dumps(row) == line
    assert line.startswith('{"timestamp": "2026-11-20T00:00:00Z", "tag": "4f8a1c0d2b9e7f6a5c3d1e0f9a8b7c6d5e4f3a2b", '
                           '"test_name": "glutton_baseline_5_users", "metric": "trial_summary", "measurements": '
                           '{"machine_type": "c3-standard-4", "node_count": "1", "allocatable_cores": "3.92", ')
    assert line.endswith('"actors_per_node": "10.0", "actors_per_vcpu": "2.55", "actors_per_gb_ram": "0.77", '
                         '"actors_per_pod_p50": "2.0", "actors_per_pod_p90": "2.0", "actors_per_pod_p99": "2.0", '
                         '"aggregate_failure_ratio": "0.0017", "create_actor_failure_ratio": "0.0", '
                         '"resume_actor_failure_ratio": "0.005", "suspend_actor_failure_ratio": "0.0", '
                         '"glutton_ping_failure_ratio": "0.0"}}')


def _write_trial(tmp_path: Path, stats: bool) -> list[dict]:
    from substrate_assets.driver.outputs import MeasuredTrial, TrialRecord, write_trial_files
    from substrate_assets.suites import Suite
    from substrate_assets.workload.library import load_script_file

    staging, work = tmp_path / "staging", tmp_path / "work"
    staging.mkdir()
    work.mkdir()
    if stats:
        for name in ("stats.csv", "stats_history.csv"):
            (staging / name).write_bytes((NEWEST / name).read_bytes())
    suite = Suite(name="s", script="quick-session", users=10, metadata={"runner": "nightly"})
    key = TrialKey("s", 1795132800, "local")
    facts = {**FACTS, "gke_version": None, "worker_actor_capacity": "4", "worker_memory_limit_gb": None,
             "sandbox_class": "process"}
    record = TrialRecord(key, suite, load_script_file(ROOT / "scripts" / "quick-session.yaml"), "local", [], 0,
                         key.started, datetime.fromtimestamp(1795132890, UTC), False, facts)
    summary = unmeasured_server_summary(start_ts=1795132800, end_ts=1795132890, steady=(1795132800, 1795132890),
                                        test_name="s", tag="local", data_timestamp="2026-11-20T00:00:00Z")
    write_trial_files(staging, record, MeasuredTrial(StagedTrial.read(staging, work), summary))
    return read_stats_jsonl(staging / "stats.jsonl")


def test_a_trial_writes_its_trial_summary_between_the_requests_and_the_server_summary(tmp_path):
    rows = _write_trial(tmp_path, stats=True)
    assert [row["metric"] for row in rows] == ["grpc_CreateActor", "grpc_ResumeActor", "grpc_SuspendActor",
                                               "http_GluttonPing", "trial_summary", "server_summary"]
    summary = rows[4]
    assert list(summary) == ["timestamp", "tag", "test_name", "metric", "measurements"]
    m = summary["measurements"]
    assert (m["run_start"], m["run_end"], m["metadata_runner"], m["sandbox_class"], m["gke_version"]) == \
        ("1795132800", "1795132890", "nightly", "process", None)
    assert (m["actors_per_node"], m["actors_per_pod_p50"], m["aggregate_failure_ratio"]) == ("10.0", "2.0", "0.0017")


def test_no_trial_summary_without_stats(tmp_path):
    assert [row["metric"] for row in _write_trial(tmp_path, stats=False)] == ["server_summary"]
