"""A soak: one long trial of the coding session, and whether any process's memory or cost per request creeps.

Runs ``substrate-bench run coding-session-soak`` (an hour of the reference coding session at a load this
machine sustains; the trial lands in the warehouse like any other) and, every 10 s, samples each of its processes
by role: the run (the ``substrate-bench`` command and Dagster), the trial's process (it holds the embedded
runtime's router and control server), the driver (Locust) and the actor hosts. For each: RSS, CPU seconds, open
descriptors; beside them the requests booked (Locust's stats history), the request log's size on disk, and the
driver's greenlets and descriptors as it counts them itself (``SUBSTRATE_BENCH_DRIVER_GAUGES``).

Then it prints, per role, the first five minutes after a five-minute warm-up against the last five minutes, and
the trial's wake p50/p99 per five-minute window (``wake_latency_windows`` in the warehouse, the same table the
report's drift plot draws). It exits 1 when a role's RSS or its CPU per request grew by more than 10 % (the actor
hosts' CPU per request is printed, not judged: their burn_cpu burns for wall-clock time, so it follows the machine's
spare cores), or the driver's greenlets did.

    .venv/bin/python -m bench.soak [--suite coding-session-soak] [--samples soak-samples.jsonl]
    .venv/bin/python -m bench.soak --analyse soak-samples.jsonl   # the tables again, from a soak's samples

The trial takes the machine's trial lock like any other; run it on an otherwise quiet machine.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import psutil

from substrate_assets.results.history_tail import StatsHistoryTail

ROOT = Path(__file__).resolve().parents[1]

SAMPLE_EVERY_S = 10.0
WARM_UP_S = 300.0
WINDOW_S = 300.0
GROWTH_LIMIT = 0.10
TEARDOWN_S = 60.0
ROLES = ("run", "trial (router + control)", "driver (Locust)", "actor hosts")
# A script's burn_cpu op burns for a span of wall-clock time (upstream's BurnCPU), so an actor host's CPU per request
# is the share of the cores it was left in that span: it falls when other work loads the machine and rises when the
# machine goes quiet, whatever the host's own code does. It is printed, not judged; its RSS is judged.
CPU_FOLLOWS_THE_MACHINE = ("actor hosts",)


def role_of(process: psutil.Process, top: int) -> str:
    """Which part of the trial a process is, from its command line."""
    if process.pid == top:
        return "run"
    line = " ".join(process.cmdline())
    if "substrate_assets.runtime.actor_host" in line:
        return "actor hosts"
    if "locust" in line and "locustfile" in line:
        return "driver (Locust)"
    if "substrate_assets.app.pipes_trial" in line or any(child_line_is_host(child) for child in process.children()):
        return "trial (router + control)"
    return "run"


def child_line_is_host(process: psutil.Process) -> bool:
    try:
        return "substrate_assets.runtime.actor_host" in " ".join(process.cmdline())
    except psutil.Error:
        return False


def option_value(command: list[str], flag: str) -> str | None:
    for index, word in enumerate(command):
        if word == flag and index + 1 < len(command):
            return command[index + 1]
        if word.startswith(flag + "="):
            return word.split("=", 1)[1]
    return None


def directory_bytes(path: Path) -> int:
    total = 0
    for entry in path.rglob("*"):
        try:
            if entry.is_file():
                total += entry.stat().st_size
        except OSError:
            continue
    return total


def last_gauges(path: Path) -> dict[str, Any]:
    """The driver's last gauge line, or nothing while it has written none."""
    try:
        lines = path.read_text().splitlines()
    except OSError:
        return {}
    for line in reversed(lines):
        try:
            return json.loads(line)
        except json.JSONDecodeError:
            continue
    return {}


