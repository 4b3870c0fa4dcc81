"""Faults a demanding user drives, each run for real, and what each one leaves behind.

Every scenario runs the ``substrate-bench`` command in a project of its own (a temporary
``SUBSTRATE_BENCH_ROOT`` holding the shipped scripts and short suites), injects one fault — a signal, a kill,
a full disk, malformed input, a concurrent writer, an abusive request — and then looks at three things:

- lost: what was measured or stored and did not land (or landed half);
- leaked: processes still alive a few seconds later, ``/tmp/substrate-runtime-*``, ``/dev/shm/substrate-live-*``
  and ``store/.staging`` entries left behind;
- next run ok: whether the next command of the same kind works, and how long it took.

Prints one row per scenario (a Markdown table, to paste into a note).

    .venv/bin/python -m bench.faults [--only kill-run,sigterm-trial,...]

The full-disk scenarios mount a tmpfs and need root; elsewhere they print why they did not run.
Processes are attributed to a scenario by appearing during it with its project in their environment.

Three scenarios kill Dagster's own processes: ``kill-ui`` (``dagster dev``'s whole process group killed during a
trial launched from the UI, then the UI started again and a new trial launched from it), ``kill-load-worker`` (the
run worker loading a UI-launched trial into the warehouse, killed) and ``kill-all`` (every process of the scenario
frozen, then killed at once, as a reboot would, then ``substrate-bench run quick-smoke``). Each ends with a leftover
scan scoped to the scenario: processes with its project in their environment, entries of its own TMPDIR,
``/dev/shm`` entries owned by one of its processes, runs not finished, and the warehouse's tables (readable, row
counts unchanged or grown).
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import itertools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import grpc
import numpy as np
import polars as pl
import psutil

if TYPE_CHECKING:
    import dagster as dg


from bench.ui_trial import LAUNCH, answers, graphql
from bench.warehouse_rebuild import write_trial
from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import ateapi_pb2_grpc
from substrate_assets.results.layout import RunStore, TrialKey
from tests.support.projects import make_project, project_env

ROOT = Path(__file__).resolve().parents[1]

CLI = str(Path(sys.executable).parent / "substrate-bench")
UPSTREAM_RUN = next((ROOT / "tests/data/upstream_runs/runs/glutton_baseline_1_user")
                    .glob("run_date=*/run_ts=*/run_tag=*"))
RAW_TABLES = ("trial_manifests", "stats_history", "locust_stats", "request_samples", "cluster_facts",
              "server_telemetry")
SUITES = """\
suites:
  - name: fault
    script: quick-session
    users: 2
    spawn_rate: 2
    duration: 30s
    think_scale: 0.2
    workers: 4
    repeat: 1
  - name: next
    script: quick-session
    users: 1
    spawn_rate: 1
    duration: 5s
    think_scale: 0.2
    workers: 2
    repeat: 1
  - name: quick-smoke
    script: quick-session
    users: 4
    spawn_rate: 2
    duration: 60s
    think_scale: 0.2
"""
HOSTILE_SUITE = """\
suites:
  - name: hostile
    script: {script}
    users: 1
    duration: 5s
"""
YAML_BOMB = """\
suites:
  - name: bomb
    script: quick-session
    users: 1
    duration: 5s
    metadata:
      a: &a ["xxxxxxxxxxxxxxxx", "xxxxxxxxxxxxxxxx", "xxxxxxxxxxxxxxxx", "xxxxxxxxxxxxxxxx"]
      b: &b [*a, *a, *a, *a, *a, *a, *a, *a]
      c: &c [*b, *b, *b, *b, *b, *b, *b, *b]
      d: &d [*c, *c, *c, *c, *c, *c, *c, *c]
      e: &e [*d, *d, *d, *d, *d, *d, *d, *d]
      f: &f [*e, *e, *e, *e, *e, *e, *e, *e]
      g: &g [*f, *f, *f, *f, *f, *f, *f, *f]
      h: &h [*g, *g, *g, *g, *g, *g, *g, *g]
      i: &i [*h, *h, *h, *h, *h, *h, *h, *h]
"""
SQL_ESCAPES = {
    "COPY TO a file": "COPY (SELECT 1) TO '{tmp}/copied.csv'",
    "EXPORT DATABASE": "EXPORT DATABASE '{tmp}/exported'",
    "ATTACH read-write": "ATTACH '{tmp}/other.duckdb' AS other (READ_ONLY false)",
    "read_text": "SELECT * FROM read_text('/etc/hostname')",
    "glob": "SELECT * FROM glob('/root/*')",
    "INSTALL": "INSTALL httpfs",
}


@dataclass
class Row:
    scenario: str
    exit: str = ""
    message: str = ""
    lost: str = ""
    leaked: str = ""
    next_ok: str = ""
    seconds: float = 0.0


class Job(subprocess.Popen[str]):
    """A command whose output goes to files, read when it ends: Dagster's logs would fill a pipe and stall it."""

    def __init__(self, args: list[str], output: Path, **options: object) -> None:
        output.mkdir(exist_ok=True)
        name = f"{len(list(output.iterdir())) // 2}-{'-'.join(args[1:3])}"
        self.out_path, self.err_path = output / f"{name}.out", output / f"{name}.err"
        with self.out_path.open("w") as out, self.err_path.open("w") as err:
            super().__init__(args, stdout=out, stderr=err, text=True, **options)  # type: ignore[call-overload]

    def communicate(self, input: str | None = None, timeout: float | None = None) -> tuple[str, str]:
        self.wait(timeout)
        return self.out_path.read_text(), self.err_path.read_text()


