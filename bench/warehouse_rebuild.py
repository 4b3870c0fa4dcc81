"""Warehouse figures (issue 16, targets 3 and 4), at 10, 1,000 and (with --big) 10,000 synthetic trials of 10k
request samples each:

- one more trial loaded into the warehouse (its raw tables, then every model updated, in one transaction: what an
  import does), median of a few, and its ratio to the figure at the smallest size (target: every ratio
  within 1.2, every figure <= 0.5 s);
- the rebuild of the whole warehouse from the run store, and DuckDB alone bulk-scanning the same store in the same
  run (read_parquet of every requests.parquet, per-trial wake quantiles), with the ratio (target <= 1.5);
- the peak RSS of the process that rebuilds (target < 4 GiB); DuckDB's scan runs in a process of its own.

    .venv/bin/python -m bench.warehouse_rebuild [--sizes 10,1000] [--big] [--samples 10000] [--repeats 5] [--work DIR]

Synthetic trials have every file a local trial has, in the same formats (trial.json with cluster
facts, status.json, stats.csv, stats_history.csv, requests.parquet, server_summary.json). 10,000 trials take
~2 GB of disk under $TMPDIR.
"""

from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import duckdb
import numpy as np
import polars as pl

from substrate_assets.results.layout import RunStore, TrialKey
from substrate_assets.results.readers import REQUESTS_SCHEMA
from substrate_assets.results.server_summary import FLAT_KEYS
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.preview import PREVIEW_ROWS
from substrate_assets.warehouse.rebuild import rebuild
from substrate_assets.warehouse.refresh import load_and_refresh
from substrate_assets.warehouse.trial_rows import read_trials

ROOT = Path(__file__).resolve().parents[1]

HEADER = ("Type,Name,Request Count,Failure Count,Median Response Time,Average Response Time,Min Response Time,"
          "Max Response Time,Average Content Size,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,"
          "99.99%,100%")
HISTORY = ("Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,100%,"
           "Total Request Count,Total Failure Count,Total Median Response Time,Total Average Response Time,"
           "Total Min Response Time,Total Max Response Time,Total Average Content Size")
NAMES = ["WakeFirstTouch", "SuspendActor", *(f"Step_0{i}_step" for i in range(1, 6))]
MODELS = ROOT / "dbt_like_sql"