class Sampler:
    """Samples a run's process tree: each long-lived process's CPU as last seen, the actor hosts' as their parent
    was charged for those it reaped plus the live ones'."""

    def __init__(self, top: psutil.Process, gauges: Path) -> None:
        self.top = top
        self.gauges = gauges
        self.cpu_seen: dict[int, tuple[str, float]] = {}
        # Actor hosts live seconds (one per wake): most start and exit between two samples. Their CPU is read from
        # the trial's process, which reaps them and so is charged their whole CPU as its children's.
        self.hosts_reaped_cpu_s = 0.0
        self.history: StatsHistoryTail | None = None
        self.request_log: Path | None = None

    def sample(self, t_s: float) -> dict[str, Any]:
        roles: dict[str, dict[str, float]] = defaultdict(lambda: {"rss_mib": 0.0, "fds": 0, "processes": 0})
        try:
            tree = [self.top, *self.top.children(recursive=True)]
        except psutil.Error:
            tree = []
        for process in tree:
            try:
                with process.oneshot():
                    role = role_of(process, self.top.pid)
                    times = process.cpu_times()
                    rss = process.memory_info().rss
                    fds = process.num_fds()
                    if role == "driver (Locust)":
                        self._follow_driver(process)
                    if role == "trial (router + control)":
                        # Locust is its child too, but is reaped only when the trial ends.
                        self.hosts_reaped_cpu_s = times.children_user + times.children_system
            except psutil.Error:
                continue
            self.cpu_seen[process.pid] = (role, times.user + times.system)
            figures = roles[role]
            figures["rss_mib"] += rss / 2**20
            figures["fds"] += fds
            figures["processes"] += 1
        cpu: dict[str, float] = defaultdict(float)
        live = {process.pid for process in tree}
        for pid, (role, seconds) in self.cpu_seen.items():
            if role != "actor hosts" or pid in live:
                cpu[role] += seconds
        self.cpu_seen = {pid: seen for pid, seen in self.cpu_seen.items() if seen[0] != "actor hosts" or pid in live}
        cpu["actor hosts"] += self.hosts_reaped_cpu_s
        totals = self.history.latest_totals() if self.history is not None else {}
        gauges = last_gauges(self.gauges)
        return {
            "t_s": round(t_s, 1),
            "roles": {role: {**roles[role], "cpu_s": cpu.get(role, 0.0)}
                      for role in ROLES if role in roles or role in cpu},
            "requests": totals.get("requests"), "users": totals.get("users"),
            "request_log_bytes": directory_bytes(self.request_log) if self.request_log is not None else None,
            "driver_greenlets": gauges.get("greenlets"), "driver_fds_self": gauges.get("open_fds"),
            "driver_gauge_cpu_s": gauges.get("gauge_cpu_s"),
        }

    def _follow_driver(self, process: psutil.Process) -> None:
        if self.history is None:
            prefix = option_value(process.cmdline(), "--csv")
            if prefix is not None:
                self.history = StatsHistoryTail(Path(process.cwd(), prefix + "_stats_history.csv"))
        if self.request_log is None:
            named = option_value(process.cmdline(), "--request-log-dir")
            if named is not None:
                self.request_log = Path(process.cwd(), named)


def soak(suite: str, samples_path: Path, gauges: Path) -> tuple[int, str | None]:
    """Run the suite, sampling its processes; the run's exit code and the trial id it printed."""
    env = {**os.environ, "SUBSTRATE_BENCH_DRIVER_GAUGES": str(gauges), "PYTHONUNBUFFERED": "1"}
    output_path = samples_path.with_suffix(".run.log")
    started = time.monotonic()
    with output_path.open("w") as output, samples_path.open("w") as samples:
        command = [str(ROOT / ".venv/bin/substrate-bench"), "run", suite, "--repeat", "1"]
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                                   start_new_session=True)
        sampler = Sampler(psutil.Process(process.pid), gauges)
        try:
            while process.poll() is None:
                samples.write(json.dumps(sampler.sample(time.monotonic() - started)) + "\n")
                samples.flush()
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(timeout=SAMPLE_EVERY_S)
        except KeyboardInterrupt:
            os.killpg(process.pid, signal.SIGINT)
            process.wait()
    return process.returncode, latest_trial(suite) if process.returncode == 0 else None


def latest_trial(suite: str) -> str | None:
    """The suite's newest trial in the warehouse: the one the soak's run landed."""
    from substrate_assets.project import warehouse_path
    from substrate_assets.warehouse.connection import connect

    with connect(warehouse_path(), read_only=True) as connection:
        row = connection.execute("select trial_id from trial_manifests where suite = ? order by started_at desc "
                                 "limit 1", [suite]).fetchone()
    return None if row is None else row[0]


@dataclass(frozen=True)
class Window:
    """One role's figures over a span of the trial: mean RSS, CPU per request, CPU share, descriptors."""

    rss_mib: float
    cpu_ms_per_request: float | None
    cpu_percent: float
    fds: float
    processes: float


