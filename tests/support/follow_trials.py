"""Two trials launched as run_trial runs with run config, as the UI's launchpad and the script sensor launch them
(recorded with the code location, so the UI can re-execute them), then followed by the automation conditions tick
by tick, as the daemon's warehouse_refresh sensor would follow them: each tick's requested partitions are executed
as the daemon launches them (one run per partition, with the checks that execute with their assets). Run in a
process of its own, with SUBSTRATE_BENCH_ROOT naming the project (the definitions read its paths when they load);
prints {"trials": [...], "runs": [...], "ticks": [[[partition, key, ...], ...], ...]} as its last line.

    python -m tests.support.follow_trials
"""

import contextlib
import functools
import json
from collections.abc import Iterator

import dagster as dg
from dagster._core.definitions.partitions.context import partition_loading_context

from substrate_assets.app.code_location import run_job
from substrate_assets.app.instance import project_instance
from substrate_assets.definitions import defs
from substrate_assets.defs.trials.jobs import TRIAL_TAG, TrialConfig, run_config

TICKS_PER_TRIAL = 4


@contextlib.contextmanager
def partitions_read_once(instance: dg.DagsterInstance) -> Iterator[None]:
    """Within one tick, each dynamic partitions definition read from the instance once. Dagster's cursor
    serialization asks the instance for the trial partitions about a thousand times per tick (one SQLite query each,
    most of this module's time); no partition is added while a tick is evaluated, so one answer serves them all."""
    instance.get_dynamic_partitions = functools.cache(instance.get_dynamic_partitions)  # type: ignore[method-assign]
    try:
        yield
    finally:
        del instance.get_dynamic_partitions


def main() -> None:
    instance = project_instance()
    graph = defs.resolve_asset_graph()
    ticks: list[list[list[str | None]]] = []

    def tick(cursor):
        with partitions_read_once(instance):
            evaluation = dg.evaluate_automation_conditions(defs=defs, instance=instance, cursor=cursor)
        by_partition: dict[str | None, list] = {}
        # Dagster's tester lists requested asset partitions only; a check's need the partitions' loading context.
        with partition_loading_context(new_ctx=evaluation._partition_loading_context):
            for result in evaluation.results:
                subset = result.true_subset
                partitions = subset.expensively_compute_partition_keys() if subset.is_partitioned else [None]
                for partition in partitions if subset.size else ():
                    by_partition.setdefault(partition, []).append(result.key)
        requested = []
        for partition, keys in by_partition.items():
            assets = [key for key in keys if isinstance(key, dg.AssetKey)]
            checks = [key for key in keys if isinstance(key, dg.AssetCheckKey)]
            requested.append([partition, *sorted([key.to_user_string() for key in assets] +
                                                 [key.name for key in checks])])
            checks += [check for asset in assets for check in graph.get(asset).check_keys]
            job = defs.resolve_implicit_global_asset_job_def().get_subset(
                asset_selection=set(assets), asset_check_selection=set(checks))
            result = job.execute_in_process(instance=instance,
                                            tags={"dagster/partition": partition} if partition else None)
            assert result.success, (partition, keys)
        ticks.append(requested)
        return evaluation.cursor

    cursor = tick(None)  # the sensor's first tick, before any trial
    trials, runs = [], []
    for users in (2, 1):
        launched = run_job("run_trial", instance, run_config(TrialConfig(suite="smoke", users=users, duration="3s")),
                           tags={})
        assert launched.success
        runs.append(launched.run_id)
        trials.append(instance.get_run_by_id(launched.run_id).tags[TRIAL_TAG])
        for _ in range(TICKS_PER_TRIAL):
            cursor = tick(cursor)
    print(json.dumps({"trials": trials, "runs": runs, "ticks": ticks}))


if __name__ == "__main__":
    main()
