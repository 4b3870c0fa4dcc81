"""Dynamic partitions: one per workload script (its name) and one per trial (its id)."""

import dagster as dg

SCRIPT_PARTITIONS = "script"
script_partitions = dg.DynamicPartitionsDefinition(name=SCRIPT_PARTITIONS)
TRIAL_PARTITIONS = "trial"
trial_partitions = dg.DynamicPartitionsDefinition(name=TRIAL_PARTITIONS)
