"""Dynamic partitions: one per workload script (its name)."""

import dagster as dg

script_partitions = dg.DynamicPartitionsDefinition(name="script")
