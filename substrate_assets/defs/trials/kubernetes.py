"""The Dagster side of a kubernetes trial: the driver pod through ``PipesK8sClient``, around which the driver
launches and removes the trial's other objects; and that pod exactly as the client would submit it."""

from collections.abc import Mapping
from typing import Any

import dagster as dg
from dagster_k8s import PipesK8sClient
from dagster_k8s.pipes import build_pod_body, get_pod_name
from kubernetes.client import ApiClient

from substrate_assets.driver.kubernetes.cluster_trial import launch_cluster_trial
from substrate_assets.driver.kubernetes.pods import driver_pod_meta, driver_pod_spec, settings_of, support_objects
from substrate_assets.results.layout import RunStore, TrialExists, TrialKey
from substrate_assets.suites import Suite


def run_on_kubernetes(context: dg.OpExecutionContext, client: PipesK8sClient, suite: Suite, key: TrialKey,
                      script_text: str | None, extras: Mapping[str, object],
                      mirror_into: RunStore | None) -> dg.PipesClientCompletedInvocation:
    namespace = settings_of(suite).namespace

    def run_driver_pod(pod_meta: dict[str, Any], pod_spec: dict[str, Any], timeout_s: int) -> Any:
        return client.run(context=context, extras=extras, namespace=namespace, base_pod_meta=pod_meta,
                          base_pod_spec=pod_spec, pod_wait_timeout=timeout_s)

    try:
        invocation: dg.PipesClientCompletedInvocation = launch_cluster_trial(
            suite, key, script_text, run_driver_pod, log=context.log, mirror_into=mirror_into)
    except TrialExists as error:
        raise dg.Failure(str(error)) from None
    return invocation


def driver_pod(suite: Suite, trial_id: str, pipes_env: dict[str, str] | None = None,
               run_id: str = "dry-run") -> dict[str, Any]:
    """The driver pod exactly as PipesK8sClient builds it; placeholders stand in for the Pipes context and the
    Dagster run id, which name the real pod at launch."""
    env = pipes_env or {"DAGSTER_PIPES_CONTEXT": "<set by Dagster at launch>",
                        "DAGSTER_PIPES_MESSAGES": "<set by Dagster at launch>"}
    body = build_pod_body(pod_name=get_pod_name(run_id, "trial_run"), image=None, command=None, env_vars=env,
                          base_pod_meta=driver_pod_meta(trial_id), base_pod_spec=driver_pod_spec(suite, trial_id))
    manifest = ApiClient().sanitize_for_serialization(body)
    return {"apiVersion": "v1", "kind": "Pod",
            **{**manifest, "metadata": {**manifest["metadata"], "namespace": settings_of(suite).namespace}}}


def kubernetes_objects(suite: Suite, trial_id: str, script_text: str | None) -> list[dict[str, Any]]:
    """Every object a kubernetes trial submits, in submission order (the driver pod last)."""
    return [*support_objects(suite, trial_id, script_text), driver_pod(suite, trial_id)]
