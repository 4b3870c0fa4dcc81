"""``substrate-bench telemetry``: the server-telemetry harvest of any run, from its Prometheus."""

from __future__ import annotations

from pathlib import Path

import click

from substrate_assets.results.server_summary import DEFAULT_ATELET_LAG_S
from substrate_assets.results.trial_directory import SERVER_SUMMARY_JSON, STATS_HISTORY_CSV


@click.command()
@click.option("--prometheus-url", required=True, help="Prometheus base URL, e.g. http://127.0.0.1:9090.")
@click.option("--start", "start_ts", type=int, required=True, help="Run start, Unix seconds.")
@click.option("--end", "end_ts", type=int, required=True, help="Run end, Unix seconds.")
@click.option("--stats-history", type=click.Path(dir_okay=False, path_type=Path), required=True,
              help=f"The run's {STATS_HISTORY_CSV} (its user counts give the steady-state window).")
@click.option("--lag-s", type=click.IntRange(min=0), default=DEFAULT_ATELET_LAG_S, show_default=True,
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
    from substrate_assets.results.stats_jsonl import data_timestamp
    from substrate_assets.telemetry.prometheus import harvest_server_summary
    from substrate_assets.telemetry.window import window_from_history

    steady = window_from_history(stats_history, start_ts, end_ts)
    if steady.whole_run_because is not None:
        click.echo(f"warning: the steady window is the whole run, because {steady.whole_run_because}", err=True)
    summary = harvest_server_summary(
        prometheus_url, start_ts=start_ts, end_ts=end_ts, steady=steady.span, lag_s=lag_s, test_name=test_name, tag=tag,
        data_timestamp=data_timestamp(datetime.fromtimestamp(start_ts, UTC)))
    if out is not None:
        write_json(out, summary)
    click.echo(json.dumps(flatten(summary), indent=1))
