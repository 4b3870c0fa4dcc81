"""What Dagster shows of a warehouse table, and how every load is reported: a raw asset's materialization, an
import and a rebuild all describe a (table, trial) load with :func:`raw_load_metadata`."""

from collections.abc import Mapping, Sequence
from typing import Any

import dagster as dg

from substrate_assets.defs.partitions import trial_partitions
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.checks import TestOutcome
from substrate_assets.warehouse.models import BuiltTable
from substrate_assets.warehouse.raw import LoadedTable

PREVIEW_ROWS = 10


def _markdown(columns: list[str], rows: list[dict[str, Any]]) -> str:
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    for row in rows:
        lines.append("| " + " | ".join("null" if row.get(c) is None else str(row.get(c)) for c in columns) + " |")
    return "\n".join(lines)


def table_metadata(name: str, columns: list[tuple[str, str]], rows: int,
                   preview: list[dict[str, Any]]) -> dict[str, Any]:
    """Row count, column schema, table name and a markdown preview."""
    return {
        "dagster/row_count": rows,
        "dagster/column_schema": dg.TableSchema(columns=[dg.TableColumn(column, kind) for column, kind in columns]),
        "dagster/table_name": f"warehouse.main.{name}",
        "preview": dg.MetadataValue.md(_markdown([column for column, _ in columns], preview)),
    }


def model_metadata(table: BuiltTable) -> dict[str, Any]:
    return table_metadata(table.name, table.columns, table.rows, table.preview)


def raw_load_metadata(loaded: LoadedTable, trial: TrialDirectory) -> dict[str, Any]:
    """One trial's load into one raw table: its rows there, the columns, its first rows, its directory."""
    return {**table_metadata(loaded.name, loaded.columns, loaded.rows[trial.trial_id],
                             loaded.previews.get(trial.trial_id, [])),
            "trial_dir": dg.MetadataValue.path(str(trial.path))}


def check_result(outcome: TestOutcome) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        check_name=outcome.test.name, passed=outcome.passed,
        severity=dg.AssetCheckSeverity.ERROR if outcome.test.blocking else dg.AssetCheckSeverity.WARN,
        metadata={"violations": outcome.violations,
                  "sample": dg.MetadataValue.json([{k: str(v) for k, v in row.items()} for row in outcome.sample])})


def report_loads(instance: dg.DagsterInstance, trials: list[TrialDirectory], raw: Mapping[str, LoadedTable],
                 models: Sequence[BuiltTable], tests: Sequence[TestOutcome] = (), *, new_partitions_only: bool = False,
                 extra: Mapping[str, Mapping[str, Any]] | None = None) -> int:
    """Record on ``instance`` what a load outside a run did (an import, a rebuild), as the assets record it in a
    run: each trial's partition of each raw table, each model, each column test. With ``new_partitions_only``,
    partitions the instance has seen materialized are left alone (a rebuild reloads them unchanged; a
    materialization event costs ~10 ms). The number of events reported."""
    registered = set(instance.get_dynamic_partitions(trial_partitions.name))
    instance.add_dynamic_partitions(trial_partitions.name,
                                    [trial.trial_id for trial in trials if trial.trial_id not in registered])
    reported = 0
    for name, loaded in raw.items():
        known = instance.get_materialized_partitions(dg.AssetKey(name)) if new_partitions_only else set()
        for trial in trials:
            if trial.trial_id in known:
                continue
            metadata = {**raw_load_metadata(loaded, trial), **(extra or {}).get(trial.trial_id, {})}
            instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=name, partition=trial.trial_id,
                                                                        metadata=metadata))
            reported += 1
    for table in models:
        instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=table.name,
                                                                    metadata=model_metadata(table)))
        reported += 1
    for outcome in tests:
        result = check_result(outcome)
        instance.report_runless_asset_event(dg.AssetCheckEvaluation(
            asset_key=dg.AssetKey(outcome.test.model), check_name=result.check_name, passed=result.passed,
            severity=result.severity, metadata=result.metadata))
        reported += 1
    return reported
