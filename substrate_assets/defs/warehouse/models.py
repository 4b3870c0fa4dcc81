"""The marts: one multi-asset step (``marts``, pool ``duckdb``) with an asset per ``dbt_like_sql`` model, its
schema.yml tests as two asset checks, and ``change_points`` over ``metric_history`` in Python; refreshed declaratively
(``warehouse_refresh``) whenever a trial's raw tables land. A refresh updates the models for the trials loaded since
they last ran (a per-trial model rewrites just their rows, and its checks look at just those rows); ``rebuild``
builds everything whole."""

import time
from dataclasses import dataclass, field
from datetime import timedelta

import dagster as dg
import duckdb

from substrate_assets.analysis.change_points import DEFAULT_PARAMETERS
from substrate_assets.analysis.noise import HISTORY_WINDOW
from substrate_assets.analysis.verdict_text import figure_text, p_value_text, percent_text, spread_text
from substrate_assets.defs.catalog import OWNERS
from substrate_assets.defs.warehouse.column_checks import check_results, column_checks
from substrate_assets.defs.warehouse.metadata import declared_table, model_metadata
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.warehouse import changes
from substrate_assets.warehouse.change_points import CHANGE_POINTS, METRIC_HISTORY, MetricChange, read_change_points
from substrate_assets.warehouse.checks import ColumnTest, load_tests, run_tests
from substrate_assets.warehouse.connection import transaction
from substrate_assets.warehouse.introspection import has_table
from substrate_assets.warehouse.models.build import update
from substrate_assets.warehouse.models.discovery import Model, ModelError, build_order, discover, models_directory
from substrate_assets.warehouse.models.marts import prune_copies, scope_of, update_change_points
from substrate_assets.warehouse.models.narrowing import drop_updated_rows, held_rows
from substrate_assets.warehouse.models.tables import describe_table
from substrate_assets.warehouse.noise_floor import NOISE_FLOOR, replace_noise_floor
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


def _built_in_python(name: str, deps: list[str], kind: str, description: str) -> dg.AssetSpec:
    """A mart the refresh builds in Python after the SQL models, from the tables ``deps``."""
    return dg.AssetSpec(name, deps=[dg.AssetKey(dep) for dep in deps], group_name="marts", owners=OWNERS,
                        kinds={"duckdb", kind}, automation_condition=dg.AutomationCondition.eager(),
                        freshness_policy=MART_FRESHNESS, metadata=declared_table(name), description=description)


CHANGE_POINTS_SPEC = _built_in_python(
    CHANGE_POINTS, [METRIC_HISTORY], "python",
    "Where each headline metric of a configuration moved to another level: one row per change point of "
    "each metric_history series (suite, configuration, metric, measured values in trial order), with the "
    "trial it starts at, the means before and after, the change in %, the p-value and whether it regressed "
    "or improved. Found by Hunter's split/merge with a t-test (Apache Otava's compute_change_points): "
    f"{DEFAULT_PARAMETERS.describe()}; a change at least the series' own trial-to-trial noise, between the "
    "medians of its levels.")

NOISE_FLOOR_SPEC = _built_in_python(
    NOISE_FLOOR, [METRIC_HISTORY, CHANGE_POINTS], "sql",
    "How much each headline metric of a configuration moves from one trial to the next: one row per "
    "metric_history series, over the configuration's trials since its latest change point (at most the last "
    f"{HISTORY_WINDOW}): the trials used, the median and level, the trial-to-trial standard deviation on the "
    "metric's scale (of the logarithms, read as a coefficient of variation; the failure ratio's in its unit) "
    "that comparisons judge a change against, and the robust spread (1.4826 x MAD / median) beside it. Null with "
    "fewer than 3 trials.")


NO_NEW_CHANGE_POINT = "no_new_change_point"
CHANGE_POINT_CHECK = dg.AssetCheckSpec(
    NO_NEW_CHANGE_POINT, asset=CHANGE_POINTS,
    description="Warns when a refresh finds a change point that was not there before: a headline figure of a "
                "configuration moved to another level. The warning names each series, the trial the new level "
                "starts at, the means before and after, the change and whether it regressed or improved.")

# When the refresh's writes were committed and the warehouse closed: from then on a reader sees the rows.
COMMITTED_AT = "committed_at"


@dataclass
class _Refresh:
    """What one refresh of the marts did, model by model, in build order."""

    # Per model refreshed: its metadata and its checks' results.
    results: list[tuple[str, dict[str, dg.MetadataValue], list[dg.AssetCheckResult]]] = field(default_factory=list)
    # Per model that stops what reads it, directly or not (as Dagster skips what depends on an asset whose blocking
    # check failed): the model and blocking tests that failed, "first: trial_id_not_null".
    blocking: dict[str, str] = field(default_factory=dict)
    # The models not refreshed for it, each with its cause.
    skipped: dict[str, str] = field(default_factory=dict)
    change_points: dict[str, dg.MetadataValue] | None = None
    # The change points this refresh found that the table did not hold before it (None: change_points not rebuilt).
    new_change_points: list[MetricChange] | None = None
    noise_floor: dict[str, dg.MetadataValue] | None = None