def window(samples: list[dict[str, Any]], role: str, start_s: float, end_s: float) -> Window | None:
    inside = [s for s in samples if start_s <= s["t_s"] <= end_s and role in s["roles"]]
    if len(inside) < 2:
        return None
    first, last = inside[0], inside[-1]
    cpu_s = last["roles"][role]["cpu_s"] - first["roles"][role]["cpu_s"]
    if role == "driver (Locust)" and None not in (first.get("driver_gauge_cpu_s"), last.get("driver_gauge_cpu_s")):
        cpu_s -= last["driver_gauge_cpu_s"] - first["driver_gauge_cpu_s"]  # the gauges' own cost is the soak's
    span_s = last["t_s"] - first["t_s"]
    requests = (last["requests"] - first["requests"]) if None not in (last["requests"], first["requests"]) else None
    return Window(
        rss_mib=sum(s["roles"][role]["rss_mib"] for s in inside) / len(inside),
        cpu_ms_per_request=cpu_s * 1000 / requests if requests else None,
        cpu_percent=100 * cpu_s / span_s if span_s else 0.0,
        fds=sum(s["roles"][role]["fds"] for s in inside) / len(inside),
        processes=sum(s["roles"][role]["processes"] for s in inside) / len(inside),
    )


def scalar_window(samples: list[dict[str, Any]], key: str, start_s: float, end_s: float) -> float | None:
    values = [s[key] for s in samples if start_s <= s["t_s"] <= end_s and s.get(key) is not None]
    return sum(values) / len(values) if values else None


def growth(before: float | None, after: float | None) -> float | None:
    return None if before in (None, 0) or after is None else after / before - 1


def percent(value: float | None) -> str:
    return "n/a" if value is None else f"{100 * value:+.1f} %"


