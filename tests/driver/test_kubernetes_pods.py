"""The objects a kubernetes trial submits: schema-valid for Kubernetes 1.33, shaped as the suite asks, and
created and removed through the official client (against tests/support/kubernetes_api.py, since no Kubernetes
API server can run on this machine)."""

import re

import kubernetes_validate
import pytest

from substrate_assets.defs.trials.kubernetes import driver_pod, kubernetes_objects
from substrate_assets.driver.kubernetes.api import (
    create_objects,
    delete_trial_objects,
    kubernetes_api,
    own_pod_reference,
    owned_by,
)
from substrate_assets.driver.kubernetes.pods import (
    MASTER_PORT,
    SCRIPT_FILE,
    driver_pod_spec,
    object_name,
    pod_wait_timeout_s,
    support_objects,
    trial_label,
    worker_command,
)
from substrate_assets.suites import Suite

K8S_VERSION = "1.33"
RFC1123 = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
TRIAL = "coding-session-cluster-20261130t101500z"
SCRIPT = "name: tiny\nmin_actor_memory: 1Mi\nsteps: []\n"


def cluster_suite(**kubernetes) -> Suite:
    return Suite(name="coding-session-cluster", script="coding-session", users=200, duration="30m",
                 backend="kubernetes", kubernetes={"image": "registry.example/substrate-bench:abc123",
                                                   "store": "gs://bench-bucket/runs", **kubernetes})


def valid(manifest: dict) -> None:
    kubernetes_validate.validate(manifest, K8S_VERSION, strict=True)


@pytest.mark.parametrize("settings", [{}, {"locust_workers": 3, "env_secrets": ["s3-credentials"],
                                          "control_tls": True, "cpu_limit": None, "memory_limit": None}])
def test_every_manifest_is_valid_for_kubernetes(settings):
    manifests = kubernetes_objects(cluster_suite(**settings), TRIAL, SCRIPT)
    for manifest in manifests:
        valid(manifest)
        assert RFC1123.fullmatch(manifest["metadata"]["name"]) and len(manifest["metadata"]["name"]) <= 63
        assert manifest["metadata"]["namespace"] == "benchmarking"
        assert manifest["metadata"]["labels"]["substrate-bench/trial"] == TRIAL
    kinds = [manifest["kind"] for manifest in manifests]
    workers = settings.get("locust_workers", 0)
    assert kinds == ["ConfigMap", *(["Service"] if workers else []), *["Pod"] * workers, "Pod"]


def test_a_schema_violation_is_caught():
    """The validator is strict: a misspelled field fails, so the test above can fail."""
    pod = driver_pod(cluster_suite(), TRIAL)
    pod["spec"]["containers"][0]["resource"] = pod["spec"]["containers"][0].pop("resources")
    with pytest.raises(kubernetes_validate.ValidationError):
        valid(pod)


def test_driver_pod_spec_follows_the_suite():
    spec = driver_pod_spec(cluster_suite(cpu_request="3", memory_request="6Gi", cpu_limit="4", memory_limit="8Gi",
                                         service_account="runner-2", image_pull_policy="Always"), TRIAL)
    [container] = spec["containers"]
    assert container["image"] == "registry.example/substrate-bench:abc123" and container["imagePullPolicy"] == "Always"
    assert container["resources"] == {"requests": {"cpu": "3", "memory": "6Gi"}, "limits": {"cpu": "4", "memory": "8Gi"}}
    assert container["command"] == ["python", "-m", "substrate_assets.app.pipes_trial"]
    assert spec["serviceAccountName"] == "runner-2" and spec["restartPolicy"] == "Never"
    assert spec["tolerations"] == [{"key": "ate.dev/benchmarking", "operator": "Equal", "value": "true",
                                    "effect": "NoSchedule"}]
    [volume] = spec["volumes"]
    assert volume["configMap"]["name"] == object_name(TRIAL, "script")
    assert container["volumeMounts"] == [{"name": volume["name"], "mountPath": "/etc/agentsession", "readOnly": True}]
    assert SCRIPT_FILE == "/etc/agentsession/script.yaml"
    assert "ports" not in container and "envFrom" not in container


