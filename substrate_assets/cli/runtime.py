"""``substrate-bench runtime``: the embedded actor runtime in the foreground."""

from __future__ import annotations

from pathlib import Path

import click


@click.command()
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
