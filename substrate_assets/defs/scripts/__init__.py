"""Workload scripts in Dagster: ``workload_script[script]``, its blocking check and the ``validate_script`` job."""
