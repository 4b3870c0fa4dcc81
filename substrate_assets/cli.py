"""The ``substrate-bench`` command."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any

import click
import yaml
from rich.console import Console
from rich.table import Table

from substrate_assets.project import scripts_directory
from substrate_assets.results.trial_directory import SERVER_SUMMARY_JSON, STATS_HISTORY_CSV
from substrate_assets.workload import ScriptError, ScriptFile, ScriptLibrary, load_script_file, summarize
from substrate_assets.workload.duration import format_duration
from substrate_assets.workload.library import SCRIPT_SUFFIXES, display_path
from substrate_assets.workload.summary import describe_op


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Benchmark Agent Substrate: density frontiers and wake-latency distributions."""


def _script_paths(paths: tuple[Path, ...], library: ScriptLibrary) -> list[Path]:
    if not paths:
        found = library.paths()
        if not found:
            raise click.UsageError(f"no scripts (*.yaml) in {display_path(library.directory)}")
        return found
    selected: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.iterdir() if p.suffix in SCRIPT_SUFFIXES and p.is_file())
            if not inside:
                raise click.UsageError(f"no scripts (*.yaml) in {display_path(path)}")
            selected.extend(inside)
        else:
            selected.append(path)
    return selected


def _summary_table(loaded: ScriptFile) -> Table:
    summary = summarize(loaded.script, loaded.sha256)
    table = Table(title=f"{summary.name}  [dim]{display_path(loaded.path)}[/dim]", title_justify="left",
                  show_header=False, box=None, padding=(0, 2))
    table.add_column("figure", style="bold")
    table.add_column("value")
    table.add_row("steps", str(summary.steps))
    table.add_row("ops", f"{summary.ops}  [dim]"
                  + ", ".join(f"{kind} {count}" for kind, count in summary.ops_by_kind.items()) + "[/dim]")
    table.add_row("think per lap", summary.think_per_lap)
    table.add_row("declared RAM", summary.declared_ram)
    table.add_row("declared disk", summary.declared_disk)
    table.add_row("floor (min_actor_memory)", summary.floor)
    table.add_row("sha256", summary.sha256_prefix or "")
    return table


def _step_table(loaded: ScriptFile) -> Table:
    table = Table(title=f"{loaded.script.name} steps", title_justify="left")
    for column in ("#", "step", "think", "ops"):
        table.add_column(column)
    for number, step in enumerate(loaded.script.steps, start=1):
        table.add_row(str(number), step.name, format_duration(step.think_ns),
                      "; ".join(describe_op(op) for op in step.ops))
    return table


@main.command()
@click.argument("paths", nargs=-1, type=click.Path(exists=True, path_type=Path))
@click.option("--steps", "show_steps", is_flag=True, help="Also print each script's step table.")
def validate(paths: tuple[Path, ...], show_steps: bool) -> None:
    """Validate workload scripts (default: every file in scripts/) and print their summaries.

    Exit status 0 when every script is valid, 1 when any is not (one
    path:line:col: line per problem on stderr), 2 on usage errors.
    """
    library = ScriptLibrary(scripts_directory())
    console = Console()
    failed = False
    for path in _script_paths(paths, library):
        expected = path.stem if library.contains(path) else None
        try:
            loaded = load_script_file(path, expected_name=expected)
        except ScriptError as error:
            failed = True
            for problem in error.problems:
                click.echo(str(problem), err=True)
            continue
        console.print(_summary_table(loaded))
        if show_steps:
            console.print(_step_table(loaded))
        console.print()
    sys.exit(1 if failed else 0)


