"""``substrate-bench validate``: workload scripts checked, summarised, and every problem located."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.console import Console
from rich.table import Table

from substrate_assets.project import scripts_directory
from substrate_assets.workload import ScriptError, ScriptFile, ScriptLibrary, load_script_file, summarize
from substrate_assets.workload.duration import format_duration
from substrate_assets.workload.library import SCRIPT_SUFFIXES, display_path
from substrate_assets.workload.summary import describe_op


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


@click.command()
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
