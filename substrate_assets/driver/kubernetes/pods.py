"""Kubernetes objects of a trial on the ``kubernetes`` backend, as plain manifests.

- a ConfigMap holding the trial's script, mounted at ``/etc/agentsession/script.yaml`` (as
  upstream's deploy.sh does with ``agentsession-script``);
- the driver pod's spec and metadata, handed to whatever launches it (Dagster's ``PipesK8sClient``,
  which adds the name and the Pipes environment): it runs Locust — every user itself, or as the
  master of ``locust_workers`` worker pods — and writes the trial to the object-store run store;
- for distributed trials, a headless Service for the master and the worker pods.

Every object carries the labels ``app.kubernetes.io/name=substrate-bench`` and
``substrate-bench/trial=<trial id>`` so a trial's objects can be found and removed together.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from substrate_assets.driver.locust_command import session_options
from substrate_assets.results.layout import STAGING
from substrate_assets.suites import KubernetesSettings, Suite

APP_LABEL = {"app.kubernetes.io/name": "substrate-bench"}
TRIAL_LABEL = "substrate-bench/trial"
ROLE_LABEL = "substrate-bench/role"
SCRIPT_DIR = "/etc/agentsession"
SCRIPT_FILE = f"{SCRIPT_DIR}/script.yaml"
MASTER_PORT = 5557
WORK_DIR = "/tmp/substrate-bench"
IMAGE_LOCUSTFILE = "/app/substrate_assets/driver/locustfile.py"  # where the image has it
DRIVER_CONTAINER = "driver"
# The module the driver pod runs: the Dagster Pipes end of trial_run.
PIPES_CHILD = "substrate_assets.app.pipes_trial"


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


def _script_volume(suite: Suite, trial_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The script's volume and its mount; none for a family that runs no script."""
    if suite.script is None:
        return [], []
    volume = {"name": "agentsession-script", "configMap": {"name": object_name(trial_id, "script")}}
    mount = {"name": "agentsession-script", "mountPath": SCRIPT_DIR, "readOnly": True}
    return [volume], [mount]


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
    volumes, mounts = _script_volume(suite, trial_id)
    container: dict[str, Any] = {
        "name": DRIVER_CONTAINER,
        "image": settings.image,
        "imagePullPolicy": settings.image_pull_policy,
        "command": ["python", "-m", PIPES_CHILD],
        "resources": _resources(settings),
        "volumeMounts": mounts,
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
        "volumes": volumes,
        "containers": [container],
    }


def with_owner(metadata: dict[str, Any], owner: dict[str, Any] | None) -> dict[str, Any]:
    """``metadata`` with ``owner`` as its ownerReference (garbage-collected with it; same namespace), if any."""
    return metadata if owner is None else {**metadata, "ownerReferences": [owner]}


def driver_pod_meta(trial_id: str, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    """The driver pod's labels (the master Service selects it by them) and, in a pod, its owner."""
    return with_owner({"labels": labels(trial_id, "master")}, owner)


def master_service(trial_id: str, settings: KubernetesSettings) -> dict[str, Any]:
    """Headless Service through which the worker pods find the driver pod (the Locust master)."""
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": object_name(trial_id, "master"), "namespace": settings.namespace,
                         "labels": labels(trial_id, "master")},
            "spec": {"clusterIP": "None", "selector": {TRIAL_LABEL: trial_label(trial_id), ROLE_LABEL: "master"},
                     "ports": [{"name": "locust-master", "port": MASTER_PORT, "targetPort": MASTER_PORT}]}}


def worker_command(suite: Suite, trial_id: str, *, locustfile: str = IMAGE_LOCUSTFILE, script_file: str = SCRIPT_FILE,
                   master: str | None = None, request_log_dir: str = f"{WORK_DIR}/requests") -> list[str]:
    """A Locust worker's command; the defaults are the paths inside the image and the master's Service."""
    settings = settings_of(suite)
    return ["locust", "-f", locustfile, "--worker", "--master-host", master or master_host(trial_id, settings),
            "--master-port", str(MASTER_PORT), "--loglevel", "INFO",
            *session_options(suite, script_file if suite.script is not None else None, settings.control_endpoint,
                             settings.router_url, request_log_dir, settings.control_tls),
            "--request-log-upload", request_log_url(settings, trial_id), suite.user_class]


def request_log_url(settings: KubernetesSettings, trial_id: str) -> str:
    """Where distributed workers upload their request-log parts for the master to merge."""
    return f"{settings.store.rstrip('/')}/{STAGING}/{trial_id}"


def worker_pod(suite: Suite, trial_id: str, index: int) -> dict[str, Any]:
    settings = settings_of(suite)
    volumes, mounts = _script_volume(suite, trial_id)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": object_name(trial_id, f"worker-{index}"), "namespace": settings.namespace,
                         "labels": labels(trial_id, "worker")},
            # Workers need no API access; OnFailure brings back one that gave up waiting for its master.
            "spec": {"serviceAccountName": settings.service_account, "automountServiceAccountToken": False,
                     "restartPolicy": "OnFailure", **_placement(suite),
                     "volumes": volumes,
                     "containers": [{"name": "worker", "image": settings.image,
                                     "imagePullPolicy": settings.image_pull_policy,
                                     "command": worker_command(suite, trial_id), "resources": _resources(settings),
                                     "volumeMounts": mounts, **({"envFrom": _env_from(settings)}
                                                                 if settings.env_secrets else {})}]}}


def pod_wait_timeout_s(suite: Suite) -> int:
    settings = settings_of(suite)
    return settings.pod_wait_timeout_s or suite.duration_s + 1800


def support_objects(suite: Suite, trial_id: str, script_text: str | None) -> list[dict[str, Any]]:
    """What a kubernetes trial submits besides the driver pod: the script ConfigMap (an agent-session suite's)
    and, for distributed trials, the master Service and the worker pods."""
    settings = settings_of(suite)
    objects = [script_config_map(trial_id, settings, script_text)] if script_text is not None else []
    if settings.locust_workers:
        objects.append(master_service(trial_id, settings))
        objects.extend(worker_pod(suite, trial_id, index) for index in range(settings.locust_workers))
    return objects
