"""Load steps: the steps of a step-ladder trial, when each ran, its steady window and the telemetry over it.

A ladder trial's Locust runs a ``LoadTestShape`` that appends one line to a *ladder log* as each step starts and
one when the ladder ends (``{"event": "step", "step": 2, "users": 4, "at": 1795…}``, ``{"event": "end", …}``).
When the trial ends, the runner turns that log into ``load_steps.json``:

```json
{"ladder": "2:45s,4:45s", "spawn_rate": 2.0,
 "steps": [{"step": 1, "target_users": 2, "hold_s": 45, "started_at": 1795000000.4, "ended_at": 1795000045.4,
            "complete": true, "window": {"start": 1795000002, "end": 1795000044, "whole_step_because": null},
            "server_summary": {…the server_summary.json structure over that window…}}]}
```

A step that never started is not in it, and a step ends where the next one that started began. ``complete`` says
whether the step ran to its end (the next step began, or the ladder ended); a step cut short by a stopped trial
ends when the trial did and is not complete. A trial without the file — a flat one, or an upstream run — is a
ladder of one step over its steady window.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from substrate_assets.results.atomic import json_text, write_text

STEP_EVENT, END_EVENT = "step", "end"
# The most steps a ladder has, a suite's or an imported run's --ladder (each step a load point): more than any ladder
# needs; a typo in max (1200 for 120) would otherwise run for days.
MAX_LADDER_STEPS = 100
_STEP = re.compile(r"(\d+):(\d+)([smh]?)")
_SECONDS = {"": 1, "s": 1, "m": 60, "h": 3600}


def parse_ladder(spec: str) -> list[tuple[int, int]]:
    """``users:hold`` steps as (users, hold_s); a ValueError names the step that does not parse."""
    items = spec.split(",")
    if len(items) > MAX_LADDER_STEPS:
        raise ValueError(f"a ladder of {len(items):,} steps is too long: at most {MAX_LADDER_STEPS}")
    steps = []
    for item in (part.strip() for part in items):
        match = _STEP.fullmatch(item)
        if match is None:
            raise ValueError(f"ladder step {item!r} is not users:hold (e.g. 4:45s); trace probabilities are not "
                             "supported")
        users, amount, unit = match.groups()
        hold_s = int(amount) * _SECONDS[unit]
        if hold_s <= 0:
            raise ValueError(f"ladder step {item!r} holds for no time")
        steps.append((int(users), hold_s))
    return steps




def ladder_spec(steps: Sequence[int], hold_s: int) -> str:
    """A ladder as upstream's ``--ladder`` reads it (``users:duration[:trace_probability]`` per step,
    comma-separated): ``2:60s,4:60s``."""
    return ",".join(f"{users}:{hold_s}s" for users in steps)


def ladder_log_line(event: str, at: float, step: int | None = None, users: int | None = None) -> str:
    """One line of the ladder log; ``step`` is 1-based."""
    return json.dumps({"event": event, "step": step, "users": users, "at": at}) + "\n"


@dataclass(frozen=True)
class StepSpan:
    """When one step of a ladder held its users: from the shape's first tick of it to the next step (or the end)."""

    step: int
    target_users: int | None  # None: the plan is not known (an upstream run whose log does not say)
    hold_s: int | None
    started_at: float
    ended_at: float
    complete: bool


def read_ladder_spans(path: Path, holds: Sequence[tuple[int, int]], trial_end: float) -> list[StepSpan]:
    """The spans of the steps the ladder log says started. ``holds`` is the planned (users, hold_s) of each step.
    A step ends where the next step that started began (a step the log lacks — its line could not be written —
    never stretches the one before over it), else at the ladder's end, else at ``trial_end`` (the trial was
    stopped: not complete). A missing log, or lines that do not parse, mean no step is known to have started:
    lines are written as the shape runs, and a torn last line is skipped."""
    starts: dict[int, float] = {}
    end: float | None = None
    if path.is_file():
        for line in path.read_text(errors="replace").splitlines():
            try:
                record = json.loads(line)
                at = float(record["at"])
            except (ValueError, TypeError, KeyError):
                continue
            if record.get("event") == STEP_EVENT and isinstance(record.get("step"), int):
                starts.setdefault(record["step"], at)
            elif record.get("event") == END_EVENT:
                end = at
    started = sorted(step for step in starts if 1 <= step <= len(holds))
    spans = []
    for index, step in enumerate(started):
        following = starts[started[index + 1]] if index + 1 < len(started) else end
        ended = following if following is not None else trial_end
        users, hold_s = holds[step - 1]
        spans.append(StepSpan(step, users, hold_s, starts[step], max(ended, starts[step]), following is not None))
    return spans


