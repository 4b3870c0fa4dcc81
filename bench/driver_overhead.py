"""The driver's own cost: ping latency through the driver vs a minimal client, and sessions per driver core.

1. Overhead: one running actor; the median of N pings (a) from a minimal
   keep-alive HTTP client loop and (b) through the driver's code path
   (geventhttpclient, protobuf, the Locust request event and the request log).
2. Capacity: Locust runs the coding-session script against the embedded
   runtime at a fast think scale; the driver process's CPU seconds per lap,
   against a lap's wall time at think scale 1, gives the sessions one driver
   core sustains before its CPU saturates.

    .venv/bin/python bench/driver_overhead.py [--pings 2000] [--users 4] [--seconds 40]
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import polars as pl
import psutil

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from substrate_assets.driver.clients import ControlClient, RouterClient  # noqa: E402
from substrate_assets.driver.scripts import ScriptSource  # noqa: E402
from substrate_assets.driver.session import AgentSessionVU, Session, SessionKnobs, TemplateCheck  # noqa: E402
from substrate_assets.protos import glutton_pb2 as g  # noqa: E402
from substrate_assets.results.request_log import RequestLogWriter, RequestRecord  # noqa: E402
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig  # noqa: E402
from substrate_assets.workload import Op, OpKind, ScriptLibrary  # noqa: E402


def probe(router_url: str, control_address: str, pings: int) -> None:
    """The driver's side, in its own process as under Locust: gevent first, then the driver's code path."""
    from gevent import monkey

    monkey.patch_all()
    from grpc.experimental import gevent as grpc_gevent

    grpc_gevent.init_gevent()
    from locust.env import Environment
    from locust.event import Events

    with tempfile.TemporaryDirectory() as work:
        events = Events()
        log = RequestLogWriter(Path(work) / "requests")

        def listener(request_type, name, response_time, response_length, exception=None, context=None, **_):
            context = context or {}
            log.append(RequestRecord(context["ts"], request_type, name, context["latency_ms"], int(response_time),
                                     response_length, exception is None, session_id=context.get("session_id")))

        events.request.add_listener(listener)
        environment = Environment(events=events)

        def record(request_type, name, started, elapsed_s, error, context):
            latency = elapsed_s * 1000
            environment.events.request.fire(request_type=request_type, name=name, response_time=int(latency),
                                            response_length=0, exception=error,
                                            context={**context, "latency_ms": latency, "ts": started})

        control = ControlClient(control_address)
        scripts = ScriptSource(ScriptLibrary(ROOT / "scripts"), "quick-session")
        vu = AgentSessionVU(control, RouterClient(router_url), scripts, SessionKnobs(), TemplateCheck(control),
                            record, rng=random.Random(1))
        session = Session("bench", scripts.load())
        wall_per_ping = []
        for _ in range(pings):
            started = time.perf_counter()
            vu._call(session, Op(OpKind.PING))  # what run_step does for a WakeFirstTouch, booked as it books it
            vu._book("http", "WakeFirstTouch", time.time(), started, None, session)
            wall_per_ping.append(time.perf_counter() - started)
        log.flush()
        booked = pl.read_parquet(next((Path(work) / "requests").glob("*.parquet")))["latency_ms"].to_list()
    print(json.dumps({"wall_ms": statistics.median(wall_per_ping) * 1e3, "booked_ms": statistics.median(booked)}))


def overhead(pings: int) -> None:
    with EmbeddedRuntime(RuntimeConfig(workers=1, actors_per_worker=1)) as runtime:
        control = ControlClient(runtime.control_address)
        control.create_atespace("benchmark")
        control.create_actor("benchmark", "bench")
        control.resume("benchmark", "bench")
        body = g.PingRequest(message="think").SerializeToString()
        headers = {"ate-target-actor": "benchmark/bench", "Content-Type": "application/x-protobuf"}
        connection = http.client.HTTPConnection("127.0.0.1", runtime.router_port)
        raw = []
        for _ in range(pings):
            started = time.perf_counter()
            connection.request("POST", "/ping", body=body, headers=headers)
            connection.getresponse().read()
            raw.append(time.perf_counter() - started)
        done = subprocess.run([sys.executable, __file__, "--probe", runtime.router_url, runtime.control_address,
                               "--pings", str(pings)], capture_output=True, text=True, check=True)
        driver = json.loads(done.stdout.strip().splitlines()[-1])
    med_raw = statistics.median(raw) * 1e3
    print(f"ping through the router, {pings} each, one running actor")
    print(f"  minimal client loop (http.client)          median {med_raw:7.3f} ms")
    print(f"  driver path, wall per ping incl. booking   median {driver['wall_ms']:7.3f} ms  "
          f"(+{driver['wall_ms'] - med_raw:.3f} ms, {driver['wall_ms'] / med_raw:.2f}x)")
    print(f"  driver path, latency the driver books      median {driver['booked_ms']:7.3f} ms")


def capacity(users: int, seconds: int, think_scale: float) -> None:
    with tempfile.TemporaryDirectory() as work, \
            EmbeddedRuntime(RuntimeConfig(workers=8, actors_per_worker=4, snapshot_fsync=False)) as runtime:
        command = [sys.executable, "-m", "locust", "-f", str(ROOT / "substrate_assets/driver/locustfile.py"),
                   "--headless", "--only-summary", "-u", str(users), "-r", str(users), "-t", f"{seconds}s",
                   "--agentsession-script", "coding-session", "--agentsession-think-scale", str(think_scale),
                   "--control-endpoint", runtime.control_address, "--router-url", runtime.router_url,
                   "--request-log-dir", f"{work}/requests", "--loglevel", "WARNING",
                   "AgentSessionUser"]  # the user class: without it Locust runs every family's user at once
        process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=work)
        watched = psutil.Process(process.pid)
        samples: list[tuple[float, float]] = []  # (wall time, driver CPU seconds)
        while process.poll() is None:
            try:
                times = watched.cpu_times()
                samples.append((time.time(), times.user + times.system))
            except psutil.NoSuchProcess:
                break
            time.sleep(0.2)
        requests = pl.concat([pl.read_parquet(p) for p in Path(work, "requests").glob("*.parquet")])
    # Steady state only: from the first wake to the last step, so Locust's start-up and teardown do not count.
    first = requests.filter(pl.col("name") == "WakeFirstTouch")["ts"].min()
    steps = requests.filter(pl.col("name").str.starts_with("Step_") & pl.col("success"))
    last = steps["ts"].max()
    in_window = [cpu for wall, cpu in samples if first <= wall <= last]
    cpu = in_window[-1] - in_window[0]
    steps = steps.filter(pl.col("ts") >= first)
    requests = requests.filter((pl.col("ts") >= first) & (pl.col("ts") <= last))
    laps = steps.height / 20
    think_s = 69.0
    step_ops_s = steps["latency_ms"].sum() / 1e3 / max(steps.height, 1) * 20
    wakes = requests.filter(pl.col("name") == "WakeFirstTouch")["latency_ms"].sum() / 1e3
    parks = requests.filter(pl.col("name") == "SuspendActor")["latency_ms"].sum() / 1e3
    per_lap_io = (wakes + parks) / max(laps, 1e-9)
    lap_s = think_s + step_ops_s + per_lap_io
    cpu_per_lap = cpu / max(laps, 1e-9)
    print(f"\ncapacity: {users} coding-session users, think scale {think_scale}, {seconds}s, "
          f"steady state: {requests.height} requests, {laps:.1f} laps, driver CPU {cpu:.2f}s")
    print(f"  driver CPU per lap                 {cpu_per_lap * 1e3:8.1f} ms ({cpu / requests.height * 1e3:.2f} ms "
          "per request)")
    print(f"  lap wall time at think scale 1     {lap_s:8.1f} s (69 s think + {step_ops_s:.1f} s ops + "
          f"{per_lap_io:.1f} s wake/park here)")
    print(f"  sessions one driver core sustains  {lap_s / cpu_per_lap:8.0f}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pings", type=int, default=2000)
    parser.add_argument("--users", type=int, default=4)
    parser.add_argument("--seconds", type=int, default=40)
    parser.add_argument("--think-scale", type=float, default=0.05)
    parser.add_argument("--probe", nargs=2, metavar=("ROUTER_URL", "CONTROL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        probe(*args.probe, args.pings)
        return
    overhead(args.pings)
    capacity(args.users, args.seconds, args.think_scale)


if __name__ == "__main__":
    main()
