"""The driver's own cost: ping latency through the driver vs a minimal client, and CPU per request under Locust.

1. Overhead: one running actor; the median of N pings (a) from a minimal
   keep-alive HTTP client loop (http.client), (b) through the driver's code path
   (RouterClient, protobuf, the Locust request event and the request log) and
   (c) as bare request bytes on a socket with only the reply's length read;
   the ratio of (b) to (a) must stay at most 1.2x, and (b) to (c) is printed
   beside it.
2. Capacity: Locust runs the coding-session script against the embedded
   runtime at a fast think scale, at two loads, each a few times (medians).
   Over each run's steady state, the Locust process's CPU seconds per request
   booked; the line through the two loads' (requests/s, CPU/s) splits that
   into a cost per request (the marginal cost: what each more session adds)
   and a fixed cost per second; with a lap's wall time at think scale 1 they
   give the sessions one driver core sustains. Each figure is printed against
   issue 16's (8.6 ms per request, about 210 sessions per core) with the ratio.

    .venv/bin/python bench/driver_overhead.py [--pings 1000] [--rounds 5] [--users 4,12] [--seconds 60] [--repeats 3]
        [--only overhead|capacity]
"""

from __future__ import annotations

import argparse
import http.client
import json
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
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

STEPS_PER_LAP = 20  # coding-session
REQUESTS_PER_LAP = 3 * STEPS_PER_LAP  # each step: WakeFirstTouch, Step_<name>, SuspendActor
THINK_PER_LAP_S = 69.0
# Issue 16, measured by this benchmark before the driver's CPU work, and its target.
BASELINE_MS_PER_REQUEST = 8.6
BASELINE_SESSIONS_PER_CORE = 210
TARGET_MS_PER_REQUEST = 1.0


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
        cpu_started = time.process_time()
        for _ in range(pings):
            started = time.perf_counter()
            vu._call(session, Op(OpKind.PING))  # what run_step does for a WakeFirstTouch, booked as it books it
            vu._book("http", "WakeFirstTouch", time.time(), started, None, session)
            wall_per_ping.append(time.perf_counter() - started)
        cpu_ms = (time.process_time() - cpu_started) / pings * 1e3
        log.flush()
        booked = pl.read_parquet(next((Path(work) / "requests").glob("*.parquet")))["latency_ms"].to_list()
    print(json.dumps({"wall_ms": statistics.median(wall_per_ping) * 1e3, "booked_ms": statistics.median(booked),
                      "cpu_ms": cpu_ms}))


