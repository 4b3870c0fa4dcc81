"""Server telemetry of a local trial, from the runtime's exact events and the samples the trial took.

The same ``server_summary`` structure a Prometheus harvest produces, computed
without Prometheus: packing from the per-second worker-state samples, node PSI
from ``/proc/pressure`` counters, snapshot sizes and checkpoint/restore
latencies from the exact event log (no histogram buckets), all inside the
reference's steady-state window. Pod PSI is null: no pods here. With no
export lag, ``atelet_lag_s`` is 0.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from substrate_assets.analysis.statistics import percentile_stats
from substrate_assets.results.runtime_samples import psi_total_column
from substrate_assets.results.server_summary import PSI_RESOURCES, summary_metadata, unmeasured_psi
from substrate_assets.telemetry.packing import packing_block

MiB = 1 << 20


def _in_window(frame: pl.DataFrame, column: str, start: float, end: float) -> pl.DataFrame:
    return frame.filter((pl.col(column) >= start) & (pl.col(column) <= end))


def packing(samples: pl.DataFrame, steady: tuple[int, int]) -> dict[str, Any]:
    """From the per-second worker-state samples (a sample missing a state is skipped)."""
    points = []
    for ts, idle, partial, at_capacity in samples.sort("ts").select(
            "ts", "idle_workers", "partial_workers", "at_capacity_workers").iter_rows():
        if None not in (idle, partial, at_capacity):
            points.append((ts, partial + at_capacity, idle + partial + at_capacity))
    return packing_block(points, steady, timestamp_digits=3)


def node_psi(samples: pl.DataFrame, steady: tuple[int, int]) -> dict[str, Any]:
    """Stall percentages per sample interval: Δ(stalled µs) / Δ(wall µs) × 100, PSI "some"."""
    ordered = samples.sort("ts")
    result: dict[str, Any] = {}
    measured = False
    for key, resource in PSI_RESOURCES:
        column = psi_total_column(resource)
        rates = []
        previous: tuple[float, int] | None = None
        for ts, total in ordered.select("ts", column).iter_rows():
            if total is None:
                previous = None
                continue
            if previous is not None and ts > previous[0] and steady[0] <= ts <= steady[1]:
                stalled = total - previous[1]
                if stalled >= 0:  # a counter that went backwards is not a rate
                    rates.append(stalled / ((ts - previous[0]) * 1e6) * 100)
            previous = (ts, total)
        measured = measured or bool(rates)
        result[f"{key}_stall_pct"] = percentile_stats(rates)
    result["nodes"] = 1 if measured else None
    return result


def snapshots(events: pl.DataFrame, steady: tuple[int, int]) -> dict[str, Any]:
    checkpoints_all = events.filter(pl.col("kind") == "checkpoint")
    checkpoints = _in_window(checkpoints_all, "start_ts", *steady)
    restores = _in_window(events.filter(pl.col("kind") == "restore"), "start_ts", *steady)
    size = percentile_stats(b / MiB for b in checkpoints["pages_bytes"].to_list() if b is not None)
    restore = percentile_stats(restores["duration_s"].to_list())
    checkpoint = percentile_stats(checkpoints["duration_s"].to_list())
    written = float(checkpoints["bytes"].sum()) if checkpoints.height else None
    seconds = float(checkpoints["duration_s"].sum()) if checkpoints.height else None
    return {
        "size_p50_mb": size["p50"], "size_p90_mb": size["p90"], "size_p95_mb": size["p95"], "size_p99_mb": size["p99"],
        "size_avg_mb": size["avg"],
        "checkpoints_in_window": checkpoints.height,
        "checkpoints_cumulative": checkpoints_all.height,
        "restore_p50_s": restore["p50"], "restore_p90_s": restore["p90"], "restore_p95_s": restore["p95"],
        "restore_p99_s": restore["p99"], "restore_mean_s": restore["avg"],
        "checkpoint_p50_s": checkpoint["p50"], "checkpoint_p90_s": checkpoint["p90"],
        "checkpoint_p95_s": checkpoint["p95"], "checkpoint_p99_s": checkpoint["p99"],
        "checkpoint_mean_s": checkpoint["avg"],
        "checkpoint_mb_s": round(written / seconds / MiB, 4) if written is not None and seconds else None,
    }


def local_server_summary(*, events: pl.DataFrame, samples: pl.DataFrame, steady: tuple[int, int],
                         start_ts: int, end_ts: int, test_name: str, tag: str, data_timestamp: str) -> dict[str, Any]:
    return {
        "metadata": summary_metadata(test_name=test_name, tag=tag, data_timestamp=data_timestamp, start_ts=start_ts,
                                     end_ts=end_ts, steady=steady, prom_url=None, atelet_lag_s=0,
                                     source="embedded-runtime"),
        "cluster_packing": packing(samples, steady),
        "node_psi": node_psi(samples, steady),
        "pod_psi": unmeasured_psi("pods"),  # no pods here
        "snapshots": snapshots(events, steady),
    }