@dataclass(frozen=True)
class LoadStep:
    """One load point's step: its span, its steady window (``whole_step_because`` says why it fell back to the
    whole step) and the server telemetry over the window (the server_summary structure; None: not recorded)."""

    step: int
    target_users: int | None
    hold_s: int | None
    started_at: float | None
    ended_at: float | None
    window_start: int | None  # None: the step has no steady window (whole_step_because says why)
    window_end: int | None
    whole_step_because: str | None = None
    server_summary: dict[str, Any] | None = None
    complete: bool | None = None  # ran to its end; None: not known

    def as_json(self) -> dict[str, Any]:
        return {"step": self.step, "target_users": self.target_users, "hold_s": self.hold_s,
                "started_at": self.started_at, "ended_at": self.ended_at, "complete": self.complete,
                "window": {"start": self.window_start, "end": self.window_end,
                           "whole_step_because": self.whole_step_because},
                "server_summary": self.server_summary}


def write_load_steps(path: Path, ladder: str, spawn_rate: float, steps: Sequence[LoadStep]) -> None:
    write_text(path, load_steps_text(ladder, spawn_rate, steps))


def load_steps_text(ladder: str, spawn_rate: float, steps: Sequence[LoadStep]) -> str:
    return json_text({"ladder": ladder, "spawn_rate": spawn_rate, "steps": [step.as_json() for step in steps]})


def _number(value: Any, where: str, *, whole: bool = False, optional: bool = True) -> Any:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or (whole and not float(value).is_integer()):
        raise ValueError(f"{where}: {'a whole number' if whole else 'a number'} expected, not {value!r}")
    return int(value) if whole else float(value)


def read_load_steps(path: Path) -> list[LoadStep]:
    """``load_steps.json``; a ValueError names the file and the step that does not read."""
    document = json.loads(path.read_text())
    steps = document.get("steps") if isinstance(document, dict) else None
    if not isinstance(steps, list):
        raise ValueError(f"{path.name}: expected an object with a 'steps' list")
    result = []
    for index, entry in enumerate(steps):
        where = f"{path.name}: steps[{index}]"
        window = entry.get("window") if isinstance(entry, dict) else None
        if not isinstance(window, dict):
            raise ValueError(f"{where}: expected an object with a 'window' object")
        summary = entry.get("server_summary")
        if summary is not None and not isinstance(summary, dict):
            raise ValueError(f"{where}.server_summary: expected an object")
        reason, complete = window.get("whole_step_because"), entry.get("complete")
        if complete is not None and not isinstance(complete, bool):
            raise ValueError(f"{where}.complete: true or false expected, not {complete!r}")
        result.append(LoadStep(
            step=_number(entry.get("step"), f"{where}.step", whole=True, optional=False),
            target_users=_number(entry.get("target_users"), f"{where}.target_users", whole=True),
            hold_s=_number(entry.get("hold_s"), f"{where}.hold_s", whole=True),
            started_at=_number(entry.get("started_at"), f"{where}.started_at"),
            ended_at=_number(entry.get("ended_at"), f"{where}.ended_at"),
            window_start=_number(window.get("start"), f"{where}.window.start", whole=True, optional=False),
            window_end=_number(window.get("end"), f"{where}.window.end", whole=True, optional=False),
            whole_step_because=None if reason is None else str(reason),
            server_summary=summary, complete=complete))
    return result
