"""The sections of a suite that are models of their own (its ladder, its SLO, its kubernetes: settings) and
the run-time form they share."""

from __future__ import annotations

import re
from itertools import pairwise
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import InitErrorDetails, PydanticCustomError

from substrate_assets.results.load_steps import MAX_LADDER_STEPS, ladder_spec
from substrate_assets.workload.model import RFC1123_LABEL

_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?")
# One broken rule found by a model validator: the loc it is at (relative to the model), its message, the value.
Problem = tuple[tuple[str | int, ...], str, Any]


def matching(pattern: re.Pattern[str], value: str, what: str) -> str:
    """``value`` when the whole of it matches ``pattern``, else a ValueError saying it must be ``what``."""
    if not pattern.fullmatch(value):
        raise ValueError(f"{value!r} must be {what}")
    return value


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


def located(title: str, problems: list[Problem]) -> ValidationError:
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
            raise located("Ladder", [((), "a ladder takes start, step and max, or users, not both", None)])
        if self.users is None and not given:
            raise located("Ladder", [((), "a ladder needs start, step and max, or users", None)])
        problems = self._users_problems() if self.users is not None else self._range_problems(ranged)
        if problems:
            raise located("Ladder", problems)
        return self

    def _users_problems(self) -> list[Problem]:
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
    def _range_problems(ranged: dict[str, int | None]) -> list[Problem]:
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
        return matching(RFC1123_LABEL, value, "an RFC 1123 label")


