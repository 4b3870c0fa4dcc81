"""How much CPU a glutton BurnCPU really takes, by parallelism: the hashing threads release the GIL, so a burn
with ``parallel: N`` should use about min(N, idle cores) core-seconds per second of wall time.

For each parallelism, the burn's wall time against its deadline, the process's CPU time over it, the cores
that amounts to (CPU / wall) and the hashing rate relative to one worker. On a loaded machine the cores
figure drops to what the scheduler gave: read it next to the load average printed first.

    .venv/bin/python -m bench.glutton_burn [--millis 1000] [--parallel 1,2,4] [--repeats 3]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path

from substrate_assets.protos import glutton_pb2 as pb
from substrate_assets.runtime.glutton import HASH_BLOCK, Glutton

ROOT = Path(__file__).resolve().parents[1]

MI = 1 << 20


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def burn(glutton: Glutton, millis: int, parallel: int) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and hash iterations of one burn."""
    cpu, started = cpu_seconds(), time.monotonic()
    reply = glutton.burn_cpu(pb.BurnCPURequest(duration_ms=millis, parallelism=parallel))
    return time.monotonic() - started, cpu_seconds() - cpu, reply.iterations


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--millis", type=int, default=1000, help="duration of each burn")
    parser.add_argument("--parallel", default="1,2,4", help="comma-separated parallelisms")
    parser.add_argument("--repeats", type=int, default=3, help="burns per parallelism; medians are printed")
    args = parser.parse_args()
    parallelisms = [int(value) for value in args.parallel.split(",")]

    load = ", ".join(f"{value:.2f}" for value in os.getloadavg())
    print(f"{os.cpu_count()} cores, load average {load}, {args.millis} ms burns x {args.repeats}, "
          f"{sys.platform}, python {sys.version.split()[0]}")
    print(f"{'parallel':>8} {'wall ms':>9} {'over ms':>8} {'cpu ms':>9} {'cores':>6} {'MiB/s':>8} {'vs 1':>6}")
    with tempfile.TemporaryDirectory(prefix="glutton-burn-") as scratch:
        glutton = Glutton(Path(scratch) / "data")
        single_rate: float | None = None
        for parallel in parallelisms:
            runs = [burn(glutton, args.millis, parallel) for _ in range(args.repeats)]
            wall = statistics.median(run[0] for run in runs)
            cpu = statistics.median(run[1] for run in runs)
            rate = statistics.median(run[2] / run[0] for run in runs)
            if parallel == 1:
                single_rate = rate
            speedup = f"{rate / single_rate:5.2f}x" if single_rate else "     -"
            print(f"{parallel:8d} {wall * 1e3:9.1f} {wall * 1e3 - args.millis:8.1f} {cpu * 1e3:9.1f} "
                  f"{cpu / wall:6.2f} {rate * HASH_BLOCK / MI:8.0f} {speedup:>6}")
    print("cores: CPU time / wall time of the burn (expect about min(parallel, idle cores)); "
          "MiB/s: bytes hashed; vs 1: hashing rate relative to one worker")


if __name__ == "__main__":
    main()
