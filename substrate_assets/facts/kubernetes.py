"""Cluster facts of an Agent Substrate cluster, discovered through the Kubernetes API as upstream's runner does.

Worker pods are the pods labelled ``ate.dev/worker-pool`` in ``benchmark-workloads``
that are Running or Pending; only the nodes they run on count. Every list call
has a 5 s timeout and reads from the watch cache (``resource_version="0"``).
Credentials: in-cluster config first, then kubeconfig; with neither, or with
discovery switched off, every fact is null. Null means "could not be read"; a
real empty pool gives 0 nodes, 0 pods, 0.0 cores and 0.0 GiB.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

from substrate_assets.results.stats_jsonl import FACT_KEYS

log = logging.getLogger(__name__)

# The Kubernetes namespace of the worker pods (reference: "Worker namespace"), named as the templates' atespace.
NAMESPACE = "benchmark-workloads"
WORKER_SELECTOR = "ate.dev/worker-pool"
LIVE_PHASES = ("Running", "Pending")
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
WORKER_CONTAINER = "ateom"
DEFAULT_MAX_ACTORS = 1000
TIMEOUT_S = 5
SANDBOX_CLASS = re.compile(r"ateom-(gvisor|microvm)")
GiB = 1024**3


class MalformedFlag(ValueError):
    """An ateom container's --max-actors is not a whole number."""


def empty_facts() -> dict[str, Any]:
    return dict.fromkeys(FACT_KEYS)


def _max_actors(args: list[str]) -> int:
    for index, arg in enumerate(args):
        if arg.startswith("--max-actors="):
            value = arg.split("=", 1)[1]
        elif arg == "--max-actors":
            if index + 1 >= len(args):
                raise MalformedFlag("--max-actors has no value")
            value = args[index + 1]
        else:
            continue
        try:
            return int(value)
        except ValueError:
            raise MalformedFlag(f"--max-actors={value!r} is not a whole number") from None
    return DEFAULT_MAX_ACTORS


def _joined(values: set[str]) -> str | None:
    return ",".join(sorted(values)) if values else None


def container_facts(pods: list[Any]) -> dict[str, Any]:
    """worker_actor_capacity, worker_memory_limit_gb and sandbox_class from the worker pods' ateom containers."""
    from kubernetes.utils import parse_quantity

    if not pods:
        return {"worker_actor_capacity": None, "worker_memory_limit_gb": None, "sandbox_class": None}
    capacities: set[int] = set()
    limits: set[float] = set()
    classes: set[str] = set()
    try:
        for pod in pods:
            for container in pod.spec.containers or []:
                if container.name != WORKER_CONTAINER:
                    continue
                capacities.add(_max_actors([*(container.command or []), *(container.args or [])]))
                limit = ((container.resources and container.resources.limits) or {}).get("memory")
                if limit is not None:
                    limits.add(round(int(parse_quantity(limit)) / GiB, 2))
                match = SANDBOX_CLASS.search(container.image or "")
                if match:
                    classes.add(match[1])
    except MalformedFlag as error:
        log.warning("worker container facts unreadable: %s", error)
        return {"worker_actor_capacity": None, "worker_memory_limit_gb": None, "sandbox_class": None}
    return {
        "worker_actor_capacity": ",".join(str(n) for n in sorted(capacities)) if capacities else None,
        "worker_memory_limit_gb": ",".join(str(gb) for gb in sorted(limits)) if limits else None,
        "sandbox_class": _joined(classes),
    }


def node_facts(nodes: list[Any]) -> dict[str, Any]:
    """The five node facts over the worker nodes (an empty list is an empty pool: zeros, not nulls). A node that
    does not say what it can allocate leaves that sum unknown (null), not short by one node."""
    from kubernetes.utils import parse_quantity

    cores: float | None = 0.0
    memory: int | None = 0
    for node in nodes:
        allocatable = node.status.allocatable or {}
        cpu, ram = allocatable.get("cpu"), allocatable.get("memory")
        cores = None if cores is None or cpu is None else cores + float(parse_quantity(cpu))
        memory = None if memory is None or ram is None else memory + int(parse_quantity(ram))
    return {
        "machine_type": _joined({label for node in nodes if (label := (node.metadata.labels or {}).get(
            INSTANCE_TYPE_LABEL))}),
        "node_count": len(nodes),
        "allocatable_cores": None if cores is None else round(cores, 2),
        "allocatable_ram_gb": None if memory is None else round(memory / GiB, 2),
        "gke_version": _joined({version for node in nodes if node.status.node_info
                                and (version := node.status.node_info.kubelet_version)}),
    }


@dataclass(frozen=True)
class Discovery:
    """How to reach the cluster; ``enabled=False`` writes every key as null without a call."""

    enabled: bool = True
    kubeconfig: str | None = None
    context: str | None = None
    namespace: str = NAMESPACE

    def api(self) -> Any | None:
        from kubernetes import client, config

        try:
            config.load_incluster_config()
            return client.CoreV1Api()
        except config.ConfigException:
            pass
        try:
            api_client = config.new_client_from_config(config_file=self.kubeconfig, context=self.context)
        except (config.ConfigException, OSError, TypeError) as error:
            log.warning("no Kubernetes credentials (in-cluster or kubeconfig): %s", error)
            return None
        return client.CoreV1Api(api_client)

    def facts(self) -> dict[str, Any]:
        facts = empty_facts()
        if not self.enabled:
            log.info("skipping cluster hardware discovery (switched off)")
            return facts
        api = self.api()
        if api is None:
            return facts
        try:
            pods = api.list_namespaced_pod(self.namespace, label_selector=WORKER_SELECTOR, resource_version="0",
                                           _request_timeout=TIMEOUT_S).items
        except Exception as error:  # no fallback to counting every node: the facts stay unknown
            log.warning("listing worker pods failed: %s", error)
            return facts
        live = [pod for pod in pods if (pod.status and pod.status.phase) in LIVE_PHASES]
        facts["worker_pod_count"] = len(live)
        facts.update(container_facts(live))
        worker_nodes = {pod.spec.node_name for pod in live if pod.spec and pod.spec.node_name}
        try:
            nodes = api.list_node(resource_version="0", _request_timeout=TIMEOUT_S).items
        except Exception as error:  # e.g. 403: the pod count stands, node facts stay unknown
            log.warning("listing nodes failed: %s", error)
            return facts
        facts.update(node_facts([node for node in nodes if node.metadata.name in worker_nodes]))
        return facts
