"""The shared warehouse (DuckLake: catalog in a real PostgreSQL, data in a real S3 API, moto) against the local file,
as history grows (issue 33, item 4):

1. one more trial loaded (its raw tables, then every model, in one transaction, as an import or a run's load
   does), median of a few, with 10 and with 1,000 trials already in the warehouse, into a lake and into a file;
   and the ratio of the figure at 1,000 to the figure at 10 (target: within 1.3 for the lake);
2. a reader's first query, ``select * from density_frontiers``, from a fresh process with the reader's role: the
   whole process (start-up, extensions, attach, query) and the attach plus query alone;
3. the data files of the lake after N separate loads (default 1,000), with the maintenance off and with it on
   (every MAINTAIN_EVERY snapshots): the files the current snapshot reads, and the objects under the data path.

    .venv/bin/python -m bench.shared_warehouse [--sizes 10,1000] [--samples 10000] [--repeats 5]
        [--loads 1000] [--load-samples 1000] [--skip-loads]

PostgreSQL (Debian's postgresql package) must be installed; moto runs in this process. The warehouses at each size
are filled by a rebuild from a synthetic run store (bench/warehouse_rebuild.py's trials), so only the timed loads
are one trial each.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from unittest import mock

import boto3
import numpy as np

from bench.warehouse_rebuild import MODELS, one_more_trial, write_trial
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse import lake as lake_module
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.lake import data_files
from substrate_assets.warehouse.rebuild import rebuild
from substrate_assets.warehouse.refresh import load_and_refresh
from substrate_assets.warehouse.trial_rows import read_trials
from tests.support.lake import READER, WRITER, SharedLake, lake_servers, new_lake
from tests.support.s3 import KEY_ID, REGION, SECRET

ROOT = Path(__file__).resolve().parents[1]

FIRST_QUERY = """
import sys, time
started = time.perf_counter()
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.location import warehouse_location
imported = time.perf_counter()
with connect(warehouse_location(), read_only=True) as connection:
    attached = time.perf_counter()
    rows = connection.execute("select * from density_frontiers").fetchall()
    queried = time.perf_counter()
print(len(rows), queried - started, imported - started, attached - imported, queried - attached)
"""


def first_query(lake: SharedLake, repeats: int) -> tuple[float, float, int, tuple[float, float, float]]:
    """A fresh process's first ``select * from density_frontiers`` as the reader, ``repeats`` times: the median of
    its wall seconds, of the seconds of import + attach + query inside it, the rows, and the medians of the import,
    the attach and the query alone."""
    walls, insides, parts, rows = [], [], [], 0
    for _ in range(repeats):
        started = time.perf_counter()
        done = subprocess.run([sys.executable, "-c", FIRST_QUERY], capture_output=True, text=True, check=True,
                              cwd=ROOT, env={**os.environ, **lake.env(READER)})
        walls.append(time.perf_counter() - started)
        count, inside, *split = done.stdout.split()
        rows = int(count)
        insides.append(float(inside))
        parts.append([float(value) for value in split])
    imported, attached, queried = (statistics.median(part[index] for part in parts) for index in range(3))
    return statistics.median(walls), statistics.median(insides), rows, (imported, attached, queried)


def objects_under(lake: SharedLake) -> int:
    """The objects in the store under the lake's data path: every file written and not yet deleted."""
    bucket, _, prefix = lake.data_path.removeprefix("s3://").partition("/")
    client = boto3.client("s3", endpoint_url=f"http://{lake.servers.s3.endpoint}", region_name=REGION,
                          aws_access_key_id=KEY_ID, aws_secret_access_key=SECRET)
    pages = client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix)
    return sum(page.get("KeyCount", 0) for page in pages)


def timed_loads(warehouse, work: Path, size: int, samples: int, repeats: int,
                rng: np.random.Generator) -> tuple[float, float]:
    extra = RunStore(work / f"extra-{size}-{os.getpid()}-{time.monotonic_ns()}")
    loads = [one_more_trial(warehouse, extra, 200_000 + size * 10 + repeat, samples, rng) for repeat in range(repeats)]
    shutil.rmtree(extra.root)
    return statistics.median(wall for wall, _ in loads), statistics.median(cpu for _, cpu in loads)


