"""Checks made before any load: a trial that could measure nothing is refused, not run.

The script is valid by the time a trial holds it (it was loaded and validated). What is left to check
is the deployment: the control API and the router answer, and the actor template's memory limit is at
least the script's ``min_actor_memory`` — the same check every session makes, made once, up front, so a
wrong ``--actor-memory`` costs one line instead of a whole run of refused sessions.

And there is room to write: a full disk found at the end costs the whole run. :func:`trial_disk_needs`
estimates what a trial writes on each filesystem (the run store; the runtime's state directory; the live
data directories on /dev/shm) and :func:`check_free_space` refuses a trial that would not fit. A disk that
fills anyway is met by :class:`Landing`: the trial stops in one line (:class:`TrialStopped`), never with a
traceback, and leaves no half-written trial.
"""

from __future__ import annotations

import math
import os
import shutil
import urllib.error
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Literal

import grpc

from substrate_assets.driver.clients import TEMPLATE, ControlClient
from substrate_assets.driver.scripts import LoadedScript
from substrate_assets.driver.users.session import SessionStartError, TemplateCheck
from substrate_assets.results.atomic import write_error
from substrate_assets.suites import Suite
from substrate_assets.workload import ScriptFile
from substrate_assets.workload.budget import budgets
from substrate_assets.workload.model import Script
from substrate_assets.workload.quantity import format_size

ANSWER_TIMEOUT_S = 5.0
MiB = 1 << 20
# A request costs one row in its request-log part and one in requests.parquet: ~100–200 bytes each with its
# names, session id and timestamps; 512 leaves room for error texts and Locust's per-request CSV lines.
REQUEST_BYTES = 512
# Requests a session makes besides its laps: CreateActor, the template check, the first resume, DeleteActor.
SESSION_REQUESTS = 4
# A bound on one actor's request rate in a family without a script (see family_requests).
FAMILY_REQUESTS_PER_S = 50
# Locust's CSVs, locust.log and the trial's own files (trial.json, stats.jsonl, logs.txt, telemetry) of a
# trial that makes few requests: a few MiB; a floor with room to spare.
STORE_FLOOR = 32 * MiB
# The runtime's host logs and snapshot manifests.
STATE_FLOOR = 16 * MiB


class TrialRefused(Exception):
    """The trial could not measure anything and was not started; the message says why, in one line."""


class TrialStopped(Exception):
    """The trial stopped before its end because a write failed; the message says why and what landed, in one line."""


@dataclass(frozen=True)
class DiskNeed:
    """About how many bytes a trial writes under ``path``, and what they are."""

    path: Path
    bytes: int
    what: str


def expected_requests(suite: Suite, script: Script) -> int:
    """An upper bound on the requests a trial books: every user laps the script as fast as its thinks allow
    (ops take time too, so real laps are slower), each step's ops plus a suspend and a resume."""
    scale = suite.think_scale or 1.0
    lap_s = script.think_per_lap_ns * scale / 1e9
    per_lap = sum(len(step.ops) + 2 for step in script.steps)
    laps = math.ceil(suite.duration_s / lap_s) if lap_s > 0 else 0
    return suite.peak_users * (laps * per_lap + SESSION_REQUESTS)


def family_requests(suite: Suite) -> int:
    """An upper bound on the requests a trial of a family without a script books: every actor at
    ``FAMILY_REQUESTS_PER_S`` for the whole run (a glutton wake with no wait and no live window is a resume, a
    ping and a suspend, tens of milliseconds at best), plus its create and delete."""
    actors = suite.peak_users * suite.actors_per_user
    return actors * (FAMILY_REQUESTS_PER_S * suite.duration_s + SESSION_REQUESTS)