@dataclass
class Project:
    root: Path
    env: dict[str, str] = field(default_factory=dict)

    @classmethod
    def create(cls, parent: Path, name: str) -> Project:
        root = parent / name
        root.mkdir()
        env = project_env(make_project(root, SUITES))
        # Runtime state directories go to a temporary directory of the project's own, so that what the scenario
        # leaves there is told apart from any other runtime on the machine.
        (parent / "tmp").mkdir(exist_ok=True)
        env["TMPDIR"] = str(parent / "tmp")
        return cls(root, env)

    @property
    def store(self) -> Path:
        return self.root / "store"

    def cli(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        try:
            return subprocess.run([CLI, *args], capture_output=True, text=True, timeout=timeout, env=self.env,
                                  cwd=self.root)
        except subprocess.TimeoutExpired as expired:
            return subprocess.CompletedProcess(expired.cmd, -999, _text(expired.stdout), _text(expired.stderr))

    def start(self, *args: str) -> Job:
        """A command in a process group of its own, as a shell starts a job."""
        return Job([CLI, *args], self.root.parent / "output", env=self.env, cwd=self.root, start_new_session=True)

    def landed(self) -> list[Path]:
        return sorted(path.parent for path in (self.store / "runs").glob("**/trial.json"))

    def staging(self) -> list[Path]:
        staging = self.store / ".staging"
        return sorted(staging.iterdir()) if staging.is_dir() else []

    def count(self, table: str, trial_id: str) -> int | None:
        done = self.cli("sql", f"SELECT count(*) AS n FROM {table} WHERE trial_id = '{trial_id}'",
                        "--format", "json")
        return json.loads(done.stdout)[0]["n"] if done.returncode == 0 else None

    def running_trial(self) -> bool:
        """Locust has appended at least one stats-history row of a trial in this project."""
        return any(len(path.read_text().splitlines()) > 1 for path in self.store.glob(".staging/*/.work/*history*"))


def _text(value: bytes | str | None) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value or ""


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return (lines[-1] if lines else "")[:110]


def wait_for(condition: Callable[[], object], timeout_s: float, interval_s: float = 0.1) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(interval_s)
    return bool(condition())


def ours(pids_before: set[int], root: Path) -> dict[int, str]:
    """Processes that appeared since ``pids_before`` and run for the project at ``root`` (its CLI, Locust, actor
    hosts: they inherit its SUBSTRATE_BENCH_ROOT), so nothing else on the machine is counted or killed."""
    marker = f"SUBSTRATE_BENCH_ROOT={root}".encode()
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in pids_before or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            environment = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if state != "Z" and marker in environment:
            found[int(entry.name)] = command[:80]
    return found


def all_pids() -> set[int]:
    return {int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()}


def state_dirs(project: Project) -> dict[Path, int]:
    """The project's runtime state directories and the machine's live-memory ones, with their sizes in bytes."""
    found = {}
    for path in [*Path(project.env["TMPDIR"]).glob("substrate-runtime-*"), *Path("/dev/shm").glob("substrate-live-*")]:
        found[path] = size_of(path)
    return found


def size_of(path: Path) -> int:
    total = 0
    for item in path.rglob("*"):
        with contextlib.suppress(OSError):  # a directory being removed as it is read
            total += item.stat().st_size if item.is_file() else 0
    return total


@contextlib.contextmanager
def watching(project: Project) -> Iterator[Callable[[], str]]:
    """Yields a function that reports, after the fault, what was left behind that was not there before."""
    pids, dirs = all_pids(), set(state_dirs(project))

    def leaked() -> str:
        # A process stopping by itself (a trial landing what it measured) is not a leak; one alive a minute on is.
        wait_for(lambda: not ours(pids, project.root), 60, 0.2)
        alive = ours(pids, project.root)
        left = {path: size for path, size in state_dirs(project).items() if path not in dirs}
        parts = []
        if alive:
            names = sorted({("locust" if "locust" in c else "actor host" if "actor_host" in c else "cli")
                            for c in alive.values()})
            parts.append(f"{len(alive)} processes ({', '.join(names)})")
        if left:
            parts.append(f"{len(left)} state dirs, {sum(left.values()) / 1e6:.0f} MB")
        if project.staging():
            parts.append(f"{len(project.staging())} staging dirs")
        return "; ".join(parts) or "nothing"

    try:
        yield leaked
    finally:
        for pid in ours(pids, project.root):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def running(project: Project, *args: str, timeout_s: float = 180) -> Job | None:
    """The command, started, once its trial logs requests; None (the command killed) if it never does."""
    process = project.start(*args)
    if wait_for(lambda: project.running_trial() or process.poll() is not None, timeout_s) and process.poll() is None:
        return process
    process.kill()
    process.communicate()
    return None


def killed(project: Project, *args: str) -> bool:
    """The command, started and killed with SIGKILL once its trial logs requests; False if it never got that far."""
    process = running(project, *args)
    if process is None:
        return False
    process.kill()
    process.communicate()
    return True


def timed(project: Project, *args: str) -> tuple[subprocess.CompletedProcess[str], float]:
    """The command run to its end (up to 240 s), and the seconds it took."""
    started = time.monotonic()
    done = project.cli(*args, timeout=240)
    return done, time.monotonic() - started


def next_trial(project: Project) -> str:
    done, took = timed(project, "trial", "next")
    swept = " (swept leftovers)" if "leftover" in (done.stdout + done.stderr).lower() else ""
    return f"{'yes' if done.returncode == 0 else f'no (exit {done.returncode})'}, {took:.0f}s{swept}"


def signalled_trial(project: Project, name: str, deliver: Callable[[Job], None]) -> Row:
    row = Row(name)
    with watching(project) as leaked:
        process = running(project, "trial", "fault")
        if process is None:
            row.message = "the trial never started"
            return row
        deliver(process)
        try:
            stdout, stderr = process.communicate(timeout=180)
        except subprocess.TimeoutExpired:
            process.kill()
            stdout, stderr = process.communicate()
        row.exit = str(process.returncode)
        row.message = last_line(stderr) or last_line(stdout)
        landed = project.landed()
        row.lost = "nothing: the trial landed" if landed else "the whole trial"
        if landed:
            events = pl.read_parquet(landed[-1] / "runtime_events.parquet")
            crashes = events.filter(pl.col("kind") == "crash")["detail"].to_list()
            if crashes:
                row.lost += f"; {len(crashes)} crash events ({crashes[0][:60]})"
        row.leaked = leaked()
    row.next_ok = next_trial(project)
    return row


def sigterm_trial(project: Project) -> Row:
    return signalled_trial(project, "SIGTERM to `trial`", lambda p: p.send_signal(signal.SIGTERM))


def ctrl_c_trial(project: Project) -> Row:
    # A terminal's Ctrl-C signals the whole foreground process group.
    return signalled_trial(project, "Ctrl-C (SIGINT to the group) on `trial`",
                           lambda p: os.killpg(p.pid, signal.SIGINT))


def kill_trial(project: Project) -> Row:
    row = Row("kill -9 `trial`")
    with watching(project) as leaked:
        if not killed(project, "trial", "fault"):
            return row
        row.exit = "-9"
        row.lost = "the trial (killed): " + ("landed" if project.landed() else "not landed")
        row.leaked = leaked()
    row.next_ok = next_trial(project)
    if project.staging():
        row.next_ok += f"; {len(project.staging())} staging dirs remain"
    return row


def kill_run(project: Project) -> Row:
    row = Row("kill -9 `run` (Dagster)")
    with watching(project) as leaked:
        if not killed(project, "run", "fault"):
            row.message = "the run's trial never started"
            return row
        row.exit = "-9"
        row.leaked = leaked()
        row.lost = "nothing: the trial landed, interrupted" if project.landed() else "the whole trial"
    done, took = timed(project, "run", "next")
    row.message = next((line.strip()[:110] for line in (done.stdout + done.stderr).splitlines()
                        if "STARTED" in line or "slot" in line or "wait" in line), "")
    row.next_ok = ("yes" if done.returncode == 0 else "no (waited 240 s)" if done.returncode == -999
                   else f"no (exit {done.returncode})") + f", {took:.0f}s"
    return row


def two_trials(project: Project) -> Row:
    row = Row("two `trial`s at once")
    with watching(project) as leaked:
        first = running(project, "trial", "fault")
        if first is None:
            return row
        second = project.start("trial", "next")
        try:
            stdout, stderr = second.communicate(timeout=10)
            row.exit = str(second.returncode)
            row.message = last_line(stderr) or last_line(stdout)
        except subprocess.TimeoutExpired:
            row.exit = "still running after 10 s"
            row.message = "(waiting)"
            second.send_signal(signal.SIGINT)
            second.communicate(timeout=120)
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=180)
        windows = []
        for directory in project.landed():
            trial = json.loads((directory / "trial.json").read_text())
            windows.append((trial["started_at"], trial["ended_at"]))
        windows.sort()
        overlap = any(later[0] < earlier[1] for earlier, later in itertools.pairwise(windows))
        row.lost = f"{len(windows)} landed; " + ("they overlap: each measured the other" if overlap else "no overlap")
        row.leaked = leaked()
    row.next_ok = next_trial(project)
    return row