def many_loads(lake: SharedLake, work: Path, loads: int, samples: int, every: int) -> tuple[int, int, float]:
    """``loads`` trials loaded one by one into an empty lake, maintenance every ``every`` snapshots (0: never):
    the data files its current snapshot reads, the objects under its data path, and the seconds per load."""
    store = RunStore(work / f"loads-{every}")
    rng = np.random.default_rng(7)
    directories = [write_trial(store, 300_000 + index, samples, rng) for index in range(loads)]
    started = time.perf_counter()
    with mock.patch.dict(os.environ, {lake_module.MAINTAIN_EVERY_ENV: str(every)}):
        for directory in directories:
            read, unreadable = read_trials([TrialDirectory(directory)])
            assert not unreadable
            with connect(lake.location(WRITER)) as connection:
                load_and_refresh(connection, read, directory=MODELS)
    per_load = (time.perf_counter() - started) / loads
    with connect(lake.location(WRITER)) as connection:
        files = data_files(connection)
    shutil.rmtree(store.root)
    return files, objects_under(lake), per_load


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="10,1000")
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--loads", type=int, default=1000)
    parser.add_argument("--load-samples", type=int, default=1000)
    parser.add_argument("--skip-loads", action="store_true", help="only items 1 and 2")
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    rng = np.random.default_rng(1)
    with tempfile.TemporaryDirectory() as temporary, lake_servers() as servers:
        work = Path(temporary)
        store = RunStore(work / "store")
        written = 0
        print(f"{'trials':>7} {'lake: one more s':>17} {'its CPU s':>9} {'file: one more s':>17} {'its CPU s':>9} "
              f"{'lake/file':>9} {'first query: process s':>22} {'attach+query s':>14} {'rows':>5}", flush=True)
        figures: dict[int, float] = {}
        for size in sizes:
            while written < size:
                write_trial(store, written, args.samples, rng)
                written += 1
            lake = new_lake(servers)
            file_warehouse = work / f"w{size}.duckdb"
            with mock.patch.dict(os.environ, lake.env(WRITER)):
                result = rebuild(store, lake.location(WRITER), MODELS)
                assert len(result.trials) == size
                lake_one, lake_cpu = timed_loads(lake.location(WRITER), work, size, args.samples, args.repeats, rng)
            rebuild(store, file_warehouse, MODELS)
            file_one, file_cpu = timed_loads(file_warehouse, work, size, args.samples, args.repeats, rng)
            file_warehouse.unlink()
            wall, inside, rows, (imported, attached, queried) = first_query(lake, args.repeats)
            figures[size] = lake_one
            print(f"{size:>7} {lake_one:>17.3f} {lake_cpu:>9.3f} {file_one:>17.3f} {file_cpu:>9.3f} "
                  f"{lake_one / file_one:>9.2f} {wall:>22.2f} {inside:>14.2f} {rows:>5}   (import {imported:.2f}, "
                  f"attach {attached:.2f}, query {queried:.2f}; targets: lake/file <= 1.3, attach+query <= 0.3)",
                  flush=True)
        smallest, largest = min(figures), max(figures)
        ratio = figures[largest] / figures[smallest]
        print(f"one more trial into the lake at {largest} trials vs {smallest}: {ratio:.2f}x (target <= 1.3)",
              flush=True)
        if args.skip_loads:
            return
        print(f"\n{args.loads} separate loads of {args.load_samples} samples each into an empty lake:", flush=True)
        print(f"{'maintenance':>24} {'data files read':>15} {'objects stored':>14} {'s per load':>10}", flush=True)
        for every, label in ((0, "off"), (lake_module.MAINTAIN_EVERY,
                                           f"every {lake_module.MAINTAIN_EVERY} snapshots")):
            lake = new_lake(servers)
            with mock.patch.dict(os.environ, lake.env(WRITER)):
                files, objects, per_load = many_loads(lake, work, args.loads, args.load_samples, every)
            print(f"{label:>24} {files:>15} {objects:>14} {per_load:>10.3f}", flush=True)


if __name__ == "__main__":
    main()