def _progress_printer(console: Console) -> tuple[Any, Any]:
    """A live progress bar on a terminal; a plain line every 10 s elsewhere (CI logs, Dagster)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    if console.is_terminal:
        bar = Progress(TextColumn("[bold]{task.fields[phase]:<10}"), BarColumn(), TimeElapsedColumn(),
                       TextColumn("left"), TimeRemainingColumn(),
                       TextColumn("users {task.fields[users]}  requests {task.fields[requests]}  "
                                  "failures {task.fields[failures]}  running actors {task.fields[actors]}"),
                       console=console, transient=False)
        task = bar.add_task("trial", total=None, phase="starting", users="-", requests="-", failures="-", actors="-")

        def update(progress: Any) -> None:
            show = {"users": progress.users, "requests": progress.requests, "failures": progress.failures,
                    "actors": progress.running_actors}
            bar.update(task, total=progress.duration_s, completed=min(progress.elapsed_s, progress.duration_s),
                       phase=progress.phase, **{k: "-" if v is None else v for k, v in show.items()})

        return bar, update
    last = [0.0]

    def log_line(progress: Any) -> None:
        if progress.phase != "running" or progress.elapsed_s - last[0] >= 10:
            last[0] = progress.elapsed_s
            remaining = max(progress.duration_s - progress.elapsed_s, 0)
            console.print(f"{progress.phase}: {progress.elapsed_s:.0f}s elapsed, {remaining:.0f}s left, users "
                          f"{progress.users}, requests {progress.requests}, failures {progress.failures}, running "
                          f"actors {progress.running_actors}", highlight=False)

    return contextlib.nullcontext(), log_line


def _print_trial(console: Console, result: Any) -> None:
    summary = result.summary
    console.print(f"trial {result.trial_id}: {result.trial_dir}", highlight=False)
    table = Table(show_header=False, box=None, padding=(0, 2))
    table.add_column("figure", style="bold")
    table.add_column("value")

    def ms(value: float | None) -> str:
        return "null" if value is None else f"{value:.1f} ms"

    table.add_row("completed", "yes" if result.completed else f"no (locust exit code {result.locust_exit_code})")
    table.add_row("WakeFirstTouch", f"n={summary.wake_n}  p50 {ms(summary.wake_p50_ms)}  p95 "
                  f"{ms(summary.wake_p95_ms)}  p99 {ms(summary.wake_p99_ms)}")
    table.add_row("steps completed", str(summary.steps_completed))
    table.add_row("failures", f"{summary.failures} of {summary.requests} requests")
    table.add_row("sessions", str(summary.sessions))
    console.print(table)


def _trial_suite(suite_name: str, changes: dict[str, Any], backend: str | None,
                 cluster: dict[str, Any]) -> Any:
    """The suite with the command line's overrides, or a UsageError saying what is wrong."""
    from pydantic import ValidationError

    from substrate_assets.suites import SuiteError, get_suite

    try:
        suite = get_suite(suite_name)
        if backend is not None:
            changes["backend"] = backend
        given = {name: value for name, value in cluster.items() if value is not None}
        if given:
            changes["kubernetes"] = {**(suite.kubernetes.model_dump() if suite.kubernetes else {}), **given}
        return suite.with_overrides(**changes)
    except SuiteError as error:
        raise click.UsageError(str(error)) from None
    except ValidationError as error:
        reasons = "; ".join(": ".join([*map(str, e["loc"]), e["msg"].removeprefix("Value error, ")])
                            for e in error.errors())
        if suite.kubernetes is None and not given:
            reasons += "; add one to the suite in suites.yaml or pass --image and --object-store"
        raise click.UsageError(f"suite {suite_name!r}: {reasons}") from None


def _print_manifests(suite: Any) -> None:
    """The objects a kubernetes trial of ``suite`` would submit, as a multi-document YAML stream."""
    from substrate_assets.driver.kubernetes_pods import trial_manifests
    from substrate_assets.project import store_directory
    from substrate_assets.results.layout import RunStore

    try:
        script = ScriptLibrary(scripts_directory()).load(suite.script)
    except ScriptError as error:
        for problem in error.problems:
            click.echo(str(problem), err=True)
        sys.exit(1)
    key = RunStore(store_directory()).propose_key(suite.name, suite.tag)
    click.echo(f"# trial {key.trial_id}: what `substrate-bench run {suite.name}` would submit to namespace "
               f"{suite.kubernetes.namespace} (the driver pod through Dagster's PipesK8sClient)")
    click.echo(yaml.dump_all(trial_manifests(suite, key.trial_id, script.text), Dumper=_ManifestDumper,
                             sort_keys=False), nl=False)


class _ManifestDumper(yaml.SafeDumper):
    """Writes multi-line strings (the script in its ConfigMap) as literal blocks, readable as the file itself."""


def _represent_text(dumper: yaml.SafeDumper, text: str) -> yaml.Node:
    style = "|" if "\n" in text else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", text, style=style)


_ManifestDumper.add_representer(str, _represent_text)


