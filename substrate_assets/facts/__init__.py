"""Cluster facts: what a trial ran on, under the reference's field names. No Dagster here."""

FACT_KEYS = ("machine_type", "node_count", "allocatable_cores", "allocatable_ram_gb", "worker_pod_count",
             "gke_version", "worker_actor_capacity", "worker_memory_limit_gb", "sandbox_class")
