"""The time-to-insight line: its moments from the request log and the runs' records, nothing guessed."""

import polars as pl

from substrate_assets.app.time_to_insight import TimeToInsight, last_request_end


def test_the_last_request_ends_at_its_start_plus_its_latency(tmp_path):
    assert last_request_end(tmp_path) is None  # no request log: not measured
    pl.DataFrame({"ts": [100.0, 101.0, 100.5], "latency_ms": [50.0, 250.0, 2000.0]}).write_parquet(
        tmp_path / "requests.parquet")
    assert last_request_end(tmp_path) == 102.5  # the slow one started earlier and ended last


def test_the_line_gives_the_total_and_where_it_went():
    insight = TimeToInsight(last_request_end=100.0, trial_written=100.5, load_started=101.25, marts_written=103.5,
                            marts_recorded=104.0)
    assert insight.seconds == 3.5
    assert insight.line() == ("time to insight: 3.5 s from the last request to the trial's rows in every mart "
                              "(trial written +0.5 s, load started +1.2 s, rows in every mart +3.5 s, recorded in "
                              "Dagster +4.0 s)")
    slow = TimeToInsight(100.0, 101.0, 103.0, 108.0, 109.0)
    assert slow.line().endswith("over the 5 s substrate-bench aims for (docs/benchmarks.md, time to insight)")


def test_a_moment_not_recorded_is_not_made_up():
    assert TimeToInsight(None, 1.0, 2.0, 3.0).seconds is None
    assert TimeToInsight(100.0, None, None, None).line() == (
        "time to insight: not measured (no request ended, or no mart was materialized)")
    assert "trial written" not in TimeToInsight(100.0, None, 101.0, 102.0).line()
