"""Suites: named, repeatable trial configurations read from ``suites.yaml``, with errors that point at lines."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_core import PydanticCustomError

from substrate_assets.project import project_root
from substrate_assets.results.server_summary import DEFAULT_ATELET_LAG_S
from substrate_assets.workload.decode import alias_expansion_problem
from substrate_assets.workload.library import read_document
from substrate_assets.workload.model import RFC1123_LABEL, script_name_problem
from substrate_assets.workload.quantity import QuantityError, format_binary_si, parse_byte_count

SLUG = re.compile(r"[a-z0-9][a-z0-9_-]*")
_DURATION = re.compile(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s?)?")
# The error type of a kubernetes suite without its kubernetes: section, which a command line can supply.
KUBERNETES_SECTION_MISSING = "kubernetes_section_missing"


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
    script: str = Field(description="Workload script name (scripts/<script>.yaml).")
    description: str = ""
    users: int = Field(ge=1, description="Concurrent agent sessions (Locust users).")
    spawn_rate: float = Field(1.0, gt=0, description="Users started per second.")
    duration: str = Field("60s", description="Run time, Locust -t form (60s, 2m, 1h30m).")
    think_scale: float = Field(1.0, ge=0, description="Multiplies every think time; 0 reads as 1, as upstream.")
    lifecycle_mode: Literal["", "suspend", "pause"] = ""
    resume_mode: Literal["", "explicit", "implicit"] = ""
    actor_memory: str = Field("1Gi", description="Memory limit of the glutton template.")
    workers: int = Field(8, ge=1)
    actors_per_worker: int = Field(4, ge=1)
    backend: Literal["local", "kubernetes"] = "local"
    kubernetes: KubernetesSettings | None = Field(None, description="Required for backend kubernetes.")
    tag: str = Field("local", description="Run tag (upstream: the commit under test).")
    prometheus_url: str | None = Field(None, description="Harvest server telemetry from this Prometheus (which "
                                       "scrapes the runtime) instead of the runtime's own event log.")
    atelet_lag_s: int = Field(DEFAULT_ATELET_LAG_S, ge=0, description="Export lag of atelet metrics: the harvest "
                              "waits until end + lag and reads snapshot figures lag/2 late.")
    metadata: dict[str, Any] = Field(default_factory=dict)

    @field_validator("name", "tag")
    @classmethod
    def _slug(cls, value: str) -> str:
        if not SLUG.fullmatch(value):
            raise ValueError(f"{value!r} must be a slug ([a-z0-9_-], starting with a letter or digit)")
        return value

    @field_validator("script")
    @classmethod
    def _script(cls, value: str) -> str:
        # The name becomes scripts/<name>.yaml: checked here, where suites.yaml's line is known, not at the open.
        problem = script_name_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value

    @field_validator("duration")
    @classmethod
    def _duration(cls, value: str) -> str:
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
        return self

    @property
    def duration_s(self) -> int:
        return parse_run_time(self.duration)

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
            reasons = "; ".join(": ".join([*map(str, detail["loc"]), detail["msg"].removeprefix("Value error, ")])
                                for detail in error.errors())
            raise SuiteError(f"suite {self.name!r}: {reasons}",
                             frozenset(detail["type"] for detail in error.errors())) from None

    def knobs(self) -> dict[str, Any]:
        return {"users": self.users, "spawn_rate": self.spawn_rate, "duration_s": self.duration_s,
                "think_scale": self.think_scale, "lifecycle_mode": self.lifecycle_mode,
                "resume_mode": self.resume_mode, "actor_memory": format_binary_si(self.actor_memory_bytes),
                "workers": self.workers, "actors_per_worker": self.actors_per_worker}


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


def load_suites(path: Path | None = None) -> dict[str, Suite]:
    """Every suite in ``suites.yaml``, by name; a SuiteError says which line is wrong and why."""
    path = path or project_root() / "suites.yaml"
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
                field = ".".join(str(part) for part in detail["loc"]) or "suite"
                line, column = node.start_mark.line + 1, node.start_mark.column + 1
                message = detail["msg"].removeprefix("Value error, ")
                problems.append(f"{path}:{line}:{column}: {label}: {field}: {message}")
            continue
        if suite.name in suites:
            node = _node_at(root, ("suites", index, "name"))
            problems.append(f"{path}:{node.start_mark.line + 1}:{node.start_mark.column + 1}: "
                            f"suite {suite.name!r} is defined twice")
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
