"""Trials whose run ended without recording them: the partition a dead or failed ``run_trial`` run named.

``run_trial`` adds its trial's partition of ``trial_run`` before the trial runs. When its run worker is killed, the
partition stays without a materialization: the raw tables (eager on ``trial_run``) count it missing, and the marts
(eager, never with a dependency missing) would wait for it forever, for every later trial. So, after a dead run is
failed, its trial is settled: a trial that landed in the run store anyway (its Pipes child, told its parent died,
landed what it measured) is recorded as ``trial_run``'s materialization; one that never landed, and that no process
is still assembling, has its partition removed.
"""

from __future__ import annotations

import dagster as dg

from substrate_assets.defs.partitions import TRIAL_PARTITIONS
from substrate_assets.defs.trials.checks import TRIAL_RUN
from substrate_assets.defs.trials.jobs import TRIAL_TAG, run_trial_job
from substrate_assets.project import store_directory
from substrate_assets.results.layout import RunStore

ENDED = [dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]


def settle_unlanded_trials(instance: dg.DagsterInstance, store: RunStore | None = None) -> list[str]:
    """Record or forget the trials of ended ``run_trial`` runs that never recorded them; one line per trial."""
    store = store or RunStore(store_directory())
    named = set(instance.get_dynamic_partitions(TRIAL_PARTITIONS))
    recorded = instance.get_materialized_partitions(dg.AssetKey(TRIAL_RUN))
    said = []
    for run in instance.get_runs(filters=dg.RunsFilter(job_name=run_trial_job.name, statuses=ENDED)):
        trial_id = run.tags.get(TRIAL_TAG)
        if trial_id is None or trial_id not in named or trial_id in recorded:
            continue
        try:
            landed = store.find(trial_id)
        except FileNotFoundError:
            landed = None
        if landed is not None:
            instance.report_runless_asset_event(dg.AssetMaterialization(
                asset_key=TRIAL_RUN, partition=trial_id,
                metadata={"trial_dir": dg.MetadataValue.path(str(landed)),
                          "recorded_by": f"the sweep of dead runs: run {run.run_id} ended before recording it"}))
            said.append(f"trial {trial_id} landed but its run {run.run_id} ended before recording it: recorded")
        elif not (store.root / ".staging" / trial_id).exists():
            instance.delete_dynamic_partition(TRIAL_PARTITIONS, trial_id)
            said.append(f"trial {trial_id} of run {run.run_id} never landed: its trial_run partition removed")
    return said
