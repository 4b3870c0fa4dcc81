"""trial_run's check judges each trial against the history of its suite and configuration, after the marts, in a real
in-process Dagster run on a temporary instance and DuckDB file (trial_run itself is not executed: its trials are
written to the run store as a finished trial leaves them)."""

import dagster as dg
import numpy as np
import pytest

from substrate_assets.definitions import defs
from substrate_assets.defs.resources import RunStoreResource
from substrate_assets.defs.trials.assets import trial_run
from substrate_assets.defs.trials.checks import NO_REGRESSION
from substrate_assets.defs.trials.jobs import run_trial_job
from substrate_assets.defs.warehouse.models import mart_assets
from substrate_assets.defs.warehouse.raw import raw_assets
from substrate_assets.defs.warehouse.regression_check import no_regression_against_history
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.refresh import load_and_refresh
from substrate_assets.warehouse.trial_rows import read_trials
from tests.support.synthetic_trials import write_trial

CHECK = dg.AssetCheckKey(trial_run.key, NO_REGRESSION)


def wakes(seed: int, median: float) -> dict[str, np.ndarray]:
    """A trial's requests: its own median drawn around ``median`` (8 % from trial to trial), its wakes around it."""
    rng = np.random.default_rng(seed)
    level = median * np.exp(rng.normal(0, 0.08))
    return {"WakeFirstTouch": rng.lognormal(np.log(level), 0.4, 2000), "Step_01_edit": rng.lognormal(3.0, 0.3, 500)}


@pytest.fixture
def trials(tmp_path):
    """Five trials of one configuration at about 100 ms, then one at 200 ms."""
    store = RunStore(tmp_path / "store")
    ids = [write_trial(store, "suite-a", 1_764_547_200 + 100 * n, wakes(n, median), tag="t", sut_version=f"v{n}")
           for n, median in enumerate((100.0, 100.0, 100.0, 100.0, 100.0, 200.0))]
    return store, ids


def evaluate(instance, store, tmp_path, trial_id) -> dg.AssetCheckEvaluation:
    result = dg.materialize(
        [trial_run, *raw_assets, *mart_assets, no_regression_against_history],
        selection=dg.AssetSelection.assets(*raw_assets, *mart_assets) | dg.AssetSelection.checks(CHECK),
        partition_key=trial_id, instance=instance,
        resources={**defs.resources, "run_store": RunStoreResource(root=str(store.root)),
                   "warehouse": WarehouseResource(database=str(tmp_path / "w.duckdb"))})
    assert result.success
    [evaluation] = [e for e in result.get_asset_check_evaluations() if e.check_name == NO_REGRESSION]
    return evaluation


def test_each_trial_is_judged_against_its_history(trials, tmp_path):
    store, ids = trials
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("trial", ids)
    first = evaluate(instance, store, tmp_path, ids[0])
    assert first.passed and first.metadata["history_trials"].value == 0
    assert first.metadata["wake_cdf"].value.startswith("![wake latency CDF](data:image/png;base64,")
    second = evaluate(instance, store, tmp_path, ids[1])
    # One earlier trial is no measure of the noise: nothing regresses, the figures are inconclusive.
    assert second.passed and second.metadata["history_trials"].value == 1
    assert second.metadata["outcome"].value == "inconclusive"
    assert "WakeFirstTouch gmean" in second.metadata["inconclusive"].value
    # The rest of the history is loaded as a whole load outside a run loads it: the check reads the marts alone.
    with connect(tmp_path / "w.duckdb") as connection:
        read, unreadable = read_trials([TrialDirectory(store.find(trial_id)) for trial_id in ids[2:5]])
        assert not unreadable
        load_and_refresh(connection, read)
    slow = evaluate(instance, store, tmp_path, ids[5])
    assert not slow.passed and slow.severity == dg.AssetCheckSeverity.WARN
    assert slow.metadata["history_trials"].value == 5 and slow.metadata["history"].value == ", ".join(ids[:5])
    # The wake's geometric mean is the primary figure here (these trials kept no runtime events: no paths).
    assert "WakeFirstTouch gmean" in slow.metadata["regressed"].value
    table = slow.metadata["comparison"].value
    assert "| WakeFirstTouch gmean * |" in table and "**regressed**" in table
    assert slow.metadata["change_pct/WakeFirstTouch_gmean"].value > 50
    assert slow.metadata["noise_pct/WakeFirstTouch_gmean"].value > 0
    assert "the history's trials and this one" in slow.metadata["wake_cdf"].value
    assert "load_points" not in slow.metadata  # a flat trial is one load point: no ladder to draw


def test_the_comparison_follows_the_marts_on_its_own():
    """run_trial runs only the trial; the judgement, which reads the marts, is started by warehouse_refresh."""
    assert not defs.resolve_job_def(run_trial_job.name).asset_layer.asset_graph.asset_check_keys
    assert CHECK in defs.resolve_asset_graph().asset_check_keys
    assert CHECK in defs.resolve_sensor_def("warehouse_refresh").asset_selection.resolve_checks(defs.resolve_asset_graph())
    assert defs.resolve_asset_graph().get(CHECK).automation_condition is not None


def test_a_groups_trial_is_judged_with_its_group_never_against_it(tmp_path):
    """A group is judged whole: its last trial's check compares the group with the history before it, and the
    group's earlier trials are no part of that history."""
    store = RunStore(tmp_path / "store")
    history = [write_trial(store, "suite-a", 1_764_547_200 + 100 * n, wakes(n, 100.0), tag="t") for n in range(5)]
    group = "suite-a-20251201t010000z-x3"
    mates = [write_trial(store, "suite-a", 1_764_548_000 + 100 * n, wakes(10 + n, 200.0), tag="t", group=group)
             for n in range(3)]
    with connect(tmp_path / "w.duckdb") as connection:
        read, unreadable = read_trials([TrialDirectory(store.find(trial_id)) for trial_id in history + mates[:2]])
        assert not unreadable
        load_and_refresh(connection, read)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("trial", [*history, *mates])
    last = evaluate(instance, store, tmp_path, mates[-1])
    assert last.metadata["history_trials"].value == 5 and last.metadata["history"].value == ", ".join(history)
    assert not last.passed and "WakeFirstTouch gmean" in last.metadata["regressed"].value
    # The candidate is the whole group: five trials against three, the group's three judged together.
    assert "| WakeFirstTouch gmean * |" in last.metadata["comparison"].value
    assert "| 5 / 3 / 0 | **regressed** |" in last.metadata["comparison"].value
