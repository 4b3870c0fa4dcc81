"""Workload families: which Locust user a suite runs, the knobs each family takes, and its wake row.

Upstream benchmarks Substrate with several workloads, each answering its own question; a suite names one with
``family`` (default ``agentsession``) and sets its knobs under ``knobs:``, each the Locust flag of the same name
in snake_case (``mem_target`` is ``--mem-target``), as upstream's dynconfig keys are. A knob a family does not
read is refused where it is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, create_model

Family = Literal["agentsession", "glutton", "durdir", "spawn", "burst", "sweperf"]
# How an actor is parked between wakes, and whether a wake is an explicit ResumeActor or the first request itself;
# "" is each family's own default (suspend; implicit for agent sessions, explicit for durdir).
LifecycleMode = Literal["", "suspend", "pause"]
ResumeMode = Literal["", "explicit", "implicit"]

# The Locust user class each family runs.
USER_CLASSES: dict[str, str] = {
    "agentsession": "AgentSessionUser", "glutton": "GluttonUser", "durdir": "DurdirUser", "spawn": "SpawnUser",
    "burst": "BurstUser", "sweperf": "SweperfUser",
}
# The request that is the family's wake (the first touch of a parked actor), as the request log marks it; spawn
# and burst start or resume cohorts explicitly and have none.
WAKE_ROWS: dict[str, str | None] = {
    "agentsession": "WakeFirstTouch", "glutton": "GluttonPing", "durdir": "DurDirServeAfterResume",
    "spawn": None, "burst": None, "sweperf": "ResumeToFirstExec",
}
# The atespace the benchmark's actors live in, and the one that holds the families' actor templates.
ATESPACE = "benchmark"
TEMPLATE_ATESPACE = "benchmark-workloads"
# Upstream's default template of each family; durdir and sweperf name theirs with a knob.
DEFAULT_TEMPLATES: dict[str, str] = {
    "agentsession": "glutton", "glutton": "glutton", "durdir": "glutton-durdir-data", "spawn": "glutton",
    "burst": "glutton", "sweperf": "swebench-astropy-7336",
}
# The rows a person reads first in a trial of each family, besides its wakes.
HEADLINE_ROWS: dict[str, tuple[str, ...]] = {
    "agentsession": (), "glutton": ("ResumeActor", "SuspendActor", "PauseActor"),
    "durdir": ("ResumeActor", "DurDirServeWarm"), "spawn": ("ActorTimeToReady", "TimeToAllReady"),
    "burst": ("ActorTimeToResume", "TimeToAllResumed", "TimeToAllSuspended"),
    "sweperf": ("CycleCEL", "TaskWallClock"),
}
# The requests that answer each family's question, judged in every comparison of its trials beside its wake row and,
# by their geometric mean, primary with it: glutton and durdir ask how long a parked actor takes to resume, spawn how
# long an actor takes to become ready, burst how long one of a cohort takes to resume. An agent session's and
# sweperf's question is their wake row itself.
QUESTION_ROWS: dict[str, tuple[str, ...]] = {
    "agentsession": (), "glutton": ("ResumeActor",), "durdir": ("ResumeActor",), "spawn": ("ActorTimeToReady",),
    "burst": ("ActorTimeToResume",), "sweperf": (),
}
# Families that run one batch or cohort per Locust process: one user, as upstream runs them.
ONE_USER_FAMILIES = ("spawn", "burst")

_QUANTITY = r"^(|all|\d+(Ki|Mi|Gi|Ti|K|M|G|T)?)$"
_WAITING = ("glutton", "durdir", "burst", "sweperf")
_GLUTTON_LOAD = ("glutton", "burst")
_COHORT = ("spawn", "burst")


@dataclass(frozen=True)
class Knob:
    """One knob of the workload families, declared once. Everything else is derived from it: the suite's
    ``knobs:`` validation (:class:`Knobs`, :data:`FAMILY_KNOBS`), the Locust flag of the same name in kebab case with
    upstream's worker default (reference §16), the values a family's virtual users read, and the Dagster launch
    form's field."""

    name: str
    kind: type[float] | type[int] | type[str]
    # Upstream's worker default: what the flag holds when a suite leaves the knob unset.
    default: float | int | str
    description: str
    families: tuple[str, ...]
    # The values a suite may set: pydantic's constraints (ge, le, gt, pattern) or a closed set of choices.
    constraints: Mapping[str, Any] = field(default_factory=dict)
    choices: tuple[str, ...] = ()

    @property
    def flag(self) -> str:
        return f"--{self.name.replace('_', '-')}"

    @property
    def annotation(self) -> Any:
        return Literal[self.choices] if self.choices else self.kind  # type: ignore[valid-type]


