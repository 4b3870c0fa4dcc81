"""The code location loads through workspace.yaml with Dagster's own CLI, in both deployments."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dagster_definitions_validate(tmp_path):
    dagster = Path(sys.executable).parent / "dagster"
    done = subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"], cwd=ROOT,
                          env={**os.environ, "DAGSTER_HOME": str(tmp_path)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "All code locations passed validation" in done.stderr + done.stdout


CLUSTER_LISTING = """\
import json
from substrate_assets.definitions import defs
graph = defs.resolve_asset_graph()
print(json.dumps({"assets": sorted(key.to_user_string() for key in graph.get_all_asset_keys()),
                  "sensors": sorted(sensor.name for sensor in defs.sensors),
                  "jobs": sorted(job.name for job in defs.jobs)}))
"""


def test_cluster_deployment_holds_scripts_and_trials_only(tmp_path):
    """On Kubernetes with a file warehouse nothing opens the DuckDB file: the warehouse assets and their sensor are
    left out."""
    done = subprocess.run([sys.executable, "-c", CLUSTER_LISTING], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "DAGSTER_HOME": str(tmp_path), "SUBSTRATE_BENCH_DEPLOYMENT": "cluster"},
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    listing = json.loads(done.stdout.strip().splitlines()[-1])
    assert listing == {"assets": ["trial_run", "workload_script"], "sensors": ["script_change_sensor"],
                       "jobs": ["run_trial", "validate_script"]}


def test_an_unknown_deployment_is_refused(tmp_path):
    done = subprocess.run([sys.executable, "-c", "import substrate_assets.definitions"], cwd=ROOT, text=True,
                          env={**os.environ, "SUBSTRATE_BENCH_DEPLOYMENT": "laptop"}, capture_output=True, timeout=120)
    assert done.returncode != 0 and "SUBSTRATE_BENCH_DEPLOYMENT='laptop': expected workstation or cluster" in done.stderr


def test_a_cluster_deployment_never_loads_the_warehouse(tmp_path):
    """Nothing on the cluster opens the DuckDB file: its code location does not even import DuckDB."""
    program = ("import sys, substrate_assets.definitions\n"
               "print(sorted(m for m in sys.modules if m == 'duckdb' or m.startswith('substrate_assets.warehouse')))")
    done = subprocess.run([sys.executable, "-c", program], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "DAGSTER_HOME": str(tmp_path), "SUBSTRATE_BENCH_DEPLOYMENT": "cluster"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_cluster_deployment_with_a_shared_warehouse_defines_the_whole_graph(tmp_path):
    """With a DuckLake setting the cluster's code location defines every asset, check and sensor a workstation
    does, but the sweep of dead run workers and the benchmark site (a run pod would write it where nobody opens it);
    defining them opens no connection (nothing answers at this catalog address)."""
    shared = {"SUBSTRATE_BENCH_WAREHOUSE": "ducklake:postgres:dbname=lake host=127.0.0.1 port=1 user=writer",
              "SUBSTRATE_BENCH_WAREHOUSE_DATA_PATH": "s3://bench/lake/"}
    listings = {}
    for deployment in ("cluster", "workstation"):
        done = subprocess.run([sys.executable, "-c", CLUSTER_LISTING], cwd=ROOT, capture_output=True, text=True,
                              env={**os.environ, **shared, "DAGSTER_HOME": str(tmp_path),
                                   "SUBSTRATE_BENCH_DEPLOYMENT": deployment}, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        listings[deployment] = json.loads(done.stdout.strip().splitlines()[-1])
    # The one difference: a workstation's daemon sweeps dead run workers of its host; a cluster's runs are pods.
    assert "dead_runs" in listings["workstation"]["sensors"]
    listings["workstation"]["sensors"].remove("dead_runs")
    assert "benchmark_site" in listings["workstation"]["assets"]
    listings["workstation"]["assets"].remove("benchmark_site")
    assert listings["cluster"] == listings["workstation"]
    assert {"density_frontiers", "wake_latency_distribution", "request_samples", "change_points"} <= set(
        listings["cluster"]["assets"])
