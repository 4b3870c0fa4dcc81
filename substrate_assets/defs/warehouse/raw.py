"""Per-trial raw tables: each loads one kind of trial file into DuckDB (pool ``duckdb``), replacing the trial's rows."""

import dagster as dg

from substrate_assets.defs.catalog import OWNERS
from substrate_assets.defs.partitions import trial_partitions
from substrate_assets.defs.resources import RunStoreResource
from substrate_assets.defs.trials.assets import trial_run
from substrate_assets.defs.warehouse.metadata import PREVIEW_ROWS, raw_load_metadata
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.raw import RAW_TABLES, RawTable, UnreadableTrial, load_trials

# Tables whose figures may come from a Prometheus server the suite names (the harvest) rather than the trial's files.
SOURCE_KINDS = {"server_telemetry": ("prometheus",), "load_steps": ("prometheus",)}


def _raw_asset(table: RawTable) -> dg.AssetsDefinition:
    @dg.asset(
        name=table.name,
        partitions_def=trial_partitions,
        deps=[trial_run],
        group_name="raw",
        owners=OWNERS,
        kinds={"duckdb", *SOURCE_KINDS.get(table.name, ())},
        pool="duckdb",
        description=f"{table.description} Table `{table.name}`, keyed by trial_id; loading a trial again replaces "
        "its rows in one transaction.",
    )
    def load(context: dg.AssetExecutionContext, run_store: RunStoreResource,
             warehouse: WarehouseResource) -> dg.MaterializeResult:
        try:
            trial = TrialDirectory(run_store.store().find(context.partition_key))
        except FileNotFoundError as error:
            raise dg.Failure(str(error)) from None
        try:
            with warehouse.connect() as connection:
                loaded = load_trials(connection, [trial], tables=[table.name], preview_rows=PREVIEW_ROWS)
        except UnreadableTrial as error:  # nothing was written: one line naming the file, not a traceback
            raise dg.Failure(f"trial {context.partition_key} does not load: {error}",
                             metadata={"trial_dir": dg.MetadataValue.path(str(error.trial_dir))}) from None
        return dg.MaterializeResult(metadata=raw_load_metadata(loaded[table.name], trial))

    return load


raw_assets = [_raw_asset(table) for table in RAW_TABLES.values()]