def test_limits_are_left_out_when_unset_and_secrets_become_env():
    spec = driver_pod_spec(cluster_suite(cpu_limit=None, memory_limit=None, env_secrets=["aws"], locust_workers=2),
                           TRIAL)
    [container] = spec["containers"]
    assert container["resources"] == {"requests": {"cpu": "1", "memory": "2Gi"}}
    assert container["envFrom"] == [{"secretRef": {"name": "aws"}}]
    assert container["ports"] == [{"name": "locust-master", "containerPort": MASTER_PORT, "protocol": "TCP"}]


def test_the_driver_pod_is_what_pipes_k8s_client_submits():
    pod = driver_pod(cluster_suite(), TRIAL, run_id="5f0c6b1e-7d1a-4c55-9a3e-2b5e8d9f0a11")
    assert pod["metadata"]["name"].startswith("dagster-5f0c6b1e-7d1a-4c55-trial-run-")
    assert pod["metadata"]["labels"]["substrate-bench/role"] == "master"
    env = {item["name"] for item in pod["spec"]["containers"][0]["env"]}
    assert {"DAGSTER_PIPES_CONTEXT", "DAGSTER_PIPES_MESSAGES", "SUBSTRATE_BENCH_ROOT"} <= env
    assert pod["spec"]["serviceAccountName"] == "benchmark-driver"
    assert pod["spec"]["activeDeadlineSeconds"] == 30 * 60 + 1800  # the load stops even if nobody is left to stop it


def test_workers_find_the_master_through_its_service():
    suite = cluster_suite(locust_workers=2, control_tls=True)
    objects = support_objects(suite, TRIAL, SCRIPT)
    [config_map, service, *workers] = objects
    assert config_map["data"] == {"script.yaml": SCRIPT}
    assert service["spec"]["clusterIP"] == "None"
    master_labels = driver_pod(suite, TRIAL)["metadata"]["labels"]
    assert all(master_labels[key] == value for key, value in service["spec"]["selector"].items())
    assert [worker["metadata"]["labels"]["substrate-bench/role"] for worker in workers] == ["worker", "worker"]
    assert workers[0]["spec"]["automountServiceAccountToken"] is False
    assert workers[0]["spec"]["restartPolicy"] == "OnFailure"
    command = workers[0]["spec"]["containers"][0]["command"]
    assert command[:3] == ["locust", "-f", "/app/substrate_assets/driver/locustfile.py"]
    assert command[command.index("--master-host") + 1] == f"{service['metadata']['name']}.benchmarking.svc.cluster.local"
    assert command[command.index("--request-log-upload") + 1] == f"gs://bench-bucket/runs/.staging/{TRIAL}"
    assert "--control-tls" in command and "--worker" in command
    assert command == worker_command(suite, TRIAL)


def test_pod_wait_timeout_is_explicit():
    assert pod_wait_timeout_s(cluster_suite()) == 30 * 60 + 1800  # the run time plus upstream's 30 min margin
    assert pod_wait_timeout_s(cluster_suite(pod_wait_timeout_s=900)) == 900


def test_names_and_labels_stay_valid_and_distinct_for_long_trial_ids():
    trial = "a-very-long-suite-name-that-goes-on-and-on-for-a-while-20261130t101500z"
    names = {object_name(trial, role) for role in ("script", "master", "worker-0", "worker-1")}
    assert len(names) == 4
    assert all(len(name) <= 63 and RFC1123.fullmatch(name) for name in names)
    # Names are a pure function of trial and role (the clean-up of another process deletes by name): pinned.
    assert object_name(trial, "script") == "sb-script-a-very-long-suite-name-that-goes-on-and-on-f-92e02aeb"
    # Cut at 63 characters, two trials of a long suite one second apart would share a label.
    later = trial.replace("101500z", "101501z")
    assert trial_label(trial) != trial_label(later)
    assert all(len(label) <= 63 and RFC1123.fullmatch(label) for label in (trial_label(trial), trial_label(later)))
    assert trial_label(TRIAL) == TRIAL
    suite = cluster_suite(locust_workers=1)
    for manifest in kubernetes_objects(suite, "x" * 50 + "-" * 13 + "20261130t101500z", SCRIPT):
        valid(manifest)


