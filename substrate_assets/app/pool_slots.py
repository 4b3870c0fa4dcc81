"""Who holds the pool slots of the project's Dagster instance, and freeing what dead runs still hold.

Every run the command line starts in-process carries its owner in run tags: host, pid, and the process's start
time, so that a pid the system has since given to another process is not taken for the owner. Dagster frees a
run's slots when its step ends in a living process; a process killed with SIGKILL ends nothing, so its run stays
STARTED and keeps its slot of the one-slot pool ``trials``, and every later trial would wait for it forever (only
Dagster's daemon, when configured, frees slots, and only those of runs already marked finished).

Before a command starts a run, ``free_dead_runs`` therefore marks failed every unfinished run whose owning
process on this host is gone and frees its slots, and frees the slots still held by runs that have already
finished or no longer exist (no step of theirs can be running). Runs without owner tags, launched by the UI or
the daemon through Dagster's run launcher, are left to Dagster's run monitoring; runs owned by another host are
left too, since their process cannot be checked from here. A pool held by a live run is waited for here, before
``dg.materialize``, where signals still stop the command: inside ``dg.materialize`` Dagster waits for a slot
without looking at SIGINT or SIGTERM.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import dagster as dg

from substrate_assets.processes.owner import WALL_CLOCK_SLACK_S, Owner

OWNER_HOST_TAG = "substrate-bench/host"
OWNER_PID_TAG = "substrate-bench/pid"
OWNER_STARTED_TAG = "substrate-bench/pid-started"  # the process's start, seconds since the epoch

UNFINISHED = (dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED,
              dg.DagsterRunStatus.CANCELING)
FINISHED = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)

Say = Callable[[str], None]


def owner_tags(owner: Owner) -> dict[str, str]:
    """The run tags naming ``owner``, a live process whose start is known (a run's owner is this process)."""
    started = owner.start_epoch_s
    if started is None:
        raise ValueError(f"{owner.describe()} has no recorded start: a run's owner cannot be told from a reused pid")
    return {OWNER_HOST_TAG: owner.host, OWNER_PID_TAG: str(owner.pid), OWNER_STARTED_TAG: f"{started:.3f}"}


def owner_of_run(run: dg.DagsterRun) -> Owner | None:
    """The process that executes ``run`` in-process, from its tags; None for a run the UI or the daemon launched."""
    try:
        return Owner.started_at(run.tags[OWNER_HOST_TAG], int(run.tags[OWNER_PID_TAG]),
                                float(run.tags[OWNER_STARTED_TAG]))
    except (KeyError, ValueError):
        return None


def _pools_phrase(pools: Iterable[str]) -> str:
    names = sorted(pools)
    return ("pool " if len(names) == 1 else "pools ") + ", ".join(names)


@dataclass(frozen=True)
class _Claims:
    """What one run holds in the instance's pools: claimed slots, and places in a pool's queue."""

    held: frozenset[str]
    queued: frozenset[str]


def _claims_by_run(instance: dg.DagsterInstance) -> dict[str, _Claims]:
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
    return {run_id: _Claims(frozenset(held.get(run_id, ())), frozenset(queued.get(run_id, set()) -
                                                                        held.get(run_id, set())))
            for run_id in held.keys() | queued.keys()}


@dataclass(frozen=True)
class FreedRun:
    """A run found dead (or finished) still holding pool slots, and what was done about it."""

    run_id: str
    status: dg.DagsterRunStatus | None  # as found; None: the run no longer exists
    owner: Owner | None
    claims: _Claims
    marked_failed: bool

    def line(self) -> str:
        if self.claims.held:
            holding, still, freed = "held", "still held", "slot freed" if len(self.claims.held) == 1 else "slots freed"
            pools = _pools_phrase(self.claims.held)
        else:
            holding, still, freed = "was queued for", "was still queued for", "its place in the queue freed"
            pools = _pools_phrase(self.claims.queued)
        holds = bool(self.claims.held or self.claims.queued)
        if self.marked_failed and self.owner is not None and self.status is not None:
            found = f"run {self.run_id} ({self.owner.describe()}, gone) was still marked {self.status.value}"
            return f"{found} and {holding} {pools}: marked failed, {freed}" if holds else f"{found}: marked failed"
        state = f"had ended ({self.status.value})" if self.status else "no longer exists"
        return f"run {self.run_id} {state} but {still} {pools}: {freed}"


def _failure_message(owner: Owner) -> str:
    epoch_s = owner.start_epoch_s
    started = "at an unrecorded time" if epoch_s is None else datetime.fromtimestamp(epoch_s, UTC).isoformat(
        timespec="seconds")
    return (f"the substrate-bench process executing this run ({owner.describe()} on {owner.host}, started "
            f"{started}) is gone, most likely killed; marked failed by substrate-bench pid {os.getpid()}, which "
            "freed the pool slots the run still held")


def free_dead_runs(instance: dg.DagsterInstance) -> list[FreedRun]:
    """Mark failed the unfinished runs whose owning process on this host is gone, free their pool slots, and free
    the slots of runs that have ended or no longer exist; what was done, one entry per run."""
    claims = _claims_by_run(instance)
    owned_here = instance.get_runs(filters=dg.RunsFilter(statuses=list(UNFINISHED),
                                                         tags={OWNER_HOST_TAG: socket.gethostname()}))
    candidates = sorted(claims.keys() | {run.run_id for run in owned_here})
    freed: list[FreedRun] = []
    storage = instance.event_log_storage
    nothing = _Claims(frozenset(), frozenset())
    for run_id in candidates:
        run = instance.get_run_by_id(run_id)
        held = claims.get(run_id, nothing)
        if run is None or run.status in FINISHED:
            if run_id not in claims:
                continue
            storage.free_concurrency_slots_for_run(run_id)
            freed.append(FreedRun(run_id, run.status if run else None, None, held, marked_failed=False))
            continue
        owner = owner_of_run(run)
        # The tags hold the owner's start by the wall clock.
        if run.status not in UNFINISHED or owner is None or not owner.is_gone(WALL_CLOCK_SLACK_S):
            continue
        instance.report_run_failed(run, _failure_message(owner))
        if run_id in claims:
            storage.free_concurrency_slots_for_run(run_id)
        freed.append(FreedRun(run_id, run.status, owner, held, marked_failed=True))
    return freed


@dataclass(frozen=True)
class PoolHolder:
    """A run holding one of a pool's slots, or first in Dagster's queue for it."""

    run_id: str
    status: dg.DagsterRunStatus | None
    owner: Owner | None

    def describe(self) -> str:
        status = self.status.value if self.status else "no longer in the instance"
        if self.owner is None:
            return f"run {self.run_id} ({status}, launched by the Dagster UI or daemon)"
        return f"run {self.run_id} (substrate-bench {self.owner.describe()}, {status})"


def pool_holders(instance: dg.DagsterInstance, pool: str) -> list[PoolHolder]:
    """The runs holding every slot of ``pool``; empty when a slot is free or the pool has no limit."""
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return []
    info = storage.get_concurrency_info(pool)
    if info.limit is None:
        return []
    claimed = {(slot.run_id, slot.step_key) for slot in info.claimed_slots}
    assigned = [(step.run_id, step.step_key) for step in info.pending_steps
                if step.assigned_timestamp is not None and (step.run_id, step.step_key) not in claimed]
    if len(claimed) + len(assigned) < info.limit:
        return []
    holders = []
    for run_id in dict.fromkeys(run_id for run_id, _ in [*sorted(claimed), *assigned]):
        run = instance.get_run_by_id(run_id)
        holders.append(PoolHolder(run_id, run.status if run else None, owner_of_run(run) if run else None))
    return holders


def _waiting_line(blocked: dict[str, list[PoolHolder]]) -> str:
    parts = []
    for pool, holders in blocked.items():
        slots = "its only slot is" if len(holders) == 1 else f"its {len(holders)} slots are"
        parts.append(f"pool {pool}: {slots} held by " + ", ".join(holder.describe() for holder in holders))
    return "; ".join(parts)


def _duration(seconds: float) -> str:
    minutes, seconds = divmod(int(seconds), 60)
    return f"{minutes}m{seconds:02d}s" if minutes else f"{seconds}s"


def wait_for_pools(instance: dg.DagsterInstance, pools: Sequence[str], say: Say, poll_s: float = 1.0,
                   remind_s: float = 30.0) -> None:
    """Free what dead runs hold, then return once every pool in ``pools`` has a free slot; while a live run holds
    one, say which (at once, then every ``remind_s``). Signals stop the wait: it sleeps outside Dagster."""
    began = time.monotonic()
    said_at: float | None = None
    while True:
        for freed in free_dead_runs(instance):
            say(freed.line())
        blocked = {pool: holders for pool in pools if (holders := pool_holders(instance, pool))}
        now = time.monotonic()
        if not blocked:
            if said_at is not None:
                say(f"{_pools_phrase(pools)} free after {_duration(now - began)}: starting")
            return
        if said_at is None:
            say(f"waiting for {_waiting_line(blocked)}; Ctrl-C or SIGTERM stops waiting")
            said_at = now
        elif now - said_at >= remind_s:
            say(f"still waiting after {_duration(now - began)} for {_waiting_line(blocked)}")
            said_at = now
        time.sleep(poll_s)


def end_own_runs(instance: dg.DagsterInstance, why: str) -> list[str]:
    """Mark canceled this process's runs that are not finished (``why`` says why) and free every slot they still
    hold; the ids of the runs canceled."""
    canceled = []
    claims = _claims_by_run(instance)
    for run in instance.get_runs(filters=dg.RunsFilter(tags=owner_tags(Owner.this_process()))):
        if run.status in UNFINISHED:
            instance.report_run_canceled(run, why)
            canceled.append(run.run_id)
        if run.run_id in claims:
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
    return canceled
