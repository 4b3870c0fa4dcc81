"""The ``substrate-bench`` command: one module per command group, each imported only when its command runs (click's
lazily loaded subcommands). Heavy imports (Dagster, DuckDB, the runtime) happen inside the commands that need them,
so ``substrate-bench validate`` starts fast and ``import`` or ``sql`` never pay for ``run``'s suites and charts."""

from __future__ import annotations

import importlib

import click

from substrate_assets.processes.quick_exit import exit_now

# Each command's name and where it is defined.
COMMANDS = {
    "validate": "substrate_assets.cli.scripts:validate",
    "trial": "substrate_assets.cli.trials:trial",
    "run": "substrate_assets.cli.trials:run",
    "ab": "substrate_assets.cli.ab:ab",
    "materialize": "substrate_assets.cli.trials:materialize_trial",
    "import": "substrate_assets.cli.warehouse:import_command",
    "rebuild": "substrate_assets.cli.warehouse:rebuild",
    "sql": "substrate_assets.cli.warehouse:sql",
    "compare": "substrate_assets.cli.compare:compare_command",
    "report": "substrate_assets.cli.report:report",
    "site": "substrate_assets.cli.site:site",
    "telemetry": "substrate_assets.cli.telemetry:telemetry",
    "runtime": "substrate_assets.cli.runtime:runtime",
    "ui": "substrate_assets.cli.ui:ui",
}


class LazyGroup(click.Group):
    """A group whose commands are imported when named (``COMMANDS``), not when the group is."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*COMMANDS, *super().list_commands(ctx)})

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return super().get_command(ctx, cmd_name)
        module, name = where.split(":")
        command = getattr(importlib.import_module(module), name)
        if not isinstance(command, click.Command) or command.name != cmd_name:
            raise RuntimeError(f"{where} is not the command {cmd_name}")
        return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Benchmark Agent Substrate: density frontiers and wake-latency distributions."""


def entry() -> None:
    """The ``substrate-bench`` command: :func:`main`, the process ended once its command has (without the
    interpreter's teardown of a second; ``processes/quick_exit``)."""
    try:
        main()
    except SystemExit as ended:
        exit_now(ended.code)
        raise
