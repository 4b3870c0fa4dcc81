"""Configuration of the embedded runtime: workers, templates, ports, state directory, timeouts."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from substrate_assets.families import DEFAULT_TEMPLATES, KNOBS_BY_NAME, TEMPLATE_ATESPACE
from substrate_assets.runtime.glutton_http import MAX_REQUEST_BODY
from substrate_assets.runtime.trajectory import TRAJECTORY_DIR, TrajectoryError, load_trajectory
from substrate_assets.workload.quantity import QuantityError, parse_byte_count

GiB = 1 << 30
DEFAULT_TEMPLATE_ATESPACE = TEMPLATE_ATESPACE
DEFAULT_TEMPLATE_NAME = DEFAULT_TEMPLATES["glutton"]
# Durdir's two templates: upstream's differ in what of the actor's disk is durable (the data dir or the whole
# filesystem); here every actor's data dir is in its snapshot, so the two behave alike.
DURDIR_TEMPLATE_NAMES = KNOBS_BY_NAME["durdir_template"].choices
# Sweperf's template: upstream's default SWE-bench image name, here an actor replaying our own trajectory file.
SWEPERF_TEMPLATE_NAME = DEFAULT_TEMPLATES["sweperf"]
DEFAULT_TRAJECTORY = TRAJECTORY_DIR / f"{SWEPERF_TEMPLATE_NAME}.json"
WORKERPOOL_NAME = "benchmark-ateom"


def _bytes(value: object) -> int | None:
    if value is None or isinstance(value, int):
        return value
    try:
        return parse_byte_count(str(value))
    except QuantityError as error:
        raise ValueError(str(error)) from None


class TemplateConfig(BaseModel):
    """An actor template; ``memory_limit`` (bytes or a quantity such as ``1Gi``) bounds RAM plus files.

    ``service`` is what its actors serve: glutton's protobuf routes, or sweperf's trajectory service replaying
    ``trajectory`` (a file in the format of ``runtime/trajectory.py``; the bundled default when unset)."""

    model_config = ConfigDict(frozen=True)

    atespace: str = DEFAULT_TEMPLATE_ATESPACE
    name: str = DEFAULT_TEMPLATE_NAME
    memory_limit: int | None = GiB
    service: Literal["glutton", "sweperf"] = "glutton"
    trajectory: Path | None = None

    _parse = field_validator("memory_limit", mode="before")(classmethod(lambda cls, v: _bytes(v)))

    @model_validator(mode="after")
    def _trajectory_fits_service(self) -> TemplateConfig:
        if self.service == "glutton" and self.trajectory is not None:
            raise ValueError(f"template {self.atespace}/{self.name}: a trajectory is for service sweperf only")
        if self.service == "sweperf":
            try:  # a bad file fails the runtime's start, not the first resume of an actor (as a crash)
                load_trajectory(self.trajectory_file)
            except TrajectoryError as error:
                raise ValueError(f"template {self.atespace}/{self.name}: {error}") from None
        return self

    @property
    def trajectory_file(self) -> Path:
        """The trajectory a sweperf actor replays: the configured file, else the bundled default."""
        return (self.trajectory or DEFAULT_TRAJECTORY).resolve()


class RuntimeConfig(BaseModel):
    """Everything the embedded runtime needs; every server binds 127.0.0.1."""

    model_config = ConfigDict(frozen=True)

    workers: int = Field(default=8, ge=1, description="Worker count (W).")
    actors_per_worker: int = Field(default=4, ge=1, description="Running actors each worker holds (C).")
    actor_memory: int = Field(default=GiB, gt=0, description="Memory limit of the built-in templates, bytes.")
    templates: tuple[TemplateConfig, ...] = ()
    state_dir: Path | None = Field(default=None, description="Snapshots, live data dirs and host logs; a temporary "
                                   "directory when unset.")
    keep_state: bool = Field(default=False, description="Keep the state directory when the runtime stops.")
    live_dir: Path | None = Field(default=None, description="Where running actors keep their data directories; a "
                                  "fresh directory on tmpfs ($SUBSTRATE_BENCH_LIVE_ROOT, else /dev/shm) when unset and "
                                  "available, as upstream's "
                                  "data dir is tmpfs, else <state_dir>/live. Always removed at stop.")
    control_port: int = Field(default=0, ge=0, le=65535)
    router_port: int = Field(default=0, ge=0, le=65535)
    metrics_port: int = Field(default=0, ge=0, le=65535)
    warm_hosts: int = Field(default=2, ge=0, description="Actor host processes kept started and idle, so a wake "
                            "does not pay for a Python start.")
    router_timeout_s: float = Field(default=30.0, gt=0, description="The router's own deadline per request (504).")
    router_max_body: int = Field(default=MAX_REQUEST_BODY, gt=0, description="Largest request body the router forwards "
                                 "(413 above it): by default glutton's largest legitimate request.")
    router_body_timeout_s: float = Field(default=30.0, gt=0, description="How long the router waits for more of a "
                                         "request's body before answering 408 and closing the connection.")
    max_parked: int = Field(default=1000, ge=1, description="Requests the router parks at once before answering 503.")
    drain_timeout_s: float = Field(default=30.0, gt=0, description="How long a suspend or pause waits for in-flight "
                                   "requests.")
    host_command_timeout_s: float = Field(default=120.0, gt=0)
    stop_grace_s: float = Field(default=10.0, ge=0, description="How long stopping waits for suspends and pauses in "
                                "progress to finish before it kills their hosts (a checkpoint takes well under a "
                                "second).")
    snapshot_fsync: bool = Field(default=True, description="Make suspend snapshots durable (fsync) before they count.")
    workerpool_name: str = WORKERPOOL_NAME
    inject_wake_delay_ms: int = Field(default=0, ge=0, description="Added to every resume (restore or unpause) "
                                      "before the actor answers: a slowdown of known size, to check that "
                                      "comparisons find one. 0 adds nothing.")

    _parse = field_validator("actor_memory", mode="before")(classmethod(lambda cls, v: _bytes(v)))

    def all_templates(self) -> tuple[TemplateConfig, ...]:
        """Configured templates plus the built-in ones (``benchmark-workloads/glutton``, durdir's two and sweperf's
        ``swebench-astropy-7336``, each limited to ``actor_memory``) that a configured template of the same name does
        not override."""
        built_in = (*(TemplateConfig(name=name, memory_limit=self.actor_memory)
                      for name in (DEFAULT_TEMPLATE_NAME, *DURDIR_TEMPLATE_NAMES)),
                    TemplateConfig(name=SWEPERF_TEMPLATE_NAME, memory_limit=self.actor_memory, service="sweperf"))
        names = {(t.atespace, t.name) for t in self.templates}
        return (*(t for t in built_in if (t.atespace, t.name) not in names), *self.templates)

    @property
    def capacity(self) -> int:
        return self.workers * self.actors_per_worker
