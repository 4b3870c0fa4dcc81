"""What Dagster shows of a warehouse table, and how every load is reported: a raw asset's materialization, an
import and a rebuild all describe a (table, trial) load with :func:`raw_load_metadata`."""

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb

from substrate_assets.defs.partitions import TRIAL_PARTITIONS
from substrate_assets.defs.warehouse.column_checks import check_evaluations
from substrate_assets.report.figures import charted_key, figure, rounded
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.checks import TestOutcome
from substrate_assets.warehouse.column_docs import column_descriptions, known_table_columns
from substrate_assets.warehouse.models.discovery import ModelError, models_directory
from substrate_assets.warehouse.models.tables import BuiltTable
from substrate_assets.warehouse.trial_densities import trial_densities
from substrate_assets.warehouse.trial_writes import LoadedTable


@functools.cache
def _column_descriptions(directory: Path) -> dict[str, dict[str, str]]:
    return column_descriptions(directory)


@functools.cache
def _table_columns(directory: Path) -> dict[str, list[tuple[str, str]]]:
    """Built on an empty warehouse in memory once for the package's code and the models (``known_table_columns``
    keeps them across processes): the catalog shows each table's columns before any trial has loaded. Only the
    definitions need them; an import does not pay. Empty for a project whose models do not build on empty tables:
    its catalog shows no columns until they are built, and the refresh that builds them says what is wrong."""
    try:
        return known_table_columns(directory)
    except (duckdb.Error, ModelError):
        return {}


# A preview cell longer than this is cut in the middle: a value without spaces (a path, a sha256) does not wrap, and
# would push the table past the page. The table holds the whole value.
PREVIEW_CELL_CHARS = 48


def _cell(value: Any, column: str) -> str:
    text = figure(value, column)
    if len(text) > PREVIEW_CELL_CHARS:
        kept = PREVIEW_CELL_CHARS - 1
        text = f"{text[:kept // 2]}…{text[-(kept - kept // 2):]}"
    return text.replace("|", "\\|").replace("\n", " ")


# A preview wider than this many columns is turned on its side, so that it fits the page.
WIDE_PREVIEW_COLUMNS = 8
# ...and shows this many rows: each is a column of the page.
WIDE_PREVIEW_ROWS = 3


def preview_markdown(columns: list[str], rows: list[dict[str, Any]]) -> str:
    """The first rows of a table as markdown, each figure rounded as a person reads it. A table wider than
    WIDE_PREVIEW_COLUMNS columns (or a single row) is shown on its side, one line per column and its first
    WIDE_PREVIEW_ROWS rows side by side: a row of a mart is far wider than the page. A wide table without rows
    (change_points before any change) is its columns, one per line."""
    if not rows and len(columns) > WIDE_PREVIEW_COLUMNS:
        return "\n".join(["| column (no rows yet) |", "|---|", *(f"| {column} |" for column in columns)])
    if len(rows) == 1 or (rows and len(columns) > WIDE_PREVIEW_COLUMNS):
        shown = rows[:WIDE_PREVIEW_ROWS]
        header = ["column", "value"] if len(shown) == 1 else ["column", *(f"row {n}" for n in range(1, len(shown) + 1))]
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join([column, *(_cell(row.get(column), column) for row in shown)]) + " |"
                  for column in columns]
        return "\n".join(lines)
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(row.get(column), column) for column in columns) + " |" for row in rows]
    return "\n".join(lines)


def column_schema(name: str, columns: list[tuple[str, str]]) -> dg.TableSchema:
    """The table's columns with their types and, from schema.yml or sources.yml, what each holds."""
    described = _column_descriptions(models_directory()).get(name, {})
    return dg.TableSchema(columns=[dg.TableColumn(column, kind, description=described.get(column))
                                   for column, kind in columns])


def declared_table(name: str) -> dict[str, Any]:
    """What the catalog shows of a table before it is built: its columns, their types and descriptions (when the
    table is one of those this process found at start)."""
    columns = _table_columns(models_directory()).get(name)
    schema = {} if columns is None else {"dagster/column_schema": column_schema(name, columns)}
    return {**schema, "dagster/table_name": f"warehouse.main.{name}"}


def table_metadata(name: str, columns: list[tuple[str, str]], rows: int,
                   preview: list[dict[str, Any]]) -> dict[str, Any]:
    """Row count, column schema, table name and a markdown preview."""
    return {
        "dagster/row_count": rows,
        "dagster/column_schema": column_schema(name, columns),
        "dagster/table_name": f"warehouse.main.{name}",
        "preview": dg.MetadataValue.md(preview_markdown([column for column, _ in columns], preview)),
    }


