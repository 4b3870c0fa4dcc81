"""The marts: one multi-asset step (``marts``, pool ``duckdb``) with an asset per model — each ``dbt_like_sql``
file and each Python model over them (change_points, noise_floor) — its schema.yml tests as two asset checks;
refreshed declaratively
(``warehouse_refresh``) whenever a trial's raw tables land. A refresh updates the models for the trials loaded since
they last ran (a per-trial model rewrites just their rows, and its checks look at just those rows); ``rebuild``
builds everything whole."""

import time
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import dagster as dg
import duckdb

from substrate_assets.defs.catalog import OWNERS
from substrate_assets.defs.warehouse.column_checks import check_results, column_checks
from substrate_assets.defs.warehouse.metadata import declared_table, model_metadata
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.report.verdict_text import figure_text, p_value_text, percent_text, spread_text
from substrate_assets.warehouse.change_points import CHANGE_POINTS, MetricChange, read_change_points
from substrate_assets.warehouse.checks import ColumnTest, load_tests
from substrate_assets.warehouse.connection import transaction
from substrate_assets.warehouse.introspection import has_table
from substrate_assets.warehouse.models.discovery import Model, ModelError, models_directory
from substrate_assets.warehouse.models.marts import refresh_marts
from substrate_assets.warehouse.models.python_models import AnyModel, PythonModel, every_model
from substrate_assets.warehouse.noise_floor import NOISE_FLOOR
from substrate_assets.warehouse.raw_tables import RAW_TABLES

# The marts are refreshed when a trial lands, so their age is the age of the newest trial: a day without one warns,
# a week fails (the history that regressions are judged against has gone stale).
MART_FRESHNESS = dg.FreshnessPolicy.time_window(fail_window=timedelta(days=7), warn_window=timedelta(days=1))


def _model_spec(model: Model, known: set[str]) -> dg.AssetSpec:
    unknown = [name for name in model.upstream if name not in known]
    if unknown:
        raise ModelError(f"{model.path}: reads {', '.join(unknown)}, which is neither a raw table nor a model "
                         f"(have {', '.join(sorted(known))})")
    return dg.AssetSpec(
        model.name,
        deps=[dg.AssetKey(name) for name in model.upstream],
        group_name="marts",
        owners=OWNERS,
        kinds={"duckdb", "sql"},
        automation_condition=dg.AutomationCondition.eager(),
        description=model.description or f"Model {model.name} ({model.path.name}).",
        freshness_policy=MART_FRESHNESS,
        metadata={"sql_file": dg.MetadataValue.path(str(model.path)), "sql": dg.MetadataValue.md(
            f"```sql\n{model.sql}\n```"), **declared_table(model.name)},
    )


def _python_spec(model: PythonModel) -> dg.AssetSpec:
    """A mart built in Python (:mod:`~substrate_assets.warehouse.models.python_models`), from the tables it reads."""
    return dg.AssetSpec(model.name, deps=[dg.AssetKey(dep) for dep in model.upstream], group_name="marts",
                        owners=OWNERS, kinds={"duckdb", model.kind},
                        automation_condition=dg.AutomationCondition.eager(), freshness_policy=MART_FRESHNESS,
                        metadata=declared_table(model.name), description=model.description)


NO_NEW_CHANGE_POINT = "no_new_change_point"
CHANGE_POINT_CHECK = dg.AssetCheckSpec(
    NO_NEW_CHANGE_POINT, asset=CHANGE_POINTS,
    description="Warns when a refresh finds a change point that was not there before: a headline figure of a "
                "configuration moved to another level. The warning names each series, the trial the new level "
                "starts at, the means before and after, the change and whether it regressed or improved.")

# When the refresh's writes were committed and the warehouse closed: from then on a reader sees the rows.
COMMITTED_AT = "committed_at"


def _place(change: MetricChange) -> tuple[str | None, str, str, str]:
    return change.suite, change.configuration, change.metric, change.trial_id


def change_places(connection: duckdb.DuckDBPyConnection) -> set[tuple[str | None, str, str, str]] | None:
    """Where the change points are before a refresh (None before the table is built): the refresh's new ones are
    those elsewhere."""
    if not has_table(connection, CHANGE_POINTS):
        return None
    return {_place(change) for change in read_change_points(connection)}


def new_change_points(found: list[MetricChange] | None,
                      before: set[tuple[str | None, str, str, str]] | None) -> list[MetricChange]:
    return [change for change in found or [] if _place(change) not in (before or set())]


def not_refreshed(skipped: Mapping[str, str]) -> str:
    """Why the models a failed blocking test kept back were not refreshed (``skipped``: each with that test)."""
    return "not refreshed, a blocking test of what they read failed: " + "; ".join(
        f"{name} (after {cause})" for name, cause in skipped.items())


