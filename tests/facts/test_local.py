"""Cluster facts of this machine, under the reference's keys."""

import os

from substrate_assets.facts.local import local_cluster_facts
from substrate_assets.results.stats_jsonl import FACT_KEYS


def test_local_facts():
    facts = local_cluster_facts(workers=8, actors_per_worker=4)
    assert tuple(facts) == FACT_KEYS
    assert facts["node_count"] == 1 and facts["worker_pod_count"] == 8 and facts["worker_actor_capacity"] == "4"
    assert facts["sandbox_class"] == "process"
    assert facts["gke_version"] is None and facts["worker_memory_limit_gb"] is None  # not measured here
    assert 0 < facts["allocatable_cores"] <= os.cpu_count()
    assert facts["allocatable_ram_gb"] > 0 and round(facts["allocatable_ram_gb"], 2) == facts["allocatable_ram_gb"]
    assert isinstance(facts["machine_type"], str) and facts["machine_type"]