def test_node_selector_keeps_the_load_off_the_nodes_under_test():
    spec = driver_pod_spec(cluster_suite(node_selector={"pool": "load"}), TRIAL)
    assert spec["nodeSelector"] == {"pool": "load"}


@pytest.fixture
def cluster(kubernetes_api_server):
    return kubernetes_api_server


def test_objects_are_created_and_removed_through_the_client(cluster):
    api = kubernetes_api(kubeconfig=cluster.kubeconfig)
    suite = cluster_suite(locust_workers=2)
    objects = support_objects(suite, TRIAL, SCRIPT)
    create_objects(api, objects)
    posts = [call for call in cluster.calls if call.method == "POST"]
    assert [(call.path, call.body["metadata"]["name"]) for call in posts] == [
        ("/api/v1/namespaces/benchmarking/configmaps", object_name(TRIAL, "script")),
        ("/api/v1/namespaces/benchmarking/services", object_name(TRIAL, "master")),
        ("/api/v1/namespaces/benchmarking/pods", object_name(TRIAL, "worker-0")),
        ("/api/v1/namespaces/benchmarking/pods", object_name(TRIAL, "worker-1"))]
    assert [call.body for call in posts] == objects

    cluster.missing.add(f"/api/v1/namespaces/benchmarking/services/{object_name(TRIAL, 'master')}")
    delete_trial_objects(api, "benchmarking", TRIAL)  # an object already gone is not an error
    deletes = [call for call in cluster.calls if call.method == "DELETE"]
    assert [call.rbac() for call in deletes] == [("deletecollection", "pods", "benchmarking"),
                                                 ("delete", "services", "benchmarking"),
                                                 ("delete", "configmaps", "benchmarking")]
    assert deletes[0].query["labelSelector"] == [f"substrate-bench/trial={TRIAL},substrate-bench/role=worker"]


def test_a_refused_call_is_reported_and_the_other_deletions_still_tried(cluster):
    from kubernetes.client.exceptions import ApiException

    api = kubernetes_api(kubeconfig=cluster.kubeconfig)
    cluster.refused = {"DELETE": 403, "POST": 403}
    problems = delete_trial_objects(api, "benchmarking", TRIAL)
    assert len(problems) == 3 and all(problem.startswith(f"trial {TRIAL}: could not delete") for problem in problems)
    assert "403" in problems[0] and len([call for call in cluster.calls if call.method == "DELETE"]) == 3
    with pytest.raises(ApiException):
        create_objects(api, support_objects(cluster_suite(), TRIAL, SCRIPT))


def test_objects_are_owned_by_the_run_pod_that_made_them(cluster, tmp_path, monkeypatch):
    pod = tmp_path / "run-pod.json"
    pod.write_text('{"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "dagster-run-abc", "namespace": '
                   '"benchmarking", "uid": "0b6f1c2e-5d4a-4e8b-9c1d-2f3a4b5c6d7e"}}')
    cluster.routes = {"/api/v1/namespaces/benchmarking/pods/dagster-run-abc": (200, str(pod))}
    namespace_file = tmp_path / "namespace"
    namespace_file.write_text("benchmarking\n")
    api = kubernetes_api(kubeconfig=cluster.kubeconfig)
    assert own_pod_reference(api, "benchmarking", str(namespace_file)) is None  # not in a pod
    monkeypatch.setenv("HOSTNAME", "dagster-run-abc")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    owner = own_pod_reference(api, "benchmarking", str(namespace_file))
    assert owner == {"apiVersion": "v1", "kind": "Pod", "name": "dagster-run-abc",
                     "uid": "0b6f1c2e-5d4a-4e8b-9c1d-2f3a4b5c6d7e"}
    assert own_pod_reference(api, "elsewhere", str(namespace_file)) is None  # owners share the namespace
    for manifest in owned_by(support_objects(cluster_suite(locust_workers=1), TRIAL, SCRIPT), owner):
        assert manifest["metadata"]["ownerReferences"] == [owner]
        valid(manifest)
