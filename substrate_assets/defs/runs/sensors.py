"""``dead_runs``: the daemon's sweep, for when no new run comes to do it (a UI left open after a crash)."""

from __future__ import annotations

import dagster as dg

from substrate_assets.defs.runs.owners import free_dead_runs, this_process_as_detector
from substrate_assets.defs.runs.scratch import sweep_pipes_leftovers

DEAD_RUNS_SENSOR = "dead_runs"
# A killed worker's trials slot is back within a minute without a new run; a new run frees it at once anyway.
SWEEP_INTERVAL_S = 30


@dg.sensor(name=DEAD_RUNS_SENSOR, minimum_interval_seconds=SWEEP_INTERVAL_S,
           default_status=dg.DefaultSensorStatus.RUNNING,
           description="Marks failed every unfinished run whose process on this host is gone (killed, or the machine "
           "restarted), frees the pool slots it held, frees the slots of runs that have ended, and removes the Pipes "
           "scratch directories of dead run workers. Runs of other hosts are left alone.")
def dead_runs_sensor(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    detector = this_process_as_detector(f"the daemon's sensor {DEAD_RUNS_SENSOR}")
    lines = [*(freed.line() for freed in free_dead_runs(context.instance, detector)), *sweep_pipes_leftovers()]
    for line in lines:
        context.log.warning(line)
    return dg.SkipReason("; ".join(lines) if lines else "no dead run holds anything")
