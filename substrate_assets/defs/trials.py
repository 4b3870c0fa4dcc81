"""``trial_run[trial]``: one execution of a suite, run through Dagster Pipes into the run store."""

import sys

import dagster as dg

from substrate_assets.defs.partitions import trial_partitions
from substrate_assets.defs.resources import RunStoreResource, ScriptLibraryResource, SuitesResource
from substrate_assets.defs.scripts import workload_script
from substrate_assets.project import project_root
from substrate_assets.results.layout import TrialKey
from substrate_assets.suites import SuiteError

TRIAL_COMPLETED = "trial_completed"


@dg.asset(
    partitions_def=trial_partitions,
    deps=[workload_script],
    group_name="trials",
    kinds={"locust"},
    check_specs=[dg.AssetCheckSpec(TRIAL_COMPLETED, asset="trial_run", description="Locust ran its whole "
                                   "duration and exited 0 (no failed requests); a trial that did not still keeps "
                                   "everything it measured.")],
    description="One trial: the suite named by the partition key (<suite>-<yyyymmddthhmmssz>) run on the "
    "local backend — embedded runtime, Locust headless — written once, atomically, into the run store as "
    "runs/<suite>/run_date=…/run_ts=…/run_tag=…/.",
)
def trial_run(context: dg.AssetExecutionContext, pipes_subprocess_client: dg.PipesSubprocessClient,
              run_store: RunStoreResource, script_library: ScriptLibraryResource,
              suites: SuitesResource) -> dg.MaterializeResult:
    trial_id = context.partition_key
    try:
        suite = suites.suite(TrialKey.suite_of(trial_id))
    except (ValueError, SuiteError) as error:
        raise dg.Failure(f"trial partition {trial_id!r}: {error}") from None
    store = run_store.store()
    key = TrialKey.from_trial_id(trial_id, suite.tag)
    if store.trial_dir(key).exists():
        raise dg.Failure(f"trial {trial_id} already ran ({store.trial_dir(key)}) and results are never rewritten; "
                         f"reload it with `substrate-bench materialize {trial_id}`")
    return pipes_subprocess_client.run(
        context=context,
        command=[sys.executable, "-m", "substrate_assets.defs.pipes_trial"],
        extras={"trial_id": trial_id, "suite": suite.name, "store": str(store.root),
                "scripts": script_library.directory, "suites": suites.path},
        cwd=str(project_root()),
    ).get_materialize_result()
