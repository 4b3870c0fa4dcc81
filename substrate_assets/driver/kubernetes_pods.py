"""Kubernetes objects of a trial on the ``kubernetes`` backend, as plain manifests.

- a ConfigMap holding the trial's script, mounted at ``/etc/agentsession/script.yaml`` (as
  upstream's deploy.sh does with ``agentsession-script``);
- the driver pod's spec, handed to Dagster's ``PipesK8sClient`` (which adds the name and
  the Pipes environment): it runs Locust — every user itself, or as the master of
  ``locust_workers`` worker pods — and writes the trial to the object-store run store;
- for distributed trials, a headless Service for the master and the worker pods.

Every object carries the labels ``app.kubernetes.io/name=substrate-bench`` and
``substrate-bench/trial=<trial id>`` so a trial's objects can be found and removed together.
"""

from __future__ import annotations

import hashlib
import logging
import re
from typing import Any

from substrate_assets.driver.outputs import session_options
from substrate_assets.suites import KubernetesSettings, Suite

log = logging.getLogger(__name__)

APP_LABEL = {"app.kubernetes.io/name": "substrate-bench"}
TRIAL_LABEL = "substrate-bench/trial"
ROLE_LABEL = "substrate-bench/role"
SCRIPT_DIR = "/etc/agentsession"
SCRIPT_FILE = f"{SCRIPT_DIR}/script.yaml"
MASTER_PORT = 5557
WORK_DIR = "/tmp/substrate-bench"
LOCUSTFILE = "/app/substrate_assets/driver/locustfile.py"
DRIVER_CONTAINER = "driver"


def object_name(trial_id: str, role: str) -> str:
    """An RFC 1123 name, at most 63 characters, unique per trial and role."""
    digest = hashlib.sha256(f"{trial_id}/{role}".encode()).hexdigest()[:8]
    stem = re.sub(r"[^a-z0-9-]+", "-", f"sb-{role}-{trial_id}".lower())[: 63 - 9].strip("-")
    return f"{stem}-{digest}"


def trial_label(trial_id: str) -> str:
    """The trial id as a label value: itself when it fits in 63 characters, else a prefix and a digest (a
    plain cut could end in '-' or drop the timestamp and so match another trial)."""
    if len(trial_id) <= 63:
        return trial_id
    digest = hashlib.sha256(trial_id.encode()).hexdigest()[:8]
    return f"{trial_id[: 63 - 9].rstrip('-_.')}-{digest}"


def labels(trial_id: str, role: str) -> dict[str, str]:
    return {**APP_LABEL, TRIAL_LABEL: trial_label(trial_id), ROLE_LABEL: role}


def settings_of(suite: Suite) -> KubernetesSettings:
    if suite.kubernetes is None:
        raise ValueError(f"suite {suite.name!r} has no kubernetes section")
    return suite.kubernetes


def _resources(settings: KubernetesSettings) -> dict[str, Any]:
    resources: dict[str, Any] = {"requests": {"cpu": settings.cpu_request, "memory": settings.memory_request}}
    limits = {name: value for name, value in (("cpu", settings.cpu_limit), ("memory", settings.memory_limit))
              if value is not None}
    if limits:
        resources["limits"] = limits
    return resources


def _env_from(settings: KubernetesSettings) -> list[dict[str, Any]]:
    return [{"secretRef": {"name": name}} for name in settings.env_secrets]


def _script_volume(trial_id: str) -> tuple[dict[str, Any], dict[str, Any]]:
    volume = {"name": "agentsession-script", "configMap": {"name": object_name(trial_id, "script")}}
    mount = {"name": "agentsession-script", "mountPath": SCRIPT_DIR, "readOnly": True}
    return volume, mount


def script_config_map(trial_id: str, settings: KubernetesSettings, script_text: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": object_name(trial_id, "script"), "namespace": settings.namespace,
                         "labels": labels(trial_id, "script")},
            "data": {"script.yaml": script_text}}


def master_host(trial_id: str, settings: KubernetesSettings) -> str:
    return f"{object_name(trial_id, 'master')}.{settings.namespace}.svc.cluster.local"


def _placement(suite: Suite) -> dict[str, Any]:
    """Where a trial's pods may run and for how long: off the nodes under test if the suite says so, and
    never past the pod wait timeout, even if whoever launched them is gone."""
    settings = settings_of(suite)
    placement: dict[str, Any] = {"activeDeadlineSeconds": pod_wait_timeout_s(suite),
                                 "tolerations": [dict(toleration) for toleration in settings.tolerations]}
    if settings.node_selector:
        placement["nodeSelector"] = dict(settings.node_selector)
    return placement


def driver_pod_spec(suite: Suite, trial_id: str) -> dict[str, Any]:
    """The driver pod's spec (``base_pod_spec`` for PipesK8sClient)."""
    settings = settings_of(suite)
    volume, mount = _script_volume(trial_id)
    container: dict[str, Any] = {
        "name": DRIVER_CONTAINER,
        "image": settings.image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": ["python", "-m", "substrate_assets.defs.pipes_trial"],
        "resources": _resources(settings),
        "volumeMounts": [mount],
        "env": [{"name": "SUBSTRATE_BENCH_ROOT", "value": "/app"}, {"name": "PYTHONUNBUFFERED", "value": "1"}],
    }
    if settings.env_secrets:
        container["envFrom"] = _env_from(settings)
    if settings.locust_workers:
        container["ports"] = [{"name": "locust-master", "containerPort": MASTER_PORT, "protocol": "TCP"}]
    return {
        "serviceAccountName": settings.service_account,
        "restartPolicy": "Never",
        **_placement(suite),
        "volumes": [volume],
        "containers": [container],
    }


