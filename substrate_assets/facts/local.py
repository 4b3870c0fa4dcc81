"""Cluster facts of this machine, for trials on the embedded runtime.

The reference's keys, read from this host: one node; its allocatable CPUs
(the affinity mask, capped by a cgroup CPU quota) and RAM (MemTotal, capped by
a cgroup memory limit, in GiB, 2 dp); the CPU model as ``machine_type``; the
runtime's worker count as ``worker_pod_count`` and actors per worker as
``worker_actor_capacity``; ``sandbox_class`` ``process``. No kubelet runs
here, so ``gke_version`` is null; workers have no memory limit of their own,
so ``worker_memory_limit_gb`` is null, as upstream reports an unlimited worker.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

GiB = 1 << 30


def _cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str | None:
    try:
        for line in cpuinfo.read_text().splitlines():
            if line.lower().startswith(("model name", "hardware", "cpu model")):
                return line.split(":", 1)[1].strip() or None
    except OSError:
        return None
    return None


def _cgroup_cpus(root: Path = Path("/sys/fs/cgroup")) -> float | None:
    try:
        quota, period = (root / "cpu.max").read_text().split()
    except (OSError, ValueError):
        return None
    return None if quota == "max" else int(quota) / int(period)


def _cgroup_memory(root: Path = Path("/sys/fs/cgroup")) -> int | None:
    try:
        text = (root / "memory.max").read_text().strip()
    except OSError:
        return None
    return None if text == "max" else int(text)


def _mem_total(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        for line in meminfo.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def local_cluster_facts(workers: int, actors_per_worker: int) -> dict[str, Any]:
    """The reference's nine facts for this machine; None where nothing was measured."""
    cpus: float | None = float(len(os.sched_getaffinity(0))) if hasattr(os, "sched_getaffinity") else None
    quota = _cgroup_cpus()
    if quota is not None:
        cpus = min(cpus, quota) if cpus is not None else quota
    memory = _mem_total()
    limit = _cgroup_memory()
    if limit is not None:
        memory = min(memory, limit) if memory is not None else limit
    return {
        "machine_type": _cpu_model(),
        "node_count": 1,
        "allocatable_cores": None if cpus is None else round(cpus, 2),
        "allocatable_ram_gb": None if memory is None else round(memory / GiB, 2),
        "worker_pod_count": workers,
        "gke_version": None,
        "worker_actor_capacity": str(actors_per_worker),
        "worker_memory_limit_gb": None,
        "sandbox_class": "process",
    }
