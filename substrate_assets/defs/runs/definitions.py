"""The runs domain's Dagster objects: the sensor that sweeps dead runs. The executor that records each run's owner is
every job's (``definitions.py``, ``run_trial``)."""

import dagster as dg

from substrate_assets.defs.runs.sensors import dead_runs_sensor

defs = dg.Definitions(sensors=[dead_runs_sensor])
