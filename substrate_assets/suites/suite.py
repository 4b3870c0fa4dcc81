"""One suite: a named, repeatable trial configuration, validated field by field and across fields."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from substrate_assets.analysis.disturbance import DisturbanceLimits
from substrate_assets.analysis.thresholds import Thresholds
from substrate_assets.families import (
    FAMILY_KNOBS,
    FAMILY_MODES,
    ONE_USER_FAMILIES,
    TEMPLATE_ATESPACE,
    USER_CLASSES,
    Family,
    Knobs,
    LifecycleMode,
    ResumeMode,
    family_template,
    knob_problems,
)
from substrate_assets.results.server_summary import DEFAULT_ATELET_LAG_S
from substrate_assets.suites.errors import SuiteError, explained
from substrate_assets.suites.sections import (
    KubernetesSettings,
    Ladder,
    Problem,
    Slo,
    located,
    matching,
    parse_run_time,
)
from substrate_assets.workload.model import script_name_problem
from substrate_assets.workload.quantity import QuantityError, format_binary_si, parse_byte_count

SLUG = re.compile(r"[a-z0-9][a-z0-9_-]*")
# The error type of a kubernetes suite without its kubernetes: section, which a command line can supply.
KUBERNETES_SECTION_MISSING = "kubernetes_section_missing"
# Trials a run of a suite repeats as one group, by default (bench/verdicts.py: docs/verdicts.md), and at most.
DEFAULT_REPEAT = 4
MAX_REPEAT = 100


class Suite(BaseModel):
    """One trial configuration. A trial is one execution of a suite."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Slug naming the suite; the first partition of its run directories.")
    family: Family = Field("agentsession", description="The workload family the suite runs: agentsession (a "
                           "script), glutton, durdir, spawn, burst or sweperf (upstream's other workloads).")
    script: str | None = Field(None, description="Workload script name (scripts/<script>.yaml); required for "
                               "agentsession, refused for the other families.")
    knobs: Knobs = Field(default_factory=Knobs, description="The family's knobs (Locust flags in snake_case); "
                         "unset ones keep upstream's defaults.")
    description: str = ""
    users: int | None = Field(None, ge=1, description="Concurrent agent sessions (Locust users); required "
                              "without a ladder, refused with one.")
    spawn_rate: float = Field(1.0, gt=0, description="Users started per second.")
    duration: str | None = Field(None, description="Run time, Locust -t form (60s, 2m, 1h30m); default 60s. "
                                 "Refused with a ladder, which runs for its steps × hold.")
    ladder: Ladder | None = Field(None, description="A step-ladder load instead of a flat one of users.")
    slo: Slo | None = Field(None, description="Thresholds each load point must meet.")
    disturbance: DisturbanceLimits = Field(default_factory=DisturbanceLimits, description="When a trial ran on a "
                                           "machine too busy with other work to be a sample of this configuration: "
                                           "it is marked disturbed and left out of noise estimates and verdicts.")
    compare: Thresholds = Field(default_factory=Thresholds, description="When `substrate-bench compare` and the "
                                "trial check call a figure changed.")
    think_scale: float = Field(1.0, ge=0, description="Multiplies every think time; 0 reads as 1, as upstream.")
    lifecycle_mode: LifecycleMode = ""
    resume_mode: ResumeMode = ""
    actor_memory: str = Field("1Gi", description="Memory limit of the glutton template.")
    workers: int = Field(8, ge=1)
    actors_per_worker: int = Field(4, ge=1)
    backend: Literal["local", "kubernetes"] = "local"
    kubernetes: KubernetesSettings | None = Field(None, description="Required for backend kubernetes.")
    tag: str = Field("local", description="Run tag (upstream: the commit under test).")
    sut_version: str | None = Field(None, pattern=r"^[A-Za-z0-9][A-Za-z0-9._:@/+-]{0,199}$",
                                    description="The version of the system under test (a Substrate commit, an image "
                                    "digest); by default this checkout's commit on the local backend, the tag on a "
                                    "cluster.")
    prometheus_url: str | None = Field(None, description="Harvest server telemetry from this Prometheus (which "
                                       "scrapes the runtime) instead of the runtime's own event log.")
    atelet_lag_s: int = Field(DEFAULT_ATELET_LAG_S, ge=0, description="Export lag of atelet metrics: the harvest "
                              "waits until end + lag and reads snapshot figures lag/2 late.")
    metadata: dict[str, Any] = Field(default_factory=dict)
    repeat: int = Field(DEFAULT_REPEAT, ge=1, le=MAX_REPEAT, description="Trials `substrate-bench run` runs back "
                        "to back as one group and judges together: the trial is the unit that varies, so one trial "
                        "cannot tell a change from the machine's noise.")
    inject_wake_delay_ms: int | None = Field(None, ge=0, description="The embedded runtime adds this many ms to "
                                             "every resume before the actor answers: a slowdown of known size, to "
                                             "check that comparisons find one. Trials with it are a configuration of "
                                             "their own; local backend only; 0 reads as none.")

    @field_validator("inject_wake_delay_ms")
    @classmethod
    def _no_delay_is_none(cls, value: int | None) -> int | None:
        return value or None

    @field_validator("name", "tag")
    @classmethod
    def _slug(cls, value: str) -> str:
        return matching(SLUG, value, "a slug ([a-z0-9_-], starting with a letter or digit)")

    @field_validator("script")
    @classmethod
    def _script(cls, value: str | None) -> str | None:
        # The name becomes scripts/<name>.yaml: checked here, where suites.yaml's line is known, not at the open.
        problem = script_name_problem(value) if value is not None else None
        if problem is not None:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _family(self) -> Suite:
        problems: list[Problem] = []
        if self.family == "agentsession" and self.script is None:
            problems.append((("script",), "required for an agentsession suite", None))
        if self.family != "agentsession" and self.script is not None:
            problems.append((("script",), f"family {self.family} runs no script; remove script", self.script))
        for name, why in knob_problems(self.family, self.knobs):
            problems.append((("knobs", name), why, getattr(self.knobs, name)))
        for name in ("lifecycle_mode", "resume_mode"):
            if getattr(self, name) and name not in FAMILY_MODES[self.family]:
                problems.append(((name,), f"family {self.family} does not read {name}", getattr(self, name)))
        if self.family != "agentsession" and self.think_scale != 1.0:
            problems.append((("think_scale",), "only agent sessions think; remove think_scale", self.think_scale))
        if self.family in ONE_USER_FAMILIES and (self.ladder is not None or self.users != 1):
            problems.append((("users",), f"a {self.family} suite runs one batch from one user: users: 1, no ladder",
                             self.users))
        if problems:
            raise located("Suite", problems)
        return self

    @property
    def actors_per_user(self) -> int:
        """Actors each Locust user drives at once: one agent session, a glutton user's round robin, a whole spawn
        batch or burst cohort (upstream's defaults where the suite leaves them): any family that reads the
        actors_per_user knob drives that many."""
        if "actors_per_user" in FAMILY_KNOBS[self.family]:
            return int(self.knobs.value("actors_per_user"))
        if self.family in ONE_USER_FAMILIES:
            return int(self.knobs.value("total_actors"))
        return 1

    @property
    def template(self) -> tuple[str, str]:
        """The actor template the suite's actors are created from."""
        return TEMPLATE_ATESPACE, family_template(self.family, self.knobs)

    @property
    def user_class(self) -> str:
        """The Locust user class the suite runs."""
        return USER_CLASSES[self.family]

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str | None) -> str | None:
        if value is not None:
            parse_run_time(value)
        return value

    @field_validator("actor_memory")
    @classmethod
    def _memory(cls, value: str) -> str:
        try:
            parse_byte_count(value)
        except QuantityError as error:
            raise ValueError(str(error)) from None
        return value

    @model_validator(mode="after")
    def _backend_settings(self) -> Suite:
        if self.backend == "kubernetes" and self.kubernetes is None:
            raise PydanticCustomError(KUBERNETES_SECTION_MISSING,
                                      "backend kubernetes needs a kubernetes: section (image, store, …)")
        if self.backend == "kubernetes" and self.inject_wake_delay_ms:
            raise located("Suite", [(("inject_wake_delay_ms",), "only the embedded runtime (backend local) can "
                                      "delay its wakes", self.inject_wake_delay_ms)])
        return self

    @model_validator(mode="after")
    def _load_shape(self) -> Suite:
        # None reads as absent, so model_dump() of either kind of suite validates again (with_overrides).
        if self.ladder is None:
            if self.users is None:
                raise located("Suite", [(("users",), "required for a suite without a ladder", None)])
            return self
        problems: list[Problem] = []
        ramp_s, ramp_step = max((added / self.spawn_rate, index + 1) for index, added in enumerate(
            top - below for below, top in zip((0, *self.ladder.steps), self.ladder.steps, strict=False)))
        if ramp_s >= self.ladder.hold_s:
            problems.append((("ladder", "hold"), f"{self.ladder.hold} is no longer than step {ramp_step}'s ramp "
                             f"({ramp_s:g}s at spawn_rate {self.spawn_rate:g}): the step would end before all its "
                             "users started", self.ladder.hold))
        if self.users is not None:
            problems.append((("users",), "a ladder suite takes its users from ladder; remove users", self.users))
        if self.duration is not None:
            problems.append((("duration",), f"a ladder suite runs for its ladder's steps × hold "
                             f"({self.ladder.duration_s} s); remove duration", self.duration))
        if problems:
            raise located("Suite", problems)
        return self

    @property
    def peak_users(self) -> int:
        """The most users the suite runs at once: its users, or its ladder's top step."""
        if self.ladder is not None:
            return self.ladder.steps[-1]
        assert self.users is not None  # checked by _load_shape
        return self.users

    @property
    def duration_s(self) -> int:
        if self.ladder is not None:
            return self.ladder.duration_s
        return parse_run_time(self.duration or "60s")

    def load_description(self) -> str:
        """The load in a few words: ``8 users for 2m``, or ``ladder 2→12 users, 6 steps of 45s``."""
        if self.ladder is None:
            return f"{self.users} users for {self.duration or '60s'}"
        steps = self.ladder.steps
        return f"ladder {steps[0]}→{steps[-1]} users, {len(steps)} steps of {self.ladder.hold}"

    @property
    def actor_memory_bytes(self) -> int:
        return parse_byte_count(self.actor_memory)

    def with_overrides(self, **changes: Any) -> Suite:
        """A copy with the given fields replaced (None leaves a field as it is; ``kubernetes`` settings and
        ``knobs`` are merged into the suite's own), validated again; a SuiteError names each field that is wrong and
        why."""
        data = self.model_dump()
        given = {key: value for key, value in changes.items() if value is not None}
        for section in ("kubernetes", "knobs"):
            if isinstance(given.get(section), dict):
                given[section] = {**(data.get(section) or {}), **given[section]}
        data.update(given)
        try:
            return Suite.model_validate(data)
        except ValidationError as error:
            reasons = "; ".join(explained(detail) for detail in error.errors())
            raise SuiteError(f"suite {self.name!r}: {reasons}",
                             frozenset(detail["type"] for detail in error.errors())) from None

    def recorded_knobs(self) -> dict[str, Any]:
        """What trial.json records as the trial's knobs."""
        ladder = self.ladder
        return {"family": self.family, "users": self.peak_users, "spawn_rate": self.spawn_rate,
                "duration_s": self.duration_s, "family_knobs": self.knobs.given() or None,
                "think_scale": self.think_scale, "lifecycle_mode": self.lifecycle_mode,
                "resume_mode": self.resume_mode, "actor_memory": format_binary_si(self.actor_memory_bytes),
                "workers": self.workers, "actors_per_worker": self.actors_per_worker,
                "actors_per_user": self.actors_per_user, "ladder": list(ladder.steps) if ladder else None,
                "hold_s": ladder.hold_s if ladder else None,
                "slo": self.slo.model_dump() if self.slo else None,
                "inject_wake_delay_ms": self.inject_wake_delay_ms}


