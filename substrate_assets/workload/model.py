"""The script model: a named loop of steps, each a think time followed by glutton ops."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from enum import StrEnum

from substrate_assets.workload.errors import Position
from substrate_assets.workload.text import quote

SCRIPT_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9-]*$")
KEY_PATTERN = re.compile(r"^[a-zA-Z0-9_-]+$")
# Kubernetes object names (a namespace, a service account) and the runtime's actor and atespace names: one RFC 1123
# label. Here, at the bottom of the layers, so that suites and the runtime check names by the same rule.
RFC1123_LABEL = re.compile(r"[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?")
# A script name is its file name in scripts/ (and a Kubernetes ConfigMap key on a cluster): past this length no
# file system would take it.
SCRIPT_NAME_MAX = 200


def script_name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a script, or None. Names are looked up as ``scripts/<name>.yaml``, so, as op keys
    inside an actor's data directory, they must not reach outside the directory that holds them."""
    if not SCRIPT_NAME_PATTERN.fullmatch(name):
        return f"script name {quote(name)} must match {SCRIPT_NAME_PATTERN.pattern}"
    if len(name) > SCRIPT_NAME_MAX:
        return f"script name {quote(name[:20] + '…')} is {len(name)} characters long; at most {SCRIPT_NAME_MAX}"
    return None


class OpKind(StrEnum):
    """The nine op kinds; each is exactly one glutton RPC."""

    INGEST = "ingest"
    BURN_CPU = "burn_cpu"
    WRITE_DISK = "write_disk"
    READ_DISK_DIGEST = "read_disk_digest"
    READ_DISK_DATA = "read_disk_data"
    FILL_RAM = "fill_ram"
    CHURN_RAM = "churn_ram"
    WALK_RAM = "walk_ram"
    PING = "ping"

    @property
    def takes_key(self) -> bool:
        return self not in (OpKind.BURN_CPU, OpKind.PING)

    @property
    def takes_size(self) -> bool:
        return self in (OpKind.INGEST, OpKind.WRITE_DISK, OpKind.FILL_RAM, OpKind.CHURN_RAM)

    @property
    def takes_millis(self) -> bool:
        return self is OpKind.BURN_CPU

    @property
    def writes_disk(self) -> bool:
        return self in (OpKind.INGEST, OpKind.WRITE_DISK)

    @property
    def reads_disk(self) -> bool:
        return self in (OpKind.READ_DISK_DIGEST, OpKind.READ_DISK_DATA)

    @property
    def needs_filled_ram(self) -> bool:
        return self in (OpKind.CHURN_RAM, OpKind.WALK_RAM)

    @property
    def size_on_wire_is_int32(self) -> bool:
        """Ingest payloads and WriteDisk sizes travel as protobuf int32 / single bodies."""
        return self.writes_disk


@dataclass(frozen=True)
class Op:
    """One op; arguments a kind does not take are ``None`` (``parallel`` is at least 1)."""

    kind: OpKind
    key: str | None = None
    size: int | None = None
    millis: int | None = None
    parallel: int | None = None
    position: Position | None = field(default=None, compare=False, repr=False)
    argument_positions: dict[str, Position] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Located:
    """Where in its file a part of a script was written, the part and each of its fields; not part of its value."""

    position: Position | None = field(default=None, compare=False, repr=False, kw_only=True)
    field_positions: dict[str, Position] = field(default_factory=dict, compare=False, repr=False, kw_only=True)


@dataclass(frozen=True)
class Step(Located):
    """A think time (the actor is parked) followed by the ops of one agent step."""

    name: str
    agent: str
    think_ns: int
    ops: tuple[Op, ...]

    @property
    def row_name(self) -> str:
        """The Locust row this step books: ``Step_<name>``."""
        return f"Step_{self.name}"


@dataclass(frozen=True)
class Script(Located):
    """A validated workload script. ``min_actor_memory`` is in bytes."""

    name: str
    min_actor_memory: int
    steps: tuple[Step, ...]

    @property
    def ops(self) -> tuple[Op, ...]:
        return tuple(op for step in self.steps for op in step.ops)

    @property
    def think_per_lap_ns(self) -> int:
        return sum(step.think_ns for step in self.steps)
