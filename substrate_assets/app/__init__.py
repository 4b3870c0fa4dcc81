"""What the ``substrate-bench`` commands do beyond one domain call: the main job on the project's Dagster instance,
imports and rebuilds that land in the warehouse and the instance alike, a kubernetes trial's dry run, and the Pipes
child that ``trial_run`` launches."""
