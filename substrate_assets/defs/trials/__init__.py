"""Trials in Dagster: ``trial_run[trial]`` (a Pipes subprocess or a driver pod), the ``run_trial`` job and the
script-change sensor."""
