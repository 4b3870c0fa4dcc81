"""The driver's own cost: ping latency through the driver vs a minimal client, and CPU per request under Locust.

1. Overhead: one running actor; the median of N pings (a) from a minimal
   keep-alive HTTP client loop (http.client), (b) through the driver's code path
   (RouterClient, protobuf, the Locust request event and the request log) and
   (c) as bare request bytes on a socket with only the reply's length read;
   the ratio of (b) to (a) must stay at most 1.2x, and (b) to (c) is printed
   beside it.
2. Wire floor: the coding-session lap's requests (the bodies the driver sends, the same sizes, replies read in
   full) sent by a few threads with the least code there is (pre-built bytes on blocking sockets, the parks
   through a plain gRPC channel, no gevent, no Locust) against the same embedded runtime; its CPU per request,
   user and system apart. What no client can go below on this machine: if it is near the 1 ms target, the target
   is out of reach for this workload.
3. Capacity: Locust runs the coding-session script against the embedded
   runtime at a fast think scale, at two loads, each a few times (medians).
   Over each run's steady state, the Locust process's CPU seconds per request
   booked; the line through the two loads' (requests/s, CPU/s) splits that
   into a cost per request (the marginal cost: what each more session adds)
   and a fixed cost per second; with a lap's wall time at think scale 1 they
   give the sessions one driver core sustains. Each figure is printed against
   issue 16's (8.6 ms per request, about 210 sessions per core) with the ratio,
   and each load's user and system CPU per request against the wire floor's.
4. Time in flight: what one unary gRPC call costs a Python client (grpcio, a process of its own, four threads
   calling in turn, bytes in and out) against a server in another process that answers after 0, 0.2, 0.5 and
   1 s: CPU per call, the share of gRPC's own threads, and the client's voluntary context switches per call. A
   park (``SuspendActor``) is in flight 150 ms to a second; this part shows why it costs the driver more than the
   whole 1 ms target, and that the cost is gRPC's and grows with the wait, not the driver's.

    .venv/bin/python -m bench.driver_overhead [--pings 1000] [--rounds 5] [--users 4,12] [--seconds 60] [--repeats 3]
        [--floor-sessions 4] [--floor-laps 1] [--inflight-calls 40] [--only overhead,floor,capacity,inflight]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import psutil

from substrate_assets.driver.clients import ControlClient, RouterClient
from substrate_assets.driver.scripts import ScriptSource
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.driver.users.session import (
    AgentSessionVU,
    Session,
    TemplateCheck,
    prepared_call,
)
from substrate_assets.processes.parent_death import dying_with_this_process
from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import glutton_pb2 as g
from substrate_assets.results.request_log import RequestLogWriter, RequestRecord
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
from substrate_assets.workload import Op, OpKind, ScriptLibrary

ROOT = Path(__file__).resolve().parents[1]

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
        vu = AgentSessionVU(control, RouterClient(router_url), scripts, WorkerKnobs(), TemplateCheck(control),
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


def floor_probe(router_port: int, control_address: str, sessions: int, laps: int) -> None:
    """The wire floor, in a process of its own without gevent: ``sessions`` threads, each one actor, replay the
    coding-session script's laps with no think time, sending what the driver sends with the least code there is.
    Each HTTP request is pre-built bytes (the driver's own serialized bodies, ``session.prepared_call``, behind the
    head ``RouterClient`` writes) written to a blocking socket; each reply is read in full into a reused buffer
    (its length from the head, nothing parsed); each park is a ``SuspendActor`` through a plain gRPC channel with
    pre-serialized request bytes (no stub classes, no messages). Prints the process's user and system CPU seconds
    over the laps, and the requests the driver would book for them (3 per step)."""
    import resource

    loaded = ScriptSource(ScriptLibrary(ROOT / "scripts"), "coding-session").load()
    control = ControlClient(control_address)
    control.ensure_atespace("floor")
    suspend = control.channel.unary_unary("/ateapi.Control/SuspendActor")  # bytes in, bytes out

    router = RouterClient(f"http://127.0.0.1:{router_port}")  # its requests' bytes only: it never connects here

    def plan(actor: str) -> list[tuple[list[tuple[bytes, bytes]], bytes]]:
        """Per step: its HTTP requests (the wake ping, then the ops), each as the two writes RouterClient makes,
        and its park."""
        def request(op: Op) -> tuple[bytes, bytes]:
            call = prepared_call(loaded, op)
            return router.wire_request("POST", f"floor/{actor}", call.route, call.body, "application/x-protobuf")
        park = pb.SuspendActorRequest(actor=ControlClient.ref("floor", actor)).SerializeToString()
        return [([request(Op(OpKind.PING)), *(request(op) for op in step.ops)], park)
                for step in loaded.script.steps]

    def read_reply(sock: socket.socket, view: memoryview) -> None:
        got = 0
        while (end := bytes(view[:min(got, 1 << 16)]).find(b"\r\n\r\n")) < 0:
            count = sock.recv_into(view[got:])
            if not count:
                raise ConnectionError("the router closed the connection")
            got += count
        head = bytes(view[:end]).decode("latin-1")
        if not head.startswith("HTTP/1.1 200"):
            raise RuntimeError(head.splitlines()[0])
        length = int(next(line for line in head.split("\r\n") if line.lower().startswith("content-length:"))[15:])
        left = end + 4 + length - got
        while left > 0:
            count = sock.recv_into(view, min(left, len(view)))
            if not count:
                raise ConnectionError("the router closed the connection mid-reply")
            left -= count

    actors = [f"floor-{number}" for number in range(sessions)]
    plans = [plan(actor) for actor in actors]
    sockets = [socket.create_connection(("127.0.0.1", router_port)) for _ in actors]
    buffers = [memoryview(bytearray(1 << 20)) for _ in actors]
    for actor, steps, sock, view in zip(actors, plans, sockets, buffers, strict=True):  # not measured
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        control.create_actor("floor", actor)
        for attempt in range(60):  # until the actor answers, as a session waits for it
            try:
                sock.sendall(b"".join(steps[0][0][0]))
                read_reply(sock, view)
                break
            except RuntimeError:
                if attempt == 59:
                    raise
                time.sleep(1)
        control.suspend("floor", actor)

    failures: list[BaseException] = []
    # The replaying threads' own CPU seconds: on the HTTP requests, and on the calling side of the parks.
    spent = {"http": 0.0, "suspend": 0.0}
    lock = threading.Lock()

    def replay(number: int) -> None:
        sock, view = sockets[number], buffers[number]
        http_s = suspend_s = 0.0
        try:
            for _ in range(laps):
                for requests, park in plans[number]:
                    started = time.thread_time()
                    for head, body in requests:
                        sock.sendall(head)
                        if body:  # tens of MiB: sent as they are, as RouterClient sends them
                            sock.sendall(body)
                        read_reply(sock, view)
                    parking = time.thread_time()
                    suspend(park, timeout=60)
                    http_s += parking - started
                    suspend_s += time.thread_time() - parking
        except BaseException as error:
            failures.append(error)
            raise
        finally:
            with lock:
                spent["http"] += http_s
                spent["suspend"] += suspend_s

    threads = [threading.Thread(target=replay, args=(number,), name=f"floor-{number}") for number in range(sessions)]
    by_thread = _thread_cpu()
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_SELF)
    by_thread = {name: cpu - by_thread.get(name, 0.0) for name, cpu in _thread_cpu().items()}
    by_thread.update({f"replaying threads, {part}": seconds for part, seconds in spent.items()})
    if failures:
        raise RuntimeError(f"a floor session failed: {failures[0]!r}")
    for actor, sock in zip(actors, sockets, strict=True):
        sock.close()
        control.delete("floor", actor)
    control.close()
    print(json.dumps({"user_s": after.ru_utime - before.ru_utime, "sys_s": after.ru_stime - before.ru_stime,
                      "requests": 3 * len(loaded.script.steps) * laps * sessions, "wall_s": wall,
                      "threads": by_thread}))


def _thread_cpu() -> dict[str, float]:
    """CPU seconds (user and system) of this process's live threads so far, summed by thread name (gRPC's by the
    names it gives its threads)."""
    tick = os.sysconf("SC_CLK_TCK")
    totals: dict[str, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            stat = (task / "stat").read_text()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2:].split()
        totals[name] = totals.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return totals


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
    user_s: float
    sys_s: float
    laps: float
    lap_s: float  # a lap's wall time at think scale 1

    @property
    def cpu_s(self) -> float:
        return self.user_s + self.sys_s

    @property
    def request_rate(self) -> float:
        return self.requests / self.window_s

    @property
    def cpu_rate(self) -> float:
        return self.cpu_s / self.window_s

    @property
    def ms_per_request(self) -> float:
        return self.cpu_s / self.requests * 1e3


@dataclass(frozen=True)
class Floor:
    """One wire-floor run: the lap's requests sent with the least code there is, and that process's CPU."""

    requests: int
    user_s: float
    sys_s: float
    wall_s: float
    threads: dict[str, float]  # CPU seconds by thread (gRPC's by the names it gives them)

    def thread_ms(self, name: str) -> float:
        return self.threads.get(name, 0.0) / self.requests * 1e3

    @property
    def user_ms(self) -> float:
        return self.user_s / self.requests * 1e3

    @property
    def sys_ms(self) -> float:
        return self.sys_s / self.requests * 1e3

    @property
    def ms_per_request(self) -> float:
        return self.user_ms + self.sys_ms


GRPC_THREADS = "event_engine"  # the name gRPC's C core gives the threads that run its event engine


def wire_floor(sessions: int, laps: int, repeats: int) -> Floor:
    """The floor ``repeats`` times, each against a fresh embedded runtime configured as the capacity runs'; the
    median run (by CPU per request), its user and system parts as measured together."""
    print(f"\nwire floor: coding-session, {sessions} sessions x {laps} lap(s) without think time, blocking sockets and "
          f"a plain gRPC channel, no gevent, no Locust; median of {repeats} runs")
    runs: list[Floor] = []
    for _ in range(repeats):
        with EmbeddedRuntime(RuntimeConfig(workers=8, actors_per_worker=4, snapshot_fsync=False)) as runtime:
            done = subprocess.run([sys.executable, __file__, "--floor-probe", str(runtime.router_port),
                                   runtime.control_address, "--floor-sessions", str(sessions), "--floor-laps",
                                   str(laps)], capture_output=True, text=True, check=True)
        run = Floor(**json.loads(done.stdout.strip().splitlines()[-1]))
        runs.append(run)
        others = sum(run.thread_ms(name) for name in run.threads if not name.startswith("replaying"))
        http_ms, parks_ms = run.thread_ms("replaying threads, http"), run.thread_ms("replaying threads, suspend")
        print(f"  {run.requests:5d} requests in {run.wall_s:5.1f}s  CPU user {run.user_ms:5.3f} + system "
              f"{run.sys_ms:5.3f} = {run.ms_per_request:5.3f} ms per request: HTTP requests {http_ms:5.3f}, parks "
              f"{parks_ms:5.3f} in the calling threads + {others:5.3f} in the others (gRPC's {GRPC_THREADS})")
    middle = sorted(runs, key=lambda run: run.ms_per_request)[len(runs) // 2]
    http_ms = statistics.median(run.thread_ms("replaying threads, http") for run in runs)
    print(f"  median: user {middle.user_ms:5.3f} + system {middle.sys_ms:5.3f} = {middle.ms_per_request:5.3f} ms per "
          f"request (target for the driver {TARGET_MS_PER_REQUEST} ms); the HTTP requests alone {http_ms:5.3f} ms, "
          f"the parks through gRPC most of the rest")
    if middle.ms_per_request >= 0.8 * TARGET_MS_PER_REQUEST:
        print(f"  the floor alone is {middle.ms_per_request / TARGET_MS_PER_REQUEST:.0%} of the target: no client that "
              f"parks through Python gRPC drives this workload at {TARGET_MS_PER_REQUEST} ms per request on this "
              f"machine")
    return middle


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
        samples: list[tuple[float, float, float]] = []  # (wall time, driver user and system CPU seconds)
        while process.poll() is None:
            try:
                times = watched.cpu_times()
                samples.append((time.time(), times.user, times.system))
            except psutil.NoSuchProcess:
                break
            time.sleep(0.2)
        requests = pl.concat([pl.read_parquet(p) for p in Path(work, "requests").glob("*.parquet")])
    # Steady state only: from the first wake to the last step, so Locust's start-up and teardown do not count.
    first = requests.filter(pl.col("name") == "WakeFirstTouch")["ts"].min()
    steps = requests.filter(pl.col("name").str.starts_with("Step_") & pl.col("success"))
    last = steps["ts"].max()
    in_window = [sample for sample in samples if first <= sample[0] <= last]
    (start, user_start, sys_start), (end, user_end, sys_end) = in_window[0], in_window[-1]
    requests = requests.filter((pl.col("ts") >= start) & (pl.col("ts") <= end))
    steps = steps.filter((pl.col("ts") >= start) & (pl.col("ts") <= end))
    laps = steps.height / STEPS_PER_LAP
    step_ops_s = steps["latency_ms"].sum() / 1e3 / max(steps.height, 1) * STEPS_PER_LAP
    wakes = requests.filter(pl.col("name") == "WakeFirstTouch")["latency_ms"].sum() / 1e3
    parks = requests.filter(pl.col("name") == "SuspendActor")["latency_ms"].sum() / 1e3
    lap_s = THINK_PER_LAP_S + step_ops_s + (wakes + parks) / max(laps, 1e-9)
    return Load(users, end - start, requests.height, user_end - user_start, sys_end - sys_start, laps, lap_s)


def capacity(users: list[int], seconds: int, think_scale: float, repeats: int, floor: Floor | None = None) -> None:
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
                  f"{run.request_rate:6.2f}/s  driver CPU {run.cpu_s:6.2f}s  {run.ms_per_request:6.2f} ms/request "
                  f"(user {run.user_s / run.requests * 1e3:5.2f}, system {run.sys_s / run.requests * 1e3:5.2f})")
        rate = statistics.median(run.request_rate for run in runs)
        cpu_rate = statistics.median(run.cpu_rate for run in runs)
        per_request = statistics.median(run.ms_per_request for run in runs)
        points.append((rate, cpu_rate, statistics.median(run.lap_s for run in runs)))
        print(f"  {count:3d} users  median: {rate:6.2f} requests/s, driver {cpu_rate * 1e3:6.1f} ms CPU/s, "
              f"{per_request:6.2f} ms per request ({BASELINE_MS_PER_REQUEST / per_request:4.1f}x less than "
              f"the {BASELINE_MS_PER_REQUEST} ms before; target {TARGET_MS_PER_REQUEST} ms)")
        if floor is not None:
            user = statistics.median(run.user_s / run.requests * 1e3 for run in runs)
            system = statistics.median(run.sys_s / run.requests * 1e3 for run in runs)
            print(f"  {count:3d} users  against the wire floor: user {user:5.2f} vs {floor.user_ms:5.3f} ms "
                  f"({user / floor.user_ms:4.1f}x), system {system:5.2f} vs {floor.sys_ms:5.3f} ms "
                  f"({system / floor.sys_ms:4.1f}x), all {per_request:5.2f} vs {floor.ms_per_request:5.3f} ms "
                  f"({per_request / floor.ms_per_request:4.1f}x)")
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


INFLIGHT_DELAYS_S = (0.0, 0.2, 0.5, 1.0)
INFLIGHT_THREADS = 4
INFLIGHT_SERVICE, INFLIGHT_RPC = "bench.Inflight", "Answer"


def inflight_server(delay_s: float) -> None:
    """A gRPC server on a free port of 127.0.0.1 whose one method answers after ``delay_s``; prints the port, then
    serves until killed."""
    from concurrent import futures

    import grpc

    def answer(request: bytes, context: object) -> bytes:
        time.sleep(delay_s)
        return b"answered"

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4 * INFLIGHT_THREADS))
    server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(
        INFLIGHT_SERVICE, {INFLIGHT_RPC: grpc.unary_unary_rpc_method_handler(answer)}),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(port, flush=True)
    server.wait_for_termination()


def inflight_probe(port: int, calls: int) -> None:
    """``calls`` unary calls in turn from each of INFLIGHT_THREADS threads over one channel (bytes, no messages);
    prints the process's CPU seconds over them, the calling threads' own part (the rest is gRPC's threads, which
    come and go), and the voluntary context switches."""
    import resource

    import grpc

    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    answer = channel.unary_unary(f"/{INFLIGHT_SERVICE}/{INFLIGHT_RPC}")
    answer(b"ask", timeout=60)  # connected, not measured
    callers_s: list[float] = []

    def ask() -> None:
        started = time.thread_time()
        for _ in range(calls):
            answer(b"ask", timeout=60)
        callers_s.append(time.thread_time() - started)

    threads = [threading.Thread(target=ask, name=f"caller-{number}") for number in range(INFLIGHT_THREADS)]
    before = resource.getrusage(resource.RUSAGE_SELF)
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    after = resource.getrusage(resource.RUSAGE_SELF)
    channel.close()
    print(json.dumps({"cpu_s": after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime,
                      "callers_s": sum(callers_s), "switches": after.ru_nvcsw - before.ru_nvcsw,
                      "calls": calls * INFLIGHT_THREADS}))


def inflight(calls: int, repeats: int) -> None:
    """The client's CPU per call at each of INFLIGHT_DELAYS_S, each the median of ``repeats`` runs (by CPU per
    call), each run a fresh client process against a fresh server process. The server serves until killed: it is
    killed when the run ends, and with this process should it die first."""
    print(f"\ntime in flight: one unary gRPC call from a Python client (grpcio, {INFLIGHT_THREADS} threads x {calls} "
          f"calls, one channel), server answering after a delay; median of {repeats} runs")
    for delay_s in INFLIGHT_DELAYS_S:
        runs: list[dict[str, float]] = []
        for _ in range(repeats):
            server = subprocess.Popen(dying_with_this_process([sys.executable, __file__, "--inflight-server",
                                                               str(delay_s)]), stdout=subprocess.PIPE, text=True)
            try:
                assert server.stdout is not None
                announced = server.stdout.readline().strip()
                if not announced.isdigit():
                    raise RuntimeError(f"the inflight server printed no port (exit code {server.poll()})")
                done = subprocess.run(dying_with_this_process([sys.executable, __file__, "--inflight-probe", announced,
                                                               "--inflight-calls", str(calls)]),
                                      capture_output=True, text=True, check=True)
            finally:
                server.kill()
                server.wait()
            runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
        middle = sorted(runs, key=lambda run: run["cpu_s"] / run["calls"])[len(runs) // 2]
        per_call_ms = middle["cpu_s"] / middle["calls"] * 1e3
        callers_ms = middle["callers_s"] / middle["calls"] * 1e3
        print(f"  answer after {delay_s:3.1f} s: {per_call_ms:5.2f} ms CPU per call ({callers_ms:5.2f} in the calling "
              f"thread, {per_call_ms - callers_ms:5.2f} in gRPC's), "
              f"{middle['switches'] / middle['calls']:5.1f} context switches per call; "
              f"{per_call_ms / TARGET_MS_PER_REQUEST:4.2f}x the {TARGET_MS_PER_REQUEST} ms target per request")


PARTS = ("overhead", "floor", "capacity", "inflight")


def _parts(text: str) -> tuple[str, ...]:
    parts = tuple(part.strip() for part in text.split(",") if part.strip())
    unknown = set(parts) - set(PARTS)
    if unknown or not parts:
        raise argparse.ArgumentTypeError(f"parts are {', '.join(PARTS)}; got {text!r}")
    return parts


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--pings", type=int, default=1000, help="Pings per round of the overhead part.")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--users", default="4,12", help="Loads to run, comma-separated user counts.")
    parser.add_argument("--seconds", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--think-scale", type=float, default=0.05)
    parser.add_argument("--floor-sessions", type=int, default=4, help="Concurrent sessions of the wire floor.")
    parser.add_argument("--floor-laps", type=int, default=1, help="Laps each wire-floor session replays.")
    parser.add_argument("--inflight-calls", type=int, default=40, help="Calls per thread at each time in flight.")
    parser.add_argument("--only", type=_parts, default=PARTS, help="Parts to run, comma-separated: overhead, floor, "
                        "capacity (capacity compares with the floor when both run), inflight.")
    parser.add_argument("--probe", nargs=2, metavar=("ROUTER_URL", "CONTROL"), help=argparse.SUPPRESS)
    parser.add_argument("--floor-probe", nargs=2, metavar=("ROUTER_PORT", "CONTROL"), help=argparse.SUPPRESS)
    parser.add_argument("--inflight-server", type=float, metavar="DELAY_S", help=argparse.SUPPRESS)
    parser.add_argument("--inflight-probe", type=int, metavar="PORT", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inflight_server is not None:
        inflight_server(args.inflight_server)
        return
    if args.inflight_probe is not None:
        inflight_probe(args.inflight_probe, args.inflight_calls)
        return
    if args.probe:
        probe(*args.probe, args.pings)
        return
    if args.floor_probe:
        floor_probe(int(args.floor_probe[0]), args.floor_probe[1], args.floor_sessions, args.floor_laps)
        return
    if "overhead" in args.only:
        overhead(args.pings, args.rounds)
    floor = wire_floor(args.floor_sessions, args.floor_laps, args.repeats) if "floor" in args.only else None
    if "capacity" in args.only:
        capacity([int(count) for count in args.users.split(",")], args.seconds, args.think_scale, args.repeats, floor)
    if "inflight" in args.only:
        inflight(args.inflight_calls, args.repeats)


if __name__ == "__main__":
    main()
