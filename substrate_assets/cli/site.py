"""``substrate-bench site``: the benchmark site built from the warehouse, and served on 127.0.0.1 if asked."""

from __future__ import annotations

import signal
import threading
from pathlib import Path

import click

from substrate_assets.cli.warehouse_choice import WAREHOUSE_OPTION, existing_warehouse


def build(directory: Path, warehouse_setting: str | None) -> str:
    """Build the site into ``directory``; a line saying what was built. ClickException on what a person can fix."""
    from substrate_assets.report.pages import NotInWarehouse
    from substrate_assets.report.site import NotASite, build_site
    from substrate_assets.suites import SuiteError, compare_thresholds, load_suites
    from substrate_assets.warehouse.connection import connect
    from substrate_assets.warehouse.lake import WarehouseUnavailable

    try:
        suites = load_suites()
    except SuiteError as error:
        raise click.ClickException(f"suites.yaml does not read, so the suites' thresholds are unknown: {error}") \
            from None
    warehouse = existing_warehouse(warehouse_setting)
    try:
        with connect(warehouse, read_only=True) as connection:
            built = build_site(connection, directory, lambda suite: compare_thresholds(suite, suites),
                               warehouse=str(warehouse))
    except (WarehouseUnavailable, NotInWarehouse, NotASite) as error:
        raise click.ClickException(str(error)) from None
    except OSError as error:  # the directory cannot be written or replaced: say which, and why
        raise click.ClickException(f"the site cannot be written to {directory}: {error.strerror or error}") \
            from None
    return (f"built {built.pages} pages ({built.suites} suites, {built.trials} trials, {built.comparisons} "
            f"comparisons) in {built.seconds:.1f} s: {built.index}")


@click.command()
@click.option("-o", "--output", type=click.Path(file_okay=False, path_type=Path),
              help="The site's directory [default: $SUBSTRATE_BENCH_SITE, else site/ in the project]; a directory "
              "that is not a site built here is never replaced.")
@click.option("--serve", is_flag=True, help="Then serve it on 127.0.0.1 until Ctrl-C (the pages also open as "
              "files, offline).")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True,
              help="The port --serve listens on (0: any free one).")
@WAREHOUSE_OPTION
def site(output: Path | None, serve: bool, port: int, warehouse_setting: str | None) -> None:
    """Build the benchmark site from the warehouse: a landing page of each suite and configuration's latest verdict,
    each suite's primary figures through time (noise bands, change points, groups, disturbed trials marked), a page
    per trial and per latest comparison. Static files that fetch nothing; print the landing page's path. Reads the
    warehouse read-only."""
    from substrate_assets.project import site_directory

    directory = (output or site_directory()).absolute()
    click.echo(build(directory, warehouse_setting))
    if not serve:
        return
    from substrate_assets.report.site_server import SiteServer

    try:
        server = SiteServer(directory, port)
    except OSError as error:
        raise click.ClickException(f"127.0.0.1:{port} cannot be listened on ({error.strerror}): --port takes "
                                   "another") from None
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, lambda *_: stop.set())
    with server:
        click.echo(f"serving the site on {server.url} ; Ctrl-C stops it")
        stop.wait()
    click.echo("stopped serving the site")
