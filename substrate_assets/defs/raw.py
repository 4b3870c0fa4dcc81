"""Per-trial raw tables: each loads one kind of trial file into DuckDB (pool ``duckdb``), replacing the trial's rows."""

import dagster as dg

from substrate_assets.defs.metadata import table_metadata
from substrate_assets.defs.partitions import trial_partitions
from substrate_assets.defs.resources import RunStoreResource, WarehouseResource
from substrate_assets.defs.trials import trial_run
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.models import describe_table
from substrate_assets.warehouse.raw import RAW_TABLES, RawTable, load_table


def _raw_asset(table: RawTable) -> dg.AssetsDefinition:
    @dg.asset(
        name=table.name,
        partitions_def=trial_partitions,
        deps=[trial_run],
        group_name="raw",
        kinds={"duckdb"},
        pool="duckdb",
        description=f"{table.description} Table `{table.name}`, keyed by trial_id; loading a trial again replaces "
        "its rows in one transaction.",
    )
    def load(context: dg.AssetExecutionContext, run_store: RunStoreResource,
             warehouse: WarehouseResource) -> dg.MaterializeResult:
        trial_id = context.partition_key
        try:
            directory = run_store.store().find(trial_id)
        except FileNotFoundError as error:
            raise dg.Failure(str(error)) from None
        with warehouse.connect() as connection:
            frame = load_table(connection, table.name, TrialDirectory(directory))
            built = describe_table(connection, table.name, preview_rows=0)
        preview = frame.head(10)
        return dg.MaterializeResult(metadata={
            **table_metadata(built, rows=frame.height, preview=preview.rows(named=True)),
            "trial_dir": dg.MetadataValue.path(str(directory)),
        })

    return load


raw_assets = [_raw_asset(table) for table in RAW_TABLES.values()]
