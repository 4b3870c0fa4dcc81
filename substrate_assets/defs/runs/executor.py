"""The executor of every run of the code location: Dagster's in-process executor, whose run worker first records
itself as the run's owner and sweeps what dead runs left.

The executor is the first code of ours that runs in the run worker, whoever launched the run (the command line, the
UI, a sensor, a schedule), before any step claims a pool slot. So the worker tags the run with its own host, pid and
start (``owners``), then fails the runs whose owner on this host is gone, frees their slots and removes the Pipes
scratch directories of dead workers and the temporary directories of killed ``dagster dev`` processes: a trial
launched after a crash finds the ``trials`` slot free.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import TYPE_CHECKING, cast

import dagster as dg
from dagster._core.execution.retries import RetryMode
from dagster._core.execution.step_dependency_config import StepDependencyConfig

from substrate_assets.defs.runs.owners import free_dead_runs, record_owner, this_process_as_detector
from substrate_assets.defs.runs.scratch import sweep_pipes_leftovers
from substrate_assets.processes.owner import Owner
from substrate_assets.processes.ui_scratch import sweep_ui_leftovers

if TYPE_CHECKING:
    from dagster._config.config_schema import UserConfigSchema
    from dagster._core.execution.context.system import PlanOrchestrationContext
    from dagster._core.execution.plan.plan import ExecutionPlan


class OwnedExecutor(dg.Executor):
    """``inner``'s execution, after the run's owner is recorded and dead runs are swept."""

    def __init__(self, inner: dg.Executor) -> None:
        self._inner = inner

    @property
    def retries(self) -> RetryMode:
        return self._inner.retries

    @property
    def step_dependency_config(self) -> StepDependencyConfig:
        return self._inner.step_dependency_config

    def execute(self, plan_context: PlanOrchestrationContext,
                execution_plan: ExecutionPlan) -> Iterator[dg.DagsterEvent]:
        instance, run = plan_context.instance, plan_context.dagster_run
        # A worker's command line says little (a code server's, copied into its multiprocessing child): say what it is.
        owner = replace(Owner.this_process(), command=f"{run.job_name} run worker")
        if record_owner(instance, run, owner):
            plan_context.log.info(f"run owned by pid {owner.pid} on {owner.host}; if that process dies, the next run "
                                  "or the daemon's sensor dead_runs marks this run failed and frees its pool slots")
        detector = this_process_as_detector(f"run {run.run_id}'s worker as it started")
        for line in [*(freed.line() for freed in free_dead_runs(instance, detector)), *sweep_pipes_leftovers(),
                     *sweep_ui_leftovers()]:
            plan_context.log.warning(line)
        yield from self._inner.execute(plan_context, execution_plan)


# Dagster takes another definition's config schema as it is, which the decorator's annotation leaves out.
@dg.executor(name="in_process", config_schema=cast("UserConfigSchema", dg.in_process_executor.config_schema),
             requirements=dg.in_process_executor.get_requirements)
def owned_in_process_executor(init_context: dg.InitExecutorContext) -> dg.Executor:
    """Dagster's in-process executor, its config unchanged, run by a worker that owns its run (``OwnedExecutor``)."""
    assert dg.in_process_executor.executor_creation_fn is not None  # a decorated executor is its creation function
    return OwnedExecutor(dg.in_process_executor.executor_creation_fn(init_context))
