"""Who owns a run, and failing the runs whose owner is gone.

A run's owner is the process that executes its steps: host, pid, and the process's start by the wall clock, so that
a pid the system has since given to another process is not taken for the owner. ``substrate-bench`` tags the runs
it executes in-process when it creates them; every other run (launched by the UI, a sensor or a schedule) is tagged
by its run worker as its steps begin (``executor``). Dagster frees a run's pool slots when its step ends in a living
process; a process killed with SIGKILL ends nothing, so its run stays STARTED and keeps its slot of the one-slot pool
``trials``, and every later trial waits for it forever (Dagster's run monitoring cannot check a run worker of the
default run launcher, and frees slots only of runs already marked finished).

``free_dead_runs`` marks failed every unfinished run whose owner on this host is gone and frees its slots, and frees
the slots still held by runs that have ended or no longer exist (no step of theirs can be running). A run owned by
another host is left alone: its process cannot be checked from here. A run without an owner of its own (its worker
has not yet begun its steps, or its tags were copied from the run it re-executes) is never taken for dead.
"""

from __future__ import annotations

import os
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime

import dagster as dg

from substrate_assets.processes.owner import WALL_CLOCK_SLACK_S, Owner

OWNER_HOST_TAG = "substrate-bench/host"
OWNER_PID_TAG = "substrate-bench/pid"
OWNER_STARTED_TAG = "substrate-bench/pid-started"  # the process's start, seconds since the epoch
OWNER_COMMAND_TAG = "substrate-bench/command"
PARENT_RUN_TAG = "dagster/parent_run_id"

UNFINISHED = (dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED,
              dg.DagsterRunStatus.CANCELING)
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
_OWNER_TAGS = (OWNER_HOST_TAG, OWNER_PID_TAG, OWNER_STARTED_TAG)


def owner_tags(owner: Owner) -> dict[str, str]:
    """The run tags naming ``owner``, a live process whose start is known (a run's owner is this process)."""
    started = owner.start_epoch_s
    if started is None:
        raise ValueError(f"{owner.describe()} has no recorded start: a run's owner cannot be told from a reused pid")
    tags = {OWNER_HOST_TAG: owner.host, OWNER_PID_TAG: str(owner.pid), OWNER_STARTED_TAG: f"{started:.3f}"}
    return {**tags, OWNER_COMMAND_TAG: owner.command} if owner.command else tags


def _tagged_owner(tags: dict[str, str] | dg.DagsterRun) -> Owner | None:
    values = tags.tags if isinstance(tags, dg.DagsterRun) else tags
    try:
        owner = Owner.started_at(values[OWNER_HOST_TAG], int(values[OWNER_PID_TAG]), float(values[OWNER_STARTED_TAG]))
    except (KeyError, ValueError):
        return None
    return Owner(owner.host, owner.pid, owner.started, values.get(OWNER_COMMAND_TAG, ""))


def owner_of_run(run: dg.DagsterRun, instance: dg.DagsterInstance | None = None) -> Owner | None:
    """The process that executes ``run``, from its tags; None before its worker has begun its steps. Given the
    instance, tags a re-execution copied from its parent run are told apart (they name the parent's process)."""
    owner = _tagged_owner(run)
    parent_id = run.tags.get(PARENT_RUN_TAG)
    if owner is None or instance is None or parent_id is None:
        return owner
    parent = instance.get_run_by_id(parent_id)
    if parent is not None and all(parent.tags.get(tag) == run.tags.get(tag) for tag in _OWNER_TAGS):
        return None
    return owner


def record_owner(instance: dg.DagsterInstance, run: dg.DagsterRun, owner: Owner) -> bool:
    """Tag ``run`` with ``owner`` unless its tags name it already; whether they changed."""
    tags = owner_tags(owner)
    if all(run.tags.get(tag) == tags[tag] for tag in _OWNER_TAGS):
        return False
    instance.add_run_tags(run.run_id, tags)
    return True


def pools_phrase(pools: Iterable[str]) -> str:
    names = sorted(pools)
    return ("pool " if len(names) == 1 else "pools ") + ", ".join(names)


@dataclass(frozen=True)
class Claims:
    """What one run holds in the instance's pools: claimed slots, and places in a pool's queue."""

    held: frozenset[str]
    queued: frozenset[str]


NO_CLAIMS = Claims(frozenset(), frozenset())