def upstream_trial_id() -> str:
    return TrialKey.parse(str(UPSTREAM_RUN)).trial_id


def upstream_root(parent: Path, name: str, breaking: Callable[[Path], None]) -> Path:
    root = parent / name
    relative = UPSTREAM_RUN.relative_to(UPSTREAM_RUN.parents[4])
    shutil.copytree(UPSTREAM_RUN, root / relative)
    breaking(root / relative)
    return root


def malformed_import(project: Project, parent: Path, name: str, breaking: Callable[[Path], None]) -> Row:
    row = Row(f"import: {name}")
    root = upstream_root(parent, name.replace(" ", "-"), breaking)
    with watching(project) as leaked:
        done = project.cli("import", str(root))
        refused = [line for line in done.stderr.splitlines() if line.startswith("refused ")]
        row.exit = str(done.returncode)
        row.message = (refused[0].split(": ", 1)[-1][:110] if refused else
                       last_line(done.stderr) or last_line(done.stdout))
        stored = list((project.store / "runs").glob("glutton_baseline_1_user/**/run_tag=*"))
        tables = sum(1 for table in RAW_TABLES if project.count(table, upstream_trial_id()))
        row.lost = ("refused; nothing stored" if not stored else
                    f"stored; {tables} of {len(RAW_TABLES)} raw tables hold rows")
        row.leaked = leaked()
        for path in stored:
            shutil.rmtree(path)
    rebuilt = project.cli("rebuild")
    row.next_ok = "rebuild ok" if rebuilt.returncode == 0 else f"rebuild exit {rebuilt.returncode}: " \
        f"{last_line(rebuilt.stderr)}"
    return row


