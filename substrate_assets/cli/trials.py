"""``substrate-bench trial`` (one trial, here), ``run`` (the main job through Dagster) and ``materialize`` (load an
existing trial again)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml
from rich.console import Console
from rich.table import Table

from substrate_assets.cli.compare import FIGURE
from substrate_assets.cli.job_results import dead_time_line, show_group, show_site, show_trial, show_verdict
from substrate_assets.cli.output import progress_display, wide_console
from substrate_assets.cli.warehouse_choice import warehouse_said_unavailable
from substrate_assets.families import WAKE_ROWS
from substrate_assets.project import scripts_directory, store_directory
from substrate_assets.suites import KUBERNETES_SECTION_MISSING, MAX_REPEAT, Suite, SuiteError, get_suite, hold_problem
from substrate_assets.suites.sections import parse_run_time
from substrate_assets.workload import ScriptError, ScriptLibrary, ScriptNotFound

if TYPE_CHECKING:
    from substrate_assets.app.stopped import Stopped
    from substrate_assets.driver.outputs import TrialResult


INJECT_WAKE_DELAY = click.option(
    "--inject-wake-delay-ms", type=click.IntRange(min=0), help="The embedded runtime adds N ms to every wake before "
    "the actor answers: a slowdown of known size, to check that a comparison finds it (a configuration of its own; "
    "0 adds none).")


def _wait_limit(_context: click.Context, _parameter: click.Parameter, value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return parse_run_time(value)
    except ValueError as error:
        raise click.BadParameter(str(error)) from None


WAIT_AT_MOST = click.option(
    "--wait-at-most", "wait_at_most_s", metavar="DURATION", callback=_wait_limit, help="While another trial holds "
    "this machine, a trial queues for it (saying its place, who holds it and when its turn comes at the earliest); "
    "past DURATION (90s, 10m, 1h) it stops waiting, having run nothing (trial: exit 2). Default: as long as it takes.")
LIVE = click.option("--live", is_flag=True, help="Watch the load: Locust's own web UI (its charts and tables, "
                    "read-only) on a free port of 127.0.0.1 while the load runs; the address is printed first. The "
                    "trial lands as a headless one does.")


def _fail_with_problems(error: ScriptError) -> None:
    for problem in error.problems:
        click.echo(str(problem), err=True)
    sys.exit(1)


def _print_trial(console: Console, result: TrialResult, family: str) -> None:
    summary = result.summary
    console.print(f"trial {result.trial_id}: {result.trial_dir}", highlight=False)
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column("figure", style="bold")
    table.add_column("value")
    table.add_row("completed", "yes" if result.completed else f"no ({_why_incomplete(result)})")
    if WAKE_ROWS[family] is not None:  # spawn and burst start or resume cohorts, with no parked wake
        table.add_row(f"wake ({summary.wake_row or WAKE_ROWS[family]})", summary.wake_figures())
    for row in summary.headline:
        table.add_row(row.name, row.text())
    if family == "agentsession":
        table.add_row("steps completed", str(summary.steps_completed))
    table.add_row("failures", f"{summary.failures} of {summary.requests} requests")
    table.add_row("sessions" if family == "agentsession" else "actors created", str(summary.sessions))
    console.print(table)
    for warning in result.warnings:
        console.print(f"warning: {warning}", style="yellow", highlight=False)


def _why_incomplete(result: TrialResult) -> str:
    """Why a trial did not run to its end, in the words of how Locust exited; failed requests are never the
    reason (they have their own line)."""
    from substrate_assets.results.trial_directory import LOCUST_RAN_TO_ITS_END

    code = result.locust_exit_code
    if result.failure:
        return result.failure
    if code < 0:
        return f"Locust was killed by signal {-code}"
    if code not in LOCUST_RAN_TO_ITS_END:
        return f"Locust failed with exit code {code}"
    return f"stopped before its run time, or no stats written; locust exit code {code}"


def _trial_suite(suite_name: str, changes: dict[str, Any], cluster: dict[str, Any]) -> Suite:
    """The suite with the command line's overrides, or a UsageError saying what is wrong."""
    try:
        suite = get_suite(suite_name)
    except SuiteError as error:
        raise click.UsageError(str(error)) from None
    given = {name: value for name, value in cluster.items() if value is not None}
    try:
        chosen = suite.with_overrides(**changes, kubernetes=given or None)
    except SuiteError as error:
        # The flags can supply only a missing kubernetes: section; any other problem is the value given.
        hint = "; add one to the suite in suites.yaml or pass --image and --object-store" \
            if KUBERNETES_SECTION_MISSING in error.kinds else ""
        raise click.UsageError(f"{error}{hint}") from None
    try:
        if chosen.script is not None:
            ScriptLibrary(scripts_directory()).path_of(chosen.script)
    except ScriptNotFound as error:
        raise click.UsageError(f"suite {chosen.name!r}: {error}") from None
    hold = hold_problem(chosen, scripts_directory())  # --think-scale may have lengthened the think cycle
    if hold is not None:
        raise click.UsageError(f"suite {chosen.name!r}: ladder.hold: {hold}")
    return chosen


