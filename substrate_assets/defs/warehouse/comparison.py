"""trial_run's check ``no_regression_against_previous_trial``: each trial compared, figure by figure, with the latest
earlier trial of its suite and configuration (``substrate-bench compare``'s figures and verdicts, by its suite's
thresholds). A regression warns and blocks nothing; the comparison table is the check's metadata."""

import warnings

import dagster as dg
import duckdb

from substrate_assets.analysis.comparison import Comparison, Side, lost, regressed
from substrate_assets.analysis.comparison_text import as_markdown, gate_fails, summary
from substrate_assets.defs.partitions import trial_partitions
from substrate_assets.defs.resources import SuitesResource
from substrate_assets.defs.trials.assets import trial_run
from substrate_assets.defs.trials.checks import NO_REGRESSION, TRIAL_RUN
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.suites import compare_thresholds
from substrate_assets.warehouse.comparison import compare, previous_trial, select_side, wake_samples

# What the comparison reads: the trial's raw tables and the marts holding its configuration and figures.
READS = ("request_samples", "locust_stats", "capacity_history", "density_frontiers", "slo_capacity")


def trial_pictures(connection: duckdb.DuckDBPyConnection, sides: list[Side]) -> dict[str, dg.MetadataValue]:
    """The wake-latency CDF of the trial (the last side) over its baseline's, and its load points when it climbed a
    ladder: images in markdown, as Dagster shows them."""
    # Imported here: the chart libraries cost ~0.6 s to import, paid by every process that loads the definitions.
    from substrate_assets.report.pages import ladder_chart
    from substrate_assets.report.plots import latency_cdf, markdown_image

    samples = {side.label: wake_samples(connection, side) for side in sides}
    pictures = {}
    if any(len(values) for values in samples.values()):
        title = "wake latency CDF" + (": previous trial and this one" if len(sides) > 1 else "")
        pictures["wake_cdf"] = dg.MetadataValue.md(markdown_image(latency_cdf(samples, title), title))
    ladder = ladder_chart(connection, sides[-1].trial_ids[0])
    if ladder is not None:
        pictures["load_points"] = dg.MetadataValue.md(markdown_image(ladder, "wake p99 by load point"))
    return pictures


def check_result(comparison: Comparison, source: str,
                 pictures: dict[str, dg.MetadataValue]) -> dg.AssetCheckResult:
    worse, gone = regressed(comparison.figures), lost(comparison.figures)
    metadata: dict[str, dg.RawMetadataValue] = {
        **pictures,
        "compared_with": comparison.baseline.trial_ids[0],
        "regressed": ", ".join(row.figure for row in worse) or "none",
        "not_measured_by_this_trial": ", ".join(row.figure for row in gone) or "none",
        "comparison": dg.MetadataValue.md(as_markdown(comparison, source)),
    }
    for row in comparison.figures:
        if row.change_pct is not None:
            metadata[f"change_pct/{row.figure.replace(' ', '_')}"] = dg.MetadataValue.float(round(row.change_pct, 1))
    return dg.AssetCheckResult(passed=not gate_fails(comparison), severity=dg.AssetCheckSeverity.WARN,
                               metadata=metadata, description=summary(comparison, source))


def compare_with_previous_trial(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource,
                                suites: SuitesResource) -> dg.AssetCheckResult:
    trial_id = context.partition_key
    with warehouse.connect() as connection:
        known = connection.execute("SELECT any_value(suite), count(*) FROM capacity_history WHERE trial_id = ?",
                                   [trial_id]).fetchone()
        if not known or not known[1]:
            raise dg.Failure(f"trial {trial_id} is not in capacity_history: materialize its raw tables and the marts "
                             "before comparing it")
        baseline = previous_trial(connection, trial_id)
        sides = [select_side(connection, trial) for trial in (baseline, trial_id) if trial is not None]
        pictures = trial_pictures(connection, sides)
        if baseline is None:
            return dg.AssetCheckResult(passed=True, metadata={"compared_with": "none", **pictures},
                                       description="The first trial of its suite and configuration: nothing to "
                                       "compare with.")
        thresholds, source = compare_thresholds(known[0], suites.all())
        comparison = compare(connection, sides[0], sides[1], thresholds)
    return check_result(comparison, source, pictures)


def _after_the_marts_follow_a_trial() -> dg.AutomationCondition:
    """True for a trial's partition that was never compared, when the marts have just been rebuilt with nothing
    upstream still running, and the trial both landed (trial_run; an imported or rebuilt trial has no such event and
    is compared only on request) and loaded."""
    def dep(asset: str, condition: dg.AutomationCondition) -> dg.AutomationCondition:
        return dg.AutomationCondition.any_deps_match(condition).allow(dg.AssetSelection.assets(asset))

    missing = dg.AutomationCondition.missing()
    return (missing & dep("capacity_history", dg.AutomationCondition.newly_updated())
            & ~dep(TRIAL_RUN, missing) & ~dep("request_samples", missing)
            & ~dg.AutomationCondition.any_deps_in_progress() & ~dg.AutomationCondition.in_progress()
            ).with_label("a landed trial, once the marts were rebuilt")


with warnings.catch_warnings():
    # A check per trial partition is a preview feature of Dagster 1.13, and the only way to check each trial.
    warnings.simplefilter("ignore", dg.PreviewWarning)
    no_regression_against_previous_trial = dg.asset_check(
        asset=trial_run,
        name=NO_REGRESSION,
        partitions_def=trial_partitions,
        blocking=False,
        additional_deps=list(READS),
        pool="duckdb",
        automation_condition=_after_the_marts_follow_a_trial(),
        description="The trial compared with the latest earlier trial of its suite and configuration, as "
        "`substrate-bench compare` does: wake and step latency p50/p99 (95 % bootstrap interval, Mann–Whitney U), "
        "densities, capacity, failure ratio. Warns on a regression, blocks nothing; passes with nothing to compare "
        "for a configuration's first trial.",
    )(compare_with_previous_trial)
