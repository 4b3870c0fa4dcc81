"""Samples a local trial takes every second: the worker pool by state, the node's pressure stall counters, and the
CPU the driver and the machine have spent."""

from __future__ import annotations

import time
from pathlib import Path

import polars as pl
import psutil

from substrate_assets.results.atomic import write_parquet
from substrate_assets.results.runtime_samples import SAMPLES_SCHEMA, psi_total_column
from substrate_assets.results.server_summary import PSI_RESOURCES


def read_psi_some_total(resource: str, root: Path = Path("/proc/pressure")) -> int | None:
    """Cumulative microseconds some task stalled on ``resource``; None where the kernel has no PSI."""
    try:
        text = (root / resource).read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("some "):
            for field in line.split()[1:]:
                name, _, value = field.partition("=")
                if name == "total":
                    return int(value)
    return None


def process_tree_cpu_s(process: psutil.Process) -> float | None:
    """CPU seconds (user + system) ``process`` and its live children have spent, and the children it has reaped;
    None once it is gone."""
    try:
        with process.oneshot():
            times = process.cpu_times()
            children = process.children(recursive=True)
        total = float(times.user + times.system + times.children_user + times.children_system)
    except psutil.Error:
        return None
    for child in children:
        try:
            child_times = child.cpu_times()
        except psutil.Error:  # it ended between the listing and the read: its parent counts it once reaped
            continue
        total += child_times.user + child_times.system
    return total


def machine_cpu_s() -> tuple[float, float, float | None]:
    """CPU seconds every core of the machine has spent busy, in all, and stolen by the hypervisor, since boot
    (/proc/stat; steal is None where the kernel does not count it)."""
    times = psutil.cpu_times()
    # guest time is already in user time; idle and iowait are a core with nothing to run.
    total = sum(getattr(times, name, 0.0) for name in
                ("user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"))
    return total - times.idle - getattr(times, "iowait", 0.0), total, getattr(times, "steal", None)


class Sampler:
    """The rows of runtime_samples.parquet, one per call to :meth:`take`; the driver's CPU once :meth:`watch_driver`
    names its process. Given ``spill_dir``, each ``spill_every`` rows go to a Parquet part there and leave memory:
    a trial of hours takes a row a second, and holds at most ``spill_every`` of them."""

    def __init__(self, spill_dir: Path | None = None, spill_every: int = 600) -> None:
        self.rows: list[dict[str, object]] = []
        self.driver: psutil.Process | None = None
        # The process the trial runs in: its tree is the trial's CPU (runtime, actor hosts, Locust); the rest of
        # the machine's busy CPU is other work's.
        self.trial = psutil.Process()
        self.spill_dir = spill_dir
        self.spill_every = spill_every
        self.parts: list[Path] = []

    def watch_driver(self, pid: int) -> None:
        try:
            self.driver = psutil.Process(pid)
        except psutil.Error:  # gone already: its CPU is not measured
            self.driver = None

    def take(self, state: dict[str, object], users: int | None) -> None:
        workers = state.get("workers", {})
        assert isinstance(workers, dict)
        self.rows.append({
            "ts": time.time(), "idle_workers": workers.get("idle"), "partial_workers": workers.get("partial"),
            "at_capacity_workers": workers.get("at_capacity"), "running_actors": state.get("running_actors"),
            "parked_requests": state.get("parked"), "users": users,
            **{psi_total_column(resource): read_psi_some_total(resource) for _, resource in PSI_RESOURCES},
            **self._cpu(),
        })
        if self.spill_dir is not None and len(self.rows) >= self.spill_every:
            self._spill(self.spill_dir)

    def _spill(self, directory: Path) -> None:
        directory.mkdir(parents=True, exist_ok=True)
        part = write_parquet(directory / f"samples-{len(self.parts):06d}.parquet",
                             pl.DataFrame(self.rows, schema=SAMPLES_SCHEMA, orient="row"))
        self.parts.append(part)
        self.rows = []

    def _cpu(self) -> dict[str, float | None]:
        busy, total, steal = machine_cpu_s()
        driver = None if self.driver is None else process_tree_cpu_s(self.driver)
        return {"driver_cpu_s": driver, "machine_busy_cpu_s": busy, "machine_cpu_s": total,
                "trial_cpu_s": process_tree_cpu_s(self.trial), "machine_steal_cpu_s": steal}

    def frame(self) -> pl.DataFrame:
        held = pl.DataFrame(self.rows, schema=SAMPLES_SCHEMA, orient="row")
        return pl.concat([*(pl.read_parquet(part) for part in self.parts), held]) if self.parts else held
