"""The trial_run child: runs one trial under Dagster Pipes.

Launched by the ``trial_run`` asset — as a subprocess (``PipesSubprocessClient``) for the local
backend, as the driver pod (``PipesK8sClient``) for the kubernetes backend. Extras: ``trial_id``,
``suite`` (the suite's settings as JSON, so the trial runs exactly what was launched), ``group`` (the group of
repeated trials it is one of, or none), and for local trials ``store``, ``scripts`` and maybe ``wait_at_most_s``
(how long it may queue for the machine). Progress goes to the run's logs every 10 s; the finished trial's figures
come back as the materialization's metadata and the ``trial_completed`` check.

A local trial queues for the machine while another trial (a ``substrate-bench trial`` beside Dagster, another
checkout's) runs, saying in the run's logs its place, who holds the machine and when its turn comes at the
earliest. SIGTERM (a run terminated) stops the trial as Ctrl-C does: it lands what was
measured, marked interrupted. A local child also receives SIGHUP when the process that launched it dies (a
``substrate-bench run`` killed outright), and stops the same way, so it never runs on unowned beside the next trial.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from dagster_pipes import open_dagster_pipes

from substrate_assets.defs.trials.checks import TRIAL_COMPLETED, TRIAL_RUN
from substrate_assets.driver.preflight import TrialRefused
from substrate_assets.driver.progress import log_lines
from substrate_assets.driver.stopping import signals_stop_the_trial
from substrate_assets.driver.trial import run_local_trial
from substrate_assets.processes.parent_death import stop_when_parent_dies
from substrate_assets.processes.quick_exit import exit_now
from substrate_assets.processes.warm_start import WARM_FLAG, await_launch
from substrate_assets.report.figures import charted_key, rounded
from substrate_assets.results.layout import RunStore, TrialKey
from substrate_assets.suites import Suite
from substrate_assets.workload import ScriptLibrary


def main(waited_ready_s: float | None = None) -> None:
    """Run the trial the Pipes context names; ``waited_ready_s``: how long this process, started ahead of its run,
    waited with its imports done (None: started by its run)."""
    stop_when_parent_dies()
    with open_dagster_pipes() as pipes, signals_stop_the_trial() as stop:
        trial_id = pipes.get_extra("trial_id")
        suite = Suite.model_validate_json(pipes.get_extra("suite"))
        group = pipes.extras.get("group")
        key = TrialKey.from_trial_id(trial_id, suite.tag)
        workload = f"think scale {suite.think_scale:g}" if suite.script else f"family {suite.family}"
        pipes.log.info(f"trial {trial_id}: suite {suite.name} ({suite.load_description()}, {workload}) on the "
                       f"{suite.backend} backend")
        if waited_ready_s is not None:
            pipes.log.info(f"{STARTED_AHEAD}: its imports were done {waited_ready_s:.1f} s before its run launched it")
        try:
            if suite.backend == "kubernetes":
                # Imported here: the kubernetes client is a third of this child's imports, which a local trial
                # pays before its load starts.
                from substrate_assets.driver.kubernetes.cluster_trial import run_cluster_trial
                from substrate_assets.driver.kubernetes.pods import SCRIPT_FILE

                result = run_cluster_trial(suite, key, Path(SCRIPT_FILE) if suite.script else None,
                                           on_progress=log_lines(pipes.log.info), group=group)
            else:
                result = run_local_trial(suite, RunStore(Path(pipes.get_extra("store"))),
                                         ScriptLibrary(Path(pipes.get_extra("scripts"))),
                                         on_progress=log_lines(pipes.log.info), key=key, wait_for_machine=True,
                                         wait_at_most_s=pipes.extras.get("wait_at_most_s"),
                                         on_notice=pipes.log.warning, group=group,
                                         live=bool(pipes.extras.get("live")))
        except KeyboardInterrupt:
            pipes.log.error(f"trial {trial_id} stopped by {stop.signal_name} before it landed; nothing was kept")
            raise SystemExit(stop.exit_code) from None
        except TrialRefused as error:
            pipes.log.error(f"trial {trial_id} refused, nothing was run: {error}")
            raise SystemExit(2) from None
        summary = result.summary
        pipes.log.info(f"trial {trial_id} written to {result.trial_dir}: wake ({summary.wake_row or 'none'}) "
                       f"{summary.wake_figures()}; "
                       f"{summary.steps_completed} steps, {summary.failures} failures")
        # Named, as a run_trial job's op (which mints the partition) has no asset of its own to default to.
        figures = {
            "requests": summary.requests,
            "failures": summary.failures,
            "steps_completed": summary.steps_completed,
            "sessions": summary.sessions,
            "wake_n": summary.wake_n, "wake_failed": summary.wake_failed,
            # Floats, rounded as every figure is shown.
            **{name: {"raw_value": rounded(value, name), "type": "float"}
               for name, value in (("wake_p50_ms", summary.wake_p50_ms), ("wake_p95_ms", summary.wake_p95_ms),
                                   ("wake_p99_ms", summary.wake_p99_ms))},
            "failure_ratio": {"raw_value": summary.failure_ratio, "type": "float"},
            **machine_load_figures(result.machine_load),
        }
        # Named, as a run_trial job's op (which mints the partition) has no asset of its own to default to.
        pipes.report_asset_materialization(
            asset_key=TRIAL_RUN,
            metadata={
                "trial_dir": {"raw_value": str(result.trial_dir), "type": "path"},
                "backend": suite.backend,
                "completed": result.completed,
                **({"failure": result.failure} if result.failure else {}),
                # Text: a code is a label, not a figure to chart across trials.
                "locust_exit_code": {"raw_value": str(result.locust_exit_code), "type": "text"},
                **machine_load_words(result.machine_load),
                # Dagster charts a number across the asset's materializations: one key per suite, so a chart
                # never mixes suites.
                **{charted_key(suite.name, name): value for name, value in figures.items()},
            },
            data_version=trial_id,
        )
        pipes.report_asset_check(
            check_name=TRIAL_COMPLETED, asset_key=TRIAL_RUN, passed=result.completed, severity="WARN",
            metadata={"locust_exit_code": result.locust_exit_code, "failures": summary.failures,
                      **({"failure": result.failure} if result.failure else {})},
        )


STARTED_AHEAD = "this trial's process was started ahead of its run"


def machine_load_figures(load: dict[str, Any] | None) -> dict[str, Any]:
    """How busy the machine was with other work: each measured figure, rounded."""
    return {name: {"raw_value": round(load[name], 4), "type": "float"}
            for name in ("foreign_cpu_share", "steal_share", "cpu_pressure") if load and load.get(name) is not None}


def machine_load_words(load: dict[str, Any] | None) -> dict[str, Any]:
    """Whether the machine was busy with other work: ``disturbed`` and why."""
    found: dict[str, Any] = {}
    if load and load.get("disturbed") is not None:
        found["disturbed"] = bool(load["disturbed"])
    if load and load.get("disturbed_because"):
        found["disturbed_because"] = "; ".join(load["disturbed_because"])
    return found


if __name__ == "__main__":
    # Started ahead (processes/warm_start), its imports done: wait to be launched.
    main(await_launch() if WARM_FLAG in sys.argv[1:] else None)
    # Its run waits for this process's exit before the trial counts as landed.
    exit_now()
