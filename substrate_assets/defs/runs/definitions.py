"""The runs domain's Dagster objects: the sensor that sweeps dead runs, with what other domains settle after it. The
executor that records each run's owner is every job's (``definitions.py``, ``run_trial``)."""

from collections.abc import Sequence

import dagster as dg

from substrate_assets.defs.runs.sensors import Follower, dead_runs_sensor


def runs_defs(followers: Sequence[Follower] = ()) -> dg.Definitions:
    return dg.Definitions(sensors=[dead_runs_sensor(followers)])
