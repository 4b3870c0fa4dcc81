"""A group's earlier trial into the raw tables without a Dagster run: loaded here, as the ``load_trial`` asset loads
it (one transaction, the same rows and metadata), and recorded on the instance as that asset's materializations.

A load run costs ~0.7 s more than its load (creating the run, planning its steps, ~33 events); a group's earlier
trials are loaded while the next trial waits to start, so that time was the group's. Their models are refreshed by
the group's last load, which is a run (``main_job``); ``materialize TRIAL`` loads any trial again in a run."""

from __future__ import annotations

import time
from dataclasses import dataclass

import dagster as dg

from substrate_assets.app.pool_slots import Say, wait_for_pools
from substrate_assets.defs.warehouse.metadata import report_loads
from substrate_assets.defs.warehouse.raw import load_raw_tables_of, load_trial
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.trial_rows import UnreadableTrial


class RawLoadFailed(RuntimeError):
    """The trial's files do not load; nothing was written. The message names the trial and the file."""


@dataclass(frozen=True)
class RawLoad:
    """When a load outside a run began and ended (Unix seconds, its records included)."""

    began: float
    ended: float


def load_raw_tables(trial_id: str, store: RunStore, instance: dg.DagsterInstance, warehouse: WarehouseResource,
                    say: Say) -> RawLoad:
    """Load the trial's files into every raw table once the warehouse's pool is free, and record each table's
    partition on ``instance``; RawLoadFailed when the files do not load."""
    wait_for_pools(instance, [load_trial.op.pool] if load_trial.op.pool else [], say)
    began = time.time()
    trial = TrialDirectory(store.find(trial_id))
    try:
        loaded, figures = load_raw_tables_of(warehouse, trial, trial_id)
    except UnreadableTrial as error:
        raise RawLoadFailed(f"trial {trial_id} does not load: {error}") from None
    report_loads(instance, [trial], loaded, [], figures={trial_id: figures})
    return RawLoad(began, time.time())