def overhead(pings: int, rounds: int) -> None:
    """Rounds of the raw loop and the driver path, one after the other, so that the machine's load (shared, and
    noisy) weighs on both alike; the median of each round's ratio."""
    with EmbeddedRuntime(RuntimeConfig(workers=1, actors_per_worker=1)) as runtime:
        control = ControlClient(runtime.control_address)
        control.create_atespace("benchmark")
        control.create_actor("benchmark", "bench")
        control.resume("benchmark", "bench")
        body = g.PingRequest(message="think").SerializeToString()
        headers = {"ate-target-actor": "benchmark/bench", "Content-Type": "application/x-protobuf"}
        connection = http.client.HTTPConnection("127.0.0.1", runtime.router_port)
        # The floor: the same request's bytes written to a socket and a reply of known length read back, nothing
        # parsed but the length (the driver's RouterClient reads the status and headers as well).
        wire = socket.create_connection(("127.0.0.1", runtime.router_port))
        wire.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        wire_reader = wire.makefile("rb")
        request = (f"POST /ping HTTP/1.1\r\nHost: 127.0.0.1:{runtime.router_port}\r\nContent-Length: {len(body)}\r\n"
                   "ate-target-actor: benchmark/bench\r\nContent-Type: application/x-protobuf\r\n\r\n").encode() + body
        raw: list[float] = []
        floor: list[float] = []
        driver: list[dict[str, float]] = []
        for _ in range(rounds):
            for _ in range(pings):
                started = time.perf_counter()
                connection.request("POST", "/ping", body=body, headers=headers)
                connection.getresponse().read()
                raw.append(time.perf_counter() - started)
            for _ in range(pings):
                started = time.perf_counter()
                wire.sendall(request)
                length = 0
                while (line := wire_reader.readline()) not in (b"\r\n", b""):
                    if line[:15].lower() == b"content-length:":
                        length = int(line[15:])
                wire_reader.read(length)
                floor.append(time.perf_counter() - started)
            done = subprocess.run([sys.executable, __file__, "--probe", runtime.router_url, runtime.control_address,
                                   "--pings", str(pings)], capture_output=True, text=True, check=True)
            driver.append(json.loads(done.stdout.strip().splitlines()[-1]))
        wire_reader.close()
        wire.close()
        connection.close()
    print(f"ping through the router, {rounds} rounds of {pings} each, one running actor")
    ratios, floor_ratios = [], []
    for number, found in enumerate(driver):
        med_raw = statistics.median(raw[number * pings:(number + 1) * pings]) * 1e3
        med_floor = statistics.median(floor[number * pings:(number + 1) * pings]) * 1e3
        ratios.append(found["wall_ms"] / med_raw)
        floor_ratios.append(found["wall_ms"] / med_floor)
        print(f"  round {number + 1}: minimal client loop (http.client) median {med_raw:6.3f} ms, bare socket "
              f"{med_floor:6.3f} ms, driver path {found['wall_ms']:6.3f} ms ({ratios[-1]:.2f}x, "
              f"{floor_ratios[-1]:.2f}x the socket), booked {found['booked_ms']:6.3f} ms, "
              f"driver CPU {found['cpu_ms']:6.3f} ms per ping")
    print(f"  overhead ratio, median of the rounds  {statistics.median(ratios):.2f}x (must stay at most 1.2x); "
          f"{statistics.median(floor_ratios):.2f}x the bare socket")


@dataclass(frozen=True)
class Load:
    """One Locust run's steady state: its requests and the driver process's CPU over the same window."""

    users: int
    window_s: float
    requests: int
    cpu_s: float
    laps: float
    lap_s: float  # a lap's wall time at think scale 1

    @property
    def request_rate(self) -> float:
        return self.requests / self.window_s

    @property
    def cpu_rate(self) -> float:
        return self.cpu_s / self.window_s

    @property
    def ms_per_request(self) -> float:
        return self.cpu_s / self.requests * 1e3


def run_load(users: int, seconds: int, think_scale: float) -> Load:
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
    in_window = [(wall, cpu) for wall, cpu in samples if first <= wall <= last]
    (start, cpu_start), (end, cpu_end) = in_window[0], in_window[-1]
    requests = requests.filter((pl.col("ts") >= start) & (pl.col("ts") <= end))
    steps = steps.filter((pl.col("ts") >= start) & (pl.col("ts") <= end))
    laps = steps.height / STEPS_PER_LAP
    step_ops_s = steps["latency_ms"].sum() / 1e3 / max(steps.height, 1) * STEPS_PER_LAP
    wakes = requests.filter(pl.col("name") == "WakeFirstTouch")["latency_ms"].sum() / 1e3
    parks = requests.filter(pl.col("name") == "SuspendActor")["latency_ms"].sum() / 1e3
    lap_s = THINK_PER_LAP_S + step_ops_s + (wakes + parks) / max(laps, 1e-9)
    return Load(users, end - start, requests.height, cpu_end - cpu_start, laps, lap_s)


