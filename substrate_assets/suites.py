"""Suites: named, repeatable trial configurations read from ``suites.yaml``, with errors that point at lines."""

from __future__ import annotations

import re
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import ErrorDetails, InitErrorDetails, PydanticCustomError

from substrate_assets.analysis.thresholds import Thresholds
from substrate_assets.families import (
    FAMILY_MODES,
    ONE_USER_FAMILIES,
    TEMPLATE_ATESPACE,
    USER_CLASSES,
    Family,
    Knobs,
    family_template,
    knob_problems,
)
from substrate_assets.project import project_root, scripts_directory
from substrate_assets.results.load_steps import ladder_spec
from substrate_assets.results.server_summary import DEFAULT_ATELET_LAG_S
from substrate_assets.workload.decode import alias_expansion_problem
from substrate_assets.workload.errors import ScriptError
from substrate_assets.workload.library import ScriptLibrary, read_document
from substrate_assets.workload.model import RFC1123_LABEL, script_name_problem
from substrate_assets.workload.quantity import QuantityError, format_binary_si, parse_byte_count

SLUG = re.compile(r"[a-z0-9][a-z0-9_-]*")
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?")
# The error type of a kubernetes suite without its kubernetes: section, which a command line can supply.
KUBERNETES_SECTION_MISSING = "kubernetes_section_missing"
# More steps than any ladder needs; a typo in max (1200 for 120) would otherwise run for days.
MAX_LADDER_STEPS = 100
# Trials a run of a suite repeats as one group, by default (bench/verdicts.py: docs/verdicts.md), and at most.
DEFAULT_REPEAT = 3
MAX_REPEAT = 100
# One broken rule found by a model validator: the loc it is at (relative to the model), its message, the value.
_Problem = tuple[tuple[str | int, ...], str, Any]


class SuiteError(ValueError):
    """suites.yaml (or one suite in it) cannot be used; the message names the file and line.

    ``kinds`` holds the pydantic error types behind it, so a caller can tell which problem it could help with."""

    def __init__(self, message: str, kinds: frozenset[str] = frozenset()) -> None:
        super().__init__(message)
        self.kinds = kinds


def parse_run_time(text: str | int) -> int:
    """Locust's ``-t`` form (``90``, ``60s``, ``2m``, ``1h30m``) in whole seconds."""
    match = _DURATION.fullmatch(str(text).strip())
    if not str(text).strip() or match is None or not any(match.groups()):
        raise ValueError(f"{text!r} is not a run time: it must look like 60s, 2m or 1h30m")
    hours, minutes, seconds = (int(part or 0) for part in match.groups())
    total = hours * 3600 + minutes * 60 + seconds
    if total <= 0:
        raise ValueError(f"run time {text!r} must be positive")
    return total


def _located(title: str, problems: list[_Problem]) -> ValidationError:
    """Errors at the given locs (field, or field and index), each with its message and the value at fault.

    A rule across fields is checked in a model validator, whose own errors sit at the model; pydantic keeps the locs
    of a ValidationError raised there, so load_suites can point at the line that is wrong, not at the section."""
    return ValidationError.from_exception_data(title, [
        InitErrorDetails(type=PydanticCustomError("value_error", "{message}", {"message": message}), loc=loc,
                         input=value)
        for loc, message, value in problems])


