"""Trial directories with every file a local trial writes, in the same formats, around request samples a test
chooses: the warehouse reads them through its real load path.

bench/compare.py writes its trials with this too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime

import numpy as np
import polars as pl

from substrate_assets.families import WAKE_ROWS
from substrate_assets.results.layout import RunStore, TrialKey
from substrate_assets.results.readers import REQUESTS_SCHEMA
from substrate_assets.runtime.events import EVENT_SCHEMA

STATS_HEADER = ("Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,Min Response Time,"
                "Max Response Time,Average Content Size,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,"
                "99.9%,99.99%,100%")
HISTORY_HEADER = ("Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,"
                  "99.99%,100%,Total Request Count,Total Failure Count,Total Median Response Time,"
                  "Total Average Response Time,Total Min Response Time,Total Max Response Time,"
                  "Total Average Content Size")
PERCENTILES = "20,25,30,33,40,55,80,120,300,400,400"


def write_trial(store: RunStore, suite: str, run_ts: int, latencies: Mapping[str, np.ndarray], *,
                tag: str = "local", sut_version: str | None = None, users: int = 4, failures: int = 0,
                node_count: int = 1, completed: bool = True, group: str | None = None,
                inject_wake_delay_ms: int | None = None, span_s: float = 58.0,
                wake_paths: Sequence[str] | None = None, foreign_cpu_share: float | None = None,
                family: str = "agentsession") -> str:
    """A trial of ``suite`` (``completed``, or stopped before its end) whose request log holds ``latencies`` (request
    name → samples, all successful, spread evenly in their order over ``span_s`` seconds from the trial's second
    second) and whose Aggregated stats row counts ``failures`` more failed requests; its trial id. ``wake_paths``
    (one per WakeFirstTouch sample: restore_warm, restore_cold or unpause) writes the runtime's event log that tells
    them; ``foreign_cpu_share`` the machine load trial.json records (over 0.05: disturbed); ``family`` the workload
    family whose wake row (WAKE_ROWS) the log marks as wakes."""
    key = TrialKey(suite, run_ts, tag)
    directory = store.trial_dir(key)
    directory.mkdir(parents=True)
    started = datetime.fromtimestamp(run_ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ended = datetime.fromtimestamp(run_ts + 60, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    (directory / "trial.json").write_text(json.dumps({
        "trial_id": key.trial_id, "group": group, "suite": suite, "tag": tag, "backend": "local", "run_ts": run_ts,
        "started_at": started, "ended_at": ended, "completed": completed, "interrupted": not completed, "sut_version": sut_version,
        "script": {"name": "quick-session", "sha256": "0" * 64},
        "knobs": {"users": users, "duration_s": 60, "actors_per_user": 1,
                  "inject_wake_delay_ms": inject_wake_delay_ms,
                  **({"family": family} if family != "agentsession" else {})},
        "cluster_facts": {"machine_type": "cpu", "node_count": node_count, "allocatable_cores": 2.0,
                          "allocatable_ram_gb": 23.5, "worker_pod_count": 8, "gke_version": None,
                          "worker_actor_capacity": "4", "worker_memory_limit_gb": None, "sandbox_class": "process"},
        "run_start": run_ts, "run_end": run_ts + 60,
        "machine_load": None if foreign_cpu_share is None else {
            "foreign_cpu_share": foreign_cpu_share, "steal_share": 0.0, "cpu_pressure": 0.7,
            "disturbed": foreign_cpu_share > 0.05,
            "disturbed_because": [f"CPU taken by other processes {foreign_cpu_share:.1%}"] if foreign_cpu_share > 0.05
            else []}}))
    (directory / "status.json").write_text(json.dumps({"locust_exit_code": 0 if completed else -15,
                                                       "stats_generated": True}))
    total = sum(len(values) for values in latencies.values())
    rows = [f"http,{name},{len(values)},0,20,25.5,3,400,0.0,12.5,0.0,{PERCENTILES}"
            for name, values in latencies.items()]
    aggregated = f",Aggregated,{total + failures},{failures},20,25.5,3,400,0.0,12.5,0.0,{PERCENTILES}"
    (directory / "stats.csv").write_text("\n".join([STATS_HEADER, *rows, aggregated]) + "\n")
    history = [f"{run_ts + t},{users},,Aggregated,10.0,0.0,{PERCENTILES},{t * 10},0,20,25.5,3,400,0.0"
               for t in range(1, 60)]
    (directory / "stats_history.csv").write_text("\n".join([HISTORY_HEADER, *history]) + "\n")
    names = [name for name, values in latencies.items() for _ in range(len(values))]
    samples = np.concatenate([np.asarray(values, dtype=float) for values in latencies.values()]) if total else []
    frame = pl.DataFrame({
        "ts": [run_ts + 1 + i * (span_s / max(total, 1)) for i in range(total)], "request_type": "http", "name": names,
        "latency_ms": samples, "response_time_ms": [int(v) for v in samples], "response_length": 0,
        "success": True, "error": None, "session_id": "agent-x", "step": "s", "step_index": 0, "lap": 0,
        "phase": "steady", "locust_seq": list(range(1, total + 1)), "locust_counted": True,
        "wake": [name == WAKE_ROWS[family] for name in names],
    }, schema=REQUESTS_SCHEMA)
    if wake_paths is not None:
        # Each wake of an actor of its own, so the wakes' spans never overlap within one actor.
        frame = frame.with_columns(pl.when(pl.col("wake")).then(pl.format("agent-w{}", pl.int_range(pl.len())))
                                   .otherwise(pl.col("session_id")).alias("session_id"))
    frame.write_parquet(directory / "requests.parquet")
    if wake_paths is not None:
        wakes = frame.filter(pl.col("wake"))
        starts, actors = wakes["ts"].to_list(), wakes["session_id"].to_list()
        assert len(starts) == len(wake_paths), "one path per wake"
        pl.DataFrame([{**dict.fromkeys(EVENT_SCHEMA), "kind": "unpause" if path == "unpause" else "restore",
                       "atespace": "benchmark", "actor": actor, "start_ts": start + 0.0005, "duration_s": 0.01,
                       "host_start": None if path == "unpause" else path.removeprefix("restore_")}
                      for start, actor, path in zip(starts, actors, wake_paths, strict=True)],
                     schema=EVENT_SCHEMA).write_parquet(directory / "runtime_events.parquet")
    return key.trial_id