def imports(project: Project, parent: Path) -> list[Row]:
    def empty_files(run: Path) -> None:
        for path in run.iterdir():
            path.write_text("")

    def broken_summary(run: Path) -> None:
        (run / "server_summary.json").write_text('{"keys": [1, 2,')

    def bad_jsonl(run: Path) -> None:
        with (run / "stats.jsonl").open("a") as handle:
            handle.write("{not json\n")

    return [malformed_import(project, parent, "empty files", empty_files),
            malformed_import(project, parent, "broken server_summary.json", broken_summary),
            malformed_import(project, parent, "bad stats.jsonl line", bad_jsonl)]


def rebuild_during_import(project: Project, parent: Path) -> Row:
    row = Row("import while `rebuild` runs")
    store, rng = RunStore(project.store), random.Random(7)
    for index in range(150):
        write_trial(store, index, 10_000, rng)
    # No warehouse yet (a first rebuild, or one after deleting the file): the case where a load used to be lost.
    root = upstream_root(parent, "concurrent", lambda run: None)
    with watching(project) as leaked:
        rebuilding = project.start("rebuild")
        # The import starts once the rebuild has listed the store (its new file exists) or, at worst, a minute in.
        wait_for(lambda: any(project.root.glob(".warehouse.duckdb.*")), 60, 0.01)
        imported = project.cli("import", str(root))
        rebuilding.communicate(timeout=300)
        row.exit = f"rebuild {rebuilding.returncode}, import {imported.returncode}"
        row.message = last_line(imported.stderr)
        samples = project.count("locust_stats", upstream_trial_id())
        row.lost = "nothing: the imported trial is in the warehouse" if samples else \
            "the imported trial is in the store with 0 rows in the warehouse"
        row.leaked = leaked()
    row.next_ok = "yes" if project.cli("rebuild").returncode == 0 else "no"
    return row


def sql_escapes(project: Project, parent: Path) -> Row:
    row = Row("`sql` reaching outside the warehouse")
    if not (project.root / "warehouse.duckdb").exists():
        project.cli("rebuild")
    refused, escaped = [], []
    for name, statement in SQL_ESCAPES.items():
        done = project.cli("sql", statement.format(tmp=parent))
        (refused if done.returncode != 0 else escaped).append(name)
    row.exit = f"{len(refused)} of {len(SQL_ESCAPES)} refused"
    row.lost = "nothing"
    row.leaked = ("reached: " + ", ".join(escaped)) if escaped else "nothing"
    written = [path.name for path in parent.glob("copied.csv")] + [path.name for path in parent.glob("exported")]
    if written:
        row.leaked += f"; wrote {', '.join(written)}"
    row.next_ok = "yes" if project.cli("sql", "SELECT count(*) FROM trials").returncode == 0 else "no"
    return row


def hostile_suites(project: Project) -> list[Row]:
    rows = []
    cases = (("suite: missing script", HOSTILE_SUITE.format(script="no-such-script"), ("trial", "hostile")),
             ("suite: script ../../../etc/passwd", HOSTILE_SUITE.format(script="../../../etc/passwd"),
              ("trial", "hostile")),
             ("suite: YAML bomb in metadata", YAML_BOMB, ("trial", "bomb")),
             ("`trial --duration 20x`", SUITES, ("trial", "next", "--duration", "20x")))
    for index, (name, suites, args) in enumerate(cases):
        hostile = Project.create(project.root.parent, f"hostile-{index}")
        (hostile.root / "suites.yaml").write_text(suites)
        started = time.monotonic()
        done = hostile.cli(*args, timeout=120)
        rows.append(Row(name, str(done.returncode), last_line(done.stderr) or last_line(done.stdout), "nothing",
                        "", "", time.monotonic() - started))
    return rows