def model_metadata(table: BuiltTable) -> dict[str, Any]:
    return table_metadata(table.name, table.columns, table.rows, table.preview)


def raw_load_metadata(loaded: LoadedTable, trial: TrialDirectory) -> dict[str, Any]:
    """One trial's load into one raw table: its rows there, the columns, its first rows, its directory."""
    return {**table_metadata(loaded.name, loaded.columns, loaded.rows[trial.trial_id],
                             loaded.previews.get(trial.trial_id, [])),
            "trial_dir": dg.MetadataValue.path(str(trial.path))}


# The one row per trial also carries the trial's densities, so Dagster charts them across trials (a key per suite).
FIGURES_ON = "trial_manifests"


def trial_figures(connection: duckdb.DuckDBPyConnection,
                  trial_ids: Sequence[str]) -> dict[str, dict[str, dg.MetadataValue]]:
    """Each trial's densities and failure ratio as float metadata (:func:`figure_metadata`), keyed by its suite as
    trial_manifests has it."""
    suites = dict(connection.execute("SELECT trial_id, suite FROM trial_manifests WHERE "
                                     "list_contains(?::VARCHAR[], trial_id)", [list(trial_ids)]).fetchall())
    return figure_metadata(trial_densities(connection, trial_ids), suites)


def figure_metadata(densities: Mapping[str, Mapping[str, float | None]],
                    suites: Mapping[str, str | None]) -> dict[str, dict[str, dg.MetadataValue]]:
    """Each trial's figures (from :func:`trial_densities`) as float metadata, rounded as shown, each under a key of
    the trial's suite (``suites``: by trial; :func:`charted_key`); a figure not measured is left out (a gap in the
    chart, not a zero)."""
    return {trial_id: {charted_key(suites.get(trial_id), name): dg.MetadataValue.float(rounded(value, name))
                       for name, value in figures.items() if value is not None}
            for trial_id, figures in densities.items()}


def report_loads(instance: dg.DagsterInstance, trials: list[TrialDirectory], raw: Mapping[str, LoadedTable],
                 models: Sequence[BuiltTable], tests: Sequence[TestOutcome] = (), *, new_partitions_only: bool = False,
                 extra: Mapping[str, Mapping[str, Any]] | None = None,
                 figures: Mapping[str, Mapping[str, Any]] | None = None,
                 beside_models: Mapping[str, Mapping[str, Any]] | None = None) -> int:
    """Record on ``instance`` what a load outside a run did (an import, a rebuild), as the assets record it in a
    run: each trial's partition of each raw table, each model, each model's column checks. With ``new_partitions_only``,
    partitions the instance has seen materialized are left alone (a rebuild reloads them unchanged; a
    materialization event costs ~10 ms). ``extra`` is metadata for every table of a trial, ``figures`` (from
    :func:`trial_figures`) for its trial_manifests row, as the raw asset records it; ``beside_models``, more metadata
    for a model by name (what the marts step shows beside it). Every model is recorded before the first check. The
    number of events reported."""
    registered = set(instance.get_dynamic_partitions(TRIAL_PARTITIONS))
    instance.add_dynamic_partitions(TRIAL_PARTITIONS,
                                    [trial.trial_id for trial in trials if trial.trial_id not in registered])
    reported = 0
    for name, loaded in raw.items():
        known = instance.get_materialized_partitions(dg.AssetKey(name)) if new_partitions_only else set()
        for trial in trials:
            if trial.trial_id in known:
                continue
            metadata = {**raw_load_metadata(loaded, trial), **(extra or {}).get(trial.trial_id, {}),
                        **((figures or {}).get(trial.trial_id, {}) if name == FIGURES_ON else {})}
            instance.report_runless_asset_event(dg.AssetMaterialization(asset_key=name, partition=trial.trial_id,
                                                                        metadata=metadata))
            reported += 1
    for table in models:
        instance.report_runless_asset_event(dg.AssetMaterialization(
            asset_key=table.name, metadata={**model_metadata(table), **(beside_models or {}).get(table.name, {})}))
        reported += 1
    return reported + report_checks(instance, tests)


def report_checks(instance: dg.DagsterInstance, tests: Sequence[TestOutcome]) -> int:
    """Record on ``instance`` the column checks of a load outside a run, as the marts step records them; the number
    of events reported."""
    evaluations = check_evaluations(tests)
    for evaluation in evaluations:
        instance.report_runless_asset_event(evaluation)
    return len(evaluations)
