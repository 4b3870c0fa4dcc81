"""The main job, in-process on the project's Dagster instance: validate a suite's script, run a trial, load it,
refresh the models. Also the reload of an existing trial."""

from collections.abc import Sequence
from dataclasses import dataclass

import dagster as dg

from substrate_assets.definitions import defs
from substrate_assets.defs.partitions import script_partitions, trial_partitions
from substrate_assets.defs.scripts.assets import SCRIPT_IS_VALID, workload_script
from substrate_assets.defs.trials.assets import trial_run
from substrate_assets.defs.warehouse.models import mart_assets
from substrate_assets.defs.warehouse.raw import raw_assets
from substrate_assets.results.layout import RunStore
from substrate_assets.suites import Suite

INFO_LOGS = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}


class MainJobError(RuntimeError):
    """A step of the main job failed; the message says which and why."""


@dataclass(frozen=True)
class JobOutcome:
    trial_id: str
    runs: list[str]


def _materialize(selection: Sequence[dg.AssetsDefinition], instance: dg.DagsterInstance,
                 partition_key: str) -> dg.ExecuteInProcessResult:
    return dg.materialize(list(defs.assets or []), selection=dg.AssetSelection.assets(*selection),
                          partition_key=partition_key, instance=instance, resources=dict(defs.resources or {}),
                          run_config=INFO_LOGS, raise_on_error=False)


def _succeeded(result: dg.ExecuteInProcessResult, what: str) -> dg.ExecuteInProcessResult:
    if not result.success:
        failures = [event.step_key + ": " + str(event.event_specific_data.error.message).strip()
                    for event in result.all_events if event.event_type_value == "STEP_FAILURE"]
        raise MainJobError(f"{what} failed (run {result.run_id}):\n" + "\n".join(failures or ["see the run's logs"]))
    return result


def materialize_script(suite: Suite, instance: dg.DagsterInstance) -> str:
    """workload_script for the suite's script; MainJobError when the script is invalid."""
    instance.add_dynamic_partitions(script_partitions.name, [suite.script])
    result = _materialize([workload_script], instance, suite.script)
    for evaluation in result.get_asset_check_evaluations():
        if evaluation.check_name == SCRIPT_IS_VALID and not evaluation.passed:
            problems = evaluation.metadata.get("problems")
            raise MainJobError(f"script {suite.script} is invalid; nothing ran:\n"
                               f"{problems.value if problems else ''}")
    return _succeeded(result, f"validating script {suite.script}").run_id


def run_suite(suite: Suite, store: RunStore, instance: dg.DagsterInstance) -> JobOutcome:
    """Register a new trial partition, then materialize the whole graph for it."""
    runs = [materialize_script(suite, instance)]
    key = store.propose_key(suite.name, suite.tag, set(instance.get_dynamic_partitions(trial_partitions.name)))
    instance.add_dynamic_partitions(trial_partitions.name, [key.trial_id])
    result = _materialize([trial_run, *raw_assets, *mart_assets], instance, key.trial_id)
    return JobOutcome(key.trial_id, [*runs, _succeeded(result, f"trial {key.trial_id}").run_id])


def reload_trial(trial_id: str, store: RunStore, instance: dg.DagsterInstance) -> JobOutcome:
    """Load an existing trial's files again (raw tables replaced, models rebuilt); no load is generated."""
    store.find(trial_id)
    instance.add_dynamic_partitions(trial_partitions.name, [trial_id])
    result = _materialize([*raw_assets, *mart_assets], instance, trial_id)
    return JobOutcome(trial_id, [_succeeded(result, f"reloading trial {trial_id}").run_id])