@main.command()
@click.argument("suite_name", metavar="SUITE")
@click.option("--store", type=click.Path(file_okay=False, path_type=Path), help="Run store (default: ./store).")
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
def trial(suite_name: str, store: Path | None, users: int | None, spawn_rate: float | None, duration: str | None,
          think_scale: float | None, lifecycle_mode: str | None, resume_mode: str | None,
          actor_memory: str | None, backend: str | None, dry_run: bool, image: str | None, object_store: str | None,
          namespace: str | None, locust_workers: int | None) -> None:
    """Run one trial of SUITE on the local backend and print its trial directory and summary.

    Trials on the kubernetes backend run through Dagster (`substrate-bench run SUITE` or the UI);
    with --dry-run this command prints the objects such a trial would submit.
    """
    from substrate_assets.driver.trial import run_local_trial
    from substrate_assets.project import store_directory
    from substrate_assets.results.layout import RunStore

    suite = _trial_suite(suite_name, {"users": users, "spawn_rate": spawn_rate, "duration": duration,
                                      "think_scale": think_scale, "lifecycle_mode": lifecycle_mode,
                                      "resume_mode": resume_mode, "actor_memory": actor_memory}, backend,
                         {"image": image, "store": object_store, "namespace": namespace,
                          "locust_workers": locust_workers})
    if suite.backend == "kubernetes":
        if not dry_run:
            raise click.UsageError(f"suite {suite.name!r} runs on the kubernetes backend, whose driver pod Dagster "
                                   f"launches: use `substrate-bench run {suite.name}` or the UI "
                                   "(--dry-run prints what would be submitted)")
        _print_manifests(suite)
        return
    if dry_run:
        raise click.UsageError("--dry-run prints a kubernetes trial's pods; add --backend kubernetes")
    console = Console()
    display, update = _progress_printer(console)
    try:
        with display:
            result = run_local_trial(suite, RunStore(store or store_directory()),
                                     ScriptLibrary(scripts_directory()), on_progress=update)
    except ScriptError as error:
        for problem in error.problems:
            click.echo(str(problem), err=True)
        sys.exit(1)
    _print_trial(console, result)
    sys.exit(0 if result.completed else 1)


def _instance() -> Any:
    """The project's persistent Dagster instance (DAGSTER_HOME inside the project unless set)."""
    import os

    from substrate_assets.project import dagster_home

    os.environ["DAGSTER_HOME"] = str(dagster_home())
    import dagster as dg

    return dg.DagsterInstance.get()


def _print_rows(console: Console, title: str, columns: list[str], rows: list[tuple[Any, ...]]) -> None:
    if title:
        console.print(f"[bold]{title}[/bold]", highlight=False)
    table = Table()
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("null" if value is None else f"{value:.4g}" if isinstance(value, float) else str(value)
                        for value in row))
    console.print(table)


def _wide_console() -> Console:
    """Rich's 80 columns when output is not a terminal would fold every table; logs and pipes are wide."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


def _show_trial(console: Console, trial_id: str) -> None:
    """The trial's density-frontier and wake-latency rows, read back from the warehouse, one figure per line."""
    from substrate_assets.project import warehouse_path
    from substrate_assets.warehouse.query import query

    for table in ("density_frontiers", "wake_latency_distribution"):
        result = query(warehouse_path(), f"SELECT * FROM {table} WHERE trial_id = ?", [trial_id])
        if not result.rows:
            console.print(f"{table}: no row for {trial_id}", highlight=False)
            continue
        rows = [(column, value) for column, value in zip(result.columns, result.rows[0], strict=True)]
        _print_rows(console, f"{table} ({trial_id})", ["column", "value"], rows[1:])


@main.command()
@click.argument("suite_name", metavar="SUITE", default="quick-smoke")
def run(suite_name: str) -> None:
    """The main job: run a trial of SUITE through the asset graph and print its frontier and wake latency.

    Registers a trial partition in the project's Dagster instance, materializes workload_script,
    trial_run, the raw tables and the models, then reads the trial's rows back from DuckDB.
    """
    from substrate_assets.defs.main_job import MainJobError, run_suite
    from substrate_assets.defs.resources import RunStoreResource
    from substrate_assets.suites import SuiteError, get_suite

    try:
        suite = get_suite(suite_name)
    except SuiteError as error:
        raise click.UsageError(str(error)) from None
    console = _wide_console()
    instance = _instance()
    console.print(f"main job: suite {suite.name} (script {suite.script}, {suite.users} users, {suite.duration}) "
                  f"on Dagster instance {instance.root_directory}", highlight=False)
    try:
        outcome = run_suite(suite, RunStoreResource().store(), instance)
    except MainJobError as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    console.print(f"trial {outcome.trial_id} materialized (runs {', '.join(outcome.runs)})", highlight=False)
    _show_trial(console, outcome.trial_id)


