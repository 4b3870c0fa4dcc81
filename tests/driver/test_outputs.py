"""What a trial writes besides Locust's own files: warnings kept in logs.txt and trial.json, never only logged."""

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from substrate_assets.driver.outputs import TrialRecord, measure_server_summary, write_trial_files
from substrate_assets.driver.trial import host_start_warnings
from substrate_assets.results.layout import TrialKey
from substrate_assets.runtime.events import EventLog, RuntimeEvent
from substrate_assets.suites import get_suite
from substrate_assets.workload import ScriptLibrary

ROOT = Path(__file__).resolve().parents[2]


def record(started: datetime, ended: datetime) -> TrialRecord:
    suite = get_suite("quick-smoke")
    script = ScriptLibrary(ROOT / "scripts").load(suite.script)
    key = TrialKey(suite.name, int(started.timestamp()), "local")
    return TrialRecord(key, suite, script, "local", ["locust"], 0, started, ended, False, {})


def test_a_whole_run_window_is_a_warning_in_logs_and_manifest(tmp_path, caplog):
    started, ended = datetime(2026, 11, 30, 10, tzinfo=UTC), datetime(2026, 11, 30, 10, 1, tzinfo=UTC)
    trial = record(started, ended)
    (tmp_path / ".work").mkdir()
    summary = measure_server_summary(tmp_path, trial)  # no stats_history.csv: nothing says when the load was steady
    assert (summary["metadata"]["steady_start_ts"], summary["metadata"]["steady_end_ts"]) == \
        (trial.key.run_ts, int(ended.timestamp()))
    assert any("steady window" in message for message in caplog.messages)
    [warning] = trial.warnings
    assert "whole run" in warning and "no stats_history.csv" in warning
    write_trial_files(tmp_path, tmp_path / ".work", trial, summary)
    assert json.loads((tmp_path / "trial.json").read_text())["warnings"] == [warning]
    assert f"warning: {warning}\n" in (tmp_path / "logs.txt").read_text()


def test_failed_warm_host_starts_become_a_trial_warning():
    events = EventLog()
    assert host_start_warnings(events.frame()) == []
    events.append(RuntimeEvent("restore", "a", "b", 1.0, 0.1))
    for _ in range(2):
        events.append(RuntimeEvent("host_start_failed", "", "", 2.0, 5.0, detail="HostFailure: not ready in 5 s"))
    [warning] = host_start_warnings(events.frame())
    assert "2 host(s)" in warning and "HostFailure: not ready in 5 s" in warning
    assert host_start_warnings(pl.DataFrame(schema=events.frame().schema)) == []
