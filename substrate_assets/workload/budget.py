"""What a script declares it holds in the actor: resident RAM and files in the (tmpfs) data dir."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from substrate_assets.workload.model import Op, OpKind, Step


@dataclass(frozen=True)
class Budget:
    """Declared bytes. RAM: Σ largest ``fill_ram`` per key. Disk: Σ largest ``ingest``/``write_disk`` per key.

    Both count against the actor's memory limit because the data dir is tmpfs.
    Churns, walks and reads do not count. The budget does not model the
    guest's real peak (kernel, runtime, allocator).
    """

    ram: int
    disk: int

    @property
    def total(self) -> int:
        return self.ram + self.disk


def _largest_per_key(ops: Iterable[Op], kinds: tuple[OpKind, ...]) -> dict[str, int]:
    largest: dict[str, int] = {}
    for op in ops:
        if op.kind in kinds and op.key is not None and op.size is not None:
            largest[op.key] = max(largest.get(op.key, 0), op.size)
    return largest


def budgets(steps: Iterable[Step]) -> Budget:
    ops = [op for step in steps for op in step.ops]
    ram = _largest_per_key(ops, (OpKind.FILL_RAM,))
    disk = _largest_per_key(ops, (OpKind.INGEST, OpKind.WRITE_DISK))
    return Budget(sum(ram.values()), sum(disk.values()))


def ram_by_key(steps: Iterable[Step]) -> dict[str, int]:
    return _largest_per_key((op for step in steps for op in step.ops), (OpKind.FILL_RAM,))


def disk_by_key(steps: Iterable[Step]) -> dict[str, int]:
    return _largest_per_key((op for step in steps for op in step.ops), (OpKind.INGEST, OpKind.WRITE_DISK))
