"""``substrate-bench trial`` (one trial, here), ``run`` (the main job through Dagster) and ``materialize`` (load an
existing trial again)."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click
import yaml
from rich.console import Console
from rich.table import Table

from substrate_assets.cli.compare import FIGURE
from substrate_assets.cli.output import print_rows, progress_display, shown, wide_console
from substrate_assets.cli.warehouse_choice import chosen_warehouse, warehouse_said_unavailable
from substrate_assets.families import WAKE_ROWS
from substrate_assets.project import scripts_directory, store_directory
from substrate_assets.suites import KUBERNETES_SECTION_MISSING, MAX_REPEAT, Suite, SuiteError, get_suite, hold_problem
from substrate_assets.suites.sections import parse_run_time
from substrate_assets.workload import ScriptError, ScriptLibrary, ScriptNotFound

if TYPE_CHECKING:
    from substrate_assets.app.stopped import Stopped


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


def _print_trial(console: Console, result: Any, family: str) -> None:
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


def _why_incomplete(result: Any) -> str:
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


class _ManifestDumper(yaml.SafeDumper):
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


def _show_trial(console: Console, trial_id: str) -> None:
    """The trial's density-frontier and wake-latency rows, read back from the warehouse, one figure per line."""
    from substrate_assets.warehouse.query import query

    for table in ("density_frontiers", "wake_latency_distribution"):
        result = query(chosen_warehouse(), f"SELECT * FROM {table} WHERE trial_id = ?", [trial_id])
        if not result.rows:
            console.print(f"{table}: no row for {trial_id}", highlight=False)
            continue
        columns, row = result.columns[1:], result.rows[0][1:]
        values = dict(zip(columns, row, strict=True))
        if table == "wake_latency_distribution" and values.get("n_failed") == 0:
            # No wake failed: the successful wakes' twins (ok_*) repeat every figure.
            kept = [index for index, column in enumerate(columns) if not column.startswith("ok_")]
            columns, row = [columns[index] for index in kept], tuple(row[index] for index in kept)
        _print_one_row(console, f"{table} ({trial_id})", columns, row)
    _show_capacity(console, trial_id)


def _show_verdict(console: Console, candidate: str, figures: tuple[str, ...] = ()) -> None:
    """The trial or group ``candidate`` judged against its configuration's history, as trial_run's check judges a
    trial (``figures``, from ``--figure``, as the primary ones): the verdict line, the figures that regressed or that
    the data cannot judge, and what would settle them."""
    from substrate_assets.analysis.verdict_text import SHOWN_COLUMNS, settling_advice, shown_row, summary
    from substrate_assets.cli.compare import thresholds_of
    from substrate_assets.warehouse.compare_figures import FigureNotRecorded
    from substrate_assets.warehouse.compare_trials import judge_against_history, suite_of
    from substrate_assets.warehouse.connection import connect
    from substrate_assets.warehouse.sides import SideNotFound, select_side

    with connect(chosen_warehouse(), read_only=True) as connection:
        try:
            side = select_side(connection, candidate)
        except SideNotFound as error:
            console.print(f"verdict: none, {error}", style="yellow", highlight=False)
            return
        thresholds, source = thresholds_of(suite_of(connection, side), figures)
        try:
            comparison = judge_against_history(connection, side, thresholds)
        except FigureNotRecorded as error:
            console.print(f"verdict: none, {error}", style="yellow", highlight=False)
            return
    if comparison is None:
        console.print("verdict: none yet, no earlier trial of this suite and configuration to judge against",
                      highlight=False)
        return
    shown = [row for row in comparison.figures if row.verdict in ("regressed", "inconclusive")]
    if shown:
        print_rows(console, f"{candidate} against {comparison.baseline.label}", SHOWN_COLUMNS,
                   [tuple(shown_row(row)) for row in shown])
    console.print(f"verdict against {comparison.baseline.label}: {summary(comparison, source)}", highlight=False)
    for warning in comparison.warnings:
        console.print(f"note: {warning}", style="yellow", highlight=False)
    advice = settling_advice(comparison)
    if advice:
        console.print(f"to settle: {advice}", highlight=False)


def _print_one_row(console: Console, title: str, columns: list[str], row: tuple[Any, ...]) -> None:
    """One row as a column/value table: a mart's row is far wider than a terminal."""
    print_rows(console, title, ["column", "value"], [(column, shown(value, column))
                                                     for column, value in zip(columns, row, strict=True)])


LOAD_POINT_COLUMNS = ("step", "target_users", "users", "actors_per_node", "actors_per_vcpu", "actors_per_gb_ram",
                      "window_s", "wake_n", "wake_p50_ms", "wake_p90_ms", "wake_p99_ms", "wake_max_ms", "requests",
                      "failure_ratio")
CAPACITY_COLUMNS = ("slo_wake_p99_ms", "slo_failure_ratio", "capacity_step", "capacity_users",
                    "capacity_actors_per_node", "capacity_actors_per_vcpu", "capacity_actors_per_gb_ram",
                    "capacity_wake_p99_ms", "capacity_null_because", "knee_step", "knee_users", "knee_wake_p99_ms",
                    "knee_failure_ratio", "broken_by", "knee_null_because", "met_above_knee")