class _ManifestDumper(yaml.SafeDumper):  # type: ignore[misc]  # yaml ships no types: SafeDumper is Any
    """Writes multi-line strings (the script in its ConfigMap) as literal blocks, readable as the file itself."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style="|" if "\n" in text else None)


_ManifestDumper.add_representer(str, _represent_text)


def _print_manifests(suite: Suite) -> None:
    """The objects a kubernetes trial of ``suite`` would submit, as a multi-document YAML stream."""
    from substrate_assets.app.dry_run import kubernetes_dry_run
    from substrate_assets.results.layout import RunStore

    try:
        key, manifests = kubernetes_dry_run(suite, RunStore(store_directory()), ScriptLibrary(scripts_directory()))
    except ScriptError as error:
        _fail_with_problems(error)
    assert suite.kubernetes is not None  # a suite on the kubernetes backend has its kubernetes: section
    click.echo(f"# trial {key.trial_id}: what a kubernetes trial of suite {suite.name} would submit to namespace "
               f"{suite.kubernetes.namespace} (the driver pod through Dagster's PipesK8sClient)")
    click.echo(yaml.dump_all(manifests, Dumper=_ManifestDumper, sort_keys=False), nl=False)


@click.command()
@click.argument("suite_name", metavar="SUITE")
@click.option("--store", type=click.Path(file_okay=False, path_type=Path),
              help="Run store (default: $SUBSTRATE_BENCH_STORE, else store/ in the project).")
@click.option("--users", type=click.IntRange(min=1), help="Override the suite's users.")
@click.option("--spawn-rate", type=click.FloatRange(min=0, min_open=True), help="Users started per second.")
@click.option("--duration", help="Run time, e.g. 60s or 2m.")
@click.option("--think-scale", type=click.FloatRange(min=0), help="Multiplies think times (0 reads as 1).")
@click.option("--lifecycle-mode", type=click.Choice(["suspend", "pause"]), help="How actors are parked.")
@click.option("--resume-mode", type=click.Choice(["implicit", "explicit"]), help="How actors are woken.")
@click.option("--actor-memory", help="Memory limit of the glutton template, e.g. 1Gi.")
@click.option("--backend", type=click.Choice(["local", "kubernetes"]), help="Override the suite's backend.")
@click.option("--dry-run", is_flag=True, help="kubernetes: print the pods, Service and ConfigMap a trial would "
              "submit, as YAML, and run nothing.")
@click.option("--image", help="kubernetes: the substrate-bench image the pods run.")
@click.option("--object-store", "object_store", help="kubernetes: run store URL (gs://…, s3://…).")
@click.option("--namespace", help="kubernetes: namespace of the trial's pods.")
@click.option("--locust-workers", type=click.IntRange(min=0), help="kubernetes: Locust worker pods (0: none).")
@click.option("--wait", "wait_for_machine", is_flag=True, help="When another trial is running on this machine, "
              "queue for it instead of refusing.")
@WAIT_AT_MOST
@LIVE
@click.option("--sut-version", help="The version of the system under test (a Substrate commit or image digest) to "
              "record; default: the suite's sut_version, else this checkout's commit (local) or the tag.")
@INJECT_WAKE_DELAY
def trial(suite_name: str, store: Path | None, users: int | None, spawn_rate: float | None, duration: str | None,
          think_scale: float | None, lifecycle_mode: str | None, resume_mode: str | None,
          actor_memory: str | None, backend: str | None, dry_run: bool, image: str | None, object_store: str | None,
          namespace: str | None, locust_workers: int | None, wait_for_machine: bool, wait_at_most_s: int | None,
          live: bool, sut_version: str | None, inject_wake_delay_ms: int | None) -> None:
    """Run one trial of SUITE on the local backend and print its trial directory and summary.

    One local trial runs on a machine at a time: while another runs, this one is refused (exit 2) or, with
    --wait (or --wait-at-most), queues for it; its started_at is when its load started, the wait kept beside it
    (machine_wait_s). Ctrl-C or SIGTERM stops the trial, which keeps what was measured until then (exit 130 or
    143).

    Trials on the kubernetes backend run through Dagster (`substrate-bench run SUITE` or the UI);
    with --dry-run this command prints the objects such a trial would submit.
    """
    from substrate_assets.driver.preflight import TrialRefused, TrialStopped
    from substrate_assets.driver.stopping import signals_stop_the_trial
    from substrate_assets.driver.trial import run_local_trial
    from substrate_assets.results.layout import RunStore

    suite = _trial_suite(suite_name, {"users": users, "spawn_rate": spawn_rate, "duration": duration,
                                      "think_scale": think_scale, "lifecycle_mode": lifecycle_mode,
                                      "resume_mode": resume_mode, "actor_memory": actor_memory, "backend": backend,
                                      "sut_version": sut_version, "inject_wake_delay_ms": inject_wake_delay_ms},
                         {"image": image, "store": object_store, "namespace": namespace,
                          "locust_workers": locust_workers})
    if suite.backend == "kubernetes":
        if not dry_run:
            if get_suite(suite_name).backend == "kubernetes":
                raise click.UsageError(f"suite {suite.name!r} runs on the kubernetes backend, whose driver pod "
                                       f"Dagster launches: use `substrate-bench run {suite.name}` or the UI "
                                       "(--dry-run prints what would be submitted)")
            raise click.UsageError(f"suite {suite.name!r} runs on the local backend in suites.yaml; a kubernetes "
                                   "trial is launched by Dagster from a suite with backend: kubernetes and a "
                                   "kubernetes: section (--dry-run prints what this one would submit)")
        _print_manifests(suite)
        return
    if dry_run:
        raise click.UsageError("--dry-run prints a kubernetes trial's pods; add --backend kubernetes")
    console = Console()
    display, update = progress_display(console)
    with signals_stop_the_trial() as stop:
        try:
            with display:
                result = run_local_trial(suite, RunStore(store or store_directory()),
                                         ScriptLibrary(scripts_directory()), on_progress=update,
                                         wait_for_machine=wait_for_machine or wait_at_most_s is not None,
                                         wait_at_most_s=wait_at_most_s, live=live,
                                         on_notice=lambda line: console.print(line, highlight=False,
                                                                              soft_wrap=True))
        except KeyboardInterrupt:
            click.echo(f"trial stopped by {stop.signal_name} before it landed; nothing was kept", err=True)
            sys.exit(stop.exit_code)
        except ScriptError as error:
            _fail_with_problems(error)
        except TrialRefused as error:
            click.echo(f"trial refused, nothing was run: {error}", err=True)
            sys.exit(2)
        except TrialStopped as error:
            click.echo(f"trial stopped: {error}", err=True)
            sys.exit(1)
    _print_trial(console, result, suite.family)
    if stop.signum is not None:
        click.echo(f"trial {result.trial_id} stopped by {stop.signal_name} before its run time; it keeps what was "
                   "measured until then (status: interrupted)", err=True)
        sys.exit(stop.exit_code)
    sys.exit(0 if result.completed else 1)


@contextmanager
def main_job_exits() -> Iterator[None]:
    """A main job that did not finish ends the command: its message on stderr, exit code 4 when the machine was too
    busy to judge (more trials disturbed than the job runs again), 1 when a step failed."""
    from substrate_assets.app.main_job import MachineTooBusy, MainJobError

    try:
        yield
    except MachineTooBusy as error:
        click.echo(str(error), err=True)
        sys.exit(4)
    except MainJobError as error:
        click.echo(str(error), err=True)
        sys.exit(1)


def exit_stopped(stopped: Stopped) -> None:
    """One line for a command stopped by a signal, and the shell's exit code for it (128 + the signal's number)."""
    click.echo(f"stopped by {stopped.signal_name}; any run this command had started is marked failed or canceled "
               "and its pool slots are freed", err=True)
    sys.exit(stopped.exit_code)


@click.command()
@click.argument("suite_name", metavar="SUITE", default="quick-smoke")
@click.option("--repeat", type=click.IntRange(min=1, max=MAX_REPEAT), help="Trials to run back to back as one group, "
              "judged together (default: the suite's repeat).")
@INJECT_WAKE_DELAY
@WAIT_AT_MOST
@LIVE
@FIGURE
def run(suite_name: str, repeat: int | None, inject_wake_delay_ms: int | None, wait_at_most_s: int | None,
        live: bool, figures: tuple[str, ...]) -> None:
    """The main job: run SUITE's trials (its repeat, or --repeat) through the asset graph, print the last one's
    frontier and wake latency, and judge them against their configuration's history.

    Registers a trial partition in the project's Dagster instance, materializes workload_script,
    trial_run, the raw tables and the models for each trial, then reads the rows back from DuckDB. Repeated trials
    form a group, whose id is printed: `substrate-bench compare` takes it.

    Runs left behind by a killed substrate-bench are marked failed and their pool slots freed first (one line
    each). While a live run holds the trials pool, says which run and waits. SIGINT or SIGTERM stops the command
    at any point (exit 130 or 143); a run it had started ends failed or canceled, its slots freed.
    """
    from substrate_assets.app.instance import project_instance
    from substrate_assets.app.main_job import run_suite
    from substrate_assets.app.stopped import Stopped, stopping_on_signals
    from substrate_assets.results.layout import RunStore

    try:
        suite = get_suite(suite_name)
        suite.with_overrides(inject_wake_delay_ms=inject_wake_delay_ms)
    except SuiteError as error:
        raise click.UsageError(str(error)) from None
    console = wide_console()
    with stopping_on_signals():
        try:
            instance = project_instance()
            workload = f"script {suite.script}" if suite.script else f"family {suite.family}"
            trials = repeat or suite.repeat
            console.print(f"main job: suite {suite.name} ({workload}, {suite.load_description()}"
                          f"{f', {trials} trials' if trials > 1 else ''}) on Dagster instance "
                          f"{instance.root_directory}", highlight=False)
            with main_job_exits():
                outcome = run_suite(suite, RunStore(store_directory()), instance, say=click.echo, repeat=repeat,
                                    inject_wake_delay_ms=inject_wake_delay_ms, wait_at_most_s=wait_at_most_s,
                                    live=live)
            console.print(f"trial {outcome.trial_id} materialized (runs {', '.join(outcome.runs)})",
                          highlight=False)
            with warehouse_said_unavailable():
                show_trial(console, outcome.trial_id)
                if outcome.group is not None:
                    show_group(console, outcome.group, outcome.trial_ids)
                    console.print(f"group {outcome.group}: {', '.join(outcome.trial_ids)}", highlight=False)
                show_verdict(console, outcome.group or outcome.trial_id, figures, outcome.comparison)
            if outcome.insight is not None:
                console.print(outcome.insight.line(), highlight=False)
            show_site(console)
            if outcome.loads:
                console.print(dead_time_line(instance, outcome.loads), highlight=False, soft_wrap=True)
        except Stopped as stopped:
            exit_stopped(stopped)


@click.command("materialize")
@click.argument("trial_id")
def materialize_trial(trial_id: str) -> None:
    """Load an existing trial's files from the run store into the warehouse again (its raw tables, then the models);
    no new trial runs."""
    from substrate_assets.app.instance import project_instance
    from substrate_assets.app.main_job import reload_trial
    from substrate_assets.app.stopped import Stopped, stopping_on_signals
    from substrate_assets.results.layout import RunStore

    console = wide_console()
    with stopping_on_signals():
        try:
            try:
                with main_job_exits():
                    outcome = reload_trial(trial_id, RunStore(store_directory()), project_instance(), say=click.echo)
            except FileNotFoundError as error:
                raise click.UsageError(str(error)) from None
            console.print(f"trial {trial_id} reloaded (run {outcome.runs[0]})", highlight=False)
            with warehouse_said_unavailable():
                show_trial(console, trial_id)
                show_verdict(console, trial_id)
        except Stopped as stopped:
            exit_stopped(stopped)
