"""A local trial's Pipes child started ahead of its run (``processes/warm_start``): ``substrate-bench run`` starts
the next trial's child while it loads the trial before, and the trial's run launches that child, through the same
Pipes session, termination and exit handling as ``PipesSubprocessClient.run`` (whose process it would otherwise
start)."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import Mapping

import dagster as dg
from dagster._core.errors import DagsterPipesExecutionError  # not re-exported; PipesSubprocessClient raises it

from substrate_assets.driver.kubernetes.pods import PIPES_CHILD
from substrate_assets.processes import warm_start
from substrate_assets.processes.parent_death import PARENT_PID_ENV
from substrate_assets.project import project_root


def local_trial_child() -> tuple[list[str], str, dict[str, str]]:
    """A local trial's Pipes child: its command, the directory it runs in, and what it is told besides Pipes' own
    (this process is its parent)."""
    return [sys.executable, "-m", PIPES_CHILD], str(project_root()), {PARENT_PID_ENV: str(os.getpid())}


def start_trial_child_ahead() -> None:
    """Start the next local trial's Pipes child now, to be launched by that trial's run in this process."""
    command, cwd, env = local_trial_child()
    warm_start.prepare(command, cwd, env)


def run_trial_child(client: dg.PipesSubprocessClient, context: dg.OpExecutionContext,
                    extras: Mapping[str, object]) -> dg.PipesClientCompletedInvocation:
    """The local trial's Pipes child run to its end: the one started ahead for it when there is one, else a new
    process (``client.run``)."""
    command, cwd, env = local_trial_child()
    child = warm_start.take(command, cwd) if client.forward_stdio else None
    if child is None:
        return client.run(context=context, command=command, extras=dict(extras), env=env, cwd=cwd)
    with dg.open_pipes_session(context=context, context_injector=client.context_injector,
                               message_reader=client.message_reader, extras=dict(extras)) as session:
        process = child.launch({**os.environ, **client.env, **env, **session.get_bootstrap_env_vars()})
        try:
            process.wait()
            if process.returncode != 0:
                raise DagsterPipesExecutionError(f"External execution process failed with code {process.returncode}")
        except dg.DagsterExecutionInterruptedError:
            if client.forward_termination:
                context.log.info("[pipes] execution interrupted, sending SIGINT to subprocess.")
                process.send_signal(signal.SIGINT)
                process.wait(timeout=client.termination_timeout_seconds)
            raise
    return dg.PipesClientCompletedInvocation(session)
