"""The per-trial raw tables: one multi-asset (pool ``duckdb``) loads a trial's files into every raw table in one
step and one transaction, replacing the trial's rows. Each table follows a landed trial on its own (eager), however
the trial was launched."""

from collections.abc import Collection, Iterator
from pathlib import Path
from typing import Any

import dagster as dg

from substrate_assets.defs.catalog import OWNERS
from substrate_assets.defs.partitions import trial_partitions
from substrate_assets.defs.resources import RunStoreResource, SuitesResource
from substrate_assets.defs.trials.assets import trial_run
from substrate_assets.defs.warehouse.metadata import (
    FIGURES_ON,
    declared_table,
    raw_load_metadata,
    trial_figures,
)
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.results.importer import fetch_trial
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.results.trial_key import TrialKey
from substrate_assets.warehouse.preview import PREVIEW_ROWS
from substrate_assets.warehouse.raw_tables import RAW_TABLES
from substrate_assets.warehouse.trial_rows import UnreadableTrial
from substrate_assets.warehouse.trial_writes import LoadedTable, load_trials

# Tables whose figures may come from a Prometheus server the suite names (the harvest) rather than the trial's files.
SOURCE_KINDS = {"server_telemetry": ("prometheus",), "load_steps": ("prometheus",)}

raw_specs = [
    dg.AssetSpec(
        table.name,
        deps=[trial_run],
        group_name="raw",
        owners=OWNERS,
        kinds={"duckdb", *SOURCE_KINDS.get(table.name, ())},
        partitions_def=trial_partitions,
        automation_condition=dg.AutomationCondition.eager(),
        description=f"{table.description} Table `{table.name}`, keyed by trial_id; loading a trial again replaces "
        "its rows in one transaction.",
        metadata=declared_table(table.name),
    )
    for table in RAW_TABLES.values()
]


def _local_or_fetched(context: dg.AssetExecutionContext, run_store: RunStoreResource, suites: SuitesResource,
                      trial_id: str) -> Path:
    """The trial's directory in the local run store; a kubernetes suite's trial that is not there (a run pod's
    store starts empty) is first mirrored from the suite's object-store run store, where its driver pod wrote it."""
    store = run_store.store()
    try:
        return store.find(trial_id)
    except FileNotFoundError:
        known = suites.all().get(TrialKey.suite_of(trial_id))
        if known is None or known.kubernetes is None:
            raise
        source = known.kubernetes.store
    context.log.info(f"trial {trial_id} is not in {store.root}: mirroring it from {source}")
    return fetch_trial(source, TrialKey.from_trial_id(trial_id, known.tag), store).trial_dir


def load_raw_tables_of(warehouse: WarehouseResource, trial: TrialDirectory, trial_id: str,
                       tables: Collection[str] | None = None
                       ) -> tuple[dict[str, LoadedTable], dict[str, dg.MetadataValue]]:
    """The trial's files loaded into ``tables`` (default: every raw table) in one transaction, and its figures for
    the trial_manifests record when that table is among them; UnreadableTrial, having written nothing, when its
    files do not read. What ``load_trial`` does in a run and a group's earlier trial outside one
    (``app/raw_loads``)."""
    with warehouse.connect() as connection:
        loaded = load_trials(connection, [trial], tables=tables, preview_rows=PREVIEW_ROWS)
        figures = trial_figures(connection, [trial_id])[trial_id] if FIGURES_ON in loaded else {}
    return loaded, figures


@dg.multi_asset(name="load_trial", specs=raw_specs, partitions_def=trial_partitions, can_subset=True, pool="duckdb",
                description="Loads one trial's files from the run store into the raw tables selected, in one "
                "transaction.")
def load_trial(context: dg.AssetExecutionContext, run_store: RunStoreResource, suites: SuitesResource,
               warehouse: WarehouseResource) -> Iterator[dg.MaterializeResult[Any]]:
    trial_id = context.partition_key
    try:
        trial = TrialDirectory(_local_or_fetched(context, run_store, suites, trial_id))
    except FileNotFoundError as error:
        raise dg.Failure(str(error)) from None
    tables = [key.path[-1] for key in context.selected_asset_keys]
    try:
        loaded, figures = load_raw_tables_of(warehouse, trial, trial_id, tables)
    except UnreadableTrial as error:  # nothing was written: one line naming the file, not a traceback
        raise dg.Failure(f"trial {trial_id} does not load: {error}",
                         metadata={"trial_dir": dg.MetadataValue.path(str(error.trial_dir))}) from None
    for name in tables:
        yield dg.MaterializeResult(asset_key=name, metadata={**raw_load_metadata(loaded[name], trial),
                                                             **(figures if name == FIGURES_ON else {})})


raw_assets = [load_trial]
