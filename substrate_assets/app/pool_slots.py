"""Who holds the pool slots of the project's Dagster instance, waiting for a pool before a command's run starts, and
ending the runs a command leaves unfinished.

Every run the command line starts in-process carries its owner in run tags (``defs/runs/owners.py``: host, pid, and
the process's start time); runs launched by the UI, a sensor or a schedule are tagged by their own run worker. Before
a command starts a run, ``wait_for_pools`` has what dead runs hold freed (``free_dead_runs``), then waits while a
live run holds a pool it needs. It waits here, before ``dg.materialize``, where signals still stop the command:
inside ``dg.materialize`` Dagster waits for a slot without looking at SIGINT or SIGTERM.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import dagster as dg

from substrate_assets.defs.runs.owners import (
    UNFINISHED,
    claims_by_run,
    free_dead_runs,
    owner_of_run,
    owner_tags,
    pools_phrase,
)
from substrate_assets.processes.owner import Owner

Say = Callable[[str], None]


@dataclass(frozen=True)
class PoolHolder:
    """A run holding one of a pool's slots, or first in Dagster's queue for it."""

    run_id: str
    status: dg.DagsterRunStatus | None
    owner: Owner | None

    def describe(self) -> str:
        status = self.status.value if self.status else "no longer in the instance"
        if self.owner is None:
            return f"run {self.run_id} ({status}, its process not yet recorded)"
        # A command's own runs are named by the command; the others by the run worker the launcher started.
        who = "substrate-bench" if self.owner.command.startswith("substrate-bench") else "run worker"
        return f"run {self.run_id} ({who} {self.owner.describe()}, {status})"


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
        holders.append(PoolHolder(run_id, run.status if run else None, owner_of_run(run, instance) if run else None))
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
                say(f"{pools_phrase(pools)} free after {_duration(now - began)}: starting")
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
    claims = claims_by_run(instance)
    for run in instance.get_runs(filters=dg.RunsFilter(tags=owner_tags(Owner.this_process()))):
        if run.status in UNFINISHED:
            instance.report_run_canceled(run, why)
            canceled.append(run.run_id)
        if run.run_id in claims:
            instance.event_log_storage.free_concurrency_slots_for_run(run.run_id)
    return canceled
