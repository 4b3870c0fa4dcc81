"""The main job, in-process on the project's Dagster instance: validate a suite's script, run a trial, load it,
refresh the models. Also the reload of an existing trial."""

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import dagster as dg

from substrate_assets.definitions import ASSETS, defs
from substrate_assets.defs.metadata import table_metadata
from substrate_assets.defs.models import mart_assets
from substrate_assets.defs.raw import raw_assets
from substrate_assets.defs.scripts import SCRIPT_IS_VALID, workload_script
from substrate_assets.defs.trials import trial_run
from substrate_assets.results.importer import ImportedRun, import_runs
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.suites import Suite
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models import build_all, discover, models_directory
from substrate_assets.warehouse.raw import RAW_TABLES, load_trials

INFO_LOGS = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}


class MainJobError(RuntimeError):
    """A step of the main job failed; the message says which and why."""


@dataclass(frozen=True)
class JobOutcome:
    trial_id: str
    runs: list[str]


def _resources() -> dict[str, object]:
    return dict(defs.resources or {})


def _materialize(selection: Sequence[dg.AssetsDefinition], instance: dg.DagsterInstance,
                 partition_key: str | None, what: str) -> dg.ExecuteInProcessResult:
    result = dg.materialize(ASSETS, selection=dg.AssetSelection.assets(*selection), partition_key=partition_key,
                            instance=instance, resources=_resources(), run_config=INFO_LOGS, raise_on_error=False)
    if not result.success:
        failures = [event.step_key + ": " + str(event.event_specific_data.error.message).strip()
                    for event in result.all_events if event.event_type_value == "STEP_FAILURE"]
        raise MainJobError(f"{what} failed (run {result.run_id}):\n" + "\n".join(failures or ["see the run's logs"]))
    return result


def validate_script(suite: Suite, instance: dg.DagsterInstance) -> str:
    instance.add_dynamic_partitions("script", [suite.script])
    result = dg.materialize(ASSETS, selection=dg.AssetSelection.assets(workload_script), partition_key=suite.script,
                            instance=instance, resources=_resources(), run_config=INFO_LOGS, raise_on_error=False)
    for evaluation in result.get_asset_check_evaluations():
        if evaluation.check_name == SCRIPT_IS_VALID and not evaluation.passed:
            problems = evaluation.metadata.get("problems")
            raise MainJobError(f"script {suite.script} is invalid; nothing ran:\n"
                               f"{problems.value if problems else ''}")
    if not result.success:
        raise MainJobError(f"validating script {suite.script} failed (run {result.run_id})")
    return result.run_id


def run_suite(suite: Suite, store: RunStore, instance: dg.DagsterInstance) -> JobOutcome:
    """Register a new trial partition, then materialize the whole graph for it."""
    runs = [validate_script(suite, instance)]
    taken = set(instance.get_dynamic_partitions("trial"))
    key = store.propose_key(suite.name, suite.tag, taken)
    instance.add_dynamic_partitions("trial", [key.trial_id])
    result = _materialize([trial_run, *raw_assets, *mart_assets], instance, key.trial_id,
                          f"trial {key.trial_id}")
    return JobOutcome(key.trial_id, [*runs, result.run_id])


def reload_trial(trial_id: str, store: RunStore, instance: dg.DagsterInstance) -> JobOutcome:
    """Load an existing trial's files again (raw tables replaced, models rebuilt); no load is generated."""
    store.find(trial_id)
    instance.add_dynamic_partitions("trial", [trial_id])
    result = _materialize([*raw_assets, *mart_assets], instance, trial_id, f"reloading trial {trial_id}")
    return JobOutcome(trial_id, [result.run_id])


@dataclass(frozen=True)
class ImportOutcome:
    runs: list[ImportedRun]
    raw_rows: dict[str, int]
    models: list[str]


def import_upstream(root: str, store: RunStore, warehouse: Path, instance: dg.DagsterInstance) -> ImportOutcome:
    """Copy every upstream run under ``root`` into the store, register each as a trial partition and load it.

    The load is one bulk pass over the warehouse (raw tables, then models) rather than a run per trial;
    each table's materialization is recorded on the instance, so the imported trials show in the UI
    beside native ones.
    """
    runs = import_runs(root, store)
    if not runs:
        return ImportOutcome([], {}, [])
    trial_ids = [run.trial_id for run in runs]
    instance.add_dynamic_partitions("trial", trial_ids)
    with connect(warehouse) as connection:
        trials = [TrialDirectory(run.trial_dir) for run in runs]
        counts = load_trials(connection, trials)
        built = build_all(connection, discover(models_directory()))
    for run in runs:
        for table in RAW_TABLES:
            instance.report_runless_asset_event(dg.AssetMaterialization(
                asset_key=table, partition=run.trial_id,
                metadata={"imported_from": run.source, "trial_dir": dg.MetadataValue.path(str(run.trial_dir))}))
    for table in built:
        instance.report_runless_asset_event(dg.AssetMaterialization(
            asset_key=table.name, metadata=table_metadata(table)))
    return ImportOutcome(runs, counts, [table.name for table in built])