class Ladder(BaseModel):
    """A step-ladder load: the users go up step by step, each step held for ``hold``.

    Given as ``start``, ``step`` and ``max`` (2, 4, …, 12), or as the list of ``users`` of each step."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    start: int | None = Field(None, ge=1, description="Users of the first step.")
    step: int | None = Field(None, ge=1, description="Users added by each step.")
    max: int | None = Field(None, ge=1, description="Users of the last step: start plus a whole number of steps.")
    users: tuple[Annotated[int, Field(ge=1)], ...] | None = Field(
        None, description="Users of each step, strictly increasing; instead of start, step and max.")
    hold: str = Field(description="How long each step runs, Locust -t form (45s, 2m).")

    @field_validator("hold", mode="before")
    @classmethod
    def _hold(cls, value: Any) -> Any:
        if isinstance(value, int) and not isinstance(value, bool):
            value = f"{value}s"  # whole seconds, as Locust's -t reads a bare number
        if isinstance(value, str):
            parse_run_time(value)
        return value

    @model_validator(mode="after")
    def _form(self) -> Ladder:
        ranged = {name: getattr(self, name) for name in ("start", "step", "max")}
        given = [name for name, value in ranged.items() if value is not None]
        if self.users is not None and given:
            raise _located("Ladder", [((), "a ladder takes start, step and max, or users, not both", None)])
        if self.users is None and not given:
            raise _located("Ladder", [((), "a ladder needs start, step and max, or users", None)])
        problems = self._users_problems() if self.users is not None else self._range_problems(ranged)
        if problems:
            raise _located("Ladder", problems)
        return self

    def _users_problems(self) -> list[_Problem]:
        users = self.users or ()
        if not users:
            return [(("users",), "a ladder needs at least one step", [])]
        if len(users) > MAX_LADDER_STEPS:
            return [(("users",), f"a ladder of {len(users)} steps is too long: at most {MAX_LADDER_STEPS}", None)]
        # Each entry's own loc, so the error is on the entry's line.
        return [(("users", index), f"{count} is not above the step before it ({previous}): "
                 "a ladder's steps must increase", count)
                for index, (previous, count) in enumerate(pairwise(users), start=1) if count <= previous]

    @staticmethod
    def _range_problems(ranged: dict[str, int | None]) -> list[_Problem]:
        missing = [name for name, value in ranged.items() if value is None]
        if missing:
            return [((name,), "a ladder of start, step and max needs all three", None) for name in missing]
        start, step, top = (value or 0 for value in ranged.values())  # none is None here
        if top < start:
            return [(("max",), f"max {top} is below start {start}", top)]
        if (top - start) % step:
            return [(("max",), f"max {top} is not start {start} plus a whole number of steps of {step}", top)]
        count = (top - start) // step + 1
        if count > MAX_LADDER_STEPS:
            return [(("max",), f"a ladder of {count} steps is too long: at most {MAX_LADDER_STEPS}", top)]
        return []

    @property
    def steps(self) -> tuple[int, ...]:
        """The users of each step, ascending."""
        if self.users is not None:
            return self.users
        assert self.start is not None and self.step is not None and self.max is not None  # checked by _form
        return tuple(range(self.start, self.max + 1, self.step))

    @property
    def hold_s(self) -> int:
        return parse_run_time(self.hold)

    @property
    def duration_s(self) -> int:
        return len(self.steps) * self.hold_s

    def locust_spec(self) -> str:
        """Upstream's ``--ladder`` value: ``2:45s,4:45s``."""
        return ladder_spec(self.steps, self.hold_s)


