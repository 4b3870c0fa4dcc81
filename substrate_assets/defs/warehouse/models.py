"""One asset per ``dbt_like_sql`` model (pool ``duckdb``), its schema.yml tests as asset checks, and
``change_points`` over ``metric_history`` in Python; all refreshed declaratively (``warehouse_refresh``) whenever a
trial's raw tables land."""

from datetime import timedelta

import dagster as dg
import duckdb

from substrate_assets.analysis.change_points import DEFAULT_PARAMETERS
from substrate_assets.analysis.comparison_text import figure_text, p_value_text, percent_text
from substrate_assets.defs.catalog import OWNERS
from substrate_assets.defs.warehouse.metadata import check_result, declared_table, model_metadata
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.warehouse.change_points import CHANGE_POINTS, METRIC_HISTORY, MetricChange, replace_change_points
from substrate_assets.warehouse.checks import ColumnTest, load_tests, run_test
from substrate_assets.warehouse.models import Model, ModelError, build, describe_table, discover, models_directory
from substrate_assets.warehouse.raw import RAW_TABLES

# The marts are refreshed when a trial lands, so their age is the age of the newest trial: a day without one warns,
# a week fails (the history that regressions are judged against has gone stale).
MART_FRESHNESS = dg.FreshnessPolicy.time_window(fail_window=timedelta(days=7), warn_window=timedelta(days=1))


def _model_asset(model: Model, tests: list[ColumnTest], known: set[str]) -> dg.AssetsDefinition:
    unknown = [name for name in model.upstream if name not in known]
    if unknown:
        raise ModelError(f"{model.path}: reads {', '.join(unknown)}, which is neither a raw table nor a model "
                         f"(have {', '.join(sorted(known))})")

    @dg.asset(
        name=model.name,
        deps=[dg.AssetKey(name) for name in model.upstream],
        group_name="marts",
        owners=OWNERS,
        kinds={"duckdb", "sql"},
        pool="duckdb",
        automation_condition=dg.AutomationCondition.eager(),
        check_specs=[dg.AssetCheckSpec(test.name, asset=model.name, description=test.description(),
                                       blocking=test.blocking) for test in tests],
        description=model.description or f"Model {model.name} ({model.path.name}).",
        freshness_policy=MART_FRESHNESS,
        metadata={"sql_file": dg.MetadataValue.path(str(model.path)), "sql": dg.MetadataValue.md(
            f"```sql\n{model.sql}\n```"), **declared_table(model.name)},
    )
    def materialize(warehouse: WarehouseResource) -> dg.MaterializeResult:
        with warehouse.connect() as connection:
            built = build(connection, model)
            outcomes = [run_test(connection, test) for test in tests]
        return dg.MaterializeResult(metadata=model_metadata(built),
                                    check_results=[check_result(outcome) for outcome in outcomes])

    return materialize


def model_assets() -> list[dg.AssetsDefinition]:
    """One asset per SQL model, and change_points where metric_history, which it reads, is one of them (as
    build_marts builds it)."""
    models = discover(models_directory())
    tests = load_tests(models_directory() / "schema.yml", set(models))
    known = set(RAW_TABLES) | set(models)
    assets = [_model_asset(model, tests.get(name, []), known) for name, model in models.items()]
    return [*assets, change_points_asset()] if METRIC_HISTORY in models else assets


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


HISTORIES_SHOWN = 3


def suite_histories(connection: duckdb.DuckDBPyConnection) -> dict[str, dg.MetadataValue]:
    """The history charts of the suites whose trials ran last (a few: each is an image in the event log)."""
    # Imported here: the chart libraries cost ~0.6 s to import, paid by every process that loads the definitions.
    from substrate_assets.report.pages import history_chart
    from substrate_assets.report.plots import markdown_image

    suites = [row[0] for row in connection.execute(
        "SELECT suite FROM metric_history WHERE suite IS NOT NULL GROUP BY suite "
        "ORDER BY max(started_at) DESC NULLS LAST, suite LIMIT ?", [HISTORIES_SHOWN]).fetchall()]
    shown = {}
    for suite in suites:
        drawn = history_chart(connection, suite)
        if drawn is not None:
            shown[f"history/{suite}"] = dg.MetadataValue.md(markdown_image(drawn, f"history of suite {suite}"))
    return shown


def change_points_asset() -> dg.AssetsDefinition:
    @dg.asset(
        name=CHANGE_POINTS,
        deps=[dg.AssetKey(METRIC_HISTORY)],
        group_name="marts",
        owners=OWNERS,
        kinds={"duckdb", "python"},
        pool="duckdb",
        automation_condition=dg.AutomationCondition.eager(),
        freshness_policy=MART_FRESHNESS,
        metadata=declared_table(CHANGE_POINTS),
        description=(
            "Where each headline metric of a configuration moved to another level: one row per change point of "
            "each metric_history series (suite, configuration, metric, measured values in trial order), with the "
            "trial it starts at, the means before and after, the change in %, the p-value and whether it regressed "
            "or improved. Found by Hunter's split/merge with a t-test (Apache Otava's compute_change_points): "
            f"{DEFAULT_PARAMETERS.describe()}."),
    )
    def materialize(warehouse: WarehouseResource) -> dg.MaterializeResult:
        with warehouse.connect() as connection:
            changes = replace_change_points(connection)
            built = describe_table(connection, CHANGE_POINTS)
            histories = suite_histories(connection)
        return dg.MaterializeResult(metadata={**model_metadata(built),
                                              "change_points": dg.MetadataValue.md(change_points_markdown(changes)),
                                              **histories})

    return materialize


mart_assets = model_assets()
