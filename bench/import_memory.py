"""What importing one upstream run with one large file costs in memory: the peak RSS of a fresh process that imports
it (planned, copied, read whole as the warehouse reads it), less what the same process held before and less what
importing the fixture's own run costs, as a multiple of the file's size. One run per file kind, each a copy of the
test fixture's run with that file grown to ``--mib`` MiB of valid rows (stats.jsonl: more rows of its request
metrics; logs.txt: more of Locust's lines; stats_history.csv: more seconds of its rows).

    .venv/bin/python -m bench.import_memory [--mib 200] [--source DIR]

``--source`` imports with another checkout's code (its package directory first on the path): the same runs against
an older commit give the ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURE = ROOT / "tests" / "data" / "upstream_runs" / "runs" / "glutton_baseline_5_users" / "run_date=2026-11-20" / \
    "run_ts=1795132800" / "run_tag=4f8a1c0d2b9e7f6a5c3d1e0f9a8b7c6d5e4f3a2b"
MIB = 1 << 20

CHILD = """
import json, resource, sys
from pathlib import Path
from substrate_assets.results.importer import import_all
from substrate_assets.results.layout import RunStore
from substrate_assets.warehouse.trial_rows import check_staged_trial
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
batch = import_all(sys.argv[1], RunStore(Path(sys.argv[2])), check=check_staged_trial)
after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print(json.dumps({"before_kib": before, "peak_kib": after, "imported": len(batch.imported),
                  "refused": [str(refusal)[-200:] for refusal in batch.refused]}))
"""


def grow_jsonl(path: Path, size: int) -> None:
    lines = path.read_text().splitlines()
    requests = [line for line in lines if json.loads(line)["metric"].startswith(("grpc_", "http_"))]
    summaries = [line for line in lines if line not in requests]
    with path.open("w") as out:
        written = 0
        while written < size:
            for line in requests:
                out.write(line + "\n")
                written += len(line) + 1
        for line in summaries:  # the rows the figures come from stay last
            out.write(line + "\n")


def grow_log(path: Path, size: int) -> None:
    head = path.read_text() if path.exists() else ""
    line = "[locust] [2026-11-20 00:00:30,000] worker/INFO/locust.runners: 5 users running, 0 failures so far\n"
    with path.open("w") as out:
        out.write(head)
        for _ in range(size // len(line)):
            out.write(line)


def grow_history(path: Path, size: int) -> None:
    header, *rows = path.read_text().splitlines()
    first = int(rows[0].split(",")[0])
    span = int(rows[-1].split(",")[0]) - first + 1
    with path.open("w") as out:
        out.write(header + "\n")
        written, shift = 0, 0
        while written < size:
            for row in rows:
                stamp, rest = row.split(",", 1)
                line = f"{int(stamp) + shift},{rest}\n"
                out.write(line)
                written += len(line)
            shift += span


KINDS = {"stats.jsonl": grow_jsonl, "logs.txt": grow_log, "stats_history.csv": grow_history}
AS_IS = "the fixture as it is"


def measure(kind: str, size: int, source: Path) -> dict:
    with tempfile.TemporaryDirectory() as work:
        run = Path(work) / "upstream" / FIXTURE.relative_to(FIXTURE.parents[4])
        shutil.copytree(FIXTURE, run)
        if kind != AS_IS:
            KINDS[kind](run / kind, size)
        actual = (run / kind).stat().st_size if kind != AS_IS else 0
        env = {**os.environ, "PYTHONPATH": str(source)}
        done = subprocess.run([sys.executable, "-c", CHILD, str(Path(work) / "upstream"), str(Path(work) / "store")],
                              capture_output=True, text=True, env=env, cwd=source)
        if done.returncode != 0:
            raise SystemExit(f"{kind}: the importing process failed:\n{done.stderr[-2000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
        return {**result, "kind": kind, "bytes": actual}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=200)
    parser.add_argument("--source", type=Path, default=ROOT)
    args = parser.parse_args()
    base = measure(AS_IS, 0, args.source.resolve())
    fixed = (base["peak_kib"] - base["before_kib"]) / 1024
    print(f"code of {args.source}; importing the fixture as it is costs {fixed:.0f} MiB over the start")
    print("| file | size (MiB) | imported | peak RSS beyond the fixture's (MiB) | ratio to the file |")
    print("|---|---:|---|---:|---:|")
    for kind in KINDS:
        result = measure(kind, args.mib * MIB, args.source.resolve())
        grown = max(0.0, (result["peak_kib"] - result["before_kib"]) / 1024 - fixed)
        said = "yes" if result["imported"] else f"refused: {result['refused'][0][-80:]}" if result["refused"] else "no"
        size_mib = result["bytes"] / MIB
        print(f"| {kind} | {size_mib:.0f} | {said} | {grown:.0f} | {grown / size_mib:.2f} |", flush=True)


if __name__ == "__main__":
    main()