class Slo(BaseModel):
    """Service-level objectives a load point must meet; at least one threshold."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    wake_p99_ms: float | None = Field(None, gt=0, allow_inf_nan=False, description="The p99 of wake latency "
                                      "(WakeFirstTouch), in ms, a load point may not exceed.")
    failure_ratio: float | None = Field(None, ge=0, le=1, allow_inf_nan=False, description="Failed requests over "
                                        "all requests of a load point, which it may not exceed.")

    @model_validator(mode="after")
    def _threshold(self) -> Slo:
        if self.wake_p99_ms is None and self.failure_ratio is None:
            raise ValueError("an slo needs at least one threshold: wake_p99_ms, failure_ratio")
        return self


class KubernetesSettings(BaseModel):
    """Where and how a ``kubernetes`` trial runs: the driver pod, its endpoints and the object-store run store."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    image: str = Field(description="The substrate-bench image (deploy/Dockerfile) the driver pods run.")
    store: str = Field(description="Run store URL the trial is written to: gs://bucket/prefix, s3://…, file://….")
    namespace: str = "benchmarking"
    service_account: str = Field("benchmark-driver", description="The driver pod's service account (cluster "
                                 "facts: list nodes, list pods in benchmark-workloads); deploy/rbac.yaml.")
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = "IfNotPresent"
    control_endpoint: str = "api.ate-system.svc.cluster.local:443"
    router_url: str = "http://atenet-router.ate-system.svc.cluster.local"
    control_tls: bool = Field(True, description="Reach the control API over TLS (system roots, or the CA file "
                              "named by GRPC_DEFAULT_SSL_ROOTS_FILE_PATH), as its port 443 implies.")
    locust_workers: int = Field(0, ge=0, description="Locust worker pods; 0 runs every user in the driver pod.")
    workers_wait_s: int = Field(900, gt=0, description="How long the master waits for all its workers to connect "
                                "before it gives up.")
    cpu_request: str = "1"
    memory_request: str = "2Gi"
    cpu_limit: str | None = "2"
    memory_limit: str | None = "4Gi"
    pod_wait_timeout_s: int | None = Field(None, gt=0, description="How long Dagster waits for the driver pod; "
                                           "default: the run time plus 1800 s, as upstream's Job timeout.")
    cluster_facts: bool = Field(True, description="Discover cluster facts through the Kubernetes API.")
    env_secrets: tuple[str, ...] = Field((), description="Secrets whose keys become the pods' environment "
                                         "(envFrom), e.g. object-store credentials.")
    node_selector: dict[str, str] = Field(default_factory=dict, description="Node labels the trial's pods must "
                                          "match, e.g. to keep the load off the nodes under test.")
    tolerations: tuple[dict[str, str], ...] = (
        {"key": "ate.dev/benchmarking", "operator": "Equal", "value": "true", "effect": "NoSchedule"},)

    @field_validator("namespace", "service_account")
    @classmethod
    def _label(cls, value: str) -> str:
        if not RFC1123_LABEL.fullmatch(value):
            raise ValueError(f"{value!r} must be an RFC 1123 label")
        return value


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
    compare: Thresholds = Field(default_factory=Thresholds, description="When `substrate-bench compare` and the "
                                "trial check call a figure changed.")
    think_scale: float = Field(1.0, ge=0, description="Multiplies every think time; 0 reads as 1, as upstream.")
    lifecycle_mode: Literal["", "suspend", "pause"] = ""
    resume_mode: Literal["", "explicit", "implicit"] = ""
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
        if not SLUG.fullmatch(value):
            raise ValueError(f"{value!r} must be a slug ([a-z0-9_-], starting with a letter or digit)")
        return value

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
        problems: list[_Problem] = []
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
            raise _located("Suite", problems)
        return self

    @property
    def actors_per_user(self) -> int:
        """Actors each Locust user drives at once: one agent session, a glutton user's round robin, a whole spawn
        batch or burst cohort (upstream's defaults where the suite leaves them)."""
        if self.family == "glutton":
            return self.knobs.actors_per_user or 1
        if self.family in ONE_USER_FAMILIES:
            return self.knobs.total_actors or 100
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
            raise _located("Suite", [(("inject_wake_delay_ms",), "only the embedded runtime (backend local) can "
                                      "delay its wakes", self.inject_wake_delay_ms)])
        return self

    @model_validator(mode="after")
    def _load_shape(self) -> Suite:
        # None reads as absent, so model_dump() of either kind of suite validates again (with_overrides).
        if self.ladder is None:
            if self.users is None:
                raise _located("Suite", [(("users",), "required for a suite without a ladder", None)])
            return self
        problems: list[_Problem] = []
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
            raise _located("Suite", problems)
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
        """A copy with the given fields replaced (None leaves a field as it is; ``kubernetes`` settings are merged
        into the suite's own), validated again; a SuiteError names each field that is wrong and why."""
        data = self.model_dump()
        given = {key: value for key, value in changes.items() if value is not None}
        if isinstance(given.get("kubernetes"), dict):
            given["kubernetes"] = {**(data.get("kubernetes") or {}), **given["kubernetes"]}
        data.update(given)
        try:
            return Suite.model_validate(data)
        except ValidationError as error:
            reasons = "; ".join(_explained(detail) for detail in error.errors())
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


def _node_at(root: yaml.Node, location: tuple[Any, ...]) -> yaml.Node:
    node = root
    for part in location:
        if isinstance(node, yaml.MappingNode):
            matches = [value for key, value in node.value if getattr(key, "value", None) == str(part)]
            if not matches:
                return node
            node = matches[0]
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            return node
    return node


def _explained(detail: ErrorDetails) -> str:
    """One pydantic error as ``field: why``, the field as written in suites.yaml (``ladder.users[2]``); an error of
    the suite as a whole is its ``why`` alone."""
    field = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in detail["loc"]).lstrip(".")
    message = detail["msg"].removeprefix("Value error, ")
    if detail["type"] == "extra_forbidden":
        message = "unknown field (a misspelling?)"
    return f"{field}: {message}" if field else message


