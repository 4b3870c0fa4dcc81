"""deploy/: Kubernetes manifests valid for 1.33, RBAC that allows exactly what trials call, Helm values Dagster
accepts, a cluster suite that loads, and a Dockerfile that copies what the image runs."""

import re
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from dagster._config import process_config
from dagster._core.instance.config import dagster_instance_config_schema
from dagster_k8s import K8sRunLauncher
from dagster_k8s.container_context import K8sContainerContext
from dagster_k8s.job import UserDefinedDagsterK8sConfig

from substrate_assets.defs.trials.kubernetes import kubernetes_objects
from substrate_assets.driver.kubernetes.api import create_objects, delete_trial_objects, kubernetes_api
from substrate_assets.driver.kubernetes.pods import support_objects
from substrate_assets.facts.kubernetes import Discovery
from substrate_assets.suites import load_suites
from substrate_assets.warehouse.location import parse_lake
from substrate_assets.workload import ScriptLibrary

ROOT = Path(__file__).resolve().parents[1]
DEPLOY = ROOT / "deploy"
RUNNER = ("benchmarking", "benchmark-runner")  # Dagster's code server and run pods
DRIVER = ("benchmarking", "benchmark-driver")  # the trials' driver pods


def documents(name: str) -> list[dict]:
    return [document for document in yaml.safe_load_all((DEPLOY / name).read_text()) if document]


@pytest.mark.parametrize("name", ["namespace.yaml", "rbac.yaml"])
def test_manifests_are_valid_for_kubernetes(name):
    for manifest in documents(name):
        kubernetes_validate.validate(manifest, "1.33", strict=True)


