"""A job's last trial (and a disturbed one) loaded whole without a Dagster run: its raw tables and every model in one
transaction, then recorded on the instance as the assets record them in a run (each raw table's partition, each model
with what the marts step shows beside it, each column check, the new change points' check, the suites' histories),
the benchmark site built and recorded, and the trial judged against its history (``no_regression_against_history``,
recorded as that check's evaluation of the trial's partition).

A load run cost ~2 s beyond its work (creating and planning it, ~150 events: each step's outputs, each check's plan,
output and evaluation), all of it between a group's last request and its rows in Dagster. ``materialize TRIAL`` and a
trial launched from the UI still load in a run; a group's earlier trials load their raw tables only
(``raw_loads``)."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import dagster as dg

from substrate_assets.analysis.comparison import Comparison
from substrate_assets.app.dead_time import CHECKS, LOADED, RECORDED, SITE, VERDICT
from substrate_assets.app.pool_slots import Say, wait_for_pools
from substrate_assets.defs.trials.assets import trial_run
from substrate_assets.defs.trials.checks import NO_REGRESSION
from substrate_assets.defs.warehouse.column_checks import as_evaluation
from substrate_assets.defs.warehouse.metadata import figure_metadata, report_checks, report_loads
from substrate_assets.defs.warehouse.models import (
    COMMITTED_AT,
    NO_NEW_CHANGE_POINT,
    change_places,
    change_point_check,
    draw_histories,
    new_change_points,
    not_refreshed,
    shown_beside,
)
from substrate_assets.defs.warehouse.raw import load_trial
from substrate_assets.defs.warehouse.regression_check import TrialNotInMarts, judgement
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.defs.warehouse.site import BENCHMARK_SITE, DescribedSite, SiteResource, build_and_describe
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.suites import Suite
from substrate_assets.warehouse.change_points import CHANGE_POINTS, MetricChange, read_change_points
from substrate_assets.warehouse.models.discovery import ModelError
from substrate_assets.warehouse.preview import PREVIEW_ROWS
from substrate_assets.warehouse.raw_tables import ensure_schema
from substrate_assets.warehouse.refresh import Refreshed, load_and_refresh
from substrate_assets.warehouse.trial_rows import read_trials


class WholeLoadFailed(RuntimeError):
    """The trial did not load, or a model did not refresh; the message names the trial and why."""


@dataclass(frozen=True)
class WholeLoad:
    """When each part of a whole load ended (Unix seconds): ``committed`` is when every mart held the trial's rows,
    ``recorded`` when every table's record was written; the site was built and the trial judged while the checks'
    records were written, which ended by ``checked``."""

    began: float
    committed: float
    recorded: float
    site_built: float
    judged: float
    checked: float
    # The trial's comparison against its history, as the site judged it (None: no site built, or no history).
    comparison: Comparison | None = None

    def parts(self) -> dict[str, float]:
        return {LOADED: self.committed - self.began, RECORDED: self.recorded - self.committed,
                SITE: self.site_built - self.recorded, VERDICT: self.judged - self.site_built,
                CHECKS: self.checked - self.judged}


def _record_checks(instance: dg.DagsterInstance, refreshed: Refreshed, found: list[MetricChange] | None,
                   before: set[tuple[str | None, str, str, str]] | None) -> None:
    """Record the load's checks as the marts step records them: each column check and the new change points'."""
    report_checks(instance, refreshed.tests)
    if found is not None:
        instance.report_runless_asset_event(as_evaluation(change_point_check(new_change_points(found, before)),
                                                        dg.AssetKey(CHANGE_POINTS), NO_NEW_CHANGE_POINT))


def load_whole(trial_id: str, store: RunStore, instance: dg.DagsterInstance, warehouse: WarehouseResource,
               suites: dict[str, Suite], site: SiteResource | None, say: Say) -> WholeLoad:
    """Load the trial into every raw table and model once the warehouse's pool is free, record it, build the site
    (none without ``site``: a deployment whose site is not its own) and judge the trial; WholeLoadFailed when its
    files do not load (nothing written) or a model does not refresh (the raw rows are written, the models are not)."""
    wait_for_pools(instance, [load_trial.op.pool] if load_trial.op.pool else [], say)
    began = time.time()
    trial = TrialDirectory(store.find(trial_id))
    read, unreadable = read_trials([trial])
    if unreadable:
        raise WholeLoadFailed(f"trial {trial_id} does not load: {unreadable[0]}")
    try:
        with warehouse.connect() as connection:
            ensure_schema(connection)
            before = change_places(connection)
            refreshed = load_and_refresh(connection, read, preview_rows=PREVIEW_ROWS, figures_of=[trial_id])
            models = {table.name for table in refreshed.models}
            found = read_change_points(connection) if CHANGE_POINTS in models else None
            shown = shown_beside(connection, models, found)
    except ModelError as error:
        raise WholeLoadFailed(f"trial {trial_id} is in the raw tables, but the models did not refresh: {error}"
                              ) from None
    committed = time.time()
    stamp = {COMMITTED_AT: dg.MetadataValue.timestamp(committed)}
    # Each table's record first, as a run records them (the raw tables', then the models'): from then on Dagster
    # shows the trial's rows. The checks' records are written while the histories are drawn, the site built and
    # the trial judged: Dagster's event writes wait on SQLite, and the charts render in a process of their own.
    # Models a blocking test kept back are not drawn or judged over (as a failed marts step stops the steps after).
    report_loads(instance, [trial], refreshed.raw, refreshed.models,
                 figures=figure_metadata(refreshed.densities, {trial_id: trial.suite}),
                 beside_models={name: {**shown.get(name, {}), **stamp} for name in models})
    recorded = time.time()
    described: DescribedSite | None = None
    verdict: dg.AssetCheckResult | None = None
    with ThreadPoolExecutor(max_workers=2, thread_name_prefix="whole-load") as pool:
        histories = pool.submit(draw_histories, warehouse) if found is not None else None
        records = pool.submit(_record_checks, instance, refreshed, found, before)
        if not refreshed.skipped and site is not None:
            described = build_and_describe(warehouse, suites, site)
        site_built = time.time()
        # The site judged each configuration's latest trial against its history, this one's too.
        comparison = described.built.judged(trial_id) if described is not None else None
        if not refreshed.skipped:
            try:
                verdict = judgement(warehouse, suites, trial_id, comparison)
            except TrialNotInMarts as error:
                raise WholeLoadFailed(str(error)) from None
        judged = time.time()
        records.result()
        drawn = histories.result() if histories is not None else None
    if drawn:
        instance.report_runless_asset_event(dg.AssetObservation(asset_key=CHANGE_POINTS, metadata=drawn))
    if refreshed.skipped:
        raise WholeLoadFailed(f"trial {trial_id}: {not_refreshed(refreshed.skipped)}")
    if described is not None:
        say(described.said)
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=BENCHMARK_SITE,
                                                                    metadata=described.metadata))
    if verdict is not None:
        instance.report_runless_asset_event(as_evaluation(verdict, trial_run.key, NO_REGRESSION, partition=trial_id))
    return WholeLoad(began, committed, recorded, site_built, judged, time.time(), comparison)
