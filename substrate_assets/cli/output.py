"""How the commands print: tables that do not fold in logs, and trial progress (a live bar on a terminal, a line
every 10 s elsewhere)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.table import Table

from substrate_assets.driver.progress import Progress, log_lines
from substrate_assets.report.figures import figure


def wide_console() -> Console:
    """Rich's 80 columns when output is not a terminal would fold every table; logs and pipes are wide."""
    console = Console()
    return console if console.is_terminal else Console(width=200)


def shown(value: Any, column: str) -> str:
    """A value as the tables show it: by the one rule of report/figures.py (a float rounded by what its column
    holds, null as a dash)."""
    return figure(value, column)


def print_rows(console: Console, title: str, columns: list[str], rows: list[tuple[Any, ...]],
               whole_cells: bool = False) -> None:
    """A table of ``rows``; ``whole_cells``: never fold a value inside its cell (a query's result), however wide the
    table gets: a table wider than the terminal is printed at its own width, its lines wrapped by the terminal."""
    if title:
        console.print(f"[bold]{title}[/bold]", highlight=False)
    table = Table()
    for column in columns:
        table.add_column(column, overflow="fold", no_wrap=whole_cells)
    for row in rows:
        table.add_row(*(shown(value, column) for value, column in zip(row, columns, strict=True)))
    if whole_cells:
        needed = console.measure(table, options=console.options.update_width(1 << 20)).maximum
        if needed > console.width:
            console = Console(width=needed, file=console.file, force_terminal=console.is_terminal,
                              color_system=console.color_system)  # type: ignore[arg-type]  # the name rich gave it
    console.print(table)


def progress_display(console: Console) -> tuple[contextlib.AbstractContextManager[Any], Callable[[Progress], None]]:
    """(the display to hold open while a trial runs, the handler its progress goes to)."""
    if not console.is_terminal:
        return contextlib.nullcontext(), log_lines(lambda line: console.print(line, highlight=False))
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.progress import Progress as Bar

    figures = TextColumn("users {task.fields[users]}  requests {task.fields[requests]}  "
                         "failures {task.fields[failures]}  running actors {task.fields[actors]}")
    bar = Bar(TextColumn("[bold]{task.fields[phase]:<10}"), BarColumn(), TimeElapsedColumn(), TextColumn("left"),
              TimeRemainingColumn(), figures, console=console, transient=False)
    task = bar.add_task("trial", total=None, phase="starting", users="-", requests="-", failures="-", actors="-")

    def update(progress: Progress) -> None:
        shown = {"users": progress.users, "requests": progress.requests, "failures": progress.failures,
                 "actors": progress.running_actors}
        fields: dict[str, Any] = {key: "-" if value is None else value for key, value in shown.items()}
        bar.update(task, total=progress.duration_s, completed=min(progress.elapsed_s, progress.duration_s),
                   phase=progress.phase, **fields)

    return bar, update


# A count printed as a line (off a terminal) at most this often: a long import says it is alive, a short one says
# nothing.
COUNT_LINE_EVERY_S = 10.0


def count_display(console: Console, what: str, clock: Callable[[], float] = time.monotonic
                  ) -> tuple[contextlib.AbstractContextManager[Any], Callable[[int, int], None]]:
    """(the display to hold open while ``what`` are worked through, the handler of ``(done, total)``): a bar with
    the counts on a terminal, elsewhere a line every ``COUNT_LINE_EVERY_S``."""
    if not console.is_terminal:
        last = [clock()]

        def line(done: int, total: int) -> None:
            if clock() - last[0] >= COUNT_LINE_EVERY_S and done < total:
                last[0] = clock()
                console.print(f"{done:,} of {total:,} {what}", highlight=False)

        return contextlib.nullcontext(), line
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.progress import Progress as Bar

    bar = Bar(TextColumn(what), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn(),
              console=console, transient=True)
    task = bar.add_task(what, total=None)

    def update(done: int, total: int) -> None:
        bar.update(task, total=total, completed=done)

    return bar, update
