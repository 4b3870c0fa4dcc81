"""How long a local trial's results took to reach people: from its last request to its rows in every mart.

The moments are read from what recorded them, not from this process's clock around calls: the last request ends at
the latest ``ts + latency`` of the trial's request log; the trial is written when its step of the run_trial run
succeeded; the load starts with the load run; every mart holds the trial's rows when the last of them was committed
and the warehouse closed (``committed_at`` in each mart's materialization: from then on any reader sees them), and
Dagster has recorded them when the last mart's materialization event was stored."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import polars as pl

from substrate_assets.defs.warehouse.models import COMMITTED_AT
from substrate_assets.results.trial_directory import REQUESTS_PARQUET

TARGET_S = 5.0  # issue 16: a trial's rows in every mart within five seconds of its last request


@dataclass(frozen=True)
class TimeToInsight:
    """Unix seconds of each moment; None when it was not recorded (no request log, a run without the event)."""

    last_request_end: float | None
    trial_written: float | None
    load_started: float | None
    marts_written: float | None
    marts_recorded: float | None = None

    @property
    def seconds(self) -> float | None:
        if self.last_request_end is None or self.marts_written is None:
            return None
        return self.marts_written - self.last_request_end

    def line(self) -> str:
        """One line for the end of a run: the total and where it went."""
        total, start = self.seconds, self.last_request_end
        if total is None or start is None:
            return "time to insight: not measured (no request ended, or no mart was materialized)"
        moments = (("trial written", self.trial_written), ("load started", self.load_started),
                   ("rows in every mart", self.marts_written), ("recorded in Dagster", self.marts_recorded))
        parts = [f"{what} +{moment - start:.1f} s" for what, moment in moments if moment is not None]
        over = (f", over the {TARGET_S:.0f} s substrate-bench aims for (docs/benchmarks.md, time to insight)"
                if total > TARGET_S else "")
        return (f"time to insight: {total:.1f} s from the last request to the trial's rows in every mart"
                f" ({', '.join(parts)}){over}")


def last_request_end(trial_dir: Path) -> float | None:
    """When the trial's last request ended (Unix seconds); None without requests."""
    path = trial_dir / REQUESTS_PARQUET
    if not path.is_file():
        return None
    end = pl.scan_parquet(path).select((pl.col("ts") + pl.col("latency_ms") / 1000).max()).collect().item()
    return None if end is None else float(end)


def _events(instance: dg.DagsterInstance, run_id: str, kind: dg.DagsterEventType) -> list[dg.EventLogEntry]:
    return [entry for entry in instance.all_logs(run_id, of_type=kind) if entry.dagster_event is not None]


def measure(instance: dg.DagsterInstance, trial_dir: Path, trial_run_id: str, load_run_id: str,
            marts: Collection[dg.AssetKey]) -> TimeToInsight:
    """The moments of one trial's way from its last request into ``marts``, as its two runs recorded them."""
    started = [entry.timestamp for entry in _events(instance, load_run_id, dg.DagsterEventType.RUN_START)]
    return _moments(instance, trial_dir, trial_run_id, min(started, default=None), marts,
                    _events(instance, load_run_id, dg.DagsterEventType.ASSET_MATERIALIZATION))


def measure_outside_a_run(instance: dg.DagsterInstance, trial_dir: Path, trial_run_id: str, load_began: float,
                          marts: Collection[dg.AssetKey]) -> TimeToInsight:
    """The same moments for a trial loaded outside a run (``whole_loads``) from ``load_began`` (Unix seconds): its
    marts' records are each mart's latest materialization, when it was recorded after the load began."""
    # One query for every mart (one each cost ~15 ms, 0.2 s for fifteen marts).
    latest = instance.get_latest_materialization_events(list(marts)).values()
    return _moments(instance, trial_dir, trial_run_id, load_began, marts,
                    [entry for entry in latest if entry is not None and entry.timestamp >= load_began])


def _moments(instance: dg.DagsterInstance, trial_dir: Path, trial_run_id: str, load_started: float | None,
             marts: Collection[dg.AssetKey], materializations: list[dg.EventLogEntry]) -> TimeToInsight:
    written = [entry.timestamp for entry in _events(instance, trial_run_id, dg.DagsterEventType.STEP_SUCCESS)]
    recorded: dict[dg.AssetKey, float] = {}
    committed: dict[dg.AssetKey, float] = {}
    for entry in materializations:
        materialization = entry.asset_materialization
        if materialization is None:
            continue
        recorded[materialization.asset_key] = entry.timestamp
        value = materialization.metadata.get(COMMITTED_AT)
        if value is not None and isinstance(value.value, (int, float)):
            committed[materialization.asset_key] = float(value.value)
    every = all(key in committed for key in marts) and bool(marts)
    return TimeToInsight(last_request_end(trial_dir), max(written, default=None), load_started,
                         max(committed[key] for key in marts) if every else None,
                         max(recorded[key] for key in marts) if every else None)
