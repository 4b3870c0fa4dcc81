"""Cluster facts: what a trial ran on (this machine, or a Kubernetes cluster), under the keys of
:data:`substrate_assets.results.stats_jsonl.FACT_KEYS`. No Dagster here."""
