"""The names of trial_run and its checks. Free of Dagster imports: the Pipes child (in a driver pod, with
``dagster_pipes`` only) reports under them too."""

TRIAL_RUN = "trial_run"
TRIAL_COMPLETED = "trial_completed"
# On a workstation, the warehouse domain judges each trial against the history of its suite and configuration
# under this name; the run_trial job leaves it out, as the marts it reads follow that job.
NO_REGRESSION = "no_regression_against_history"