@main.command("materialize")
@click.argument("trial_id")
def materialize_trial(trial_id: str) -> None:
    """Load an existing trial from the run store again (raw tables, then models), without running load."""
    from substrate_assets.defs.main_job import MainJobError, reload_trial
    from substrate_assets.defs.resources import RunStoreResource

    console = _wide_console()
    try:
        outcome = reload_trial(trial_id, RunStoreResource().store(), _instance())
    except FileNotFoundError as error:
        raise click.UsageError(str(error)) from None
    except MainJobError as error:
        click.echo(str(error), err=True)
        sys.exit(1)
    console.print(f"trial {trial_id} reloaded (run {outcome.runs[0]})", highlight=False)
    _show_trial(console, trial_id)


@main.command("import")
@click.argument("root")
def import_command(root: str) -> None:
    """Import every upstream run under ROOT (runs/<name>/run_date=…/run_ts=…/run_tag=…/; a directory or a
    gs://, s3:// or other fsspec URL) as trials: copied unchanged into the run store, then loaded."""
    from substrate_assets.defs.main_job import import_upstream
    from substrate_assets.defs.resources import RunStoreResource
    from substrate_assets.project import warehouse_path

    outcome = import_upstream(root, RunStoreResource().store(), warehouse_path(), _instance())
    console = _wide_console()
    if not outcome.runs:
        raise click.ClickException(f"no upstream runs under {root} (expected runs/<name>/run_date=…/run_ts=…/"
                                   "run_tag=…/)")
    _print_rows(console, f"imported {len(outcome.runs)} runs", ["trial_id", "copied", "source"],
                [(run.trial_id, "yes" if run.copied else "already in the store", run.source)
                 for run in outcome.runs])
    console.print(f"loaded raw rows {outcome.raw_rows}; rebuilt {', '.join(outcome.models)}", highlight=False)


@main.command()
def rebuild() -> None:
    """Recreate the warehouse from the run store (every trial, then every model)."""
    from substrate_assets.project import store_directory, warehouse_path
    from substrate_assets.results.layout import RunStore
    from substrate_assets.warehouse.models import models_directory
    from substrate_assets.warehouse.rebuild import rebuild as rebuild_warehouse

    result = rebuild_warehouse(RunStore(store_directory()), warehouse_path(), models_directory())
    console = _wide_console()
    console.print(f"rebuilt {warehouse_path()} from {result.trials} trials in {result.seconds:.2f}s", highlight=False)
    _print_rows(console, "tables", ["table", "rows"],
                [*result.raw_rows.items(), *((table.name, table.rows) for table in result.models)])
    failed = [outcome for outcome in result.tests if not outcome.passed]
    for outcome in failed:
        click.echo(f"test {outcome.test.model}.{outcome.test.name} failed: {outcome.violations} rows", err=True)
    sys.exit(1 if failed else 0)


@main.command()
@click.argument("statement")
@click.option("--format", "output", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
def sql(statement: str, output: str) -> None:
    """Run read-only SQL on the warehouse, e.g. "select trial_id, p50_ms, p99_ms from wake_latency_distribution"."""
    import csv
    import json

    import duckdb

    from substrate_assets.project import warehouse_path
    from substrate_assets.warehouse.query import WarehouseBusy, query

    try:
        result = query(warehouse_path(), statement)
    except (FileNotFoundError, WarehouseBusy) as error:
        raise click.ClickException(str(error)) from None
    except duckdb.Error as error:
        raise click.ClickException(f"SQL error: {error}") from None
    if output == "csv":
        writer = csv.writer(sys.stdout, lineterminator="\n")
        writer.writerow(result.columns)
        writer.writerows(result.rows)
    elif output == "json":
        click.echo(json.dumps([dict(zip(result.columns, row, strict=True)) for row in result.rows], default=str,
                              indent=1))
    else:
        _print_rows(_wide_console(), "", result.columns, result.rows)


@main.command()
@click.option("--port", type=int, default=3000, show_default=True)
def ui(port: int) -> None:
    """The Dagster UI (and daemon: sensors, automation) on 127.0.0.1, on the project's instance."""
    import os
    import shutil

    from substrate_assets.project import dagster_home, project_root

    dagster = shutil.which("dagster", path=os.path.dirname(sys.executable)) or "dagster"
    env = {**os.environ, "DAGSTER_HOME": str(dagster_home())}
    click.echo(f"Dagster UI on http://127.0.0.1:{port} (DAGSTER_HOME={env['DAGSTER_HOME']}); Ctrl-C stops it")
    os.chdir(project_root())
    os.execve(dagster, [dagster, "dev", "-w", "workspace.yaml", "-h", "127.0.0.1", "-p", str(port)], env)


@main.command()
@click.option("--prometheus-url", required=True, help="Prometheus base URL, e.g. http://127.0.0.1:9090.")
@click.option("--start", "start_ts", type=int, required=True, help="Run start, Unix seconds.")
@click.option("--end", "end_ts", type=int, required=True, help="Run end, Unix seconds.")
@click.option("--stats-history", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help=f"The run's {STATS_HISTORY_CSV} (its user counts give the steady-state window).")
@click.option("--lag-s", type=click.IntRange(min=0), default=70, show_default=True,
              help="atelet export lag: snapshot reads are taken lag/2 late; waits until end + lag.")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), help=f"Also write {SERVER_SUMMARY_JSON} here.")
