"""Wake physics of the embedded runtime, measured against the physical floor in the same run.

For one actor holding 96Mi of RAM and 98.5Mi of files (the coding-session budget):
suspend time; resume-to-first-response through the router (a ping to the
suspended actor, measured by the client); pause/unpause round trip; and the
floor: reading the snapshot's bytes from page cache plus starting a bare Python
process. Prints the figures and the ratio of resume to floor.

    .venv/bin/python -m bench.runtime_wake [--cycles 30] [--no-fsync]
"""

from __future__ import annotations

import argparse
import http.client
import statistics
import subprocess
import sys
import time
from pathlib import Path

import grpc

from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import ateapi_pb2_grpc
from substrate_assets.protos import glutton_pb2 as g
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig

MI = 1 << 20
ATESPACE, ACTOR = "benchmark", "wake-bench"
FILES = {"repo_tarball": 16 * MI, "deps_cache": 32 * MI, "build_artifacts": 24 * MI, "patch": 512 * 1024,
         "test_fixtures": 2 * MI, "release_package": 24 * MI}
ARRAYS = {"agent_context": 32 * MI, "compiler_ws": 64 * MI}


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(int(len(ordered) * p), len(ordered) - 1)]


class RouterClient:
    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.connection = http.client.HTTPConnection(host, int(port), timeout=60)
        self.headers = {"ate-target-actor": f"{ATESPACE}/{ACTOR}", "Content-Type": "application/x-protobuf"}

    def post(self, route: str, message: object) -> bytes:
        self.connection.request("POST", route, body=message.SerializeToString(), headers=self.headers)
        response = self.connection.getresponse()
        body = response.read()
        if response.status != 200:
            raise RuntimeError(f"{route}: {response.status} {body!r}")
        return body


def read_all(snapshot: Path) -> int:
    total = 0
    for path in [snapshot / "pages.img", *sorted((snapshot / "files").iterdir())]:
        with path.open("rb", buffering=0) as handle:
            data = bytearray(path.stat().st_size)
            handle.readinto(data)
            total += len(data)
    return total


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--cycles", type=int, default=30)
    parser.add_argument("--no-fsync", action="store_true", help="suspend without making snapshots durable")
    args = parser.parse_args()

    config = RuntimeConfig(workers=1, actors_per_worker=1, snapshot_fsync=not args.no_fsync)
    with EmbeddedRuntime(config) as runtime:
        control = ateapi_pb2_grpc.ControlStub(grpc.insecure_channel(runtime.control_address))
        ref = pb.ObjectRef(atespace=ATESPACE, name=ACTOR)
        control.CreateAtespace(pb.CreateAtespaceRequest(atespace=pb.Atespace(metadata=pb.ResourceMetadata(name=ATESPACE))))
        control.CreateActor(pb.CreateActorRequest(actor=pb.Actor(
            metadata=pb.ResourceMetadata(atespace=ATESPACE, name=ACTOR),
            actor_template=pb.ObjectRef(atespace="benchmark-workloads", name="glutton"))))
        client = RouterClient(runtime.router_url)
        client.post("/ping", g.PingRequest(message="hello"))
        for key, size in ARRAYS.items():
            client.post("/writeram", g.WriteRAMRequest(key=key, size=str(size), write_mode=g.WRITE_MODE_OVERWRITE))
        for key, size in FILES.items():
            client.post("/writedisk", g.WriteDiskRequest(key=key, size=size))

        suspend, wake, pause_round_trip, floor_read, floor_start = [], [], [], [], []
        for _ in range(args.cycles):
            started = time.perf_counter()
            control.SuspendActor(pb.SuspendActorRequest(actor=ref))
            suspend.append(time.perf_counter() - started)
            started = time.perf_counter()
            client.post("/ping", g.PingRequest(message="think"))
            wake.append(time.perf_counter() - started)
        snapshot = runtime.snapshot_path(ATESPACE, ACTOR)
        assert snapshot is not None
        control.SuspendActor(pb.SuspendActorRequest(actor=ref))
        snapshot = runtime.snapshot_path(ATESPACE, ACTOR)
        snapshot_bytes = read_all(snapshot)
        for _ in range(args.cycles):
            started = time.perf_counter()
            read_all(snapshot)
            floor_read.append(time.perf_counter() - started)
            started = time.perf_counter()
            subprocess.run([sys.executable, "-c", "pass"], check=True)
            floor_start.append(time.perf_counter() - started)
        client.post("/ping", g.PingRequest(message="think"))
        for _ in range(args.cycles):
            started = time.perf_counter()
            control.PauseActor(pb.PauseActorRequest(actor=ref))
            client.post("/ping", g.PingRequest(message="think"))
            pause_round_trip.append(time.perf_counter() - started)

    floor = [r + s for r, s in zip(floor_read, floor_start, strict=True)]
    rows = [
        ("suspend (checkpoint, fsync)" if not args.no_fsync else "suspend (checkpoint)", suspend),
        ("resume to first response", wake),
        ("pause + unpause to first response", pause_round_trip),
        ("floor: read snapshot from page cache", floor_read),
        ("floor: start bare python", floor_start),
        ("floor: total", floor),
    ]
    print(f"snapshot {snapshot_bytes / MI:.1f} MiB (RAM {sum(ARRAYS.values()) / MI:.1f} MiB + files "
          f"{sum(FILES.values()) / MI:.1f} MiB), {args.cycles} cycles, {sys.platform}, python {sys.version.split()[0]}")
    print(f"{'':40} {'p50 ms':>9} {'p95 ms':>9} {'mean ms':>9}")
    for label, values in rows:
        print(f"{label:40} {percentile(values, 0.5) * 1e3:9.1f} {percentile(values, 0.95) * 1e3:9.1f} "
              f"{statistics.fmean(values) * 1e3:9.1f}")
    ratio50 = percentile(wake, 0.5) / percentile(floor, 0.5)
    ratio95 = percentile(wake, 0.95) / percentile(floor, 0.95)
    print(f"resume / floor: p50 {ratio50:.2f}x, p95 {ratio95:.2f}x (target <= 2x)")


if __name__ == "__main__":
    main()