def hold_problem(suite: Suite, scripts: Path) -> str | None:
    """Why the suite's ladder holds a step for less than one lap of its script's thinks, if it does: a step that
    ends mid-lap measures sessions that never reached their later steps. None when there is no ladder, or when the
    script cannot be loaded (script validation says why, where the script is). load_suites checks it; a caller
    that overrides think_scale (with_overrides) checks the copy again with this."""
    if suite.ladder is None or suite.script is None:
        return None
    try:
        script = ScriptLibrary(scripts).load(suite.script).script
    except (ScriptError, OSError, ValueError):
        return None
    scale = suite.think_scale or 1.0  # 0 reads as 1, as the field says
    cycle_s = script.think_per_lap_ns * scale / 1e9
    if suite.ladder.hold_s >= cycle_s:
        return None
    return (f"{suite.ladder.hold} is shorter than one think cycle of script {suite.script} "
            f"({script.think_per_lap_ns / 1e9:g}s of think per lap × think scale {scale:g} = {cycle_s:g}s); "
            "each step must hold every session through its whole script")


def load_suites(path: Path | None = None, scripts: Path | None = None) -> dict[str, Suite]:
    """Every suite in ``suites.yaml``, by name; a SuiteError says which line is wrong and why.

    ``scripts`` is where a ladder suite's script is read to check its hold against one think cycle: by default the
    ``scripts/`` directory beside the suites file, else the project's (deploy/suites.cluster.yaml has none)."""
    path = path or project_root() / "suites.yaml"
    if scripts is None:
        scripts = path.parent / "scripts" if (path.parent / "scripts").is_dir() else scripts_directory()
    try:
        text = read_document(path).decode("utf-8")
    except OSError as error:
        raise SuiteError(f"{path}: cannot read: {error.strerror}") from None
    except UnicodeDecodeError as error:
        raise SuiteError(f"{path}: not UTF-8 text: {error.reason} at byte {error.start}") from None
    except ValueError as error:  # larger than any suites file needs
        raise SuiteError(f"{path}: {error}") from None
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        # Checked before anything is built from the nodes: a "billion laughs" document composes in a moment, but
        # every walk of what it constructs (validation, trial.json) would run out of memory.
        bomb = alias_expansion_problem(root) if root is not None else None
        if bomb is not None:
            raise SuiteError(f"{path}:{bomb.line}:{bomb.column}: {bomb.message}")
        document = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise SuiteError(f"{path}: invalid YAML: {error}") from None
    except RecursionError:
        raise SuiteError(f"{path}: invalid YAML: nested too deeply") from None
    if root is None or not isinstance(document, dict) or not isinstance(document.get("suites"), list):
        raise SuiteError(f"{path}:1:1: expected a mapping with a 'suites' list")
    unknown = set(document) - {"suites"}
    if unknown:
        raise SuiteError(f"{path}:1:1: unknown top-level field(s): {', '.join(sorted(unknown))}")
    suites: dict[str, Suite] = {}
    problems: list[str] = []
    for index, entry in enumerate(document["suites"]):
        named = isinstance(entry, dict) and entry.get("name")
        label = f"suite {entry['name']!r}" if named else f"suite {index + 1}"
        try:
            suite = Suite.model_validate(entry)
        except ValidationError as error:
            for detail in error.errors():
                node = _node_at(root, ("suites", index, *detail["loc"]))
                line, column = node.start_mark.line + 1, node.start_mark.column + 1
                problems.append(f"{path}:{line}:{column}: {label}: {_explained(detail)}")
            continue
        if suite.name in suites:
            node = _node_at(root, ("suites", index, "name"))
            problems.append(f"{path}:{node.start_mark.line + 1}:{node.start_mark.column + 1}: "
                            f"suite {suite.name!r} is defined twice")
            continue
        hold = hold_problem(suite, scripts)
        if hold is not None:
            node = _node_at(root, ("suites", index, "ladder", "hold"))
            problems.append(f"{path}:{node.start_mark.line + 1}:{node.start_mark.column + 1}: "
                            f"{label}: ladder.hold: {hold}")
            continue
        suites[suite.name] = suite
    if problems:
        raise SuiteError("\n".join(problems))
    return suites


def get_suite(name: str, path: Path | None = None) -> Suite:
    suites = load_suites(path)
    if name not in suites:
        raise SuiteError(f"no suite {name!r} in {path or project_root() / 'suites.yaml'} "
                         f"(have {', '.join(sorted(suites)) or 'none'})")
    return suites[name]


def compare_thresholds(suite: str | None, suites: dict[str, Suite]) -> tuple[Thresholds, str]:
    """The thresholds a comparison whose candidate ran ``suite`` is judged by, and where they come from: the suite's
    ``compare:``, or the defaults for a suite ``suites`` does not have (an imported run's)."""
    if suite is not None and suite in suites:
        return suites[suite].compare, f"thresholds of suite {suite}"
    return Thresholds(), f"default thresholds (suite {suite} is not in suites.yaml)"
