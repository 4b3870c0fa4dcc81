"""``substrate-bench ui``: the Dagster UI and daemon on 127.0.0.1, on the project's instance."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING

import click

from substrate_assets.project import UI_PORT

if TYPE_CHECKING:
    from substrate_assets.report.site_server import SiteServer


def _site_server(port: int, say: Callable[[str], None]) -> SiteServer:
    """The benchmark site served on ``port``, or on a free port when that one is taken (saying so)."""
    from substrate_assets.project import site_directory
    from substrate_assets.report.site_server import SiteServer

    try:
        return SiteServer(site_directory(), port)
    except OSError as error:
        server = SiteServer(site_directory(), 0)
        say(f"127.0.0.1:{port} is taken ({error.strerror}): the benchmark site is served on port {server.port}")
        return server


@click.command()
@click.option("--port", type=int, default=UI_PORT, show_default=True)
@click.option("--site-port", type=click.IntRange(0, 65535), default=None,
              help="Where the benchmark site is served beside the UI [default: --port + 1].")
def ui(port: int, site_port: int | None) -> None:
    """The Dagster UI (and daemon: sensors, automation) on 127.0.0.1, on the project's instance, and the benchmark
    site (substrate-bench site) beside it, which the benchmark_site asset links to. Ctrl-C, SIGTERM or SIGHUP stops
    it with every process it started, from a terminal or from a script. Only requests addressed to 127.0.0.1 or
    localhost are answered (a web page cannot reach it by rebinding its own name)."""
    from substrate_assets.app.dagster_ui import run_ui, ui_command
    from substrate_assets.processes.host_guard import HostGuard, free_port, listening_socket
    from substrate_assets.project import DAGSTER_HOME_ENV, SITE_URL_ENV, dagster_home, project_root

    dagster = shutil.which("dagster", path=os.path.dirname(sys.executable)) or "dagster"
    env = {**os.environ, DAGSTER_HOME_ENV: str(dagster_home())}
    try:
        listening = listening_socket(port)
    except OSError as error:
        raise click.ClickException(f"127.0.0.1:{port} cannot be listened on ({error.strerror}): --port takes "
                                   "another") from None
    def say(line: str) -> None:
        click.echo(line, err=True)

    # Dagster's webserver answers any Host: it listens on a port of its own, behind the guard on the one people use.
    webserver_port = free_port()
    guard = HostGuard(listening, webserver_port,
                      on_refused=lambda host: say(f"refused a request addressed to {host!r}, not to this machine"))
    site = _site_server(port + 1 if site_port is None else site_port, say)
    env[SITE_URL_ENV] = site.url
    click.echo(f"Dagster UI on http://127.0.0.1:{port} ({DAGSTER_HOME_ENV}={env[DAGSTER_HOME_ENV]}); Ctrl-C stops it")
    click.echo(f"benchmark site on {site.url} (built after each load of the warehouse)")
    guard.start()
    site.start()
    try:
        code = run_ui(ui_command(dagster, webserver_port), str(project_root()), env, say)
    finally:
        site.stop()
        guard.stop()
    sys.exit(code)
