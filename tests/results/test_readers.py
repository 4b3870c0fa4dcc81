"""Readers accept upstream's files and other Locust versions, with one schema whatever wrote them."""

from pathlib import Path

import polars as pl
import pytest

from substrate_assets.results.keys import measurement_key
from substrate_assets.results.landing import LocustCsv
from substrate_assets.results.readers import (
    EXCEPTIONS_SCHEMA,
    FAILURES_SCHEMA,
    STATS_HISTORY_SCHEMA,
    STATS_SCHEMA,
    read_exceptions,
    read_failures,
    read_stats,
    read_stats_history,
)
from substrate_assets.results.stats_jsonl import per_request_rows
from substrate_assets.results.status import stats_generated

UPSTREAM = Path(__file__).resolve().parents[1] / "data" / "upstream"


@pytest.mark.parametrize(("column", "key"), [
    ("50%", "p50"), ("99.9%", "p99_9"), ("99.99%", "p99_99"), ("100%", "p100"), ("Requests/s", "requests_per_s"),
    ("Failures/s", "failures_per_s"), ("Average Content Size", "average_content_size"),
    ("Total Median Response Time", "total_median_response_time"), ("User Count", "user_count"),
    ("First Seen", "first_seen"),
])
def test_measurement_keys(column, key):
    assert measurement_key(column) == key


def test_upstream_stats_csv():
    frame = read_stats(UPSTREAM / "stats.csv")
    assert dict(frame.schema) == STATS_SCHEMA
    aggregated = frame.filter(pl.col("name") == "Aggregated").row(0, named=True)
    assert aggregated["type"] == "" and aggregated["request_count"] == 238 and aggregated["p99"] == 410.0
    crash = frame.filter(pl.col("name") == "CrashCount").row(0, named=True)
    assert crash["request_count"] == 0 and crash["p50"] is None and crash["p100"] is None  # N/A stays null
    assert stats_generated(LocustCsv.read(UPSTREAM / "stats.csv"))


def test_upstream_stats_history_csv():
    frame = read_stats_history(UPSTREAM / "stats_history.csv")
    assert dict(frame.schema) == STATS_HISTORY_SCHEMA
    assert frame["user_count"].to_list() == [0.0, 1.0, 2.0]
    assert frame["p50"].to_list() == [None, 240.0, 180.0]
    assert frame["total_request_count"].to_list() == [0, 1, 3]


def test_failures_without_first_and_last_seen():
    frame = read_failures(UPSTREAM / "failures.csv")
    assert dict(frame.schema) == FAILURES_SCHEMA
    row = frame.row(0, named=True)
    assert row["occurrences"] == 2 and 'details = "no free workers available"' in row["error"]
    assert row["first_seen"] is None and row["last_seen"] is None


def test_failures_with_first_and_last_seen(tmp_path):
    path = tmp_path / "failures.csv"
    path.write_text("Method,Name,Error,Occurrences,First Seen,Last Seen\n"
                    "http,WakeFirstTouch,RouterError('boom'),3,2026-11-30T10:00:01Z,2026-11-30T10:00:09Z\n")
    row = read_failures(path).row(0, named=True)
    assert row["occurrences"] == 3
    assert (row["last_seen"] - row["first_seen"]).total_seconds() == 8


def test_empty_exceptions():
    frame = read_exceptions(UPSTREAM / "exceptions.csv")
    assert frame.height == 0 and dict(frame.schema) == EXCEPTIONS_SCHEMA


def test_stats_jsonl_rows_keep_csv_strings_and_skip_aggregated():
    stats = LocustCsv.read(UPSTREAM / "stats.csv")
    assert stats is not None
    rows = per_request_rows(stats.records, timestamp="2026-11-30T10:00:00Z", tag="abc", test_name="t")
    assert [row["metric"] for row in rows] == ["grpc_ResumeActor", "grpc_SuspendActor", "actor_CrashCount"]
    assert set(rows[0]) == {"timestamp", "tag", "test_name", "metric", "measurements"}
    assert rows[0]["measurements"]["requests_per_s"] == "1.9979"
    assert rows[2]["measurements"]["p99_9"] == "N/A"
    assert list(rows[0]["measurements"]) == [
        "request_count", "failure_count", "median_response_time", "average_response_time", "min_response_time",
        "max_response_time", "average_content_size", "requests_per_s", "failures_per_s", "p50", "p66", "p75", "p80",
        "p90", "p95", "p98", "p99", "p99_9", "p99_99", "p100"]


def test_stats_generated_needs_a_named_row(tmp_path):
    only_total = tmp_path / "stats.csv"
    only_total.write_text((UPSTREAM / "stats.csv").read_text().splitlines()[0] + "\n"
                          ",Aggregated,0,0,0,0,0,0,0,0,0,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A,N/A\n")
    assert not stats_generated(LocustCsv.read(only_total))
    assert not stats_generated(LocustCsv.read(tmp_path / "missing.csv"))


def _history_named(tmp_path: Path, name: str) -> Path:
    """The reference's window test samples, as total rows named ``name``."""
    path = tmp_path / f"history_{name or 'empty'}.csv"
    rows = [(100, 2), (110, 4), (120, 6.3), (130, 7), (140, 3)]
    path.write_text("Timestamp,User Count,Type,Name,Requests/s\n"
                    + "".join(f"{ts},{users},,{name},1.0\n" for ts, users in rows))
    return path


def test_an_empty_name_stays_empty(tmp_path):
    """Some Locust versions write the aggregate row's Name empty; a CSV field is never null."""
    frame = read_stats_history(_history_named(tmp_path, ""))
    assert frame["name"].to_list() == [""] * 5 and frame["type"].to_list() == [""] * 5


def test_an_empty_name_gives_the_same_steady_window_as_aggregated(tmp_path):
    from substrate_assets.telemetry.window import window_from_history

    windows = {name: window_from_history(_history_named(tmp_path, name), 100, 150) for name in ("", "Aggregated")}
    assert windows[""] == windows["Aggregated"] and windows[""].span == (120, 130)  # the reference's window vector
