"""``trial_run[trial]``: one execution of a suite, run through Dagster Pipes into the run store."""

import sys

import dagster as dg
from dagster_k8s import PipesK8sClient

from substrate_assets.defs.partitions import trial_partitions
from substrate_assets.defs.resources import RunStoreResource, ScriptLibraryResource, SuitesResource
from substrate_assets.defs.scripts import workload_script
from substrate_assets.driver.kubernetes_pods import (
    create_objects,
    delete_trial_objects,
    driver_pod_meta,
    driver_pod_spec,
    kubernetes_api,
    own_pod_reference,
    owned_by,
    pod_wait_timeout_s,
    settings_of,
    support_objects,
)
from substrate_assets.project import project_root, warehouse_enabled
from substrate_assets.results.importer import already_stored, fetch_trial
from substrate_assets.results.layout import RunStore, TrialExists, TrialKey
from substrate_assets.suites import Suite, SuiteError
from substrate_assets.workload import ScriptError

TRIAL_COMPLETED = "trial_completed"


@dg.asset(
    partitions_def=trial_partitions,
    deps=[workload_script],
    group_name="trials",
    kinds={"locust"},
    pool="trials",  # two trials at once on one runtime or cluster would measure each other
    check_specs=[dg.AssetCheckSpec(TRIAL_COMPLETED, asset="trial_run", description="Locust ran its whole "
                                   "duration and exited 0 (no failed requests); a trial that did not still keeps "
                                   "everything it measured.")],
    description="One trial: the suite named by the partition key (<suite>-<yyyymmddthhmmssz>), run on its backend "
    "— local (embedded runtime, Locust as a Pipes subprocess) or kubernetes (a driver pod through PipesK8sClient, "
    "optional Locust worker pods, an object-store run store) — and written once, atomically, into the run store "
    "as runs/<suite>/run_date=…/run_ts=…/run_tag=…/.",
)
def trial_run(context: dg.AssetExecutionContext, pipes_subprocess_client: dg.PipesSubprocessClient,
              pipes_k8s_client: PipesK8sClient, run_store: RunStoreResource, script_library: ScriptLibraryResource,
              suites: SuitesResource) -> dg.MaterializeResult:
    trial_id = context.partition_key
    try:
        suite = suites.suite(TrialKey.suite_of(trial_id))
    except (ValueError, SuiteError) as error:
        raise dg.Failure(f"trial partition {trial_id!r}: {error}") from None
    store = run_store.store()
    key = TrialKey.from_trial_id(trial_id, suite.tag)
    if suite.backend == "local" and not warehouse_enabled():
        raise dg.Failure(f"trial {trial_id}: suite {suite.name} runs on the local backend, which a cluster "
                         "deployment cannot run; give it backend: kubernetes, or run it from a workstation")
    try:
        store.refuse_existing(key)
    except TrialExists as error:
        raise dg.Failure(f"{error}; reload it with `substrate-bench materialize {trial_id}`") from None
    try:
        script = script_library.library().load(suite.script)
    except (ScriptError, FileNotFoundError) as error:
        raise dg.Failure(f"trial {trial_id}: script {suite.script} cannot run:\n{error}") from None
    extras = {"trial_id": trial_id, "suite": suite.model_dump_json(), "store": str(store.root),
              "scripts": script_library.directory}
    if suite.backend == "kubernetes":
        return _run_on_kubernetes(context, pipes_k8s_client, suite, key, script.text, extras, store)
    return pipes_subprocess_client.run(
        context=context,
        command=[sys.executable, "-m", "substrate_assets.defs.pipes_trial"],
        extras=extras,
        cwd=str(project_root()),
    ).get_materialize_result()


def _run_on_kubernetes(context: dg.AssetExecutionContext, client: PipesK8sClient, suite: Suite, key: TrialKey,
                       script_text: str, extras: dict[str, str], store: RunStore) -> dg.MaterializeResult:
    """The driver pod through PipesK8sClient, with the script's ConfigMap (and, for distributed trials, the master
    Service and worker pods) around it; then the trial is mirrored from the object store for loading."""
    settings = settings_of(suite)
    api = kubernetes_api()
    refusal = already_stored(settings.store, key)
    if refusal is not None:
        raise dg.Failure(refusal)
    owner = own_pod_reference(api, settings.namespace)
    objects = owned_by(support_objects(suite, key.trial_id, script_text), owner)
    context.log.info(f"submitting {len(objects)} objects to namespace {settings.namespace} for trial {key.trial_id}")
    pod_meta = driver_pod_meta(key.trial_id)
    if owner is not None:
        pod_meta["ownerReferences"] = [owner]
    try:
        create_objects(api, objects)
        invocation = client.run(context=context, extras=extras, namespace=settings.namespace, base_pod_meta=pod_meta,
                                base_pod_spec=driver_pod_spec(suite, key.trial_id),
                                pod_wait_timeout=pod_wait_timeout_s(suite))
    finally:
        for problem in delete_trial_objects(api, settings.namespace, key.trial_id):
            context.log.warning(f"{problem}; remove it by hand (label substrate-bench/trial)")
    if warehouse_enabled():  # on a workstation the raw assets load the trial next, from the local store
        mirrored = fetch_trial(settings.store, key, store)
        context.log.info(f"trial {key.trial_id} mirrored from {mirrored.source} to {mirrored.trial_dir}")
    return invocation.get_materialize_result()