def _refreshed(connection: duckdb.DuckDBPyConnection, models: dict[str, Model], tests: dict[str, list[ColumnTest]],
               selected: set[str], checks: set[tuple[str, str]]) -> _Refresh:
    """The selected models updated in build order and their selected checks run, in one transaction (one commit;
    a model that fails rolls the whole refresh back)."""
    refresh = _Refresh()
    with transaction(connection):
        books = changes.read_books(connection)
        for model in build_order(models):
            if model.name not in selected:
                continue
            cause = next((refresh.blocking[name] for name in model.upstream if name in refresh.blocking), None)
            if cause is not None:
                refresh.blocking[model.name] = refresh.skipped[model.name] = cause
                continue
            built = update(connection, model, models, books=books)
            chosen = [test for check in column_checks(model.name, tests.get(model.name, []))
                      if (model.name, check.name) in checks for test in check.tests]
            # Every selected check reports, even over no new rows: Dagster expects a result from each.
            outcomes = run_tests(connection, chosen, trial_ids=scope_of(built, model.per_trial),
                                 rows=held_rows(books))
            failed = [outcome.test.name for outcome in outcomes if outcome.test.blocking and not outcome.passed]
            if failed:
                refresh.blocking[model.name] = f"{model.name}: {', '.join(failed)}"
            refresh.results.append((model.name, model_metadata(built), check_results(model.name, outcomes)))
        python_built = {CHANGE_POINTS, NOISE_FLOOR} & selected
        if python_built and METRIC_HISTORY in models:
            if METRIC_HISTORY in refresh.blocking:
                refresh.skipped.update(dict.fromkeys(sorted(python_built), refresh.blocking[METRIC_HISTORY]))
            elif CHANGE_POINTS in selected or not has_table(connection, CHANGE_POINTS):
                # noise_floor is rebuilt with change_points, whose latest change point starts each window.
                before = {_place(change) for change in read_change_points(connection)} \
                    if has_table(connection, CHANGE_POINTS) else set()
                built = update_change_points(connection, books)
                if CHANGE_POINTS in selected:
                    found = read_change_points(connection)
                    refresh.new_change_points = [change for change in found if _place(change) not in before]
                    refresh.change_points = {**model_metadata(built), "change_points": dg.MetadataValue.md(
                        change_points_markdown(found))}
            else:
                replace_noise_floor(connection)
            if NOISE_FLOOR in selected and NOISE_FLOOR not in refresh.skipped:
                refresh.noise_floor = {**model_metadata(describe_table(connection, NOISE_FLOOR)),
                                       "noise_floor": dg.MetadataValue.md(noise_floor_markdown(connection))}
        prune_copies(connection, models)
        if books is not None:
            drop_updated_rows(connection, books)
    return refresh


def _place(change: MetricChange) -> tuple[str | None, str, str, str]:
    return change.suite, change.configuration, change.metric, change.trial_id


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


def marts_asset(models: dict[str, Model], tests: dict[str, list[ColumnTest]],
                known: set[str]) -> dg.AssetsDefinition:
    """Every model (and change_points) as one asset step: each model is still its own asset, with its own checks and
    lineage, but a refresh opens the warehouse once and updates the models one after another in build order, instead
    of paying a Dagster step (and a DuckDB open) per model. The warehouse is closed (readers see every new row) before
    anything is drawn or recorded. Any subset can be materialized."""
    specs = [_model_spec(model, known) for model in models.values()]
    if METRIC_HISTORY in models:
        specs += [CHANGE_POINTS_SPEC, NOISE_FLOOR_SPEC]

    @dg.multi_asset(name="marts", specs=specs, can_subset=True, pool="duckdb",
                    check_specs=[check.spec() for model in models.values()
                                 for check in column_checks(model.name, tests.get(model.name, []))]
                    + ([CHANGE_POINT_CHECK] if METRIC_HISTORY in models else []),
                    description="Refreshes the selected marts in one step, in build order.")
    def refresh_marts(context: dg.AssetExecutionContext, warehouse: WarehouseResource):  # noqa: ANN202
        selected = {key.to_user_string() for key in context.selected_asset_keys}
        checks = {(key.asset_key.to_user_string(), key.name) for key in context.selected_asset_check_keys}
        with warehouse.connect() as connection:
            refresh = _refreshed(connection, models, tests, selected, checks)
        committed = {COMMITTED_AT: dg.MetadataValue.timestamp(time.time())}
        for name, metadata, evaluated in refresh.results:
            yield dg.MaterializeResult(asset_key=name, metadata={**metadata, **committed}, check_results=evaluated)
        if refresh.change_points is not None:
            with warehouse.read() as connection:
                histories = suite_histories(connection)
            judged = [change_point_check(refresh.new_change_points or [])] \
                if CHANGE_POINT_CHECK.key in context.selected_asset_check_keys else []
            yield dg.MaterializeResult(asset_key=CHANGE_POINTS, check_results=judged,
                                       metadata={**refresh.change_points, **committed, **histories})
        if refresh.noise_floor is not None:
            yield dg.MaterializeResult(asset_key=NOISE_FLOOR, metadata={**refresh.noise_floor, **committed})
        if refresh.skipped:
            raise ModelError("not refreshed, a blocking test of what they read failed: " + "; ".join(
                f"{name} (after {cause})" for name, cause in refresh.skipped.items()))

    return refresh_marts


def model_assets() -> list[dg.AssetsDefinition]:
    """The marts: every SQL model, and change_points where metric_history, which it reads, is one of them (as
    update_marts builds it); none for a project without models."""
    models = discover(models_directory())
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


mart_assets = model_assets()
