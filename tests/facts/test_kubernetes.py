"""Kubernetes cluster facts through the official client, against a local HTTP server serving API JSON.

No Kubernetes API server can run on this machine, so a small HTTP server on 127.0.0.1
(tests/support/kubernetes_api.py) answers the two list calls with recorded API responses; everything
else — kubeconfig loading, the client, request parameters, deserialization — is the real thing.
"""

import json
from pathlib import Path

import pytest

from substrate_assets.facts.kubernetes import Discovery, container_facts
from substrate_assets.results.stats_jsonl import FACT_KEYS

DATA = Path(__file__).resolve().parents[1] / "data" / "kubernetes"


@pytest.fixture
def api(kubernetes_api_server):
    return kubernetes_api_server


PODS = "/api/v1/namespaces/benchmark-workloads/pods"
NODES = "/api/v1/nodes"


def test_facts_of_the_worker_pool(api):
    api.routes = {PODS: (200, "pods.json"), NODES: (200, "nodes.json")}
    facts = Discovery(kubeconfig=api.kubeconfig).facts()
    assert tuple(facts) == FACT_KEYS
    assert facts == {
        "machine_type": "c3-standard-4,n2-standard-8",  # worker nodes only, sorted
        "node_count": 2,  # the Pending pod has no node; the Succeeded pod's node does not count
        "allocatable_cores": 11.83,  # 7910m + 3920m
        "allocatable_ram_gb": 40.7,  # bytes summed first, then GiB
        "worker_pod_count": 5,  # Running and Pending
        "gke_version": "v1.33.5-gke.1080000",
        "worker_actor_capacity": "4,1000",  # one ateom without the flag runs the default
        "worker_memory_limit_gb": "16.0",
        "sandbox_class": "gvisor,microvm",
    }
    [(pods_path, pods_query), (nodes_path, nodes_query)] = api.requests
    assert nodes_path == NODES
    assert pods_path == PODS and pods_query["labelSelector"] == ["ate.dev/worker-pool"]
    assert pods_query["resourceVersion"] == ["0"] and nodes_query["resourceVersion"] == ["0"]


def test_a_403_on_nodes_keeps_the_pod_facts(api):
    api.routes = {PODS: (200, "pods.json"), NODES: (403, "forbidden.json")}
    facts = Discovery(kubeconfig=api.kubeconfig).facts()
    assert facts["worker_pod_count"] == 5 and facts["worker_actor_capacity"] == "4,1000"
    assert all(facts[key] is None for key in ("machine_type", "node_count", "allocatable_cores", "allocatable_ram_gb",
                                              "gke_version"))


def test_an_empty_pool_is_zero_not_null(api):
    api.routes = {PODS: (200, "empty_pods.json"), NODES: (200, "nodes.json")}
    facts = Discovery(kubeconfig=api.kubeconfig).facts()
    assert (facts["node_count"], facts["worker_pod_count"], facts["allocatable_cores"],
            facts["allocatable_ram_gb"]) == (0, 0, 0.0, 0.0)
    assert facts["machine_type"] is None and facts["gke_version"] is None
    assert facts["worker_actor_capacity"] is None and facts["sandbox_class"] is None


def test_a_failed_pod_list_leaves_every_fact_null(api):
    api.routes = {PODS: (500, "forbidden.json"), NODES: (200, "nodes.json")}
    assert set(Discovery(kubeconfig=api.kubeconfig).facts().values()) == {None}
    assert [path for path, _ in api.requests] == [PODS]  # no fallback to counting all nodes


def test_switched_off_or_without_credentials_every_key_is_null(api, tmp_path):
    api.routes = {PODS: (200, "pods.json"), NODES: (200, "nodes.json")}
    assert Discovery(enabled=False, kubeconfig=api.kubeconfig).facts() == dict.fromkeys(FACT_KEYS)
    assert api.requests == []
    assert Discovery(kubeconfig=str(tmp_path / "missing")).facts() == dict.fromkeys(FACT_KEYS)


def test_a_malformed_flag_nulls_the_container_facts_only(api, tmp_path):
    pods = json.loads((DATA / "pods.json").read_text())
    pods["items"][0]["spec"]["containers"][0]["args"] = ["--max-actors=many"]
    (tmp_path / "bad.json").write_text(json.dumps(pods))
    api.routes = {PODS: (200, str(tmp_path / "bad.json")), NODES: (200, "nodes.json")}
    facts = Discovery(kubeconfig=api.kubeconfig).facts()
    assert facts["worker_actor_capacity"] is None and facts["sandbox_class"] is None
    assert facts["worker_memory_limit_gb"] is None
    assert facts["node_count"] == 2 and facts["worker_pod_count"] == 5


def test_a_node_without_allocatable_values_leaves_the_sums_unknown():
    from kubernetes.client import V1Node, V1NodeStatus, V1ObjectMeta

    from substrate_assets.facts.kubernetes import node_facts

    full = V1Node(metadata=V1ObjectMeta(name="a"), status=V1NodeStatus(allocatable={"cpu": "3920m",
                                                                                     "memory": "13591700Ki"}))
    silent = V1Node(metadata=V1ObjectMeta(name="b"), status=V1NodeStatus(allocatable={"memory": "13591700Ki"}))
    assert (node_facts([full])["allocatable_cores"], node_facts([full])["allocatable_ram_gb"]) == (3.92, 12.96)
    facts = node_facts([full, silent])
    assert facts["allocatable_cores"] is None and facts["allocatable_ram_gb"] == 25.92 and facts["node_count"] == 2


def test_no_pods_no_container_facts():
    assert container_facts([]) == {"worker_actor_capacity": None, "worker_memory_limit_gb": None,
                                   "sandbox_class": None}