def number(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def steady_span(samples: list[dict[str, Any]], warm_up_s: float) -> tuple[float, float]:
    """The steady span: from the end of the warm-up to a minute before the driver ended (its sessions tear down
    then, and the run starts landing the trial)."""
    loaded = [s["t_s"] for s in samples if s.get("users") and "driver (Locust)" in s["roles"]]
    end = max(loaded) - TEARDOWN_S if loaded else samples[-1]["t_s"]
    start = min(loaded) if loaded else samples[0]["t_s"]
    return start + warm_up_s, end


def analyse(samples: list[dict[str, Any]], warm_up_s: float = WARM_UP_S, window_s: float = WINDOW_S) -> list[str]:
    """Print the per-role table and the scalar gauges; the failures, one line each."""
    start, end = steady_span(samples, warm_up_s)
    if end - start < 2 * window_s:
        return [f"the steady span after warm-up is {end - start:.0f} s, shorter than two {window_s:.0f} s windows"]
    early, late = (start, start + window_s), (end - window_s, end)
    print(f"steady span after a {warm_up_s:.0f} s warm-up: {start:.0f}-{end:.0f} s; windows {early[0]:.0f}-"
          f"{early[1]:.0f} s and {late[0]:.0f}-{late[1]:.0f} s")
    print("| process | RSS MiB first | RSS MiB last | RSS growth | CPU ms/request first | last | growth "
          "| CPU % first | last | fds first | last | processes |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    failures = []
    for role in ROLES:
        before, after = window(samples, role, *early), window(samples, role, *late)
        if before is None or after is None:
            print(f"| {role} | not seen in both windows |||||||||||")
            continue
        rss_growth = growth(before.rss_mib, after.rss_mib)
        cpu_growth = growth(before.cpu_ms_per_request, after.cpu_ms_per_request)
        print(f"| {role} | {before.rss_mib:.1f} | {after.rss_mib:.1f} | {percent(rss_growth)} "
              f"| {number(before.cpu_ms_per_request, 2)} | {number(after.cpu_ms_per_request, 2)} "
              f"| {percent(cpu_growth)} | {before.cpu_percent:.1f} | {after.cpu_percent:.1f} "
              f"| {before.fds:.0f} | {after.fds:.0f} | {before.processes:.0f} / {after.processes:.0f} |")
        if rss_growth is not None and rss_growth > GROWTH_LIMIT:
            failures.append(f"{role}: RSS grew {percent(rss_growth)} ({before.rss_mib:.1f} -> "
                            f"{after.rss_mib:.1f} MiB)")
        if cpu_growth is not None and cpu_growth > GROWTH_LIMIT and role not in CPU_FOLLOWS_THE_MACHINE:
            failures.append(f"{role}: CPU per request grew {percent(cpu_growth)}")
    print()
    print("| gauge | first | last | growth |")
    print("|---|---:|---:|---:|")
    for key, label in (("driver_greenlets", "driver greenlets"), ("driver_fds_self", "driver open descriptors"),
                       ("users", "users")):
        before, after = scalar_window(samples, key, *early), scalar_window(samples, key, *late)
        print(f"| {label} | {number(before)} | {number(after)} | {percent(growth(before, after))} |")
    log = [(s["t_s"], s["request_log_bytes"], s["requests"]) for s in samples
           if s.get("request_log_bytes") and s.get("requests")]  # 0 bytes: the log was moved to the run store
    if len(log) >= 2:
        # The request log only grows; what matters is that it grows with the requests, not faster.
        early_log = [row for row in log if early[0] <= row[0] <= early[1]]
        late_log = [row for row in log if late[0] <= row[0] <= late[1]]
        if len(early_log) >= 2 and len(late_log) >= 2:
            def per_request(rows: list[tuple[float, int, int]]) -> float | None:
                requests = rows[-1][2] - rows[0][2]
                return (rows[-1][1] - rows[0][1]) / requests if requests else None
            before, after = per_request(early_log), per_request(late_log)
            print(f"| request log bytes per request | {number(before)} | {number(after)} "
                  f"| {percent(growth(before, after))} |")
            print(f"| request log size MiB | {early_log[-1][1] / 2**20:.1f} | {late_log[-1][1] / 2**20:.1f} | |")
    greenlet_growth = growth(scalar_window(samples, "driver_greenlets", *early),
                             scalar_window(samples, "driver_greenlets", *late))
    if greenlet_growth is not None and greenlet_growth > GROWTH_LIMIT:
        failures.append(f"driver greenlets grew {percent(greenlet_growth)}")
    return failures


def wake_windows(trial_id: str) -> list[tuple[Any, ...]]:
    """The trial's wake latency per five-minute window, as the warehouse holds it."""
    from substrate_assets.project import warehouse_path
    from substrate_assets.warehouse.connection import connect

    with connect(warehouse_path(), read_only=True) as connection:
        return connection.execute(
            "select window_index, window_start_s, n_wakes, p50_ms, p99_ms from wake_latency_windows "
            "where trial_id = ? order by window_index", [trial_id]).fetchall()


def print_wake_windows(rows: Iterable[tuple[Any, ...]]) -> None:
    print()
    print("| window | from s | wakes | wake p50 ms | wake p99 ms |")
    print("|---:|---:|---:|---:|---:|")
    for index, start_s, wakes, p50, p99 in rows:
        print(f"| {index} | {start_s:.0f} | {wakes} | {number(p50)} | {number(p99)} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default="coding-session-soak")
    parser.add_argument("--samples", type=Path, default=Path("soak-samples.jsonl"))
    parser.add_argument("--analyse", type=Path, help="a soak's samples file: print its tables again, run nothing")
    parser.add_argument("--trial", help="with --analyse: the soak's trial id, for its wake windows")
    parser.add_argument("--warm-up", type=float, default=WARM_UP_S, help="seconds left out after the load starts")
    parser.add_argument("--window", type=float, default=WINDOW_S, help="seconds in each compared window")
    options = parser.parse_args()
    trial = options.trial
    if options.analyse is None:
        gauges = options.samples.with_suffix(".gauges.jsonl")
        gauges.unlink(missing_ok=True)
        code, trial = soak(options.suite, options.samples.resolve(), gauges.resolve())
        print(f"run exited {code}; trial {trial}; samples in {options.samples}")
        if code != 0:
            sys.exit(f"the soak's run failed (exit {code}): see {options.samples.with_suffix('.run.log')}")
    path = options.analyse or options.samples
    samples = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    failures = analyse(samples, options.warm_up, options.window)
    if trial is not None:
        print_wake_windows(wake_windows(trial))
    for failure in failures:
        print(f"CREEP: {failure}")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
