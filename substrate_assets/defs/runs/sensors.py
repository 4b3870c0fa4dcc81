"""``dead_runs``: the daemon's sweep, for when no new run comes to do it (a UI left open after a crash)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import dagster as dg

from substrate_assets.defs.runs.owners import free_dead_runs, this_process_as_detector
from substrate_assets.defs.runs.scratch import sweep_pipes_leftovers
from substrate_assets.processes.ui_scratch import sweep_ui_leftovers

DEAD_RUNS_SENSOR = "dead_runs"
# A killed worker's trials slot is back within a minute without a new run; a new run frees it at once anyway.
SWEEP_INTERVAL_S = 30
# What a domain settles once runs are swept (a trial a dead run never recorded); one line per thing done.
Follower = Callable[[dg.DagsterInstance], list[str]]


def sweep(instance: dg.DagsterInstance, followers: Sequence[Follower] = ()) -> list[str]:
    """One sweep, as the sensor makes it: dead runs failed and their slots freed, dead workers' Pipes scratch
    directories removed, then what each follower settles."""
    detector = this_process_as_detector(f"the daemon's sensor {DEAD_RUNS_SENSOR}")
    lines = [*(freed.line() for freed in free_dead_runs(instance, detector)), *sweep_pipes_leftovers(),
             *sweep_ui_leftovers()]
    for follow in followers:
        lines += follow(instance)
    return lines


def dead_runs_sensor(followers: Sequence[Follower] = ()) -> dg.SensorDefinition:
    @dg.sensor(name=DEAD_RUNS_SENSOR, minimum_interval_seconds=SWEEP_INTERVAL_S,
               default_status=dg.DefaultSensorStatus.RUNNING,
               description="Marks failed every unfinished run whose process on this host is gone (killed, or the "
               "machine restarted), frees the pool slots it held, frees the slots of runs that have ended, removes "
               "the Pipes scratch directories of dead run workers, and settles the trials such runs never recorded. "
               "Runs of other hosts are left alone.")
    def dead_runs(context: dg.SensorEvaluationContext) -> dg.SkipReason:
        lines = sweep(context.instance, followers)
        for line in lines:
            context.log.warning(line)
        return dg.SkipReason("; ".join(lines) if lines else "no dead run holds anything")

    return dead_runs
