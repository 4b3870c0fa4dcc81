"""Workload families: which Locust user a suite runs, the knobs each family takes, and its wake row.

Upstream benchmarks Substrate with several workloads, each answering its own question; a suite names one with
``family`` (default ``agentsession``) and sets its knobs under ``knobs:``, each the Locust flag of the same name
in snake_case (``mem_target`` is ``--mem-target``), as upstream's dynconfig keys are. A knob a family does not
read is refused where it is written.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Family = Literal["agentsession", "glutton", "durdir", "spawn", "burst", "sweperf"]

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
# Families that run one batch or cohort per Locust process: one user, as upstream runs them.
ONE_USER_FAMILIES = ("spawn", "burst")

_WAITS = ("min_wait_time", "max_wait_time")
_GLUTTON = (*_WAITS, "min_live_time", "max_live_time", "max_pings_per_wake", "mem_target", "mem_churn", "mem_read",
            "cpu_cores", "cpu_duty_cycle")
_COHORT = ("total_actors", "actor_deadline")
# Which knobs each family reads (reference §16's "used by" column).
FAMILY_KNOBS: dict[str, tuple[str, ...]] = {
    "agentsession": (),
    "glutton": (*_GLUTTON, "actors_per_user"),
    "durdir": (*_WAITS, "durdir_template", "durdir_file_size_bytes", "durdir_read_mode"),
    "spawn": (*_COHORT, "spawn_concurrency"),
    "burst": (*_GLUTTON, *_COHORT),
    "sweperf": (*_WAITS, "sweperf_template", "sweperf_total_steps", "sweperf_num_cycles",
                "sweperf_poll_interval_ms"),
}
# The suite-level modes each family reads.
FAMILY_MODES: dict[str, tuple[str, ...]] = {
    "agentsession": ("lifecycle_mode", "resume_mode"), "glutton": ("lifecycle_mode",),
    "durdir": ("lifecycle_mode", "resume_mode"), "spawn": (), "burst": ("lifecycle_mode",), "sweperf": (),
}

_QUANTITY = r"^(|all|\d+(Ki|Mi|Gi|Ti|K|M|G|T)?)$"


class Knobs(BaseModel):
    """A family's knobs; unset ones keep upstream's worker defaults (reference §16)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    min_wait_time: float | None = Field(None, ge=0, description="Seconds; wait between iterations, at least.")
    max_wait_time: float | None = Field(None, ge=0, description="Seconds; wait between iterations, at most "
                                        "(upstream default 0.5).")
    min_live_time: float | None = Field(None, ge=0, description="Seconds an actor stays awake, at least.")
    max_live_time: float | None = Field(None, ge=0, description="Seconds an actor stays awake, at most.")
    max_pings_per_wake: int | None = Field(None, description="GluttonPing calls per wake, at most (< 1 reads "
                                           "as 1).")
    mem_target: str | None = Field(None, pattern=_QUANTITY, description="RAM each actor fills once "
                                   "(GluttonFillRAM), a glutton quantity such as 96Mi.")
    mem_churn: str | None = Field(None, pattern=_QUANTITY, description="RAM rewritten per wake "
                                  "(GluttonChurnRAM, rotating).")
    mem_read: str | None = Field(None, pattern=_QUANTITY, description="RAM walked after each resume "
                                 "(GluttonReadRAM); 'all' walks the whole fill.")
    cpu_cores: int | None = Field(None, ge=0, description="Cores of background load per actor (GluttonUseCPU).")
    cpu_duty_cycle: float | None = Field(None, ge=0, le=1, description="Share of each cycle those cores spin.")
    actors_per_user: int | None = Field(None, ge=1, description="Actors each glutton user serves round robin.")
    durdir_template: Literal["glutton-durdir-data", "glutton-durdir-full"] | None = None
    durdir_file_size_bytes: int | None = Field(None, ge=0, le=(1 << 31) - 1, description="Size of the durable "
                                               "file (0 reads as 8 MiB).")
    durdir_read_mode: Literal["", "data", "digest"] | None = None
    total_actors: int | None = Field(None, ge=1, description="Actors of the spawn batch or burst cohort.")
    spawn_concurrency: int | None = Field(None, ge=0, description="Actors spawned at once.")
    actor_deadline: float | None = Field(None, gt=0, description="Seconds each actor has to become ready.")
    sweperf_template: str | None = Field(None, pattern=r"^[a-z0-9][a-z0-9.-]*$")
    sweperf_total_steps: int | None = Field(None, ge=0)
    sweperf_num_cycles: int | None = Field(None, ge=0)
    sweperf_poll_interval_ms: int | None = Field(None, ge=0)

    def given(self) -> dict[str, object]:
        """The knobs the suite sets."""
        return self.model_dump(exclude_none=True)

    def locust_options(self) -> list[str]:
        """The set knobs as Locust flags, in a fixed order."""
        options: list[str] = []
        for name, value in self.given().items():
            options += [f"--{name.replace('_', '-')}", f"{value:g}" if isinstance(value, float) else str(value)]
        return options


def family_template(family: str, knobs: Knobs) -> str:
    """The name of the template (in ``benchmark-workloads``) whose actors the family creates."""
    return knobs.durdir_template or knobs.sweperf_template or DEFAULT_TEMPLATES[family]


def knob_problems(family: str, knobs: Knobs) -> list[tuple[str, str]]:
    """Each knob set that ``family`` does not read, with why."""
    allowed = FAMILY_KNOBS[family]
    problems = [(name, f"family {family} does not read {name}; it reads "
                 f"{', '.join(allowed) if allowed else 'none (an agent session is configured by its script)'}")
                for name in knobs.given() if name not in allowed]
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
