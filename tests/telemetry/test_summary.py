"""The steady window, the percentile set and the 45 keys, with the reference's own vectors; local telemetry."""

import polars as pl
import pytest

from substrate_assets.analysis.statistics import percentile_stats
from substrate_assets.results.runtime_samples import SAMPLES_SCHEMA
from substrate_assets.results.server_summary import FLAT_KEYS, flatten
from substrate_assets.runtime.events import EVENT_SCHEMA
from substrate_assets.telemetry.local import local_server_summary, snapshots
from substrate_assets.telemetry.window import history_samples, locate_steady_window

MiB = 1 << 20


def test_steady_window_reference_vectors():
    samples = [(100, 2), (110, 4), (120, 6.3), (130, 7), (140, 3)]
    assert locate_steady_window(samples, 100, 150).span == (120, 130)
    assert locate_steady_window([(120, 0)], 100, 150).span == (100, 150)
    assert locate_steady_window([], 100, 150).span == (100, 150)
    assert locate_steady_window([(90, 5)], 100, 150).span == (100, 150)  # first steady sample outside the run


def test_a_window_that_falls_back_to_the_whole_run_says_why():
    assert locate_steady_window([(100, 2), (120, 6.3)], 100, 150).whole_run_because is None
    assert locate_steady_window([(120, 0)], 100, 150).whole_run_because == "no user count above 0"
    assert locate_steady_window([], 100, 150).whole_run_because == "no user-count samples"
    assert "outside the run" in locate_steady_window([(90, 5)], 100, 150).whole_run_because


def test_history_samples_take_total_rows_and_skip_bad_ones():
    rows = [{"name": "Aggregated", "timestamp": 1, "user_count": 2.0}, {"name": "WakeFirstTouch", "timestamp": 1,
            "user_count": 9.0}, {"name": "", "timestamp": 2, "user_count": None}, {"name": "Total", "timestamp": 3,
            "user_count": "4"}]
    assert history_samples(rows) == [(1, 2.0), (3, 4.0)]


def test_percentile_set_reference_vector():
    assert percentile_stats(range(1, 201)) == {"min": 1, "p50": 101, "p90": 181, "p95": 191, "p99": 199,
                                               "max": 200, "avg": 100.5}
    assert percentile_stats([]) == dict.fromkeys(("min", "p50", "p90", "p95", "p99", "max", "avg"))
    assert percentile_stats([float("nan"), 1.0, float("inf")])["max"] == 1.0
    assert percentile_stats([1 / 3])["p50"] == 0.3333


def test_45_flat_keys_in_the_reference_order():
    assert len(FLAT_KEYS) == 45
    assert FLAT_KEYS[:6] == ("cluster_packing_p50", "cluster_packing_p90", "cluster_packing_p95",
                             "cluster_packing_p99", "psi_cpu_stall_p50", "pod_psi_cpu_stall_p50")
    assert FLAT_KEYS[16:18] == ("psi_mem_stall_p95", "pod_psi_mem_stall_p95")
    assert FLAT_KEYS[28:34] == ("snapshot_size_p50_mb", "snapshot_size_p90_mb", "snapshot_size_p95_mb",
                                "snapshot_size_p99_mb", "snapshot_size_avg_mb", "checkpoints_in_window")
    assert FLAT_KEYS[-1] == "checkpoint_mb_s"
    row = flatten({})
    assert list(row) == list(FLAT_KEYS) and set(row.values()) == {None}  # nothing measured: all null


def events(rows):
    return pl.DataFrame([{**dict.fromkeys(EVENT_SCHEMA), **row} for row in rows], schema=EVENT_SCHEMA)


def test_checkpoint_mb_s_reference_vector_and_nulls():
    # 100 MiB written over 50 s of checkpointing is 2.0 MiB/s.
    frame = events([{"kind": "checkpoint", "atespace": "b", "actor": "a", "start_ts": 110.0, "duration_s": 20.0,
                     "bytes": 40 * MiB, "pages_bytes": 30 * MiB},
                    {"kind": "checkpoint", "atespace": "b", "actor": "a", "start_ts": 120.0, "duration_s": 30.0,
                     "bytes": 60 * MiB, "pages_bytes": 50 * MiB}])
    result = snapshots(frame, (100, 200))
    assert result["checkpoint_mb_s"] == 2.0
    assert (result["checkpoints_in_window"], result["checkpoints_cumulative"]) == (2, 2)
    assert (result["size_p50_mb"], result["size_avg_mb"]) == (50.0, 40.0)
    assert result["restore_p50_s"] is None and result["restore_mean_s"] is None
    empty = snapshots(events([]), (100, 200))
    assert empty["checkpoint_mb_s"] is None and empty["checkpoints_in_window"] == 0  # a measured zero


def test_local_summary_packing_and_psi():
    rows = []
    for i, (idle, partial, full, cpu_us) in enumerate([(3, 1, 0, 0), (2, 1, 1, 500_000), (0, 0, 0, 700_000),
                                                       (2, 2, 0, 400_000)]):
        rows.append({**dict.fromkeys(SAMPLES_SCHEMA), "ts": 100.0 + i, "idle_workers": idle, "partial_workers": partial,
                     "at_capacity_workers": full, "psi_cpu_some_total_us": cpu_us})
    samples = pl.DataFrame(rows, schema=SAMPLES_SCHEMA)
    summary = local_server_summary(events=events([]), samples=samples, steady=(100, 103), start_ts=100, end_ts=104,
                                   test_name="t", tag="x", data_timestamp="2026-11-30T00:00:00Z")
    ratios = [point["packing_ratio"] for point in summary["cluster_packing"]["timeseries"]]
    assert ratios == [0.25, 0.5, None, 0.5]  # an empty pool has no ratio, not 0
    assert summary["cluster_packing"]["summary"]["p50"] == 0.5
    # cpu stalled 0.5 s in the first second, 0.2 s in the second; the counter going back is not a rate.
    assert summary["node_psi"]["cpu_stall_pct"]["min"] == pytest.approx(20.0)
    assert summary["node_psi"]["cpu_stall_pct"]["max"] == pytest.approx(50.0)
    assert summary["node_psi"]["mem_stall_pct"]["p50"] is None and summary["node_psi"]["nodes"] == 1
    assert summary["pod_psi"]["cpu_stall_pct"]["p50"] is None
    assert summary["pod_psi"]["pods"] is None  # no pods here: not measured, not 0
    flat = flatten(summary)
    assert flat["cluster_packing_p50"] == "0.5" and flat["pod_psi_cpu_stall_p50"] is None
    without_psi = samples.with_columns(pl.lit(None, dtype=pl.Int64).alias("psi_cpu_some_total_us"))
    unmeasured = local_server_summary(events=events([]), samples=without_psi, steady=(100, 103), start_ts=100,
                                      end_ts=104, test_name="t", tag="x", data_timestamp="2026-11-30T00:00:00Z")
    assert unmeasured["node_psi"]["nodes"] is None