def driver_pod_meta(trial_id: str) -> dict[str, Any]:
    return {"labels": labels(trial_id, "master")}


def master_service(trial_id: str, settings: KubernetesSettings) -> dict[str, Any]:
    """Headless Service through which the worker pods find the driver pod (the Locust master)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": object_name(trial_id, "master"), "namespace": settings.namespace,
                         "labels": labels(trial_id, "master")},
            "spec": {"clusterIP": "None", "selector": {TRIAL_LABEL: trial_label(trial_id), ROLE_LABEL: "master"},
                     "ports": [{"name": "locust-master", "port": MASTER_PORT, "targetPort": MASTER_PORT}]}}


def worker_command(suite: Suite, trial_id: str, *, locustfile: str = LOCUSTFILE, script_file: str = SCRIPT_FILE,
                   master: str | None = None, request_log_dir: str = f"{WORK_DIR}/requests") -> list[str]:
    """A Locust worker's command; the defaults are the paths inside the image and the master's Service."""
    settings = settings_of(suite)
    return ["locust", "-f", locustfile, "--worker", "--master-host", master or master_host(trial_id, settings),
            "--master-port", str(MASTER_PORT), "--loglevel", "INFO",
            *session_options(suite, script_file, settings.control_endpoint, settings.router_url, request_log_dir,
                             settings.control_tls),
            "--request-log-upload", request_log_url(settings, trial_id)]


def request_log_url(settings: KubernetesSettings, trial_id: str) -> str:
    """Where distributed workers upload their request-log parts for the master to merge."""
    return f"{settings.store.rstrip('/')}/.staging/{trial_id}"


def worker_pod(suite: Suite, trial_id: str, index: int) -> dict[str, Any]:
    settings = settings_of(suite)
    volume, mount = _script_volume(trial_id)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": object_name(trial_id, f"worker-{index}"), "namespace": settings.namespace,
                         "labels": labels(trial_id, "worker")},
            # Workers need no API access; OnFailure brings back one that gave up waiting for its master.
            "spec": {"serviceAccountName": settings.service_account, "automountServiceAccountToken": False,
                     "restartPolicy": "OnFailure", **_placement(suite),
                     "volumes": [volume],
                     "containers": [{"name": "worker", "image": settings.image,
                                     "imagePullPolicy": settings.image_pull_policy,
                                     "command": worker_command(suite, trial_id), "resources": _resources(settings),
                                     "volumeMounts": [mount], **({"envFrom": _env_from(settings)}
                                                                 if settings.env_secrets else {})}]}}


def pod_wait_timeout_s(suite: Suite) -> int:
    settings = settings_of(suite)
    return settings.pod_wait_timeout_s or suite.duration_s + 1800


def driver_pod(suite: Suite, trial_id: str, pipes_env: dict[str, str] | None = None,
               run_id: str = "dry-run") -> dict[str, Any]:
    """The driver pod exactly as PipesK8sClient builds it; placeholders stand in for the Pipes context and the
    Dagster run id, which name the real pod at launch."""
    from dagster_k8s.pipes import build_pod_body, get_pod_name
    from kubernetes.client import ApiClient

    env = pipes_env or {"DAGSTER_PIPES_CONTEXT": "<set by Dagster at launch>",
                        "DAGSTER_PIPES_MESSAGES": "<set by Dagster at launch>"}
    body = build_pod_body(pod_name=get_pod_name(run_id, "trial_run"), image=None, command=None, env_vars=env,
                          base_pod_meta=driver_pod_meta(trial_id), base_pod_spec=driver_pod_spec(suite, trial_id))
    manifest = ApiClient().sanitize_for_serialization(body)
    return {"apiVersion": "v1", "kind": "Pod",
            **{**manifest, "metadata": {**manifest["metadata"], "namespace": settings_of(suite).namespace}}}


def support_objects(suite: Suite, trial_id: str, script_text: str) -> list[dict[str, Any]]:
    """What a kubernetes trial submits besides the driver pod: the script ConfigMap and, for distributed
    trials, the master Service and the worker pods."""
    settings = settings_of(suite)
    objects = [script_config_map(trial_id, settings, script_text)]
    if settings.locust_workers:
        objects.append(master_service(trial_id, settings))
        objects.extend(worker_pod(suite, trial_id, index) for index in range(settings.locust_workers))
    return objects


def trial_manifests(suite: Suite, trial_id: str, script_text: str) -> list[dict[str, Any]]:
    """Every object a kubernetes trial submits, in submission order (the driver pod last)."""
    return [*support_objects(suite, trial_id, script_text), driver_pod(suite, trial_id)]


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
    deletions = {
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
    import os

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
    if owner is None:
        return objects
    return [{**manifest, "metadata": {**manifest["metadata"], "ownerReferences": [owner]}} for manifest in objects]