KNOBS: tuple[Knob, ...] = (
    Knob("min_wait_time", float, 0.0, "Seconds; wait between iterations, at least.", _WAITING, {"ge": 0}),
    Knob("max_wait_time", float, 0.5, "Seconds; wait between iterations, at most (upstream default 0.5).", _WAITING,
         {"ge": 0}),
    Knob("min_live_time", float, 0.0, "Seconds an actor stays awake, at least.", _GLUTTON_LOAD, {"ge": 0}),
    Knob("max_live_time", float, 0.0, "Seconds an actor stays awake, at most.", _GLUTTON_LOAD, {"ge": 0}),
    Knob("max_pings_per_wake", int, 1, "GluttonPing calls per wake, at most (< 1 reads as 1).", _GLUTTON_LOAD),
    Knob("mem_target", str, "", "RAM each actor fills once (GluttonFillRAM), a glutton quantity such as 96Mi.",
         _GLUTTON_LOAD, {"pattern": _QUANTITY}),
    Knob("mem_churn", str, "", "RAM rewritten per wake (GluttonChurnRAM, rotating).", _GLUTTON_LOAD,
         {"pattern": _QUANTITY}),
    Knob("mem_read", str, "", "RAM walked after each resume (GluttonReadRAM); 'all' walks the whole fill.",
         _GLUTTON_LOAD, {"pattern": _QUANTITY}),
    Knob("cpu_cores", int, 0, "Cores of background load per actor (GluttonUseCPU).", _GLUTTON_LOAD, {"ge": 0}),
    Knob("cpu_duty_cycle", float, 0.0, "Share of each cycle those cores spin.", _GLUTTON_LOAD, {"ge": 0, "le": 1}),
    Knob("actors_per_user", int, 1, "Actors each glutton user serves round robin.", ("glutton",), {"ge": 1}),
    Knob("durdir_template", str, DEFAULT_TEMPLATES["durdir"], "Durdir's actor template.", ("durdir",),
         choices=("glutton-durdir-data", "glutton-durdir-full")),
    Knob("durdir_file_size_bytes", int, 8 << 20, "Size of the durable file (0 reads as 8 MiB).", ("durdir",),
         {"ge": 0, "le": (1 << 31) - 1}),
    Knob("durdir_read_mode", str, "data", "data (bytes and digest) or digest.", ("durdir",),
         choices=("", "data", "digest")),
    Knob("total_actors", int, 100, "Actors of the spawn batch or burst cohort.", _COHORT, {"ge": 1}),
    Knob("spawn_concurrency", int, 1, "Actors spawned at once.", ("spawn",), {"ge": 0}),
    Knob("actor_deadline", float, 120.0, "Seconds each actor has to become ready.", _COHORT, {"gt": 0}),
    Knob("sweperf_template", str, DEFAULT_TEMPLATES["sweperf"], "Sweperf's actor template.", ("sweperf",),
         {"pattern": r"^[a-z0-9][a-z0-9.-]*$"}),
    Knob("sweperf_total_steps", int, 21, "Steps of the trajectory replayed.", ("sweperf",), {"ge": 0}),
    Knob("sweperf_num_cycles", int, 4, "Cycles (suspend and resume) the trajectory is split into.", ("sweperf",),
         {"ge": 0}),
    Knob("sweperf_poll_interval_ms", int, 200, "How often a cycle's job status is polled, in ms.", ("sweperf",),
         {"ge": 0}),
)
KNOBS_BY_NAME: dict[str, Knob] = {knob.name: knob for knob in KNOBS}
# Which knobs each family reads (reference §16's "used by" column).
FAMILY_KNOBS: dict[str, tuple[str, ...]] = {
    family: tuple(knob.name for knob in KNOBS if family in knob.families) for family in get_args(Family)}
# The suite-level modes each family reads.
FAMILY_MODES: dict[str, tuple[str, ...]] = {
    "agentsession": ("lifecycle_mode", "resume_mode"), "glutton": ("lifecycle_mode",),
    "durdir": ("lifecycle_mode", "resume_mode"), "spawn": (), "burst": ("lifecycle_mode",), "sweperf": (),
}


class _KnobValues(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def given(self) -> dict[str, object]:
        """The knobs the suite sets."""
        return self.model_dump(exclude_none=True)

    def locust_options(self) -> list[str]:
        """The set knobs as Locust flags, in a fixed order."""
        options: list[str] = []
        for name, value in self.given().items():
            options += [KNOBS_BY_NAME[name].flag, f"{value:g}" if isinstance(value, float) else str(value)]
        return options


# A family's knobs as a suite sets them; unset ones keep upstream's worker defaults (reference §16).
Knobs = create_model(
    "Knobs", __base__=_KnobValues, __doc__="A family's knobs; unset ones keep upstream's worker defaults.",
    **{knob.name: (knob.annotation | None, Field(None, description=knob.description, **knob.constraints))
       for knob in KNOBS})


def family_template(family: str, knobs: Knobs) -> str:
    """The name of the template (in ``benchmark-workloads``) whose actors the family creates."""
    return knobs.durdir_template or knobs.sweperf_template or DEFAULT_TEMPLATES[family]


def knob_problems(family: str, knobs: Knobs) -> list[tuple[str, str]]:
    """Each knob set that ``family`` does not read, with why."""
    allowed = FAMILY_KNOBS[family]
    problems = [(name, f"family {family} does not read {name}; it reads "
                 f"{', '.join(allowed) if allowed else 'none (an agent session is configured by its script)'}")
                for name in knobs.given() if name not in allowed]
    return problems + window_problems(knobs)


def window_problems(knobs: object) -> list[tuple[str, str]]:
    """Each wait or live window whose max is below its min (a window left unset is not judged)."""
    problems = []
    for window in ("wait", "live"):
        low, high = getattr(knobs, f"min_{window}_time"), getattr(knobs, f"max_{window}_time")
        if low is not None and high is not None and high < low:
            problems.append((f"max_{window}_time", f"{high:g} is below min_{window}_time {low:g}"))
    return problems


def family_of_rows(names: Iterable[str]) -> str | None:
    """The family whose rows these are (an imported upstream run names none), or None when they do not say."""
    present = set(names)
    if "WakeFirstTouch" in present:
        return "agentsession"
    if "ResumeToFirstExec" in present or any(name.startswith("Workload_Cycle_") for name in present):
        return "sweperf"
    if any(name.startswith("DurDir") for name in present):
        return "durdir"
    if "ActorTimeToReady" in present or "TimeToAllReady" in present:
        return "spawn"
    if any(name.startswith(("ActorTimeTo", "TimeToAll")) for name in present) or "GluttonReadyPing" in present:
        return "burst"
    if "GluttonPing" in present:
        return "glutton"
    return None
