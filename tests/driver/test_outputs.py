"""What a trial writes besides Locust's own files: warnings kept in logs.txt and trial.json, never only logged."""

import json
from datetime import UTC, datetime
from pathlib import Path

import polars as pl

from substrate_assets.driver.outputs import (
    MeasuredTrial,
    TrialRecord,
    measure_server_summary,
    no_session_failure,
    write_trial_files,
)
from substrate_assets.driver.trial import host_start_warnings
from substrate_assets.results.landing import LocustCsv, StagedTrial
from substrate_assets.results.layout import TrialKey
from substrate_assets.results.request_log import RequestLogWriter, RequestRecord, merge_parts
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.runtime.events import EventLog, RuntimeEvent
from substrate_assets.suites import get_suite
from substrate_assets.telemetry.window import trial_windows
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
    # No stats_history.csv: nothing says when the load was steady.
    summary = measure_server_summary(trial, trial_windows(None, trial.run_start, trial.run_end).run)
    assert (summary["metadata"]["steady_start_ts"], summary["metadata"]["steady_end_ts"]) == \
        (trial.key.run_ts, int(ended.timestamp()))
    assert any("steady window" in message for message in caplog.messages)
    [warning] = trial.warnings
    assert "whole run" in warning and "no stats_history.csv" in warning
    write_trial_files(tmp_path, trial, MeasuredTrial(StagedTrial.read(tmp_path, tmp_path / ".work"), summary))
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


def test_a_trial_in_which_no_session_started_failed_and_says_why(tmp_path):
    started, ended = datetime(2026, 11, 30, 10, tzinfo=UTC), datetime(2026, 11, 30, 10, 1, tzinfo=UTC)
    trial = record(started, ended)
    work = tmp_path / ".work"
    work.mkdir()
    # Locust ran to its end and exited 0; it wrote stats (a refused CreateActor) but no session got its actor.
    (tmp_path / "stats.csv").write_text(
        "Type,Name,Request Count,Failure Count\ngrpc,CreateActor,2,2\n,Aggregated,2,2\n")
    writer = RequestLogWriter(tmp_path / "parts")
    for second in (1.0, 2.0):
        writer.append(RequestRecord(second, "grpc", "CreateActor", 3.0, 3, 0, False, error="RpcError: no capacity"))
    writer.flush()
    merge_parts(tmp_path / "parts", tmp_path / "requests.parquet")
    (work / "locust.log").write_text("[2026-11-30 10:00:01,000] h/ERROR/session: cannot start an agent session: "
                                     "CreateActor agent-1: no capacity\n")
    staged = StagedTrial.read(tmp_path, work)
    window = trial_windows(staged.files.history, trial.run_start, trial.run_end).run
    outcome = write_trial_files(tmp_path, trial, MeasuredTrial(staged, measure_server_summary(trial, window)))
    assert (outcome.completed, outcome.failure) == \
        (False, "no session ever started: CreateActor agent-1: no capacity")
    assert outcome.requests is not None and outcome.requests.sessions == 0
    manifest = json.loads((tmp_path / "trial.json").read_text())
    assert (manifest["completed"], manifest["sessions_started"], manifest["failure"]) == \
        (False, 0, outcome.failure)
    assert f"failed: {outcome.failure}\n" in (tmp_path / "logs.txt").read_text()
    directory = TrialDirectory(tmp_path)
    assert directory.completed is False
    assert directory.manifest_fields()["failure"] == outcome.failure


def test_no_session_failure_only_when_none_started():
    assert no_session_failure(None, "") is None and no_session_failure(3, "") is None
    assert no_session_failure(0, "") == "no session ever started (no CreateActor succeeded)"


def test_locust_counts_are_unknown_for_an_empty_or_damaged_stats_csv(tmp_path):
    """Without Locust's counts no row's locust_counted is known; an empty or damaged stats.csv must not stop the
    landing (write_trial_files says why the trial has no stats)."""
    assert LocustCsv(tmp_path / "stats.csv", b"").request_counts() is None
    assert LocustCsv(tmp_path / "stats.csv", b"Type,Name,Request Count\nhttp,Wake,3").request_counts() is None
    whole = b"Type,Name,Request Count\nhttp,Wake,3\n,Aggregated,3\n"
    assert LocustCsv(tmp_path / "stats.csv", whole).request_counts() == {("http", "Wake"): 3}
