"""trial_run's check compares each trial with the previous one of its suite and configuration, after the marts, in a
real in-process Dagster run on a temporary instance and DuckDB file (trial_run itself is not executed: its trials
are written to the run store as a finished trial leaves them)."""

import dagster as dg
import numpy as np
import pytest

from substrate_assets.definitions import defs
from substrate_assets.defs.resources import RunStoreResource
from substrate_assets.defs.trials.assets import trial_run
from substrate_assets.defs.trials.checks import NO_REGRESSION
from substrate_assets.defs.trials.jobs import run_trial_job
from substrate_assets.defs.warehouse.comparison import no_regression_against_previous_trial
from substrate_assets.defs.warehouse.models import mart_assets
from substrate_assets.defs.warehouse.raw import raw_assets
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.results.layout import RunStore
from tests.support.synthetic_trials import write_trial

CHECK = dg.AssetCheckKey(trial_run.key, NO_REGRESSION)


def wakes(seed: int, median: float) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"WakeFirstTouch": rng.lognormal(np.log(median), 0.4, 2000), "Step_01_edit": rng.lognormal(3.0, 0.3, 500)}


@pytest.fixture
def trials(tmp_path):
    store = RunStore(tmp_path / "store")
    ids = [write_trial(store, "suite-a", 1_764_547_200 + 100 * n, wakes(n, median), tag="t", sut_version=f"v{n}")
           for n, median in enumerate((100.0, 102.0, 140.0))]
    return store, ids


def evaluate(instance, store, tmp_path, trial_id) -> dg.AssetCheckEvaluation:
    result = dg.materialize(
        [trial_run, *raw_assets, *mart_assets, no_regression_against_previous_trial],
        selection=dg.AssetSelection.assets(*raw_assets, *mart_assets) | dg.AssetSelection.checks(CHECK),
        partition_key=trial_id, instance=instance,
        resources={**defs.resources, "run_store": RunStoreResource(root=str(store.root)),
                   "warehouse": WarehouseResource(database=str(tmp_path / "w.duckdb"))})
    assert result.success
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == NO_REGRESSION]
    return evaluation


def test_each_trial_is_compared_with_the_previous_one(trials, tmp_path):
    store, ids = trials
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("trial", ids)
    first = evaluate(instance, store, tmp_path, ids[0])
    assert first.passed and first.metadata["compared_with"].value == "none"
    assert first.metadata["wake_cdf"].value.startswith("![wake latency CDF](data:image/png;base64,")
    second = evaluate(instance, store, tmp_path, ids[1])
    assert second.passed and second.metadata["compared_with"].value == ids[0]
    assert second.metadata["regressed"].value == "none"
    third = evaluate(instance, store, tmp_path, ids[2])
    assert not third.passed and third.severity == dg.AssetCheckSeverity.WARN
    assert third.metadata["compared_with"].value == ids[1]
    assert "WakeFirstTouch p50" in third.metadata["regressed"].value
    table = third.metadata["comparison"].value
    assert "| WakeFirstTouch p50 |" in table and "**regressed**" in table
    assert third.metadata["change_pct/WakeFirstTouch_p50"].value > 25
    assert "previous trial and this one" in third.metadata["wake_cdf"].value
    assert "load_points" not in third.metadata  # a flat trial is one load point: no ladder to draw


def test_the_comparison_follows_the_marts_on_its_own():
    """run_trial runs only the trial; the comparison, which reads the marts, is started by warehouse_refresh."""
    assert not defs.resolve_job_def(run_trial_job.name).asset_layer.asset_graph.asset_check_keys
    assert CHECK in defs.resolve_asset_graph().asset_check_keys
    assert CHECK in defs.resolve_sensor_def("warehouse_refresh").asset_selection.resolve_checks(defs.resolve_asset_graph())
    assert defs.resolve_asset_graph().get(CHECK).automation_condition is not None
