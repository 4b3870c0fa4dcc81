"""Jobs a test runs in a run worker of its own (``dagster job execute``, no owner tags given at launch, as a run the UI,
a sensor or a schedule launches): one holds the ``trials`` pool and its Pipes scratch directory until killed, the
other takes the pool and ends; ``nothing_job`` does nothing, for runs a test writes straight into an instance."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import dagster as dg

from substrate_assets.defs.runs.executor import owned_in_process_executor
from substrate_assets.defs.runs.scratch import owned_pipes_client

READY_ENV = "SUBSTRATE_BENCH_TEST_READY"


@dg.op(pool="trials")
def hold_the_pool() -> None:
    with owned_pipes_client(dg.PipesSubprocessClient()):
        Path(os.environ[READY_ENV]).write_text(str(os.getpid()))
        threading.Event().wait()  # until killed


@dg.op(pool="trials")
def take_the_pool() -> None:
    pass


@dg.job(executor_def=owned_in_process_executor)
def holding_trial() -> None:
    hold_the_pool()


@dg.job(executor_def=owned_in_process_executor)
def next_trial() -> None:
    take_the_pool()


defs = dg.Definitions(jobs=[holding_trial, next_trial])


@dg.op
def _nothing() -> None:
    pass


@dg.job
def nothing_job() -> None:
    _nothing()
