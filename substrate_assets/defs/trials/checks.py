"""The names of trial_run's checks. Free of Dagster imports: the Pipes child (in a driver pod, with
``dagster_pipes`` only) reports under them too."""

TRIAL_COMPLETED = "trial_completed"