def write_trial(store: RunStore, index: int, samples: int, rng: np.random.Generator) -> Path:
    key = TrialKey("synthetic", 1_700_000_000 + index * 100, "bench")
    directory = store.trial_dir(key)
    directory.mkdir(parents=True)
    users = int(rng.integers(2, 65))
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
    latency = rng.lognormal(3.0, 0.6, samples)
    order = np.arange(samples)
    names = np.array(NAMES)[order % len(NAMES)]
    frame = pl.DataFrame({"ts": key.run_ts + order * 0.006, "request_type": "http", "name": names,
                          "latency_ms": latency, "wake": names == "WakeFirstTouch",
                          "response_time_ms": latency.astype(np.int64), "response_length": 0, "success": True,
                          "error": None, "session_id": "agent-x", "step": "s", "step_index": 0, "lap": 0,
                          "phase": "steady", "locust_seq": order // len(NAMES) + 1, "locust_counted": True},
                         schema=REQUESTS_SCHEMA)
    frame.write_parquet(directory / "requests.parquet")
    summary = {"cluster_packing": {"summary": {"p50": 0.5, "p90": 0.75, "p95": 0.75, "p99": 1.0}},
               "snapshots": {"size_p50_mb": 16.0, "checkpoints_in_window": 40, "restore_p50_s": 0.02}}
    (directory / "server_summary.json").write_text(json.dumps(summary))
    assert len(FLAT_KEYS) == 45
    return directory


def duckdb_bulk_scan(store: RunStore, database: Path) -> float:
    """DuckDB alone over the same store: every requests.parquet read into one table of a database file (as the
    warehouse is one), then per-trial wake quantiles. Its seconds. Run in a process of its own (``--scan``), so its
    memory is not counted as the rebuild's."""
    output = subprocess.run([sys.executable, __file__, "--scan", str(store.root), str(database)], check=True,
                            capture_output=True, text=True).stdout
    database.unlink(missing_ok=True)
    return float(output)


def _scan(root: Path, database: Path) -> None:
    files = [str(directory / "requests.parquet") for directory in RunStore(root).trial_dirs()]
    database.unlink(missing_ok=True)
    started = time.perf_counter()
    with duckdb.connect(str(database)) as connection:
        connection.execute("SET enable_progress_bar = false")
        connection.execute("CREATE TABLE samples AS SELECT * FROM read_parquet(?, filename = true)", [files])
        connection.execute("SELECT filename, quantile_disc(latency_ms, [0.5, 0.9, 0.99]) FROM samples "
                           "WHERE name = 'WakeFirstTouch' GROUP BY filename").fetchall()
    print(time.perf_counter() - started)


def one_more_trial(warehouse: Path, extra: RunStore, index: int, samples: int,
                   rng: np.random.Generator) -> tuple[float, float]:
    """Seconds, wall and CPU (every thread of this process: what the load cost, however busy the machine), to load
    one new trial and update every model, as an import does (files written beforehand)."""
    directory = write_trial(extra, index, samples, rng)
    started, cpu = time.perf_counter(), time.process_time()
    read, unreadable = read_trials([TrialDirectory(directory)])
    assert not unreadable, unreadable
    with connect(warehouse) as connection:
        outcomes = load_and_refresh(connection, read, directory=MODELS, preview_rows=PREVIEW_ROWS,
                                    figures_of=[part.trial_id for part in read]).tests
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    assert all(outcome.passed for outcome in outcomes), [o.test.name for o in outcomes if not o.passed]
    return seconds, cpu


def peak_rss_gib() -> float:
    """This process's (the rebuilds and the loads): not the reading worker processes' (each holds a share of a
    batch's small tables) nor the DuckDB scan's, which runs apart."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,1000")
    parser.add_argument("--big", action="store_true", help="also 10,000 trials (~100M samples, ~2 GB of disk)")
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--rebuilds", type=int, default=1,
                        help="rebuilds (each beside a scan of DuckDB's own, alternating) at each size: medians")
    parser.add_argument("--work", type=Path, help="keep the synthetic store here (and reuse the trials it holds) "
                        "instead of a temporary directory")
    parser.add_argument("--scan", nargs=2, type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.scan:
        _scan(*args.scan)
        return
    sizes = [int(size) for size in args.sizes.split(",")] + ([10_000] if args.big else [])
    rng = np.random.default_rng(1)
    print(f"{'trials':>7} {'samples':>11} {'rebuild s':>10} {'duckdb s':>9} {'ratio':>6} "
          f"{'one more trial s (median)':>26} {'vs smallest':>11} {'its CPU s':>9} {'peak RSS GiB':>12}", flush=True)
    with tempfile.TemporaryDirectory() as temporary:
        work = args.work or Path(temporary)
        store = RunStore(work / "store")
        written, smallest = len(store.trial_dirs()) if store.root.exists() else 0, None
        for size in sizes:
            while written < size:
                write_trial(store, written, args.samples, rng)
                written += 1
            if len(store.trial_dirs()) != size:
                raise SystemExit(f"{store.root} holds {len(store.trial_dirs())} trials, not {size}: sizes go up")
            warehouse = work / f"w{size}.duckdb"
            scans, rebuilds, ratios = [], [], []
            for _ in range(args.rebuilds):  # alternating, so a slow spell of the machine falls on both alike
                scans.append(duckdb_bulk_scan(store, work / "scan.duckdb"))
                started = time.perf_counter()
                result = rebuild(store, warehouse, MODELS)
                rebuilds.append(time.perf_counter() - started)
                ratios.append(rebuilds[-1] / scans[-1])
                assert len(result.trials) == size and all(outcome.passed for outcome in result.tests)
            seconds, scan = statistics.median(rebuilds), statistics.median(scans)
            if args.rebuilds > 1:
                print(f"{size:>7} trials, {args.rebuilds} rebuilds: " + ", ".join(
                    f"{r:.2f}/{s:.2f} s" for r, s in zip(rebuilds, scans, strict=True))
                    + f"; median of the ratios {statistics.median(ratios):.2f} (target <= 1.3)", flush=True)
            extra = RunStore(work / f"extra{size}")
            shutil.rmtree(extra.root, ignore_errors=True)
            loads = [one_more_trial(warehouse, extra, 100_000 + size * 10 + repeat, args.samples, rng)
                     for repeat in range(args.repeats)]
            shutil.rmtree(extra.root)
            one, cpu = statistics.median(wall for wall, _ in loads), statistics.median(cpu for _, cpu in loads)
            smallest = smallest or one
            print(f"{size:>7} {result.raw_rows['request_samples']:>11} {seconds:>10.2f} {scan:>9.2f} "
                  f"{seconds / scan:>6.2f} {one:>26.3f} {one / smallest:>11.2f} {cpu:>9.3f} {peak_rss_gib():>12.2f}",
                  flush=True)
            warehouse.unlink()


if __name__ == "__main__":
    main()
