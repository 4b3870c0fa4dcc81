"""Script-level rules, applied after decoding, in upstream's order; every violation is reported."""

from __future__ import annotations

from substrate_assets.workload.budget import budgets
from substrate_assets.workload.errors import Position, ScriptProblem
from substrate_assets.workload.model import OpKind, Script, script_name_problem
from substrate_assets.workload.quantity import format_size
from substrate_assets.workload.text import quote

_VERB = {
    OpKind.CHURN_RAM: "churn",
    OpKind.WALK_RAM: "walk",
    OpKind.READ_DISK_DIGEST: "read",
    OpKind.READ_DISK_DATA: "read",
}


def validate(script: Script) -> list[ScriptProblem]:
    """Every broken script rule, in the order upstream checks them; empty when the script is usable."""
    problems: list[ScriptProblem] = []
    at = script.field_positions

    def top(message: str, field: str) -> None:
        problems.append(ScriptProblem(message, position=at.get(field, script.position)))

    if (name_problem := script_name_problem(script.name)) is not None:
        top(name_problem, "name")
    if not script.steps:
        top(f"script {quote(script.name)} has no steps", "steps")

    seen: dict[str, int] = {}
    ram_filled: set[str] = set()
    disk_written: set[str] = set()
    for number, step in enumerate(script.steps, start=1):
        label = step.name or None

        def step_problem(message: str, position: Position | None, *, _n: int = number,
                         _label: str | None = label) -> None:
            problems.append(ScriptProblem(message, position=position, step=_label, step_number=_n))

        if not step.name or not step.agent:
            missing = " and ".join(f for f, v in (("name", step.name), ("agent", step.agent)) if not v)
            step_problem(f"name and agent must be set ({missing} missing)", step.position)
        if step.name:
            if step.name in seen:
                step_problem(f"duplicate step name (also step {seen[step.name]})",
                             step.field_positions.get("name", step.position))
            else:
                seen[step.name] = number
        if step.think_ns <= 0:
            step_problem("think time must be positive", step.field_positions.get("think", step.position))
        if not step.ops:
            step_problem("has no ops", step.field_positions.get("ops", step.position))
        for index, op in enumerate(step.ops):
            used_too_soon = None
            if op.kind is OpKind.FILL_RAM:
                ram_filled.add(op.key or "")
            elif op.kind.writes_disk:
                disk_written.add(op.key or "")
            elif op.kind.needs_filled_ram and op.key not in ram_filled:
                used_too_soon = f"RAM array {quote(op.key or '')} before any fill_ram"
            elif op.kind.reads_disk and op.key not in disk_written:
                used_too_soon = f"{quote(op.key or '')} before any ingest or write_disk"
            if used_too_soon is not None:
                problems.append(ScriptProblem(
                    f"{_VERB[op.kind]} of {used_too_soon}", position=op.argument_positions.get("key", op.position),
                    step=label, step_number=number, op_index=index, op_kind=op.kind.value))

    declared = budgets(script.steps)
    shown = f"declared RAM {format_size(declared.ram)} + disk {format_size(declared.disk)}"
    if script.min_actor_memory <= 0:
        top(f"script {quote(script.name)}: min_actor_memory is required ({shown})", "min_actor_memory")
    elif script.min_actor_memory < declared.total:
        top(f"script {quote(script.name)}: min_actor_memory {format_size(script.min_actor_memory)} "
            f"is below the {shown}", "min_actor_memory")
    return problems