def trial_disk_needs(suite: Suite, script: Script | None, store_dir: Path, state_dir: Path, live_dir: Path | None,
                     capacity: int, actor_memory: int) -> list[DiskNeed]:
    """What a local trial writes: request-log rows and Locust's files in the store; a snapshot of every parked
    actor (its declared RAM and files — a family without a script: its memory limit), plus one more per running
    actor while it suspends, in the state directory; the files of every running actor in the live directory."""
    actors = suite.peak_users * suite.actors_per_user
    running = min(actors, capacity)
    if script is not None:
        budget = budgets(script.steps)
        footprint, files = min(budget.total, actor_memory), min(budget.disk, actor_memory)
        requests = expected_requests(suite, script)
    else:
        footprint = files = actor_memory
        requests = family_requests(suite)
    needs = [DiskNeed(store_dir, STORE_FLOOR + REQUEST_BYTES * requests,
                      f"the run store: up to {requests} logged requests and Locust's files"),
             DiskNeed(state_dir, STATE_FLOOR + (actors + running) * footprint,
                      f"the runtime's state: snapshots of {actors} actors of {format_size(footprint)}")]
    if live_dir is not None:
        needs.append(DiskNeed(live_dir, running * files, f"the live data of {running} running actors"))
    return needs


def _mount_point(path: Path) -> Path:
    path = path.resolve()
    device = os.stat(path).st_dev
    while path.parent != path and os.stat(path.parent).st_dev == device:
        path = path.parent
    return path


def check_free_space(needs: Iterable[DiskNeed]) -> None:
    """Raise :class:`TrialRefused` when a filesystem has less free space than the needs on it add up to."""
    by_device: dict[int, list[DiskNeed]] = {}
    for need in needs:
        by_device.setdefault(os.stat(need.path).st_dev, []).append(need)
    for together in by_device.values():
        wanted = sum(need.bytes for need in together)
        free = shutil.disk_usage(together[0].path).free
        if free < wanted:
            raise TrialRefused(f"not enough free space on {_mount_point(together[0].path)}: "
                               f"{format_size(free)} free, the trial needs about {format_size(wanted)} "
                               f"({'; '.join(need.what for need in together)})")


class Landing:
    """Around the writes that land a trial: a write that fails (a full store) removes the staging directory and
    raises :class:`TrialStopped` with one line, never a traceback and never half a trial.

    ``stopped`` is why Locust stopped early, when it did: a trial stopped that way still lands if it can.
    """

    def __init__(self, staging: Path) -> None:
        self.staging = staging
        self.stopped: str | None = None

    def __enter__(self) -> Landing:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 traceback: TracebackType | None) -> Literal[False]:
        if not isinstance(error, Exception) or isinstance(error, TrialRefused | TrialStopped):
            return False
        failed = write_error(error, Path(getattr(error, "filename", None) or self.staging))
        if failed is None:
            return False
        shutil.rmtree(self.staging, ignore_errors=True)
        full = " (the store's filesystem is full)" if failed.disk_full else ""
        landed = f"nothing landed{full}: {failed}; the trial's staging directory was removed"
        raise TrialStopped(f"{self.stopped}; {landed}" if self.stopped else landed) from error


def check_before_load(script: ScriptFile | None, control_endpoint: str, router_url: str, *,
                      control_tls: bool = False, timeout_s: float = ANSWER_TIMEOUT_S, disk: Sequence[DiskNeed] = (),
                      template: tuple[str, str] = TEMPLATE) -> None:
    """Raise :class:`TrialRefused` unless the control API and the router answer, the control API serves
    ``template`` (the one the suite's family creates actors of), the template fits the script (if any) and
    ``disk`` fits the free space."""
    check_free_space(disk)
    control = ControlClient(control_endpoint, deadline_s=timeout_s, tls=control_tls)
    try:
        try:
            control.get_template(*template)
        except grpc.RpcError as error:
            raise TrialRefused(f"the control API at {control_endpoint} does not answer GetActorTemplate "
                               f"{template[0]}/{template[1]} ({error.code().name}: {error.details()})") from None
        if script is not None:
            try:
                TemplateCheck(control).ensure(LoadedScript(script, b""))
            except SessionStartError as error:
                raise TrialRefused(str(error)) from None
    finally:
        control.close()
    _check_router(router_url, timeout_s)


def _check_router(router_url: str, timeout_s: float) -> None:
    try:
        with urllib.request.urlopen(router_url, timeout=timeout_s):
            pass
    except urllib.error.HTTPError:
        return  # it answered (a request naming no actor is refused, as it should be)
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise TrialRefused(f"the router at {router_url} does not answer ({reason})") from None
