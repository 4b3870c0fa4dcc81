"""How long a trial takes from launch until it is in the marts and compared, launched from the UI (the launchpad's
own GraphQL `launchRun` against a real `dagster dev`, the rest followed by the daemon's warehouse_refresh) and by
`substrate-bench run` (which loads, rebuilds and compares in-process), side by side, in a project of its own.

    .venv/bin/python -m bench.ui_trial [--suite quick-smoke] [--port 3099]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.support.projects import make_project, project_env

ROOT = Path(__file__).resolve().parents[1]

CLI = str(Path(sys.executable).parent / "substrate-bench")
LAUNCH = """
mutation Launch($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""


def graphql(port: int, query: str, variables: dict) -> dict:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/graphql", method="POST",
                                     data=json.dumps({"query": query, "variables": variables}).encode(),
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        return json.loads(response.read())


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2):
            return True
    except OSError:
        return False


def run_timeline(instance, first_run_id: str) -> list[str]:
    """Each run from the launched one on: when it was created, started and ended, in seconds after its creation."""
    runs = sorted(instance.get_run_records(), key=lambda record: record.create_timestamp.timestamp())
    first = next(record for record in runs if record.dagster_run.run_id == first_run_id)
    zero = first.create_timestamp.timestamp()
    lines = []
    for record in runs:
        if record.create_timestamp.timestamp() < zero:
            continue
        run = record.dagster_run
        what = run.job_name if run.job_name == "run_trial" else ", ".join(sorted(
            [key.to_user_string() for key in run.asset_selection or []][:2] +
            [key.name for key in run.asset_check_selection or []][:1])) + ", …"
        lines.append(f"{what:<60} created {record.create_timestamp.timestamp() - zero:6.1f}  started "
                     f"{(record.start_time or zero) - zero:6.1f}  ended {(record.end_time or zero) - zero:6.1f}")
    return lines


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--suite", default="quick-smoke")
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    import dagster as dg

    with tempfile.TemporaryDirectory() as scratch:
        project = make_project(Path(scratch), (ROOT / "suites.yaml").read_text())
        env = project_env(project)

        started = time.monotonic()
        subprocess.run([CLI, "run", args.suite], env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
        cli_s = time.monotonic() - started

        port = args.port
        if not port:
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]
        ui = subprocess.Popen([CLI, "ui", "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL, start_new_session=True)
        try:
            while not answers(port):
                time.sleep(0.5)
            time.sleep(15)  # the daemon's first ticks: the sensors record their baselines
            instance = dg.DagsterInstance.from_config(str(project / ".dagster_home"))
            started = time.monotonic()
            launched = graphql(port, LAUNCH, {"params": {
                "selector": {"repositoryLocationName": "substrate_assets", "repositoryName": "__repository__",
                             "jobName": "run_trial"},
                "runConfigData": {"ops": {"trial": {"config": {"suite": args.suite}}}}}})
            run_id = launched["data"]["launchRun"]["run"]["runId"]
            trial_id = None
            landed_s = marts_s = None
            check = dg.AssetCheckKey(dg.AssetKey("trial_run"), "no_regression_against_history")
            while True:
                time.sleep(0.5)
                if trial_id is None:
                    run = instance.get_run_by_id(run_id)
                    trial_id = run.tags.get("substrate/trial") if run else None
                    continue
                if landed_s is None and trial_id in instance.get_materialized_partitions(dg.AssetKey("trial_run")):
                    landed_s = time.monotonic() - started
                if marts_s is None and landed_s is not None:
                    latest = instance.fetch_materializations(dg.AssetKey("capacity_history"), limit=1).records
                    loaded = instance.fetch_materializations(dg.AssetRecordsFilter(
                        asset_key=dg.AssetKey("request_samples"), asset_partitions=[trial_id]), limit=1).records
                    if latest and loaded and latest[0].storage_id > loaded[0].storage_id:
                        marts_s = time.monotonic() - started
                evaluations = instance.event_log_storage.get_asset_check_execution_history(check, limit=5)
                if any(evaluation.partition == trial_id and evaluation.status.value != "PLANNED"
                       for evaluation in evaluations):
                    compared_s = time.monotonic() - started
                    break
            timeline = run_timeline(instance, run_id)
        finally:
            os.killpg(ui.pid, signal.SIGTERM)
            ui.wait(timeout=60)
    print(f"suite {args.suite}")
    print(f"substrate-bench run (validate, trial, load, marts, comparison): {cli_s:.1f} s")
    print(f"UI launch → trial landed {landed_s:.1f} s, in the marts {marts_s:.1f} s, compared {compared_s:.1f} s")
    print(f"ratio UI (compared) / CLI: {compared_s / cli_s:.2f}")
    print("runs from the UI launch on (s after the launch: created, started, ended):")
    for line in timeline:
        print(f"  {line}")


if __name__ == "__main__":
    main()
