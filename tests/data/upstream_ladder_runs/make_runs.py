"""Writes this folder's upstream ladder run from ``upstream_runs_newest/``'s ``glutton_actors_per_user_3`` (its
stats.csv, facts and telemetry), with a ladder's log, history, trial_summary and steady window.

    .venv/bin/python tests/data/upstream_ladder_runs/make_runs.py
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOURCE = next((HERE.parent / "upstream_runs_newest/runs/glutton_actors_per_user_3").glob("*/*/*"))
RUN_TS, TAG = 1795478400, "4f8a1c0d2b9e7f6a5c3d1e0f9a8b7c6d5e4f3a2b"
WORK = "/tmp/20261124T000000Z-locust-runner"
HISTORY_HEADER = ("Timestamp,User Count,Type,Name,Requests/s,Failures/s,50%,66%,75%,80%,90%,95%,98%,99%,99.9%,99.99%,"
                  "100%,Total Request Count,Total Failure Count,Total Median Response Time,Total Average Response Time,"
                  "Total Min Response Time,Total Max Response Time,Total Average Content Size")


def ramp(start: int, end: int, rate: int) -> list[int]:
    """The user counts Locust's history shows from ``start`` to ``end`` at ``rate`` users a second."""
    values, users = [], start
    while users != end:
        users = min(end, users + rate) if end > users else max(end, users - rate)
        values.append(users)
    return values


def ladder_history(ladder: list[tuple[int, int]], rate: int) -> list[int]:
    """A row of 0 before spawning, each step's ramp then its level for the rest of its hold, two rows of teardown."""
    users, history = 0, [0]
    for level, hold in ladder:
        climb = ramp(users, level, rate)
        history += climb + [level] * (hold - len(climb))
        users = level
    return [*history, 0, 0]


def log_text(name: str, spec: str, rate: int, top: int, seconds: int) -> str:
    return f"""==== Run config ====
  name:           {name}
  tag:            {TAG}
  files:          /app/tests/glutton.py,/app/shapes/ladder_shape.py
  test_file:      /app/tests/glutton.py
  duration:       None
  users:          {top}
  uses_boomer:    True
  empty stats ok: False
  dest_prefix:    gs://substrate-benchmarks/runs/{name}/run_date=2026-11-24/run_ts={RUN_TS}/run_tag={TAG}
  work_dir:       {WORK}
  extra flags:
    --ladder {spec} --ladder-spawn-rate {rate}
====================
Running: /usr/local/bin/python3 -m locust --headless -f /app/tests/glutton.py,/app/shapes/ladder_shape.py -u {top} \
--csv {WORK}/{name} --master --expect-workers 1 --boomer-config-port 5560 --ladder {spec} --ladder-spawn-rate {rate}
Running: /app/boomer-worker --user-class glutton --master-web-port 5560
[locust] [2026-11-24 00:00:00,398] runner/INFO/locust.main: Starting Locust 2.32.7
[locust] [2026-11-24 00:00:00,402] runner/INFO/locust.main: Shape test starting.
[locust] [2026-11-24 00:00:01,011] runner/INFO/locust.runners: {name}: 1 workers connected
[boomer] {{"time":"2026-11-24T00:00:01.5Z","level":"INFO","msg":"registered boomer task","user_class":"GluttonUser"}}
[locust] [2026-11-24 00:{seconds // 60:02d}:{seconds % 60:02d},001] runner/INFO/locust.runners: Shape test stopping
Locust exited with code 1
Stopping boomer...
Boomer exited with code 0
"""


def write_run(name: str, ladder: list[tuple[int, int]], rate: int) -> None:
    users = ladder_history(ladder, rate)
    target = HERE / "runs" / name / "run_date=2026-11-24" / f"run_ts={RUN_TS}" / f"run_tag={TAG}"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    for file in ("status.json", "stats.csv", "failures.csv", "exceptions.csv"):
        shutil.copy(SOURCE / file, target / file)
    spec, top = ",".join(f"{level}:{hold}s" for level, hold in ladder), max(level for level, _ in ladder)
    run_end = RUN_TS + len(users) + 90  # the boomer worker's cleanup comes before run_end
    (target / "logs.txt").write_text(log_text(name, spec, rate, top, len(users) - 2))
    lines, total = [HISTORY_HEADER], 0
    for second, count in enumerate(users):
        total += 3 * count
        lines.append(f"{RUN_TS + second},{count},,Aggregated,{3 * count:.6f},0.000000,95,110,150,170,200,240,300,500,"
                     f"1900,1900,1900,{total},0,95,98.9,2,1900,1.7")
    (target / "stats_history.csv").write_text("\n".join(lines) + "\n")
    rows = [json.loads(line) for line in (SOURCE / "stats.jsonl").read_text().splitlines()]
    for row in rows:
        row["test_name"], row["timestamp"] = name, "2026-11-24T00:00:00Z"
        if row["metric"] == "trial_summary":
            figures = row["measurements"]
            for key in ("metadata_cluster_name", "metadata_nodes"):
                figures.pop(key)
            figures.update(run_start=str(RUN_TS), run_end=str(run_end), actors_per_node=f"{float(top)}",
                           actors_per_vcpu=f"{round(top / 3.92, 2)}", actors_per_gb_ram=f"{round(top / 12.96, 2)}",
                           multi_actor_worker="false", actors_per_pod_p50="3.0", actors_per_pod_p90="4.0",
                           actors_per_pod_p99="4.0")
    (target / "stats.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
    summary = json.loads((SOURCE / "server_summary.json").read_text())
    steady = [RUN_TS + second for second, count in enumerate(users) if count >= 0.9 * top]  # the reference's window
    summary["metadata"].update(test_name=name, data_timestamp="2026-11-24T00:00:00Z", start_ts=RUN_TS, end_ts=run_end,
                               steady_start_ts=steady[0], steady_end_ts=steady[-1])
    (target / "server_summary.json").write_text(json.dumps(summary, indent=2) + "\n")


if __name__ == "__main__":
    write_run("glutton_slo_ladder", [(5, 20), (10, 30), (15, 25), (20, 40)], 2)
