"""Whole trials: Locust headless against the embedded runtime, and the trial directory it leaves."""

import contextlib
import json
import re
import subprocess
import sys
import threading
from pathlib import Path

import polars as pl
import psutil
import pytest

from substrate_assets.driver.trial import run_local_trial
from substrate_assets.results import trial_directory
from substrate_assets.results.layout import RunStore, TrialKey
from substrate_assets.results.readers import (
    STATS_HISTORY_SCHEMA,
    STATS_SCHEMA,
    read_exceptions,
    read_failures,
    read_json,
    read_requests,
    read_stats,
    read_stats_history,
    read_stats_jsonl,
)
from substrate_assets.suites import get_suite
from substrate_assets.workload import ScriptLibrary
from tests.support.waiting import wait_until

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "substrate-bench")


@pytest.fixture(scope="module")
def cli_trial(tmp_path_factory):
    """One short quick-smoke trial through the command line, as a user runs it."""
    store = tmp_path_factory.mktemp("store")
    done = subprocess.run([CLI, "trial", "quick-smoke", "--store", str(store), "--users", "3", "--duration", "12s",
                           "--sut-version", "substrate@4f8a1c0d"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    [trial_dir] = RunStore(store).trial_dirs()
    return done, trial_dir


def test_the_command_prints_the_trial_and_its_summary(cli_trial):
    done, _trial_dir = cli_trial
    assert done.returncode == 0, done.stdout + done.stderr
    assert "trial quick-smoke-" in done.stdout and "WakeFirstTouch" in done.stdout
    assert re.search(r"failures\s+0 of \d+ requests", done.stdout)
    assert "running:" in done.stdout  # progress lines when not on a terminal


def test_the_trial_directory_holds_every_file(cli_trial):
    _, trial_dir = cli_trial
    names = {path.name for path in trial_dir.iterdir()}
    assert {"stats.csv", "stats_history.csv", "failures.csv", "exceptions.csv", "requests.parquet", "trial.json",
            "status.json", "stats.jsonl", "runtime_events.parquet", "runtime_samples.parquet", "logs.txt"} <= names
    assert not any(name.startswith(".") for name in names)
    assert not (trial_dir.parents[4] / ".staging").exists() or not any((trial_dir.parents[4] / ".staging").iterdir())
    key = TrialKey.parse(trial_dir.as_posix())
    assert key.suite == "quick-smoke" and key.tag == "local"
    assert read_json(trial_dir / "status.json") == {"locust_exit_code": 0, "stats_generated": True}


def test_the_manifest(cli_trial):
    _, trial_dir = cli_trial
    manifest = read_json(trial_dir / "trial.json")
    assert manifest["trial_id"] == TrialKey.parse(trial_dir.as_posix()).trial_id
    assert manifest["completed"] is True and manifest["backend"] == "local"
    # A steady window was found and every warm host started. The trial ran beside the rest of the test suite, whose
    # CPU may have disturbed it: that is the one warning it may carry, with the figures that say so.
    assert [line for line in manifest["warnings"] if not line.startswith("disturbed: ")] == []
    load = manifest["machine_load"]
    assert 0 <= load["steal_share"] < 1 and load["cpu_pressure"] > 0 and load["foreign_cpu_share"] is not None
    assert load["disturbed"] == (load["foreign_cpu_share"] > 0.05 or load["steal_share"] > 0.05)
    assert manifest["script"]["text"] == (ROOT / "scripts" / "quick-session.yaml").read_text()
    assert len(manifest["script"]["sha256"]) == 64
    assert manifest["knobs"]["users"] == 3 and manifest["knobs"]["duration_s"] == 12
    assert manifest["knobs"]["think_scale"] == 0.2
    assert manifest["versions"]["locust"] and manifest["versions"]["substrate-bench"]
    assert manifest["sut_version"] == "substrate@4f8a1c0d"  # --sut-version wins over this checkout's commit
    assert manifest["started_at"] < manifest["ended_at"]
    assert manifest["files"]["requests.parquet"]["bytes"] == (trial_dir / "requests.parquet").stat().st_size


def test_zero_failures_and_laps(cli_trial):
    _, trial_dir = cli_trial
    requests = read_requests(trial_dir / "requests.parquet")
    assert requests.height > 0 and requests.filter(~pl.col("success")).height == 0
    assert requests.filter(pl.col("name") == "Step_05_wrap_up").height >= 3  # at least one lap per user
    assert sorted(requests.filter(pl.col("name") == "DeleteActor")["session_id"].to_list()) == \
        sorted(requests.filter(pl.col("name") == "CreateActor")["session_id"].to_list())  # every actor torn down


def test_every_wake_followed_a_restore(cli_trial):
    _, trial_dir = cli_trial
    requests = read_requests(trial_dir / "requests.parquet")
    events = pl.read_parquet(trial_dir / "runtime_events.parquet")
    for session in requests["session_id"].drop_nulls().unique().to_list():
        mine = requests.filter(pl.col("session_id") == session).sort("ts")
        restores = events.filter((pl.col("actor") == session) & (pl.col("kind") == "restore")
                                 & (pl.col("detail").is_null()))["start_ts"].to_list()
        wakes = mine.filter(pl.col("name") == "WakeFirstTouch")
        # A wake cut off by the end of the trial is not recorded, yet its request (and one parked behind it)
        # may still have woken the actor: only restores after the session's last recorded request are extra.
        recorded = mine.filter(pl.col("name") != "DeleteActor")
        last_end = (recorded["ts"] + recorded["latency_ms"] / 1000).max()
        during = [start for start in restores if start <= last_end]
        assert len(during) == wakes.height  # implicit mode: one restore per wake, nothing else wakes an actor
        assert len(restores) - len(during) <= 2
        parked_at = 0.0
        for row in mine.iter_rows(named=True):
            if row["name"] == "SuspendActor":
                parked_at = row["ts"] + row["latency_ms"] / 1000
            elif row["name"] == "WakeFirstTouch":
                end = row["ts"] + row["latency_ms"] / 1000
                assert any(parked_at - 0.001 <= start <= end for start in restores)


def test_the_request_log_and_locust_count_one_population(cli_trial):
    """For every request name, the log's rows Locust counted are exactly stats.csv's Request Count and Failure
    Count; rows booked after Locust's last stats write stay in the log, marked."""
    _, trial_dir = cli_trial
    requests = read_requests(trial_dir / "requests.parquet")
    stats = read_stats(trial_dir / "stats.csv").filter(pl.col("name") != "Aggregated")
    assert set(requests["phase"].unique()) <= {"ramp_up", "steady", "stopping"}
    assert {"ramp_up", "steady"} <= set(requests["phase"].unique())
    assert requests["locust_counted"].null_count() == 0
    counted = requests.filter(pl.col("locust_counted")).group_by("request_type", "name").agg(
        pl.len().alias("n"), (~pl.col("success")).sum().alias("failed"))
    expected = {(row["type"], row["name"]): (row["request_count"], row["failure_count"])
                for row in stats.iter_rows(named=True)}
    assert {(row["request_type"], row["name"]): (row["n"], row["failed"])
            for row in counted.iter_rows(named=True)} == expected
    # Each name's counted rows are its first ones in booking order.
    for (kind, name), (count, _) in expected.items():
        rows = requests.filter((pl.col("request_type") == kind) & (pl.col("name") == name))
        assert sorted(rows.filter(pl.col("locust_counted"))["locust_seq"].to_list()) == list(range(1, count + 1))
    # Sessions still open when the load stops delete their actors afterwards: those rows are kept, marked.
    assert "stopping" in set(requests.filter(pl.col("name") == "DeleteActor")["phase"].unique())


def test_readers_on_files_a_real_locust_wrote(cli_trial):
    _, trial_dir = cli_trial
    stats = read_stats(trial_dir / "stats.csv")
    assert dict(stats.schema) == STATS_SCHEMA
    names = set(stats["name"].to_list())
    assert {"WakeFirstTouch", "SuspendActor", "CreateActor", "Aggregated"} <= names
    assert {f"Step_0{i}_" for i in range(1, 6)} <= {name[:8] for name in names}
    wake = stats.filter(pl.col("name") == "WakeFirstTouch").row(0, named=True)
    logged = read_requests(trial_dir / "requests.parquet").filter(pl.col("name") == "WakeFirstTouch").height
    assert 0 < wake["request_count"] <= logged and wake["type"] == "http"
    history = read_stats_history(trial_dir / "stats_history.csv")
    assert dict(history.schema) == STATS_HISTORY_SCHEMA and history["user_count"].max() == 3
    assert read_failures(trial_dir / "failures.csv").height == 0
    assert read_failures(trial_dir / "failures.csv").columns[-2:] == ["first_seen", "last_seen"]
    assert read_exceptions(trial_dir / "exceptions.csv").height == 0
    rows = read_stats_jsonl(trial_dir / "stats.jsonl")
    assert {row["metric"] for row in rows} >= {"http_WakeFirstTouch", "grpc_SuspendActor", "http_Step_03_build"}
    assert all(set(row) == {"timestamp", "tag", "test_name", "metric", "measurements"} for row in rows)
    assert all(row["test_name"] == "quick-smoke" and row["tag"] == "local" for row in rows)


def test_runtime_samples_show_the_pool(cli_trial):
    _, trial_dir = cli_trial
    samples = pl.read_parquet(trial_dir / "runtime_samples.parquet")
    assert samples.height >= 8
    assert (samples["idle_workers"] + samples["partial_workers"] + samples["at_capacity_workers"] == 8).all()
    assert samples["running_actors"].max() >= 1


def test_the_trial_records_what_its_driver_cost(cli_trial):
    """Locust's CPU and the machine's over the steady window, from the samples' cumulative counters."""
    _, trial_dir = cli_trial
    samples = pl.read_parquet(trial_dir / "runtime_samples.parquet")
    driver = samples["driver_cpu_s"].drop_nulls()
    assert driver.len() >= samples.height - 2  # from the first sample after Locust started
    assert (driver.diff().drop_nulls() >= 0).all() and driver.max() > 0
    assert (samples["machine_busy_cpu_s"] <= samples["machine_cpu_s"]).all()
    trial = read_json(trial_dir / "trial.json")
    load = trial["driver_load"]
    start, end = trial["run_start"], trial["run_end"]
    assert start <= load["window_start_ts"] < load["window_end_ts"] <= end
    assert load["cores"] >= 1 and load["driver_cpu_s"] > 0
    assert load["driver_core_share"] == pytest.approx(
        load["driver_cpu_s"] / ((load["window_end_ts"] - load["window_start_ts"]) * load["cores"]))
    assert 0 < load["machine_cpu_saturation"] <= 1
    warned = [line for line in trial["warnings"] if line.startswith("the driver (Locust) used")]
    assert bool(warned) == (load["driver_core_share"] > 0.25)


def _locust_process() -> psutil.Process | None:
    """This test's Locust child (``python -m locust ...``), if it is running."""
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied):
            if process.cmdline()[1:3] == ["-m", "locust"] and process.status() != psutil.STATUS_ZOMBIE:
                return process
    return None


def _children() -> set[tuple[int, float]]:
    """This process's descendants now, by pid and start (a reused pid is another process)."""
    found = set()
    for process in psutil.Process().children(recursive=True):
        with contextlib.suppress(psutil.NoSuchProcess):
            found.add((process.pid, process.create_time()))
    return found


def _still_running(processes: list[psutil.Process], before: set[tuple[int, float]]) -> list[psutil.Process]:
    """Those of ``processes`` that run (not zombies) and were not children before the trial: an earlier test's
    helper that lives as long as the test process (multiprocessing's resource tracker, which a rebuild's reading
    processes start) is none of the trial's."""
    running = []
    for process in processes:
        with contextlib.suppress(psutil.NoSuchProcess):
            if process.status() != psutil.STATUS_ZOMBIE and (process.pid, process.create_time()) not in before:
                running.append(process)
    return running


def test_kill_9_of_locust_leaves_a_readable_partial_trial(tmp_path):
    # A run time no test reaches: Locust is killed mid-run however slowly it starts, never after it ended.
    suite = get_suite("quick-smoke").with_overrides(users=2, duration="1h")
    result: dict[str, object] = {}
    before = _children()

    def run() -> None:
        try:
            result["trial"] = run_local_trial(suite, RunStore(tmp_path), ScriptLibrary(ROOT / "scripts"))
        except BaseException as error:  # handed to the test's thread
            result["error"] = error

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    try:
        def measured_mid_run() -> psutil.Process | None:
            if "error" in result:  # the trial failed before Locust was killed: nothing to wait for
                raise result["error"]
            locust = _locust_process()
            parts = list((tmp_path / ".staging").glob("*/.work/requests/part-*.parquet"))
            return locust if locust is not None and len(parts) >= 2 else None

        locust = wait_until(measured_mid_run, "Locust running with two request-log parts written",
                            timeout_s=150, interval_s=0.2)
        locust.kill()  # SIGKILL, to this very process: psutil refuses a pid that was reused
        runner.join(timeout=120)
        assert not runner.is_alive(), "the trial did not finish within 120 s of Locust's death"
    finally:
        if runner.is_alive():  # a failure above: stop the 1 h Locust rather than leave it running
            leftover = _locust_process()
            if leftover is not None:
                with contextlib.suppress(psutil.NoSuchProcess):
                    leftover.kill()
            runner.join(timeout=120)
    if "error" in result:
        raise result["error"]
    trial = result["trial"]
    assert trial.locust_exit_code == -9 and not trial.completed
    assert read_json(trial.trial_dir / "status.json")["locust_exit_code"] == -9
    manifest = json.loads((trial.trial_dir / "trial.json").read_text())
    assert manifest["completed"] is False
    requests = read_requests(trial.trial_dir / trial_directory.REQUESTS_PARQUET)
    assert requests.height > 0 and requests.filter(pl.col("name") == "WakeFirstTouch").height > 0
    assert not list(tmp_path.glob(".staging/*"))
    assert not _still_running(psutil.Process().children(recursive=True), before)
