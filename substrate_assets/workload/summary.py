"""Figures a person checks first about a script: shape, think time, declared memory, fingerprint."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from substrate_assets.workload.budget import Budget, budgets
from substrate_assets.workload.duration import format_duration
from substrate_assets.workload.model import Op, OpKind, Script
from substrate_assets.workload.quantity import format_size


@dataclass(frozen=True)
class ScriptSummary:
    name: str
    steps: int
    ops: int
    think_per_lap_ns: int
    budget: Budget
    min_actor_memory: int
    ops_by_kind: dict[str, int]
    sha256: str | None

    @property
    def think_per_lap(self) -> str:
        """Seconds, before think scale and jitter (``69s``, ``3.5s``)."""
        return f"{self.think_per_lap_ns / 1e9:g}s"

    @property
    def declared_ram(self) -> str:
        return format_size(self.budget.ram)

    @property
    def declared_disk(self) -> str:
        return format_size(self.budget.disk)

    @property
    def floor(self) -> str:
        return format_size(self.min_actor_memory)

    @property
    def sha256_prefix(self) -> str | None:
        return self.sha256[:12] if self.sha256 else None


def summarize(script: Script, sha256: str | None = None) -> ScriptSummary:
    counts = Counter(op.kind.value for op in script.ops)
    return ScriptSummary(
        name=script.name,
        steps=len(script.steps),
        ops=len(script.ops),
        think_per_lap_ns=script.think_per_lap_ns,
        budget=budgets(script.steps),
        min_actor_memory=script.min_actor_memory,
        ops_by_kind={kind.value: counts[kind.value] for kind in OpKind if counts[kind.value]},
        sha256=sha256,
    )


def describe_op(op: Op) -> str:
    """One op the way the step table prints it: ``fill_ram agent_context 32Mi``, ``burn_cpu 500ms ×2``."""
    if op.kind.takes_millis:
        return f"{op.kind.value} {format_duration((op.millis or 0) * 1_000_000)} ×{op.parallel}"
    parts = [op.kind.value]
    if op.key is not None:
        parts.append(op.key)
    if op.size is not None:
        parts.append(format_size(op.size))
    return " ".join(parts)


def step_table_markdown(script: Script) -> str:
    """The script as a markdown table: number, step, think, ops."""
    lines = ["| # | step | think | ops |", "|---|---|---|---|"]
    for number, step in enumerate(script.steps, start=1):
        ops = "; ".join(describe_op(op) for op in step.ops).replace("|", "\\|")
        name = step.name.replace("|", "\\|")
        lines.append(f"| {number} | `{name}` | {format_duration(step.think_ns)} | {ops} |")
    return "\n".join(lines)
