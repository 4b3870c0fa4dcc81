"""A trial's objects through the official Kubernetes client: create them, find the pod this process runs in to
own them, and remove them by name and label when the trial ends."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from substrate_assets.driver.kubernetes.pods import ROLE_LABEL, TRIAL_LABEL, object_name, trial_label, with_owner

log = logging.getLogger(__name__)


def kubernetes_api(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """CoreV1Api: in-cluster config first, then kubeconfig."""
    from kubernetes import client, config

    try:
        config.load_incluster_config()
        return client.CoreV1Api()
    except config.ConfigException:
        return client.CoreV1Api(config.new_client_from_config(config_file=kubeconfig, context=context))


def create_objects(api: Any, objects: list[dict[str, Any]]) -> None:
    """Submit ConfigMaps, Services and Pods (the driver pod is PipesK8sClient's to submit)."""
    create = {"ConfigMap": api.create_namespaced_config_map, "Service": api.create_namespaced_service,
              "Pod": api.create_namespaced_pod}
    for manifest in objects:
        create[manifest["kind"]](manifest["metadata"]["namespace"], manifest)


def delete_trial_objects(api: Any, namespace: str, trial_id: str) -> list[str]:
    """Remove a trial's worker pods, master Service and script ConfigMap (by label and name), trying each; what
    could not be removed, one line each (an object already gone is not a problem)."""
    from kubernetes.client.exceptions import ApiException

    selector = f"{TRIAL_LABEL}={trial_label(trial_id)},{ROLE_LABEL}=worker"
    deletions: dict[str, Callable[[], Any]] = {
        "worker pods": lambda: api.delete_collection_namespaced_pod(namespace, label_selector=selector),
        f"Service {object_name(trial_id, 'master')}":
            lambda: api.delete_namespaced_service(object_name(trial_id, "master"), namespace),
        f"ConfigMap {object_name(trial_id, 'script')}":
            lambda: api.delete_namespaced_config_map(object_name(trial_id, "script"), namespace),
    }
    problems = []
    for what, delete in deletions.items():
        try:
            delete()
        except ApiException as error:
            if error.status != 404:
                problems.append(f"trial {trial_id}: could not delete {what} in {namespace}: "
                                f"{error.status} {error.reason}")
        except Exception as error:  # the API unreachable: keep trying the others, then say so
            problems.append(f"trial {trial_id}: could not delete {what} in {namespace}: {error}")
    return problems


SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


def own_pod_reference(api: Any, namespace: str,
                      namespace_file: str = SERVICE_ACCOUNT_NAMESPACE) -> dict[str, Any] | None:
    """An ownerReference to the pod this process runs in (a Dagster run pod), so that what it creates in
    ``namespace`` is garbage-collected with it even if it dies before cleaning up; None outside a pod, in
    another namespace (owners must share it), or if unreadable."""
    name = os.environ.get("HOSTNAME")
    if not os.environ.get("KUBERNETES_SERVICE_HOST") or not name or not os.path.exists(namespace_file):
        return None
    try:
        with open(namespace_file) as handle:
            own_namespace = handle.read().strip()
        if own_namespace != namespace:
            return None
        pod = api.read_namespaced_pod(name, own_namespace)
    except Exception as error:  # a missing owner costs only the garbage collection
        log.warning("cannot read this pod (%s): trial objects will not be owned by it", error)
        return None
    return {"apiVersion": "v1", "kind": "Pod", "name": pod.metadata.name, "uid": pod.metadata.uid}


def owned_by(objects: list[dict[str, Any]], owner: dict[str, Any] | None) -> list[dict[str, Any]]:
    """``objects`` with ``owner`` as their ownerReference (the owner must be in their namespace)."""
    return [{**manifest, "metadata": with_owner(manifest["metadata"], owner)} for manifest in objects]
