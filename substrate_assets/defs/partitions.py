"""Dynamic partitions: one per workload script (its name) and one per trial (its id)."""

import dagster as dg

script_partitions = dg.DynamicPartitionsDefinition(name="script")
TRIAL_PARTITIONS = "trial"
trial_partitions = dg.DynamicPartitionsDefinition(name=TRIAL_PARTITIONS)