def capacity(users: list[int], seconds: int, think_scale: float, repeats: int) -> None:
    """Each load ``repeats`` times (medians), then the driver's CPU as a fixed rate plus a cost per request: the
    line through the loads' (requests/s, CPU/s). A light load's CPU per request is mostly the fixed part; the
    marginal cost is what each more session adds, and with the fixed part it says how many sessions one core
    drives."""
    print(f"\ncapacity: coding-session, think scale {think_scale}, {seconds}s per run, median of {repeats} runs")
    points: list[tuple[float, float, float]] = []  # per load, medians: (requests/s, driver CPU s/s, lap s)
    for count in users:
        runs = [run_load(count, seconds, think_scale) for _ in range(repeats)]
        for run in runs:
            print(f"  {count:3d} users  {run.window_s:5.1f}s steady  {run.requests:5d} requests  "
                  f"{run.request_rate:6.2f}/s  driver CPU {run.cpu_s:6.2f}s  {run.ms_per_request:6.2f} ms/request")
        rate = statistics.median(run.request_rate for run in runs)
        cpu_rate = statistics.median(run.cpu_rate for run in runs)
        per_request = statistics.median(run.ms_per_request for run in runs)
        points.append((rate, cpu_rate, statistics.median(run.lap_s for run in runs)))
        print(f"  {count:3d} users  median: {rate:6.2f} requests/s, driver {cpu_rate * 1e3:6.1f} ms CPU/s, "
              f"{per_request:6.2f} ms per request ({BASELINE_MS_PER_REQUEST / per_request:4.1f}x less than "
              f"the {BASELINE_MS_PER_REQUEST} ms before; target {TARGET_MS_PER_REQUEST} ms)")
    (low_rate, low_cpu, _), (high_rate, high_cpu, _) = points[0], points[-1]
    lap_s = statistics.median(lap for *_, lap in points)
    session_rate = REQUESTS_PER_LAP / lap_s  # one session's requests per second at think scale 1
    # The steadier figure: the busiest load's CPU per request, fixed costs included, spread over whole sessions.
    busiest = high_cpu / high_rate
    print(f"  sessions per driver core at {users[-1]} users' cost {1 / (busiest * session_rate):6.0f} "
          f"({busiest * 1e3:.2f} ms per request, {session_rate:.2f} requests/s per session at think scale 1)")
    if high_rate <= low_rate:
        return
    marginal = (high_cpu - low_cpu) / (high_rate - low_rate)  # CPU seconds per request
    fixed = low_cpu - marginal * low_rate  # CPU seconds per second
    sessions = (1 - fixed) / (marginal * session_rate) if marginal > 0 else float("inf")
    print(f"  marginal cost per request            {marginal * 1e3:6.2f} ms "
          f"({BASELINE_MS_PER_REQUEST / max(marginal * 1e3, 1e-9):4.1f}x less than the "
          f"{BASELINE_MS_PER_REQUEST} ms before)")
    print(f"  fixed cost                           {fixed * 1e3:6.1f} ms CPU/s (gRPC, gevent, Locust, log flushes)")
    print(f"  lap wall time at think scale 1       {lap_s:6.1f} s ({REQUESTS_PER_LAP} requests: "
          f"{session_rate:.2f}/s per session)")
    print(f"  sessions one driver core sustains    {sessions:6.0f} "
          f"({sessions / BASELINE_SESSIONS_PER_CORE:4.1f}x the {BASELINE_SESSIONS_PER_CORE} before)")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pings", type=int, default=1000, help="Pings per round of the overhead part.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--users", default="4,12", help="Loads to run, comma-separated user counts.")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--think-scale", type=float, default=0.05)
    parser.add_argument("--only", choices=("overhead", "capacity"), help="Run one of the two parts.")
    parser.add_argument("--probe", nargs=2, metavar=("ROUTER_URL", "CONTROL"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.probe:
        probe(*args.probe, args.pings)
        return
    if args.only != "capacity":
        overhead(args.pings, args.rounds)
    if args.only != "overhead":
        capacity([int(count) for count in args.users.split(",")], args.seconds, args.think_scale, args.repeats)


if __name__ == "__main__":
    main()
