"""Warehouse rebuild time for 10, 100 and 1000 synthetic trials of 10k request samples each, and the
incremental load of one more trial (its raw tables, then every model).

    .venv/bin/python bench/warehouse_rebuild.py [--sizes 10,100,1000] [--samples 10000]

Synthetic trials have every file a local trial has, in the same formats (trial.json with cluster
facts, status.json, stats.csv, stats_history.csv, requests.parquet, server_summary.json).
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from pathlib import Path

import polars as pl

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from substrate_assets.results.layout import RunStore, TrialKey  # noqa: E402
from substrate_assets.results.readers import REQUESTS_SCHEMA  # noqa: E402
from substrate_assets.results.server_summary import FLAT_KEYS  # noqa: E402
from substrate_assets.results.trial_directory import TrialDirectory  # noqa: E402
from substrate_assets.warehouse.connection import connect  # noqa: E402
from substrate_assets.warehouse.models import build_marts  # noqa: E402
from substrate_assets.warehouse.raw import load_trials  # noqa: E402
from substrate_assets.warehouse.rebuild import rebuild  # noqa: E402

HEADER = ("Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,Min Response Time,"
          "Max Response Time,Average Content Size,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,"
          "99.99%,100%")
HISTORY = ("Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%,"
           "Total Request Count,Total Failure Count,Total Median Response Time,Total Average Response Time,"
           "Total Min Response Time,Total Max Response Time,Total Average Content Size")
NAMES = ["WakeFirstTouch", "SuspendActor", *(f"Step_0{i}_step" for i in range(1, 6))]


def write_trial(store: RunStore, index: int, samples: int, rng: random.Random) -> None:
    key = TrialKey("synthetic", 1_700_000_000 + index * 100, "bench")
    directory = store.trial_dir(key)
    directory.mkdir(parents=True)
    users = rng.randint(2, 64)
    (directory / "trial.json").write_text(json.dumps({
        "trial_id": key.trial_id, "suite": "synthetic", "tag": "bench", "backend": "local", "run_ts": key.run_ts,
        "started_at": "2023-11-14T22:13:20Z", "ended_at": "2023-11-14T22:14:20Z", "completed": True,
        "script": {"name": "quick-session", "sha256": "0" * 64}, "knobs": {"users": users, "duration_s": 60},
        "cluster_facts": {"machine_type": "cpu", "node_count": 1, "allocatable_cores": 2.0, "allocatable_ram_gb": 23.5,
                          "worker_pod_count": 8, "gke_version": None, "worker_actor_capacity": "4",
                          "worker_memory_limit_gb": None, "sandbox_class": "process"},
        "run_start": key.run_ts, "run_end": key.run_ts + 60}))
    (directory / "status.json").write_text('{"locust_exit_code": 0, "stats_generated": true}\n')
    rows = [f"http,{name},{samples // len(NAMES)},0,20,25.5,3,400,0.0,12.5,0.0,20,25,30,33,40,55,80,120,300,400,400"
            for name in NAMES]
    (directory / "stats.csv").write_text("\n".join([HEADER, *rows, f",Aggregated,{samples},0,20,25.5,3,400,0.0,12.5,"
                                                     "0.0,20,25,30,33,40,55,80,120,300,400,400"]) + "\n")
    history = [f"{key.run_ts + t},{min(users, t)},,Aggregated,10.0,0.0,20,25,30,33,40,55,80,120,300,400,400,"
               f"{t * 10},0,20,25.5,3,400,0.0" for t in range(60)]
    (directory / "stats_history.csv").write_text("\n".join([HISTORY, *history]) + "\n")
    latency = [rng.lognormvariate(3.0, 0.6) for _ in range(samples)]
    names = [NAMES[i % len(NAMES)] for i in range(samples)]
    frame = pl.DataFrame({"ts": [key.run_ts + i * 0.006 for i in range(samples)], "request_type": "http",
                          "name": names, "latency_ms": latency, "response_time_ms": [int(v) for v in latency],
                          "response_length": 0, "success": True, "error": None, "session_id": "agent-x",
                          "step": "s", "step_index": 0, "lap": 0, "phase": "steady",
                          "locust_seq": [i // len(NAMES) + 1 for i in range(samples)], "locust_counted": True},
                         schema=REQUESTS_SCHEMA)
    frame.write_parquet(directory / "requests.parquet")
    summary = {"cluster_packing": {"summary": {"p50": 0.5, "p90": 0.75, "p95": 0.75, "p99": 1.0}},
               "snapshots": {"size_p50_mb": 16.0, "checkpoints_in_window": 40, "restore_p50_s": 0.02}}
    (directory / "server_summary.json").write_text(json.dumps(summary))
    assert len(FLAT_KEYS) == 45


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,100,1000")
    parser.add_argument("--samples", type=int, default=10_000)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    rng = random.Random(1)
    print(f"{'trials':>7} {'request samples':>16} {'rebuild s':>10} {'per trial ms':>13} {'incremental s':>14}")
    with tempfile.TemporaryDirectory() as work:
        store = RunStore(Path(work) / "store")
        written = 0
        for size in sizes:
            while written < size:
                write_trial(store, written, args.samples, rng)
                written += 1
            warehouse = Path(work) / f"w{size}.duckdb"
            started = time.perf_counter()
            result = rebuild(store, warehouse, ROOT / "dbt_like_sql")
            seconds = time.perf_counter() - started
            assert len(result.trials) == size and all(outcome.passed for outcome in result.tests)
            extra = RunStore(Path(work) / f"extra{size}")
            write_trial(extra, 10_000 + size, args.samples, rng)
            started = time.perf_counter()
            with connect(warehouse) as connection:
                load_trials(connection, [TrialDirectory(extra.trial_dirs()[0])])
                build_marts(connection, ROOT / "dbt_like_sql")
            incremental = time.perf_counter() - started
            print(f"{size:>7} {result.raw_rows['request_samples']:>16} {seconds:>10.2f} "
                  f"{seconds / size * 1e3:>13.1f} {incremental:>14.2f}")


if __name__ == "__main__":
    main()
