"""``substrate-bench ui``: the Dagster UI and daemon on 127.0.0.1, on the project's instance."""

from __future__ import annotations

import os
import shutil
import sys

import click


@click.command()
@click.option("--port", type=int, default=3000, show_default=True)
def ui(port: int) -> None:
    """The Dagster UI (and daemon: sensors, automation) on 127.0.0.1, on the project's instance. Ctrl-C, SIGTERM or
    SIGHUP stops it with every process it started, from a terminal or from a script."""
    from substrate_assets.app.dagster_ui import run_ui, ui_command
    from substrate_assets.project import DAGSTER_HOME_ENV, dagster_home, project_root

    dagster = shutil.which("dagster", path=os.path.dirname(sys.executable)) or "dagster"
    env = {**os.environ, DAGSTER_HOME_ENV: str(dagster_home())}
    click.echo(f"Dagster UI on http://127.0.0.1:{port} ({DAGSTER_HOME_ENV}={env[DAGSTER_HOME_ENV]}); Ctrl-C stops it")
    sys.exit(run_ui(ui_command(dagster, port), str(project_root()), env, lambda line: click.echo(line, err=True)))
