"""A recorded agent trajectory that the sweperf service replays step by step: the file format and its loader.

Upstream's sweperf actor is a SWE-bench image that replays a recorded agent trajectory (the commands an agent
ran on one task) and reports each chunk's in-container command time. Ours replays a trajectory file of our own
making, a JSON document::

    {
      "format": 1,
      "name": "swebench-astropy-7336",
      "description": "…",
      "steps": [
        {"kind": "checkout", "duration_ms": 180, "cpu_ms": 60, "ram_bytes": 4194304, "file_bytes": 1048576},
        …
      ]
    }

Each step is real work for the time the trajectory records, in this order:

- ``ram_bytes``: bytes written into the trajectory's RAM array (glutton's ``WriteRAM`` on key ``trajectory``):
  the array grows to ``ram_bytes`` when it is smaller, else ``ram_bytes`` of it are rotated through;
- ``file_bytes``: a file ``step-<n>`` of that many random bytes written into the actor's data directory
  (glutton's ``WriteDisk``); files of earlier steps stay, as an agent's edits to a repository do;
- ``cpu_ms``: that much CPU time of the job's thread spent hashing (sha256, which releases the GIL);
- ``duration_ms``: the step's recorded duration: after its work the step idles out the rest of it. Work that
  takes longer than the recorded duration makes the step longer; the service reports what it measured.

``kind`` is a label (``checkout``, ``search``, ``edit``, ``test``, …); zero or absent amounts are no work of
that sort. RAM and files count against the template's memory limit like any glutton write, and exceeding it
crashes the actor. Step numbers are 1-based, as ``/execute`` addresses them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FORMAT = 1
TRAJECTORY_DIR = Path(__file__).resolve().parent / "trajectories"
_AMOUNTS = ("duration_ms", "cpu_ms", "ram_bytes", "file_bytes")


class TrajectoryError(ValueError):
    """A trajectory file that cannot be replayed, and why."""


@dataclass(frozen=True)
class TrajectoryStep:
    number: int
    kind: str
    duration_ms: float
    cpu_ms: float = 0.0
    ram_bytes: int = 0
    file_bytes: int = 0


@dataclass(frozen=True)
class Trajectory:
    name: str
    steps: tuple[TrajectoryStep, ...]
    description: str = ""

    def __len__(self) -> int:
        return len(self.steps)

    def step_range(self, start_step: int, end_step: int) -> tuple[TrajectoryStep, ...]:
        """Steps ``start_step`` through ``end_step`` (1-based, inclusive), or :class:`TrajectoryError`."""
        if not 1 <= start_step <= end_step <= len(self.steps):
            raise TrajectoryError(f"steps {start_step}..{end_step} are not a range within the trajectory's "
                                  f"steps 1..{len(self.steps)}")
        return self.steps[start_step - 1:end_step]

    @property
    def recorded_ms(self) -> float:
        return sum(step.duration_ms for step in self.steps)


def _step(number: int, entry: Any, source: str) -> TrajectoryStep:
    where = f"{source}: step {number}"
    if not isinstance(entry, dict):
        raise TrajectoryError(f"{where} is not an object")
    unknown = set(entry) - {"kind", *_AMOUNTS}
    if unknown:
        raise TrajectoryError(f"{where} has unknown fields {sorted(unknown)}")
    kind = entry.get("kind", "")
    if not isinstance(kind, str):
        raise TrajectoryError(f"{where}: kind must be a string")
    if "duration_ms" not in entry:
        raise TrajectoryError(f"{where} has no duration_ms")
    amounts: dict[str, float] = {}
    for name in _AMOUNTS:
        value = entry.get(name, 0)
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise TrajectoryError(f"{where}: {name} must be a number of at least 0, got {value!r}")
        if name.endswith("_bytes") and not isinstance(value, int):
            raise TrajectoryError(f"{where}: {name} must be a whole number, got {value!r}")
        amounts[name] = value
    return TrajectoryStep(number, kind, float(amounts["duration_ms"]), float(amounts["cpu_ms"]),
                          int(amounts["ram_bytes"]), int(amounts["file_bytes"]))


def parse_trajectory(document: Any, source: str = "trajectory") -> Trajectory:
    if not isinstance(document, dict):
        raise TrajectoryError(f"{source}: not a JSON object")
    if document.get("format") != FORMAT:
        raise TrajectoryError(f"{source}: unknown trajectory format {document.get('format')!r} (want {FORMAT})")
    steps = document.get("steps")
    if not isinstance(steps, list) or not steps:
        raise TrajectoryError(f"{source}: steps must be a non-empty list")
    return Trajectory(str(document.get("name", "")),
                      tuple(_step(number, entry, source) for number, entry in enumerate(steps, 1)),
                      str(document.get("description", "")))


def load_trajectory(path: Path) -> Trajectory:
    try:
        document = json.loads(path.read_text())
    except OSError as error:
        raise TrajectoryError(f"cannot read trajectory {path}: {error}") from None
    except ValueError as error:
        raise TrajectoryError(f"trajectory {path} is not JSON: {error}") from None
    return parse_trajectory(document, str(path))
