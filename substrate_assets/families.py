"""Workload families: which Locust user a suite runs, the knobs each family takes, and its wake row.

Upstream benchmarks Substrate with several workloads, each answering its own question; a suite names one with
``family`` (default ``agentsession``) and sets its knobs under ``knobs:``, each the Locust flag of the same name
in snake_case (``mem_target`` is ``--mem-target``), as upstream's dynconfig keys are. A knob a family does not
read is refused where it is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, create_model

Family = Literal["agentsession", "glutton", "durdir", "spawn", "burst", "sweperf"]
# How an actor is parked between wakes, and whether a wake is an explicit ResumeActor or the first request itself;
# "" is each family's own default (suspend; implicit for agent sessions, explicit for durdir).
LifecycleMode = Literal["", "suspend", "pause"]
ResumeMode = Literal["", "explicit", "implicit"]

# The atespace the benchmark's actors live in, and the one that holds the families' actor templates.
ATESPACE = "benchmark"
TEMPLATE_ATESPACE = "benchmark-workloads"


@dataclass(frozen=True)
class FamilySpec:
    """One workload family, declared once: the dicts below, the suite rules and the rows a trial of it shows are
    derived from it."""

    name: str
    # The Locust user class it runs.
    user_class: str
    # The request that is its wake (the first touch of a parked actor), as the request log marks it; None for a
    # family that starts or resumes cohorts explicitly.
    wake_row: str | None
    # Upstream's default template (durdir and sweperf name theirs with a knob).
    default_template: str
    # The rows a person reads first in a trial of it, besides its wakes.
    headline_rows: tuple[str, ...]
    # The requests that answer its question, judged in every comparison beside its wake row and, by their geometric
    # mean, primary with it (none: the wake row itself is its question).
    question_rows: tuple[str, ...]
    # The suite-level modes it reads.
    modes: tuple[str, ...]
    # The request names that tell an imported run's rows are this family's (a trailing * matches a prefix).
    recognised_by: tuple[str, ...]
    # Runs one batch or cohort per Locust process: one user, as upstream runs it.
    one_user: bool = False

    def recognises(self, names: set[str]) -> bool:
        return any(any(name.startswith(marker[:-1]) for name in names) if marker.endswith("*") else marker in names
                   for marker in self.recognised_by)


# Glutton and durdir ask how long a parked actor takes to resume, spawn how long an actor takes to become ready, burst
# how long one of a cohort takes to resume; an agent session's and sweperf's question is their wake row itself.
FAMILY_SPECS: tuple[FamilySpec, ...] = (
    FamilySpec("agentsession", "AgentSessionUser", "WakeFirstTouch", "glutton", (), (),
               ("lifecycle_mode", "resume_mode"), ("WakeFirstTouch",)),
    FamilySpec("glutton", "GluttonUser", "GluttonPing", "glutton", ("ResumeActor", "SuspendActor", "PauseActor"),
               ("ResumeActor",), ("lifecycle_mode",), ("GluttonPing",)),
    FamilySpec("durdir", "DurdirUser", "DurDirServeAfterResume", "glutton-durdir-data",
               ("ResumeActor", "DurDirServeWarm"), ("ResumeActor",), ("lifecycle_mode", "resume_mode"), ("DurDir*",)),
    FamilySpec("spawn", "SpawnUser", None, "glutton", ("ActorTimeToReady", "TimeToAllReady"), ("ActorTimeToReady",),
               (), ("ActorTimeToReady", "TimeToAllReady"), one_user=True),
    FamilySpec("burst", "BurstUser", None, "glutton", ("ActorTimeToResume", "TimeToAllResumed", "TimeToAllSuspended"),
               ("ActorTimeToResume",), ("lifecycle_mode",), ("ActorTimeTo*", "TimeToAll*", "GluttonReadyPing"),
               one_user=True),
    FamilySpec("sweperf", "SweperfUser", "ResumeToFirstExec", "swebench-astropy-7336", ("CycleCEL", "TaskWallClock"),
               (), (), ("ResumeToFirstExec", "Workload_Cycle_*")),
)
FAMILIES: dict[str, FamilySpec] = {spec.name: spec for spec in FAMILY_SPECS}

USER_CLASSES: dict[str, str] = {spec.name: spec.user_class for spec in FAMILY_SPECS}
WAKE_ROWS: dict[str, str | None] = {spec.name: spec.wake_row for spec in FAMILY_SPECS}
DEFAULT_TEMPLATES: dict[str, str] = {spec.name: spec.default_template for spec in FAMILY_SPECS}
HEADLINE_ROWS: dict[str, tuple[str, ...]] = {spec.name: spec.headline_rows for spec in FAMILY_SPECS}
QUESTION_ROWS: dict[str, tuple[str, ...]] = {spec.name: spec.question_rows for spec in FAMILY_SPECS}
FAMILY_MODES: dict[str, tuple[str, ...]] = {spec.name: spec.modes for spec in FAMILY_SPECS}
ONE_USER_FAMILIES = tuple(spec.name for spec in FAMILY_SPECS if spec.one_user)

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
        return Literal[self.choices] if self.choices else self.kind


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


class _KnobValues(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    def given(self) -> dict[str, object]:
        """The knobs the suite sets."""
        return self.model_dump(exclude_none=True)

    def value(self, name: str) -> Any:
        """The knob's value: the suite's, else upstream's worker default."""
        chosen = getattr(self, name)
        return KNOBS_BY_NAME[name].default if chosen is None else chosen

    def locust_options(self) -> list[str]:
        """The set knobs as Locust flags, in a fixed order."""
        options: list[str] = []
        for name, value in self.given().items():
            options += [KNOBS_BY_NAME[name].flag, f"{value:g}" if isinstance(value, float) else str(value)]
        return options


# A family's knobs as a suite sets them; unset ones keep upstream's worker defaults (reference §16).
if TYPE_CHECKING:
    class Knobs(_KnobValues):
        """The model built below from KNOBS, as the checker sees it: a field per knob, None when unset; the two this
        module reads are named, any other is Any."""

        durdir_template: str | None = None
        sweperf_template: str | None = None

        def __getattr__(self, name: str) -> Any: ...
else:
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


# Which family an imported run's rows are asked of in this order: spawn's rows would pass for burst's (ActorTimeTo*),
# and a burst run pings as glutton does.
RECOGNITION_ORDER = ("agentsession", "sweperf", "durdir", "spawn", "burst", "glutton")


def family_of_rows(names: Iterable[str]) -> str | None:
    """The family whose rows these are (an imported upstream run names none), or None when they do not say."""
    present = set(names)
    return next((family for family in RECOGNITION_ORDER if FAMILIES[family].recognises(present)), None)