def change_point_check(new: list[MetricChange]) -> dg.AssetCheckResult:
    """``no_new_change_point``: passes when the refresh found no change point the table lacked; else a warning
    naming each new one."""
    metadata: dict[str, dg.MetadataValue] = {"new_change_points": dg.MetadataValue.int(len(new))}
    if new:
        metadata["found"] = dg.MetadataValue.md(change_points_markdown(new))
    description = None if not new else "; ".join(
        f"{change.suite} {change.metric} {change.direction} {percent_text(change.change_pct)} at trial "
        f"{change.trial_id} (after {change.previous_trial_id})" for change in new)
    return dg.AssetCheckResult(asset_key=CHANGE_POINTS, check_name=NO_NEW_CHANGE_POINT, passed=not new,
                               severity=dg.AssetCheckSeverity.WARN, metadata=metadata, description=description)


def _checked(models: dict[str, AnyModel], tests: dict[str, list[ColumnTest]],
             checks: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """The (model, test) pairs of the selected Dagster checks (model, key_tests or value_tests)."""
    return {(name, test.name) for name in models for check in column_checks(name, tests.get(name, []))
            if (name, check.name) in checks for test in check.tests}


def shown_beside(connection: duckdb.DuckDBPyConnection, refreshed: set[str],
                 found: list[MetricChange] | None) -> dict[str, dict[str, dg.MetadataValue]]:
    """What a person reads in the UI beside a Python model's table: its rows as a table."""
    shown: dict[str, dict[str, dg.MetadataValue]] = {}
    if found is not None:
        shown[CHANGE_POINTS] = {"change_points": dg.MetadataValue.md(change_points_markdown(found))}
    if NOISE_FLOOR in refreshed:
        shown[NOISE_FLOOR] = {"noise_floor": dg.MetadataValue.md(noise_floor_markdown(connection))}
    return shown


def marts_asset(models: dict[str, AnyModel], tests: dict[str, list[ColumnTest]],
                known: set[str]) -> dg.AssetsDefinition:
    """Every model (SQL and Python) as one asset step: each model is still its own asset, with its own checks and
    lineage, but a refresh opens the warehouse once and updates the models one after another in build order
    (:func:`refresh_marts`, the refresh an import and a load use too), instead of paying a Dagster step (and a
    DuckDB open) per model. The warehouse is closed (readers see every new row) before anything is drawn or
    recorded. Any subset can be materialized."""
    specs = [_python_spec(model) if isinstance(model, PythonModel) else _model_spec(model, known)
             for model in models.values()]

    @dg.multi_asset(name="marts", specs=specs, can_subset=True, pool="duckdb",
                    check_specs=[check.spec() for model in models.values()
                                 for check in column_checks(model.name, tests.get(model.name, []))]
                    + ([CHANGE_POINT_CHECK] if CHANGE_POINTS in models else []),
                    description="Refreshes the selected marts in one step, in build order.")
    # Dagster does not read a generator's return annotation: it types the outputs by the specs.
    def marts_step(context: dg.AssetExecutionContext, warehouse: WarehouseResource
                   ) -> Iterator[dg.MaterializeResult[Any] | dg.AssetCheckResult | dg.AssetObservation]:
        selected = {key.to_user_string() for key in context.selected_asset_keys}
        checks = {(key.asset_key.to_user_string(), key.name) for key in context.selected_asset_check_keys}
        with warehouse.connect() as connection, transaction(connection):
            before = change_places(connection) if CHANGE_POINTS in selected else None
            refresh = refresh_marts(connection, selected=selected, checked=_checked(models, tests, checks))
            refreshed = {table.name for table in refresh.tables}
            found = read_change_points(connection) if CHANGE_POINTS in refreshed else None
            shown = shown_beside(connection, refreshed, found)
        committed = {COMMITTED_AT: dg.MetadataValue.timestamp(time.time())}
        # The charts render in a process of their own (report/renderer), so the histories are drawn while the
        # materializations are recorded (a second of Dagster's event writes) instead of after them.
        drawing = ThreadPoolExecutor(max_workers=1, thread_name_prefix="suite-histories")
        histories = (drawing.submit(draw_histories, warehouse)
                     if CHANGE_POINTS in selected and CHANGE_POINTS in refreshed else None)
        drawing.shutdown(wait=False)
        # A model built because a selected one reads it and it was never built is not this run's to report.
        reported = [table for table in refresh.tables if table.name in selected]
        # Every materialization first, then the checks: each result is two event writes, and the trial's rows are
        # in Dagster once all the models' materializations are, ~0.6 s sooner than behind 27 checks.
        for table in reported:
            yield dg.MaterializeResult(asset_key=table.name,
                                       metadata={**model_metadata(table), **shown.get(table.name, {}), **committed})
        for table in reported:
            yield from check_results(table.name, refresh.outcomes.get(table.name, []))
            if table.name == CHANGE_POINTS and CHANGE_POINT_CHECK.key in context.selected_asset_check_keys:
                yield change_point_check(new_change_points(found, before))
        # Recorded once every materialization is: the trial's record in Dagster does not wait for the drawing. The
        # site's step, next, finds the charts drawn.
        drawn = histories.result() if histories is not None else None
        if drawn:
            yield dg.AssetObservation(asset_key=CHANGE_POINTS, metadata=drawn)
        if refresh.skipped:
            raise ModelError(not_refreshed(refresh.skipped))

    return marts_step


def model_assets() -> list[dg.AssetsDefinition]:
    """The marts: every SQL model, and each Python model whose tables are among them (as refresh_marts builds
    them); none for a project without models."""
    models = every_model(models_directory())
    if not models:
        return []
    tests = load_tests(models_directory() / "schema.yml", set(models))
    return [marts_asset(models, tests, set(RAW_TABLES) | set(models))]


def change_points_markdown(changes: list[MetricChange]) -> str:
    """The change points as a table, rounded as compare rounds: ms to 0.1, percentages to 1 dp, p-values to 2
    significant digits."""
    if not changes:
        return "No series has a change point."
    lines = ["| suite | configuration | metric | trial | previous trial | before | after | change | p-value | "
             "direction |", "|---|---|---|---|---|---|---|---|---|---|"]
    for change in changes:
        before, after = figure_text(change.mean_before, change.unit), figure_text(change.mean_after, change.unit)
        lines.append(f"| {change.suite} | {change.configuration} | {change.metric} | {change.trial_id} "
                     f"(#{change.trial_number}) | {change.previous_trial_id} | {before} {change.unit} | "
                     f"{after} {change.unit} | {percent_text(change.change_pct)} | {p_value_text(change.p_value)} | "
                     f"{change.direction} |")
    return "\n".join(lines)


def noise_floor_markdown(connection: duckdb.DuckDBPyConnection) -> str:
    """Each series' noise floor as a table: the trials it was measured over, the level, the noise and the robust
    spread (percent on the ratio scale, the unit's on the difference scale)."""
    rows = connection.execute(f"""
        SELECT suite, configuration, metric, unit, scale, trials_used, first_trial_id, last_trial_id, level, noise,
               robust_noise
        FROM {NOISE_FLOOR} ORDER BY suite, configuration, metric""").fetchall()
    if not rows:
        return "No series has a trial yet."
    lines = ["| suite | configuration | metric | trials | level | noise | robust noise |",
             "|---|---|---|---|---|---|---|"]
    for suite, configuration, metric, unit, scale, used, first, last, level, noise, robust in rows:
        lines.append(f"| {suite} | {configuration} | {metric} | {used} ({first} … {last}) | "
                     f"{figure_text(level, unit)} {unit} | {spread_text(noise, scale, unit)} | "
                     f"{spread_text(robust, scale, unit)} |")
    return "\n".join(lines)


HISTORIES_SHOWN = 3


def draw_histories(warehouse: WarehouseResource) -> dict[str, dg.MetadataValue]:
    """:func:`suite_histories`, read from the warehouse once a refresh has committed."""
    with warehouse.read() as connection:
        return suite_histories(connection)


def suite_histories(connection: duckdb.DuckDBPyConnection) -> dict[str, dg.MetadataValue]:
    """The history charts of the suites whose trials ran last (a few: each is an image in the event log), an
    observation of change_points after the refresh's materializations."""
    # Imported here: the chart libraries cost ~0.6 s to import, paid by every process that loads the definitions.
    from substrate_assets.report.pages import history_chart
    from substrate_assets.report.plots import markdown_image

    suites = [row[0] for row in connection.execute(
        "SELECT suite FROM metric_history WHERE suite IS NOT NULL GROUP BY suite "
        "ORDER BY max(started_at) DESC NULLS LAST, suite LIMIT ?", [HISTORIES_SHOWN]).fetchall()]
    shown: dict[str, dg.MetadataValue] = {}
    for suite in suites:
        drawn = history_chart(connection, suite)
        if drawn is not None:
            shown[f"history/{suite}"] = dg.MetadataValue.md(markdown_image(drawn, f"history of suite {suite}"))
    return shown


mart_assets = model_assets()