def claims_by_run(instance: dg.DagsterInstance) -> dict[str, Claims]:
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return {}
    held: dict[str, set[str]] = {}
    queued: dict[str, set[str]] = {}
    for pool, info in storage.get_concurrency_infos(sorted(storage.get_concurrency_keys())).items():
        for slot in info.claimed_slots:
            held.setdefault(slot.run_id, set()).add(pool)
        for step in info.pending_steps:
            queued.setdefault(step.run_id, set()).add(pool)
    return {run_id: Claims(frozenset(held.get(run_id, ())), frozenset(queued.get(run_id, set()) -
                                                                      held.get(run_id, set())))
            for run_id in held.keys() | queued.keys()}


@dataclass(frozen=True)
class FreedRun:
    """A run found dead (or finished) still holding pool slots, and what was done about it."""

    run_id: str
    status: dg.DagsterRunStatus | None  # as found; None: the run no longer exists
    owner: Owner | None
    claims: Claims
    marked_failed: bool

    def line(self) -> str:
        if self.claims.held:
            holding, still, freed = "held", "still held", "slot freed" if len(self.claims.held) == 1 else "slots freed"
            pools = pools_phrase(self.claims.held)
        else:
            holding, still, freed = "was queued for", "was still queued for", "its place in the queue freed"
            pools = pools_phrase(self.claims.queued)
        holds = bool(self.claims.held or self.claims.queued)
        if self.marked_failed and self.owner is not None and self.status is not None:
            found = f"run {self.run_id} ({self.owner.describe()}, gone) was still marked {self.status.value}"
            return f"{found} and {holding} {pools}: marked failed, {freed}" if holds else f"{found}: marked failed"
        state = f"had ended ({self.status.value})" if self.status else "no longer exists"
        return f"run {self.run_id} {state} but {still} {pools}: {freed}"


def failure_message(owner: Owner, detected_by: str) -> str:
    """Why a run was marked failed: which process died, and who found it gone and how."""
    epoch_s = owner.start_epoch_s
    started = "at an unrecorded time" if epoch_s is None else datetime.fromtimestamp(epoch_s, UTC).isoformat(
        timespec="seconds")
    command = f" ({owner.command})" if owner.command else ""
    return (f"the process executing this run, pid {owner.pid} on {owner.host}{command} started {started}, is gone, "
            f"most likely killed: no process of that host has its pid, or the one that has it started at another "
            f"time; found by {detected_by}, which freed the pool slots the run still held")


def this_process_as_detector(what: str) -> str:
    return f"{what} (pid {os.getpid()} on {socket.gethostname()})"


def free_dead_runs(instance: dg.DagsterInstance, detected_by: str | None = None) -> list[FreedRun]:
    """Mark failed the unfinished runs whose owning process on this host is gone, free their pool slots, and free
    the slots of runs that have ended or no longer exist; what was done, one entry per run. ``detected_by`` names
    who looks, for the failed run's message (default: this process)."""
    detector = detected_by or this_process_as_detector("substrate-bench")
    claims = claims_by_run(instance)
    owned_here = instance.get_runs(filters=dg.RunsFilter(statuses=list(UNFINISHED),
                                                         tags={OWNER_HOST_TAG: socket.gethostname()}))
    candidates = sorted(claims.keys() | {run.run_id for run in owned_here})
    freed: list[FreedRun] = []
    storage = instance.event_log_storage
    for run_id in candidates:
        run = instance.get_run_by_id(run_id)
        held = claims.get(run_id, NO_CLAIMS)
        if run is None or run.status in FINISHED:
            if run_id not in claims:
                continue
            storage.free_concurrency_slots_for_run(run_id)
            freed.append(FreedRun(run_id, run.status if run else None, None, held, marked_failed=False))
            continue
        owner = owner_of_run(run, instance)
        # The tags hold the owner's start by the wall clock.
        if run.status not in UNFINISHED or owner is None or not owner.is_gone(WALL_CLOCK_SLACK_S):
            continue
        # Read again: the run may have ended between the two looks, by its own worker's last event.
        latest = instance.get_run_by_id(run_id)
        if latest is None or latest.status not in UNFINISHED:
            continue
        instance.report_run_failed(latest, failure_message(owner, detector))
        if run_id in claims:
            storage.free_concurrency_slots_for_run(run_id)
        freed.append(FreedRun(run_id, run.status, owner, held, marked_failed=True))
    return freed