@click.option("--test-name", default="", help="metadata.test_name")
@click.option("--tag", default="", help="metadata.tag")
def telemetry(prometheus_url: str, start_ts: int, end_ts: int, stats_history: Path, lag_s: int, out: Path | None,
              test_name: str, tag: str) -> None:
    """Harvest server telemetry from Prometheus for one run; print the 45-key server_summary row as JSON."""
    import json
    from datetime import UTC, datetime

    from substrate_assets.results.atomic import write_json
    from substrate_assets.results.server_summary import flatten
    from substrate_assets.telemetry.prometheus import harvest_server_summary
    from substrate_assets.telemetry.window import window_from_history

    steady = window_from_history(stats_history, start_ts, end_ts)
    summary = harvest_server_summary(
        prometheus_url, start_ts=start_ts, end_ts=end_ts, steady=steady, lag_s=lag_s, test_name=test_name, tag=tag,
        data_timestamp=datetime.fromtimestamp(start_ts, UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    if out is not None:
        write_json(out, summary)
    click.echo(json.dumps(flatten(summary), indent=1))


@main.command()
@click.option("--control-port", type=int, default=0, show_default=True, help="gRPC Control API port (0: any free).")
@click.option("--router-port", type=int, default=0, show_default=True, help="HTTP router port (0: any free).")
@click.option("--metrics-port", type=int, default=0, show_default=True, help="Prometheus /metrics port (0: any free).")
@click.option("--state-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Snapshots and host logs (default: a temporary directory).")
@click.option("--workers", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--actors-per-worker", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--actor-memory", default="1Gi", show_default=True,
              help="Memory limit of the benchmark-workloads/glutton template (RAM plus files).")
@click.option("--warm-hosts", type=click.IntRange(min=0), default=2, show_default=True,
              help="Actor host processes kept started, so a wake skips the Python start.")
@click.option("--keep-state", is_flag=True, help="Keep the state directory when stopping.")
@click.option("--no-fsync", is_flag=True, help="Do not fsync snapshots (faster, not durable).")
def runtime(control_port: int, router_port: int, metrics_port: int, state_dir: Path | None, workers: int,
            actors_per_worker: int, actor_memory: str, warm_hosts: int, keep_state: bool, no_fsync: bool) -> None:
    """Run the embedded actor runtime in the foreground until Ctrl-C or SIGTERM.

    Prints the control, router and metrics addresses; every server binds 127.0.0.1. Stopping kills
    every actor process and removes the state directory unless --keep-state.
    """
    from pydantic import ValidationError

    from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig

    try:
        config = RuntimeConfig(control_port=control_port, router_port=router_port, metrics_port=metrics_port,
                               state_dir=state_dir, workers=workers, actors_per_worker=actors_per_worker,
                               actor_memory=actor_memory, warm_hosts=warm_hosts, keep_state=keep_state,
                               snapshot_fsync=not no_fsync)
    except ValidationError as error:
        raise click.BadParameter(error.errors()[0]["msg"]) from None
    try:
        EmbeddedRuntime(config).run_until_signalled()
    except OSError as error:
        raise click.ClickException(f"cannot start the runtime: {error}") from None


if __name__ == "__main__":  # pragma: no cover
    main()