def _show_capacity(console: Console, trial_id: str) -> None:
    """A ladder trial's load points, and the capacity under its suite's SLO when it sets one."""
    from substrate_assets.warehouse.query import query

    points = query(chosen_warehouse(), f"SELECT {', '.join(LOAD_POINT_COLUMNS)} FROM load_points WHERE trial_id = ? "
                                     "ORDER BY step", [trial_id])
    capacity = query(chosen_warehouse(), f"SELECT {', '.join(CAPACITY_COLUMNS)} FROM slo_capacity WHERE trial_id = ?",
                     [trial_id])
    has_slo = bool(capacity.rows) and (capacity.rows[0][0] is not None or capacity.rows[0][1] is not None)
    if len(points.rows) > 1 or has_slo:
        print_rows(console, f"load_points ({trial_id})", list(points.columns), points.rows)
    if has_slo:
        _print_one_row(console, f"slo_capacity ({trial_id})", capacity.columns, capacity.rows[0])


def exit_stopped(stopped: Stopped) -> None:
    """One line for a command stopped by a signal, and the shell's exit code for it (128 + the signal's number)."""
    click.echo(f"stopped by {stopped.signal_name}; any run this command had started is marked failed or canceled "
               "and its pool slots are freed", err=True)
    sys.exit(stopped.exit_code)


def _show_group(console: Console, group: str, trial_ids: tuple[str, ...]) -> None:
    """Each trial of a group in one line: its wakes and their p50 and p99, and its failure ratio."""
    from substrate_assets.warehouse.query import query

    figures = query(chosen_warehouse(), """
        SELECT w.trial_id, w.n_wakes AS wake_n, w.gmean_ms, w.p50_ms, w.p99_ms, w.slow_share,
               d.aggregate_failure_ratio AS failure_ratio, m.foreign_cpu_share, m.disturbed
        FROM wake_latency_distribution AS w LEFT JOIN density_frontiers AS d USING (trial_id)
        LEFT JOIN trial_manifests AS m USING (trial_id)
        WHERE list_contains(?::VARCHAR[], w.trial_id) ORDER BY w.trial_id""", [list(trial_ids)])
    print_rows(console, f"group {group} ({len(trial_ids)} trials)", list(figures.columns), figures.rows)


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
    from substrate_assets.app.main_job import MachineTooBusy, MainJobError, run_suite
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
            try:
                outcome = run_suite(suite, RunStore(store_directory()), instance, say=click.echo, repeat=repeat,
                                    inject_wake_delay_ms=inject_wake_delay_ms, wait_at_most_s=wait_at_most_s,
                                    live=live)
            except MachineTooBusy as error:
                click.echo(str(error), err=True)
                sys.exit(4)
            except MainJobError as error:
                click.echo(str(error), err=True)
                sys.exit(1)
            console.print(f"trial {outcome.trial_id} materialized (runs {', '.join(outcome.runs)})",
                          highlight=False)
            with warehouse_said_unavailable():
                _show_trial(console, outcome.trial_id)
                if outcome.group is not None:
                    _show_group(console, outcome.group, outcome.trial_ids)
                    console.print(f"group {outcome.group}: {', '.join(outcome.trial_ids)}", highlight=False)
                _show_verdict(console, outcome.group or outcome.trial_id, figures)
            if outcome.insight is not None:
                console.print(outcome.insight.line(), highlight=False)
            _show_site(console)
            if outcome.loads:
                console.print(dead_time_line(instance, outcome.loads), highlight=False, soft_wrap=True)
        except Stopped as stopped:
            exit_stopped(stopped)


def dead_time_line(instance: Any, loads: Sequence[Any]) -> str:
    """Where this job's seconds went outside its trials' load, from its process's start until now; a line saying
    why not when its records do not tell (the job's own outcome and exit code stand either way)."""
    from substrate_assets.app.dead_time import measure_dead_time, process_started

    try:
        return measure_dead_time(instance, process_started(), loads, time.time()).line()
    except Exception as error:  # a figure about the job must never end it
        return f"dead time: not measured ({type(error).__name__}: {error})"


def _show_site(console: Console) -> None:
    """Where the benchmark site the job built again is: its landing page, to open."""
    from substrate_assets.project import site_directory

    index = site_directory() / "index.html"
    if index.is_file():
        console.print(f"benchmark site: {index} (substrate-bench site --serve serves it)", highlight=False)


@click.command("materialize")
@click.argument("trial_id")
def materialize_trial(trial_id: str) -> None:
    """Load an existing trial's files from the run store into the warehouse again (its raw tables, then the models);
    no new trial runs."""
    from substrate_assets.app.instance import project_instance
    from substrate_assets.app.main_job import MainJobError, reload_trial
    from substrate_assets.app.stopped import Stopped, stopping_on_signals
    from substrate_assets.results.layout import RunStore

    console = wide_console()
    with stopping_on_signals():
        try:
            try:
                outcome = reload_trial(trial_id, RunStore(store_directory()), project_instance(), say=click.echo)
            except FileNotFoundError as error:
                raise click.UsageError(str(error)) from None
            except MainJobError as error:
                click.echo(str(error), err=True)
                sys.exit(1)
            console.print(f"trial {trial_id} reloaded (run {outcome.runs[0]})", highlight=False)
            with warehouse_said_unavailable():
                _show_trial(console, trial_id)
                _show_verdict(console, trial_id)
        except Stopped as stopped:
            exit_stopped(stopped)
