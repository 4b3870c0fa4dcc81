"""trial_run's check ``no_regression_against_history``: each trial judged, figure by figure, against the recent history
of its suite and configuration (its trials since the latest change point, at most 20, before this one), as
Conbench judges a result against the distribution of earlier results: the history is the baseline and the measure
of the noise (``substrate-bench compare``'s figures and verdicts, by the suite's thresholds). A regression warns and
blocks nothing; an inconclusive figure passes, saying why; the comparison table is the check's metadata."""

import warnings
from collections.abc import Mapping

import dagster as dg
import duckdb

from substrate_assets.analysis.comparison import Comparison, Side, inconclusive, lost, regressed
from substrate_assets.defs.partitions import trial_partitions
from substrate_assets.defs.resources import SuitesResource
from substrate_assets.defs.trials.assets import trial_run
from substrate_assets.defs.trials.checks import NO_REGRESSION, TRIAL_RUN
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.report.verdict_text import as_markdown, notes, outcome, settling_advice, summary
from substrate_assets.suites import Suite, compare_thresholds
from substrate_assets.warehouse.compare_samples import pooled_wakes
from substrate_assets.warehouse.compare_trials import judge_against_history
from substrate_assets.warehouse.sides import AllDisturbed, judged_with_its_group

# What the judgement reads: the trial's raw tables, the marts holding its configuration, figures and history.
READS = ("request_samples", "wake_samples", "locust_stats", "capacity_history", "trial_figures", "step_latency",
         "metric_history", "change_points")


def trial_pictures(connection: duckdb.DuckDBPyConnection, sides: list[Side]) -> dict[str, dg.MetadataValue]:
    """The wake-latency CDF of the trial (the last side) over its history's, and its load points when it climbed a
    ladder: images in markdown, as Dagster shows them."""
    # Imported here: the chart libraries cost ~0.6 s to import, paid by every process that loads the definitions.
    from substrate_assets.report.pages import ladder_chart
    from substrate_assets.report.plots import latency_cdf, markdown_image

    samples = {side.label: pooled_wakes(connection, side.trial_ids) for side in sides}
    pictures: dict[str, dg.MetadataValue] = {}
    if any(len(values) for values in samples.values()):
        title = "wake latency CDF" + (": the history's trials and this one" if len(sides) > 1 else "")
        pictures["wake_cdf"] = dg.MetadataValue.md(markdown_image(latency_cdf(samples, title), title))
    ladder = ladder_chart(connection, sides[-1].trial_ids[0])
    if ladder is not None:
        pictures["load_points"] = dg.MetadataValue.md(markdown_image(ladder, "wake p99 by load point"))
    return pictures


def check_result(comparison: Comparison, source: str,
                 pictures: dict[str, dg.MetadataValue]) -> dg.AssetCheckResult:
    worse, gone, unsure = regressed(comparison.figures), lost(comparison.figures), inconclusive(comparison.figures)
    advice = settling_advice(comparison)
    metadata: dict[str, dg.RawMetadataValue] = {
        **pictures,
        "history_trials": dg.MetadataValue.int(len(comparison.baseline.trial_ids)),
        "history": ", ".join(comparison.baseline.trial_ids),
        "outcome": outcome(comparison),
        "regressed": ", ".join(row.figure for row in worse) or "none",
        "inconclusive": ", ".join(row.figure for row in unsure) or "none",
        "not_measured_by_this_trial": ", ".join(row.figure for row in gone) or "none",
        "comparison": dg.MetadataValue.md(as_markdown(comparison, source)),
        **({"notes": "\n".join(notes(comparison))} if notes(comparison) else {}),
        **({"to_settle": advice} if advice else {}),
    }
    for row in comparison.figures:
        name = row.figure.replace(" ", "_")
        if row.change_pct is not None:
            metadata[f"change_pct/{name}"] = dg.MetadataValue.float(round(row.change_pct, 1))
        if row.noise is not None and row.scale == "ratio":
            metadata[f"noise_pct/{name}"] = dg.MetadataValue.float(round(row.noise * 100, 1))
    return dg.AssetCheckResult(passed=not (worse or gone), severity=dg.AssetCheckSeverity.WARN,
                               metadata=metadata, description=summary(comparison, source))


class TrialNotInMarts(LookupError):
    """The trial is not in capacity_history: its raw tables and the marts must be loaded before it is judged."""