@contextlib.contextmanager
def tmpfs(path: Path, size: str) -> Iterator[None]:
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], check=True)
    try:
        yield
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> None:
    with contextlib.suppress(OSError), (directory / "filler").open("wb") as handle:
        while True:
            handle.write(b"\0" * (1 << 20))
            handle.flush()


def full_disk(project: Project) -> list[Row]:
    if os.geteuid() != 0:
        return [Row("full disk", message="not run: mounting a tmpfs needs root")]
    rows = []
    with tmpfs(project.store, "4m"):
        started = time.monotonic()
        done = project.cli("trial", "next", timeout=240)
        rows.append(Row("store on a 4 MB disk", str(done.returncode), last_line(done.stderr) or last_line(done.stdout),
                        "nothing" if not project.landed() else "a trial landed", "",
                        "", time.monotonic() - started))
        rows[-1].leaked = f"{len(project.staging())} staging dirs"
    with tmpfs(project.store, "512m"), watching(project) as leaked:
        row = Row("disk fills during `trial`")
        process = running(project, "trial", "fault")
        if process is not None:
            filled = time.monotonic()
            fill(project.store)
            try:
                stdout, stderr = process.communicate(timeout=240)
            except subprocess.TimeoutExpired:
                process.kill()
                stdout, stderr = process.communicate()
            row.exit = str(process.returncode)
            row.message = last_line(stderr) or last_line(stdout)
            row.seconds = time.monotonic() - filled
            traceback = "Traceback" in stderr
            row.lost = ("landed" if project.landed() else "nothing landed") + ("; a traceback" if traceback else "")
            (project.store / "filler").unlink()
            row.leaked = leaked()
            row.next_ok = next_trial(project)
        rows.append(row)
    return rows


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def router_bodies(project: Project) -> list[Row]:
    control_port, router_port = free_port(), free_port()
    runtime = subprocess.Popen([CLI, "runtime", "--workers", "1", "--actors-per-worker", "1", "--control-port",
                                str(control_port), "--router-port", str(router_port)], env=project.env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rows = []
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{control_port}")
        grpc.channel_ready_future(channel).result(timeout=60)
        control = ateapi_pb2_grpc.ControlStub(channel)
        control.CreateAtespace(pb.CreateAtespaceRequest(atespace=pb.Atespace(
            metadata=pb.ResourceMetadata(name="benchmark"))))
        control.CreateActor(pb.CreateActorRequest(actor=pb.Actor(
            metadata=pb.ResourceMetadata(atespace="benchmark", name="big"),
            actor_template=pb.ObjectRef(atespace="benchmark-workloads", name="glutton"))))
        base = rss_mb(runtime.pid)
        peak = [base]
        sampling = threading.Event()

        def sample() -> None:
            while not sampling.is_set():
                peak[0] = max(peak[0], rss_mb(runtime.pid))
                time.sleep(0.05)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        size, sent, status = 1536 << 20, 0, "connection closed"
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", router_port), timeout=120) as sock:
            sock.sendall(f"POST /writedisk HTTP/1.1\r\nHost: x\r\nate-target-actor: benchmark/big\r\n"
                         f"Content-Type: application/x-protobuf\r\nContent-Length: {size}\r\n\r\n".encode())
            chunk = b"\0" * (1 << 20)
            with contextlib.suppress(OSError):
                while sent < size:
                    sock.sendall(chunk)
                    sent += len(chunk)
            with contextlib.suppress(OSError):
                status = sock.recv(200).decode(errors="replace").split("\r\n")[0] or status
        sampling.set()
        sampler.join()
        started_over = time.monotonic()
        with socket.create_connection(("127.0.0.1", router_port), timeout=120) as sock:
            sock.sendall(b"POST /writedisk HTTP/1.1\r\nHost: x\r\nate-target-actor: benchmark/big\r\n"
                         b"Content-Length: 3221225472\r\n\r\n" + b"\0" * (1 << 20))
            try:
                over = sock.recv(200).decode(errors="replace").split("\r\n")[0] or "connection closed"
            except TimeoutError:
                over = "no answer in 120 s"
        rows.append(Row("3 GiB declared body (over the cap)", over, "", "", "", "", time.monotonic() - started_over))
        rows.append(Row("1.5 GB request body to the router", status, f"{sent >> 20} MiB sent before the answer",
                        "", f"runtime RSS +{peak[0] - base:.0f} MB at peak", "", time.monotonic() - started))
        started = time.monotonic()
        with socket.create_connection(("127.0.0.1", router_port), timeout=200) as sock:
            sock.sendall(b"POST /ping HTTP/1.1\r\nHost: x\r\nate-target-actor: benchmark/big\r\n"
                         b"Content-Length: 1000\r\n\r\n0123456789")
            try:
                answer = sock.recv(200).decode(errors="replace").split("\r\n")[0] or "closed"
            except TimeoutError:
                answer = "no answer in 200 s"
        rows.append(Row("a body that never arrives", answer, "", "", "", "", time.monotonic() - started))
        connection = http.client.HTTPConnection("127.0.0.1", router_port, timeout=60)
        connection.request("POST", "/ping", body=b"", headers={"ate-target-actor": "benchmark/big"})
        ok = connection.getresponse().status
        for row in rows:
            row.next_ok = f"ping after: {ok}"
    finally:
        runtime.send_signal(signal.SIGTERM)
        _, stderr = runtime.communicate(timeout=120)
    tracebacks = stderr.count("Traceback")
    for row in rows:
        row.message += f"; {tracebacks} tracebacks in the runtime's log" if tracebacks else ""
    return rows


# The statuses of a run that has not ended, queued included.
OPEN_RUNS = ("QUEUED", "NOT_STARTED", "STARTING", "STARTED", "CANCELING")
WAREHOUSE_TABLES = (*RAW_TABLES, "trials", "wake_latency_distribution", "density_frontiers")
LOCATION = {"repositoryLocationName": "substrate_assets", "repositoryName": "__repository__", "jobName": "run_trial"}


class Tracker:
    """Every process of the scenario seen while it runs (sampled), so that what its processes own is told apart from
    what other work on the machine owns."""

    def __init__(self, project: Project) -> None:
        self.project, self.before = project, all_pids()
        self.seen: set[int] = set()
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._done.is_set():
            self.seen |= set(ours(self.before, self.project.root))
            self._done.wait(0.3)

    def alive(self) -> dict[int, str]:
        return ours(self.before, self.project.root)

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def owner_pid(directory: Path) -> int | None:
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        return int(json.loads((directory / "owner.json").read_text())["pid"])
    return None


def shm_entries() -> set[Path]:
    return set(Path("/dev/shm").glob("substrate-*"))


@dataclass
class Baseline:
    """What the scenario's project held before its fault."""

    tmp: set[Path]
    shm: set[Path]
    counts: dict[str, int]


def table_counts(project: Project) -> dict[str, int] | None:
    """Every warehouse table's row count, in one read-only query; None when the warehouse does not answer it."""
    query = "SELECT " + ", ".join(f"(SELECT count(*) FROM {table}) AS {table}" for table in WAREHOUSE_TABLES)
    done = project.cli("sql", query, "--format", "json")
    return json.loads(done.stdout)[0] if done.returncode == 0 else None


def seeded_warehouse(project: Project) -> Baseline:
    """A warehouse holding two synthetic trials (rebuilt from the store), and what the project holds now."""
    store = RunStore(project.store)
    rng = np.random.default_rng(7)
    for index in range(2):
        write_trial(store, index, 2_000, rng)
    project.cli("rebuild")
    return Baseline(set(Path(project.env["TMPDIR"]).iterdir()), shm_entries(), table_counts(project) or {})


def instance_of(project: Project) -> dg.DagsterInstance:
    import dagster as dg  # only the scenarios that look at runs pay for importing Dagster

    return dg.DagsterInstance.from_config(str(project.root / ".dagster_home"))


def open_runs(project: Project) -> list[str]:
    with instance_of(project) as instance:
        return [f"{run.run_id[:8]} {run.status.value}" for run in instance.get_runs()
                if run.status.value in OPEN_RUNS]


def run_status(project: Project, run_id: str) -> str:
    with instance_of(project) as instance:
        run = instance.get_run_by_id(run_id)
        return run.status.value if run else "missing"


def failure_of(project: Project, run_id: str) -> str:
    """Who failed the run and why, from its failure message (ours names who found its process gone)."""
    with instance_of(project) as instance:
        for entry in instance.all_logs(run_id):
            event = entry.dagster_event
            if event and event.is_run_failure:
                message = event.message or ""
                if "found by " in message:
                    return "failed, found dead by " + message.split("found by ", 1)[1].split(", which")[0]
                return f"failed: {message[:90]}"
    return run_status(project, run_id)


def trials_loaded(project: Project, baseline: Baseline, timeout_s: float) -> bool:
    """The warehouse holds more trials than before the scenario (warehouse_refresh loaded the new one)."""
    return wait_for(lambda: (table_counts(project) or {}).get("trials", 0) > baseline.counts.get("trials", 0),
                    timeout_s, 3.0)


def leftover_scan(project: Project, tracker: Tracker, baseline: Baseline) -> str:
    """What the scenario left: its processes, its TMPDIR's new entries, /dev/shm entries its processes own, its
    project's staging dirs, runs not finished, and the warehouse's tables against the baseline."""
    wait_for(lambda: not tracker.alive(), 60, 0.2)
    tracker.stop()
    parts = []
    alive = tracker.alive()
    if alive:
        parts.append(f"{len(alive)} processes ({'; '.join(sorted(set(alive.values())))[:100]})")
    tmp = sorted(path.name for path in set(Path(project.env["TMPDIR"]).iterdir()) - baseline.tmp)
    if tmp:
        parts.append(f"TMPDIR: {', '.join(tmp)[:100]}")
    shm = [path.name for path in shm_entries() - baseline.shm if owner_pid(path) in tracker.seen]
    if shm:
        parts.append(f"/dev/shm: {', '.join(shm)}")
    if project.staging():
        parts.append(f"{len(project.staging())} staging dirs")
    stuck = open_runs(project)
    if stuck:
        parts.append(f"runs not finished: {', '.join(stuck)}")
    counts = table_counts(project)
    if counts is None:
        parts.append("warehouse unreadable")
    else:
        shrunk = [table for table, count in baseline.counts.items() if counts.get(table, 0) < count]
        if shrunk:
            parts.append(f"tables shrunk: {', '.join(shrunk)}")
        parts.append(f"warehouse: {len(counts)} tables readable, trials {baseline.counts.get('trials')}→"
                     f"{counts['trials']}")
    return "; ".join(parts) if len(parts) > 1 or not parts[0].startswith("warehouse") else f"nothing; {parts[0]}"


@dataclass
class UI:
    """``substrate-bench ui`` of the scenario, on a port of its own."""

    job: Job
    port: int

    @classmethod
    def start(cls, project: Project) -> UI:
        port = free_port()
        job = project.start("ui", "--port", str(port))
        if not wait_for(lambda: answers(port) or job.poll() is not None, 300, 0.5) or job.poll() is not None:
            raise RuntimeError(f"the UI never answered: {job.communicate()[1][-500:]}")
        return cls(job, port)

    def dagster_dev(self) -> psutil.Process:
        return psutil.Process(self.job.pid).children()[0]

    def launch(self, suite: str) -> str:
        answer = graphql(self.port, LAUNCH, {"params": {"selector": LOCATION, "runConfigData": {
            "ops": {"trial": {"config": {"suite": suite}}}}}})["data"]["launchRun"]
        if answer["__typename"] != "LaunchRunSuccess":
            raise RuntimeError(f"launch refused: {answer}")
        return answer["run"]["runId"]

    def stop(self) -> None:
        if self.job.poll() is None:
            self.job.send_signal(signal.SIGTERM)
        self.job.communicate(timeout=120)


def ended(project: Project, run_id: str, timeout_s: float) -> str:
    wait_for(lambda: run_status(project, run_id) not in OPEN_RUNS, timeout_s, 1.0)
    return run_status(project, run_id)


def settled(project: Project, timeout_s: float = 300) -> bool:
    """Every run has ended (the trial's load, models and judgement, queued by warehouse_refresh, included)."""
    return wait_for(lambda: not open_runs(project), timeout_s, 2.0)


def next_ui_trial(project: Project, ui: UI, baseline: Baseline) -> str:
    """A trial launched from the UI, to its end and its load into the warehouse."""
    started = time.monotonic()
    run_id = ui.launch("next")
    status = ended(project, run_id, 300)
    loaded = status == "SUCCESS" and trials_loaded(project, baseline, 300)
    settled(project)
    return (f"{'yes' if status == 'SUCCESS' else 'no'} ({status}{', loaded' if loaded else ', not loaded'}), "
            f"{time.monotonic() - started:.0f}s")


def new_trials(project: Project, before: set[Path]) -> str:
    landed = [path for path in project.landed() if path not in before]
    if not landed:
        return "trial not landed"
    interrupted = json.loads((landed[-1] / "trial.json").read_text()).get("interrupted")
    return "trial landed" + (", interrupted" if interrupted else "")


def trial_measuring_from_the_ui(project: Project, ui: UI, suite: str = "fault") -> str | None:
    run_id = ui.launch(suite)
    return run_id if wait_for(project.running_trial, 300, 0.5) else None


def kill_ui(project: Project) -> Row:
    row = Row("kill -9 `dagster dev` (its process group) during a UI trial; `ui` again, a new UI trial")
    baseline = seeded_warehouse(project)
    landed = set(project.landed())
    tracker = Tracker(project)
    ui = UI.start(project)
    run_id = trial_measuring_from_the_ui(project, ui)
    if run_id is None:
        ui.stop()
        row.message = "the UI's trial never started"
        return row
    os.killpg(ui.dagster_dev().pid, signal.SIGKILL)
    ui.job.communicate(timeout=60)
    row.exit = "-9"
    stuck = run_status(project, run_id)
    wait_for(lambda: not tracker.alive(), 60, 0.2)
    row.lost = f"{new_trials(project, landed)}; its run left {stuck}"
    ui = UI.start(project)
    row.next_ok = next_ui_trial(project, ui, baseline)
    row.message = f"old run {failure_of(project, run_id)}"
    ui.stop()
    row.leaked = leftover_scan(project, tracker, baseline)
    return row


def load_worker(project: Project, after_s: float) -> tuple[str, int] | None:
    """The run loading a trial into the warehouse, once its worker has recorded itself and begun a step: its id and
    its worker's pid."""
    import dagster as dg

    found: list[tuple[str, int]] = []

    def loading() -> bool:
        with instance_of(project) as instance:
            for run in instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])):
                selection = {key.to_user_string() for key in run.asset_selection or []}
                pid = run.tags.get("substrate-bench/pid")
                if "request_samples" in selection and pid and any(
                        entry.dagster_event and entry.dagster_event.event_type_value == "STEP_START"
                        for entry in instance.all_logs(run.run_id)):
                    found.append((run.run_id, int(pid)))
                    return True
        return False

    return found[0] if wait_for(loading, after_s, 0.2) else None


