"""The ``substrate-bench`` command: one module per command group. Heavy imports (Dagster, DuckDB, the runtime)
happen inside the commands that need them, so ``substrate-bench validate`` starts fast."""

import click

from substrate_assets.cli.ab import ab
from substrate_assets.cli.compare import compare_command
from substrate_assets.cli.report import report
from substrate_assets.cli.runtime import runtime
from substrate_assets.cli.scripts import validate
from substrate_assets.cli.site import site
from substrate_assets.cli.telemetry import telemetry
from substrate_assets.cli.trials import materialize_trial, run, trial
from substrate_assets.cli.ui import ui
from substrate_assets.cli.warehouse import import_command, rebuild, sql


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """Benchmark Agent Substrate: density frontiers and wake-latency distributions."""


for command in (validate, trial, run, ab, materialize_trial, import_command, rebuild, sql, compare_command, report,
                site, telemetry, runtime, ui):
    main.add_command(command)