def judgement(warehouse: WarehouseResource, suites: Mapping[str, Suite], trial_id: str,
              judged: Comparison | None = None) -> dg.AssetCheckResult:
    """The check's result for ``trial_id``, judged by its suite's thresholds (``suites``: every suite by name); what
    the check records in a run, and the main job records outside one. TrialNotInMarts before its load. ``judged``:
    the trial's comparison against its history, when a reader of the same warehouse (the site) judged it already."""
    with warehouse.read() as connection:  # a read: no writer lock, so it never waits for a load nor holds one up
        known = connection.execute("SELECT any_value(suite), count(*) FROM capacity_history WHERE trial_id = ?",
                                   [trial_id]).fetchone()
        if not known or not known[1]:
            raise TrialNotInMarts(f"trial {trial_id} is not in capacity_history: materialize its raw tables and the "
                                  "marts before judging it")
        thresholds, source = compare_thresholds(known[0], suites)
        try:
            trial = judged_with_its_group(connection, trial_id)
        except AllDisturbed as error:
            return dg.AssetCheckResult(
                passed=False, severity=dg.AssetCheckSeverity.WARN,
                metadata={"outcome": "disturbed", "history_trials": dg.MetadataValue.int(0)},
                description=f"Not judged: {error}.")
        comparison = judged if judged is not None else judge_against_history(connection, trial, thresholds)
        sides = [trial] if comparison is None else [comparison.baseline, trial]
        pictures = trial_pictures(connection, sides)
    if comparison is None:
        return dg.AssetCheckResult(passed=True, metadata={"history_trials": dg.MetadataValue.int(0), **pictures},
                                   description="No earlier trial of its suite and configuration: no history to "
                                   "judge it against yet.")
    return check_result(comparison, source, pictures)


def judge_trial_against_history(context: dg.AssetCheckExecutionContext, warehouse: WarehouseResource,
                                suites: SuitesResource) -> dg.AssetCheckResult:
    try:
        return judgement(warehouse, suites.all(), context.partition_key)
    except TrialNotInMarts as error:
        raise dg.Failure(str(error)) from None


_Condition = dg.AutomationCondition[dg.AssetKey | dg.AssetCheckKey]


def _after_the_marts_follow_a_trial() -> _Condition:
    """True for a trial's partition that was never judged, when the marts have just been rebuilt with nothing
    upstream still running, and the trial both landed (trial_run; an imported or rebuilt trial has no such event and
    is judged only on request) and loaded."""
    def dep(asset: str, condition: _Condition) -> _Condition:
        return dg.AutomationCondition.any_deps_match(condition).allow(dg.AssetSelection.assets(asset))

    missing = dg.AutomationCondition.missing()
    return (missing & dep("capacity_history", dg.AutomationCondition.newly_updated())
            & ~dep(TRIAL_RUN, missing) & ~dep("request_samples", missing)
            & ~dg.AutomationCondition.any_deps_in_progress() & ~dg.AutomationCondition.in_progress()
            ).with_label("a landed trial, once the marts were rebuilt")


with warnings.catch_warnings():
    # A check per trial partition is a preview feature of Dagster 1.13, and the only way to check each trial.
    warnings.simplefilter("ignore", dg.PreviewWarning)
    no_regression_against_history = dg.asset_check(
        asset=trial_run,
        name=NO_REGRESSION,
        partitions_def=trial_partitions,
        blocking=False,
        additional_deps=list(READS),
        pool="duckdb",
        automation_condition=_after_the_marts_follow_a_trial(),
        description="The trial, with its group when it ran in one (`run --repeat`, `ab`: a group is judged whole), "
        "judged against the recent history of its suite and configuration (its trials since "
        "the latest change point, at most 20, before it, none disturbed), as `substrate-bench compare` judges: per "
        "figure — the wake's geometric mean (primary), its paths' p50 and slow share, wake and step p50/p99, "
        "densities, capacity, failure ratio — the change, its interval, the trial-to-trial noise of the history and "
        "the change the rule could detect. Warns on a regression, and on a disturbed trial (the machine busy with "
        "other work), which it does not judge; passes on no change and on an inconclusive figure (saying how many "
        "trials would settle it), and with nothing to judge against for a configuration's first trial.",
    )(judge_trial_against_history)