def kill_load_worker(project: Project) -> Row:
    row = Row("kill -9 the run worker loading a UI trial into the warehouse; a new UI trial")
    baseline = seeded_warehouse(project)
    landed = set(project.landed())
    tracker = Tracker(project)
    ui = UI.start(project)
    ui.launch("next")
    loading = load_worker(project, 400)
    if loading is None:
        ui.stop()
        row.message = "no load run was seen"
        return row
    run_id, pid = loading
    os.kill(pid, signal.SIGKILL)
    killed_at = time.monotonic()
    row.exit = "-9"
    status = ended(project, run_id, 180)
    row.message = f"load run {failure_of(project, run_id)} {time.monotonic() - killed_at:.0f}s after the kill"
    row.lost = f"its load ({status}); {new_trials(project, landed)} in the store"
    row.next_ok = next_ui_trial(project, ui, baseline)
    ui.stop()
    row.leaked = leftover_scan(project, tracker, baseline)
    return row


def kill_all(project: Project) -> Row:
    row = Row("SIGKILL to every process of the scenario at once (as a reboot) during a UI trial; `run quick-smoke`")
    baseline = seeded_warehouse(project)
    landed = set(project.landed())
    tracker = Tracker(project)
    ui = UI.start(project)
    run_id = trial_measuring_from_the_ui(project, ui)
    if run_id is None:
        ui.stop()
        row.message = "the UI's trial never started"
        return row
    # Frozen first, so that no process sees another die (a parent-death signal, a stopped child) before its own end.
    victims = [psutil.Process(pid) for pid in tracker.alive()]
    for signum in (signal.SIGSTOP, signal.SIGKILL):
        for victim in victims:
            with contextlib.suppress(psutil.NoSuchProcess):
                victim.send_signal(signum)
    ui.job.communicate(timeout=60)
    row.exit = f"-9 ({len(victims)} processes)"
    row.lost = f"{new_trials(project, landed)}; its run left {run_status(project, run_id)}"
    started = time.monotonic()
    done = project.cli("run", "quick-smoke", "--repeat", "1", timeout=900)
    row.next_ok = f"{'yes' if done.returncode == 0 else f'no (exit {done.returncode})'}, " \
        f"{time.monotonic() - started:.0f}s"
    row.message = f"old run {failure_of(project, run_id)}"
    row.leaked = leftover_scan(project, tracker, baseline)
    return row