def allowed(account: tuple[str, str], verb: str, resource: str, namespace: str | None) -> bool:
    """Whether deploy/rbac.yaml lets the service account make this call."""
    objects = documents("rbac.yaml")
    roles = {(item["kind"], item["metadata"].get("namespace"), item["metadata"]["name"]): item["rules"]
             for item in objects if item["kind"] in ("Role", "ClusterRole")}
    for binding in (item for item in objects if item["kind"] in ("RoleBinding", "ClusterRoleBinding")):
        subjects = {(subject["namespace"], subject["name"]) for subject in binding["subjects"]
                    if subject["kind"] == "ServiceAccount"}
        scope = binding["metadata"].get("namespace")
        if account not in subjects or (scope is not None and scope != namespace):
            continue
        role_ref = binding["roleRef"]
        rules = roles.get((role_ref["kind"], scope if role_ref["kind"] == "Role" else None, role_ref["name"]), [])
        if any("" in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"] for rule in rules):
            return True
    return False


def test_rbac_allows_what_a_trial_calls_and_no_more(kubernetes_api_server):
    cluster = kubernetes_api_server
    cluster.routes = {"/api/v1/namespaces/benchmark-workloads/pods": (200, "pods.json"),
                      "/api/v1/nodes": (200, "nodes.json")}
    suite = load_suites(DEPLOY / "suites.cluster.yaml")["coding-session-cluster"]
    api = kubernetes_api(kubeconfig=cluster.kubeconfig)
    # The run pod (trial_run): the trial's objects, then their removal.
    create_objects(api, support_objects(suite, "coding-session-cluster-20261130t101500z", "name: x\n"))
    delete_trial_objects(api, "benchmarking", "coding-session-cluster-20261130t101500z")
    runner_calls = {call.rbac() for call in cluster.calls}
    # What PipesK8sClient does with the driver pod (dagster_k8s.pipes and client): create it, list it by
    # name, read it and its logs, list its events on failure, delete it; and the run pod reads itself.
    runner_calls |= {("create", "pods", "benchmarking"), ("get", "pods", "benchmarking"),
                     ("list", "pods", "benchmarking"), ("get", "pods/log", "benchmarking"),
                     ("list", "events", "benchmarking"), ("delete", "pods", "benchmarking")}
    # The driver pod: cluster facts.
    cluster.calls.clear()
    Discovery(kubeconfig=cluster.kubeconfig).facts()
    driver_calls = {call.rbac() for call in cluster.calls}
    assert driver_calls == {("list", "pods", "benchmark-workloads"), ("list", "nodes", None)}
    assert {("create", "configmaps", "benchmarking"), ("deletecollection", "pods", "benchmarking")} <= runner_calls
    assert sorted(call for call in runner_calls if not allowed(RUNNER, *call)) == []
    assert sorted(call for call in driver_calls if not allowed(DRIVER, *call)) == []
    # And no more: the load generators cannot start pods, the runner cannot read the cluster's nodes.
    assert not allowed(DRIVER, "create", "pods", "benchmarking")
    assert not allowed(RUNNER, "list", "nodes", None)
    assert not allowed(RUNNER, "list", "secrets", "benchmarking")
    assert not allowed(RUNNER, "create", "pods", "benchmark-workloads")
    assert not allowed(DRIVER, "delete", "nodes", None)


def test_pods_run_as_the_accounts_rbac_yaml_grants():
    suite = load_suites(DEPLOY / "suites.cluster.yaml")["coding-session-cluster"]
    pods = [manifest for manifest in kubernetes_objects(suite, "coding-session-cluster-20261130t101500z", "x")
            if manifest["kind"] == "Pod"]
    assert {pod["spec"]["serviceAccountName"] for pod in pods} == {DRIVER[1]}
    accounts = {(item["metadata"]["namespace"], item["metadata"]["name"]) for item in documents("rbac.yaml")
                if item["kind"] == "ServiceAccount"}
    assert accounts == {RUNNER, DRIVER}


def test_the_cluster_suite_loads_and_its_manifests_are_valid():
    suite = load_suites(DEPLOY / "suites.cluster.yaml")["coding-session-cluster"]
    assert suite.backend == "kubernetes" and suite.kubernetes.locust_workers == 4
    script = ScriptLibrary(ROOT / "scripts").load(suite.script)
    for manifest in kubernetes_objects(suite, "coding-session-cluster-20261130t101500z", script.text):
        kubernetes_validate.validate(manifest, "1.33", strict=True)


def test_every_family_runs_on_a_cluster_with_valid_manifests():
    suites = load_suites(DEPLOY / "suites.families.yaml")
    assert {suite.family for suite in suites.values()} == {"glutton", "durdir", "spawn", "burst", "sweperf"}
    for suite in suites.values():
        trial_id = f"{suite.name}-20261130t101500z"
        manifests = kubernetes_objects(suite, trial_id, None)
        # No script, so no script ConfigMap and no volume for it; the driver runs the family's user class.
        assert [manifest["kind"] for manifest in manifests] == ["Pod"]
        assert manifests[0]["spec"]["volumes"] == []
        for manifest in manifests:
            kubernetes_validate.validate(manifest, "1.33", strict=True)
    spawn = suites["spawn-100-actors"].model_copy(update={"kubernetes": suites["spawn-100-actors"].kubernetes
                                                          .model_copy(update={"locust_workers": 1})})
    worker = next(m for m in kubernetes_objects(spawn, "s-20261130t101500z", None)
                  if m["metadata"]["name"].startswith("sb-worker-0-"))
    command = worker["spec"]["containers"][0]["command"]
    assert command[-1] == "SpawnUser" and "--agentsession-script-file" not in command
    assert command[command.index("--total-actors") + 1] == "100"


def snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def test_helm_values_configure_a_launcher_dagster_accepts():
    values = yaml.safe_load((DEPLOY / "dagster-values.yaml").read_text())
    [location] = values["dagster-user-deployments"]["deployments"]
    assert location["dagsterApiGrpcArgs"] == ["--module-name", "substrate_assets.definitions"]
    assert {"name": "SUBSTRATE_BENCH_DEPLOYMENT", "value": "cluster"} in location["env"]
    # The shared warehouse: its setting names a DuckLake this project attaches, with no secret in it; the secrets
    # come from a Secret as environment variables.
    env = {item["name"]: item["value"] for item in location["env"]}
    lake = parse_lake(env["SUBSTRATE_BENCH_WAREHOUSE"], env["SUBSTRATE_BENCH_WAREHOUSE_DATA_PATH"])
    assert "user=lake_writer" in lake.conninfo and lake.data_path.startswith("gs://")
    assert location["envSecrets"] == [{"name": "substrate-bench-warehouse"}]
    assert values["runLauncher"]["type"] == "K8sRunLauncher"
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    assert launcher["runK8sConfig"]["podSpecConfig"]["serviceAccountName"] == RUNNER[1]
    # The chart renders these values into dagster.yaml's run_launcher config (snake-case keys, plus the
    # instance ConfigMap it creates); Dagster's own schema must accept the result.
    config = {snake(key): value for key, value in launcher.items()}
    config["run_k8s_config"] = {snake(key): value for key, value in launcher["runK8sConfig"].items()}
    result = process_config(K8sRunLauncher.config_type(), {**config, "instance_config_map": "dagster-instance"})
    assert result.success, [error.message for error in result.errors]
    instance = process_config(dagster_instance_config_schema(), values["additionalInstanceConfig"])
    assert instance.success, [error.message for error in instance.errors]
    assert values["additionalInstanceConfig"]["concurrency"]["pools"]["default_limit"] == 1


def test_run_pods_run_as_benchmark_runner():
    """With includeConfigInLaunchedRuns, the code location's service account is merged over the launcher's
    runK8sConfig, and the later one wins: both must name benchmark-runner."""
    values = yaml.safe_load((DEPLOY / "dagster-values.yaml").read_text())
    user_deployments = values["dagster-user-deployments"]
    assert user_deployments["serviceAccount"] == {"create": False, "name": RUNNER[1]}
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]["runK8sConfig"]
    from_launcher = K8sContainerContext(run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(
        {snake(key): value for key, value in launcher.items()}))
    from_location = K8sContainerContext(service_account_name=user_deployments["serviceAccount"]["name"])
    merged = from_launcher.merge(from_location)
    assert merged.run_k8s_config.pod_spec_config["service_account_name"] == RUNNER[1]


def test_dockerfile_copies_what_the_image_runs():
    dockerfile = (DEPLOY / "Dockerfile").read_text()
    copied = {source.rstrip("/") for line in dockerfile.splitlines() if line.startswith("COPY ")
              for source in line.split()[1:-1]}
    assert {"pyproject.toml", "uv.lock", "suites.yaml", "workspace.yaml", "protos", "scripts", "dbt_like_sql",
            "substrate_assets"} <= copied
    assert all((ROOT / source).exists() for source in copied)
    ignored = {line.strip().rstrip("/") for line in (ROOT / ".dockerignore").read_text().splitlines()}
    assert not copied & ignored
    assert "SUBSTRATE_BENCH_ROOT=/app" in dockerfile and "uv sync --frozen --no-dev" in dockerfile
    # The pods' paths are the image's: the worker pods' locustfile and the project root.
    assert (ROOT / "substrate_assets" / "driver" / "locustfile.py").exists()
