"""``trial_run[trial]``: one execution of a suite, run through Dagster Pipes into the run store."""

import warnings

import dagster as dg

from substrate_assets.defs.catalog import OWNERS, Materialized
from substrate_assets.defs.partitions import trial_partitions
from substrate_assets.defs.resources import (
    DeploymentResource,
    RunStoreResource,
    ScriptLibraryResource,
    SuitesResource,
)
from substrate_assets.defs.runs.scratch import owned_pipes_client
from substrate_assets.defs.scripts.assets import workload_script
from substrate_assets.defs.trials.checks import TRIAL_COMPLETED, TRIAL_RUN
from substrate_assets.defs.trials.kubernetes_client import KubernetesPipesClient
from substrate_assets.defs.trials.started_ahead import run_trial_child
from substrate_assets.results.layout import TrialExists, TrialKey
from substrate_assets.suites import Suite, SuiteError
from substrate_assets.workload import ScriptError

# Dagster's own Pipes clients call this preview API on every run (dagster/_core/pipes/context.py); the warning is
# about Dagster's code, not ours, and would be printed at every trial.
warnings.filterwarnings("ignore", message=r"Function `PipesMessageReader\.expected_writer_count` is currently in "
                        "preview", category=dg.PreviewWarning)


def launch_trial(context: dg.OpExecutionContext, suite: Suite, trial_id: str,
                 pipes_subprocess_client: dg.PipesSubprocessClient, pipes_k8s_client: KubernetesPipesClient,
                 run_store: RunStoreResource, script_library: ScriptLibraryResource,
                 deployment: DeploymentResource, group: str | None = None,
                 wait_at_most_s: int | None = None, live: bool = False) -> dg.PipesClientCompletedInvocation:
    """Run one trial of ``suite`` as ``trial_id`` on its backend, through Dagster Pipes, as one of ``group`` when
    given (a local trial queued for the machine at most ``wait_at_most_s``, with Locust's live web UI when
    ``live``); what the trial reported."""
    store = run_store.store()
    key = TrialKey.from_trial_id(trial_id, suite.tag)
    here = deployment.deployment()
    if not here.runs_backend(suite.backend):
        raise dg.Failure(f"trial {trial_id}: suite {suite.name} runs on the {suite.backend} backend, which a "
                         f"{here} deployment cannot run; give it backend: kubernetes, or run it from a workstation")
    try:
        store.refuse_existing(key)
    except TrialExists as error:
        raise dg.Failure(f"{error}; reload it with `substrate-bench materialize {trial_id}`") from None
    try:
        script = script_library.library().load(suite.script) if suite.script is not None else None
    except (ScriptError, FileNotFoundError) as error:
        raise dg.Failure(f"trial {trial_id}: script {suite.script} cannot run:\n{error}") from None
    extras = {"trial_id": trial_id, "suite": suite.model_dump_json(), "store": str(store.root),
              "scripts": script_library.directory, **({"group": group} if group else {}),
              **({"wait_at_most_s": wait_at_most_s} if wait_at_most_s else {}), **({"live": True} if live else {})}
    if suite.backend == "kubernetes":
        from substrate_assets.defs.trials.kubernetes import run_on_kubernetes  # the Kubernetes client: ~2 s

        # On a workstation the raw assets load the trial next, from the local store.
        return run_on_kubernetes(context, pipes_k8s_client.client(), suite, key,
                                 script.text if script is not None else None, extras,
                                 mirror_into=store if here.holds_warehouse else None)
    # The context and messages go to a scratch directory this worker owns: removed after a kill -9 by the next sweep.
    with owned_pipes_client(pipes_subprocess_client) as client:
        return run_trial_child(client, context, extras)


@dg.asset(
    name=TRIAL_RUN,
    partitions_def=trial_partitions,
    deps=[workload_script],
    group_name="trials",
    owners=OWNERS,
    # A local trial is a Pipes subprocess; a cluster trial a driver pod.
    kinds={"locust", "python", "kubernetes"},
    pool="trials",  # two trials at once on one runtime or cluster would measure each other
    check_specs=[dg.AssetCheckSpec(TRIAL_COMPLETED, asset=TRIAL_RUN, description="The trial ran to its end: "
                                   "Locust ran its whole duration, exited by itself and wrote stats, and a session "
                                   "started. Failed requests do not fail it (they are the failures metadata); a "
                                   "trial that did not complete still keeps everything it measured.")],
    description="One trial: a suite of suites.yaml run on its backend — local (embedded runtime, Locust as a Pipes "
    "subprocess) or kubernetes (a driver pod through PipesK8sClient, optional Locust worker pods, an object-store "
    "run store) — and written once, atomically, into the run store as `runs/<suite>/run_date=…/run_ts=…/run_tag=…/`."
    "\n\nStart one from the **run_trial** job (Launchpad: the suite, and optionally users, duration and think "
    "scale): it names the trial's partition itself, `<suite>-<yyyymmddthhmmssz>`. Materializing a partition here "
    "runs the suite its key names, as suites.yaml has it, and only when that trial never landed.",
)
def trial_run(context: dg.AssetExecutionContext, pipes_subprocess_client: dg.PipesSubprocessClient,
              pipes_k8s_client: KubernetesPipesClient, run_store: RunStoreResource,
              script_library: ScriptLibraryResource, suites: SuitesResource,
              deployment: DeploymentResource) -> Materialized:
    trial_id = context.partition_key
    try:
        suite = suites.suite(TrialKey.suite_of(trial_id))
    except (ValueError, SuiteError) as error:
        raise dg.Failure(f"trial partition {trial_id!r}: {error}") from None
    return launch_trial(context.op_execution_context, suite, trial_id, pipes_subprocess_client, pipes_k8s_client,
                        run_store, script_library, deployment).get_materialize_result()