SCENARIOS: dict[str, Callable[[Project, Path], list[Row]]] = {
    "kill-run": lambda project, parent: [kill_run(project)],
    "sigterm-trial": lambda project, parent: [sigterm_trial(project)],
    "ctrl-c-trial": lambda project, parent: [ctrl_c_trial(project)],
    "kill-trial": lambda project, parent: [kill_trial(project)],
    "two-trials": lambda project, parent: [two_trials(project)],
    "imports": imports,
    "rebuild-import": lambda project, parent: [rebuild_during_import(project, parent)],
    "full-disk": lambda project, parent: full_disk(project),
    "router": lambda project, parent: router_bodies(project),
    "sql": lambda project, parent: [sql_escapes(project, parent)],
    "hostile-suites": lambda project, parent: hostile_suites(project),
    "kill-ui": lambda project, parent: [kill_ui(project)],
    "kill-load-worker": lambda project, parent: [kill_load_worker(project)],
    "kill-all": lambda project, parent: [kill_all(project)],
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated scenario names: " + ", ".join(SCENARIOS))
    args = parser.parse_args()
    chosen = args.only.split(",") if args.only else list(SCENARIOS)
    print("| scenario | exit | message | lost | leaked | next run ok | s |")
    print("|---|---|---|---|---|---|---|")
    for name in chosen:
        with tempfile.TemporaryDirectory(prefix="substrate-faults-") as scratch:
            parent = Path(scratch)
            project = Project.create(parent, "project")
            started = time.monotonic()
            for row in SCENARIOS[name](project, parent):
                seconds = row.seconds or time.monotonic() - started
                cells = [row.scenario, row.exit, row.message, row.lost, row.leaked, row.next_ok, f"{seconds:.0f}"]
                print("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |", flush=True)


if __name__ == "__main__":
    main()
