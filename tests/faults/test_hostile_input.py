"""Hostile and damaged input: suites naming scripts outside scripts/, YAML bombs, oversize files, a bad --duration,
Locust CSVs cut short or binary, and what ``completed`` means when requests failed. Each fails fast with a message
naming the file (and line), never a traceback, a hang or a silent row of nulls."""

import json
import shutil
import time
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from substrate_assets.cli import main
from substrate_assets.driver.outputs import MeasuredTrial, TrialRecord, measure_server_summary, write_trial_files
from substrate_assets.project import ROOT_ENV
from substrate_assets.results.landing import StagedTrial
from substrate_assets.results.layout import TrialKey
from substrate_assets.results.readers import DamagedCsv, read_stats, read_stats_history
from substrate_assets.results.request_log import RequestLogWriter, RequestRecord, merge_parts
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.suites import SuiteError, get_suite, load_suites
from substrate_assets.telemetry.window import trial_windows
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.discovery import discover
from substrate_assets.warehouse.models.marts import build_all
from substrate_assets.warehouse.trial_writes import load_trials
from substrate_assets.workload import ScriptError, ScriptLibrary, ScriptNotFound, decode, load_script_file
from substrate_assets.workload.decode import MAX_DOCUMENT_BYTES

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM_STATS = ROOT / "tests" / "data" / "upstream" / "stats.csv"
UPSTREAM_HISTORY = ROOT / "tests" / "data" / "upstream" / "stats_history.csv"

# The classic "billion laughs": nine levels, each nine aliases of the one below, about 4 * 10^8 nodes expanded.
BOMB = "      l0: &l0 lol\n" + "".join(
    f"      l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * 9)}]\n" for level in range(1, 10))


def project(tmp_path: Path, suites: str) -> Path:
    """A project root with the real scripts and the given suites.yaml."""
    root = tmp_path / "project"
    shutil.copytree(ROOT / "scripts", root / "scripts")
    (root / "suites.yaml").write_text(suites)
    return root


def trial_command(root: Path | None, *args: str):
    env = {"COLUMNS": "200", **({ROOT_ENV: str(root)} if root is not None else {})}
    return CliRunner(env=env).invoke(main, ["trial", *args])


def suite_entry(script: str, extra: str = "") -> str:
    return f"suites:\n  - name: s\n    users: 1\n    script: {script}\n{extra}"


def test_a_suite_naming_a_missing_script_is_a_usage_error(tmp_path):
    root = project(tmp_path, suite_entry("no-such-session"))
    result = trial_command(root, "s")
    assert result.exit_code == 2, result.output
    assert (f"Error: suite 's': {root / 'scripts'}: no script \"no-such-session\" (have coding-session, "
            "quick-session)") in result.output
    assert not isinstance(result.exception, FileNotFoundError) and "Traceback" not in result.output
    with pytest.raises(ScriptNotFound) as caught:  # and for callers that catch a missing file, it is one
        ScriptLibrary(ROOT / "scripts").load("no-such-session")
    assert isinstance(caught.value, FileNotFoundError) and isinstance(caught.value, ScriptError)


@pytest.mark.parametrize("script", ["../../../etc/passwd", "/etc/passwd", "quick-session/../../x", "Quick"])
def test_a_script_name_reaching_outside_scripts_is_refused_at_its_line(tmp_path, script):
    root = project(tmp_path, suite_entry(script))
    with pytest.raises(SuiteError) as caught:
        load_suites(root / "suites.yaml")
    assert str(caught.value).startswith(f"{root / 'suites.yaml'}:4:13: suite 's': script: script name ")
    assert "must match ^[a-z0-9][a-z0-9-]*$" in str(caught.value)
    result = trial_command(root, "s")
    assert result.exit_code == 2 and "suites.yaml:4:13" in result.output and "Traceback" not in result.output
    # The library refuses the name itself, before it looks at any file.
    with pytest.raises(ScriptNotFound, match="no such script: script name"):
        ScriptLibrary(ROOT / "scripts").path_of(script)


def _fails_fast(load, error_type: type[Exception]) -> Exception:
    """Run ``load``, which must raise ``error_type`` within 0.5 s of CPU and 16 MiB of Python memory."""
    tracemalloc.start()
    started = time.process_time()
    try:
        with pytest.raises(error_type) as caught:
            load()
        spent = time.process_time() - started
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert spent < 0.5, f"{spent:.2f} s of CPU"
    assert peak < 16 << 20, f"{peak} bytes"
    return caught.value


def test_a_yaml_bomb_in_a_suites_metadata_is_refused_at_once(tmp_path):
    root = project(tmp_path, suite_entry("quick-session", "    metadata:\n" + BOMB))
    error = _fails_fast(lambda: load_suites(root / "suites.yaml"), SuiteError)
    message = str(error)
    assert message.startswith(f"{root / 'suites.yaml'}:")
    assert "expand the document by more than 100000 nodes (a YAML bomb?)" in message
    line = int(message.split(":")[1])
    assert "&l" in (root / "suites.yaml").read_text().splitlines()[line - 1]  # the anchor being repeated
    # A recursive alias is refused as well, rather than built into a structure no walk of it ends.
    (root / "suites.yaml").write_text(suite_entry("quick-session", "    metadata: &m {self: *m}\n"))
    with pytest.raises(SuiteError, match=r"suites.yaml:\d+:\d+: .*a recursive document"):
        load_suites(root / "suites.yaml")


def test_a_yaml_bomb_in_a_script_is_refused_at_once(tmp_path):
    text = (ROOT / "scripts" / "quick-session.yaml").read_text()
    path = tmp_path / "quick-session.yaml"
    path.write_text(f"x-bomb:\n{BOMB.replace('      ', '  ')}{text}")
    error = _fails_fast(lambda: load_script_file(path), ScriptError)
    assert "YAML bomb" in str(error) and str(error).startswith(f"{path}:{error.line}:")
    assert "&l" in path.read_text().splitlines()[error.line - 1]


def _oversize(path: Path) -> Path:
    """A file 8 GiB long that takes no disk (sparse): reading it would take far longer than the test allows."""
    with path.open("wb") as handle:
        handle.truncate(8 << 30)
    return path


def test_an_oversize_script_is_refused_before_it_is_read(tmp_path):
    path = _oversize(tmp_path / "huge.yaml")
    error = _fails_fast(lambda: load_script_file(path), ScriptError)
    assert str(error).endswith(f"huge.yaml: the file is {8 << 30} bytes, above the 1048576-byte (1 MiB) cap, "
                               "far beyond any real workload")
    just_over = tmp_path / "over.yaml"
    just_over.write_bytes(b"#" * (MAX_DOCUMENT_BYTES + 1))
    with pytest.raises(ScriptError, match="the file is 1048577 bytes, above the 1048576-byte"):
        load_script_file(just_over)
    with pytest.raises(ScriptError, match="the script is 1048577 bytes"):  # bytes handed over by any caller
        decode(b"#" * (MAX_DOCUMENT_BYTES + 1), "over.yaml")


def test_an_oversize_suites_file_is_refused_before_it_is_read(tmp_path):
    path = _oversize(tmp_path / "suites.yaml")
    error = _fails_fast(lambda: get_suite("s", path), SuiteError)
    assert str(error) == (f"{path}: the file is {8 << 30} bytes, above the 1048576-byte (1 MiB) cap, far beyond "
                          "any real workload")


def test_a_bad_duration_says_what_is_wrong_with_it():
    result = trial_command(None, "quick-smoke", "--duration", "20x")
    assert result.exit_code == 2
    assert "Error: suite 'quick-smoke': duration: '20x' is not a run time: it must look like 60s, 2m or 1h30m" \
        in result.output
    assert "--image" not in result.output
    # The hint is for what it is about: a kubernetes trial without its kubernetes: section.
    result = trial_command(None, "quick-smoke", "--backend", "kubernetes", "--dry-run")
    assert result.exit_code == 2 and "pass --image and --object-store" in result.output


def _cut_mid_row(source: Path, target: Path) -> Path:
    text = source.read_text()
    target.write_text(text[: text.rindex("\n", 0, len(text) - 1) + 12])  # the last row's first few fields
    return target


def _binary(target: Path) -> Path:
    target.write_bytes(bytes(range(256)) * 8)
    return target


def test_a_damaged_stats_csv_is_an_error_naming_the_file_and_line(tmp_path):
    cut = _cut_mid_row(UPSTREAM_STATS, tmp_path / "stats.csv")
    lines = len(cut.read_text().splitlines())
    with pytest.raises(DamagedCsv, match=rf"stats.csv:{lines}: 2 fields where the header has 22: the row is cut"):
        read_stats(cut)
    binary = _binary(tmp_path / "stats_history.csv")
    with pytest.raises(DamagedCsv, match=r"stats_history.csv:1: binary data \(a NUL byte at byte 0\)"):
        read_stats_history(binary)
    # Raw loads and imports read trial directories: the same error, never rows of nulls.
    trial = tmp_path / "runs/s/run_date=2026-11-30/run_ts=1796033700/run_tag=local"
    trial.mkdir(parents=True)
    _cut_mid_row(UPSTREAM_STATS, trial / "stats.csv")
    with pytest.raises(DamagedCsv, match=rf"{trial / 'stats.csv'}:{lines}: "):
        TrialDirectory(trial).stats()
    # A cut that leaves every field but ends mid-value has no line end: still a cut row.
    text = UPSTREAM_STATS.read_text()
    (tmp_path / "end.csv").write_text(text[:-3])
    with pytest.raises(DamagedCsv, match="the last row has no line end"):
        read_stats(tmp_path / "end.csv")


def _record(staging: Path, exit_code: int) -> TrialRecord:
    started, ended = datetime(2026, 11, 30, 10, tzinfo=UTC), datetime(2026, 11, 30, 10, 1, tzinfo=UTC)
    suite = get_suite("quick-smoke", ROOT / "suites.yaml")
    script = ScriptLibrary(ROOT / "scripts").load(suite.script)
    key = TrialKey(suite.name, int(started.timestamp()), "local")
    (staging / ".work").mkdir(parents=True)
    return TrialRecord(key, suite, script, "local", ["locust"], exit_code, started, ended, False, {})


def _finalize(staging: Path, record: TrialRecord) -> tuple[object, dict]:
    staged = StagedTrial.read(staging, staging / ".work")
    window = trial_windows(staged.files.history, record.run_start, record.run_end).run
    outcome = write_trial_files(staging, record, MeasuredTrial(staged, measure_server_summary(record, window)))
    return outcome, json.loads((staging / "trial.json").read_text())


@pytest.mark.parametrize("damage", [_cut_mid_row, lambda _source, target: _binary(target)])
def test_a_trial_whose_stats_csv_is_damaged_says_so(tmp_path, damage):
    staging = tmp_path / "staging"
    record = _record(staging, exit_code=-9)
    damage(UPSTREAM_STATS, staging / "stats.csv")
    outcome, manifest = _finalize(staging, record)
    [warning] = [line for line in manifest["warnings"] if line.startswith("stats.csv:")]
    assert "the trial counts as having generated no stats" in warning
    assert ("cut short" in warning) or ("binary data" in warning)
    assert json.loads((staging / "status.json").read_text()) == {"locust_exit_code": -9, "stats_generated": False}
    assert outcome.completed is False and manifest["completed"] is False
    assert f"warning: {warning}\n" in (staging / "logs.txt").read_text()


def test_a_damaged_stats_history_makes_the_whole_run_window_a_warning_naming_it(tmp_path):
    staging = tmp_path / "staging"
    record = _record(staging, exit_code=0)
    _cut_mid_row(UPSTREAM_HISTORY, staging / "stats_history.csv")
    _, manifest = _finalize(staging, record)
    [warning] = manifest["warnings"]
    assert "stats_history.csv could not be read" in warning and "stats_history.csv:" in warning


STATS_WITH_FAILURES = \
    "Type,Name,Request Count,Failure Count\ngrpc,CreateActor,2,0\nhttp,WakeFirstTouch,10,3\n,Aggregated,12,3\n"


def test_a_trial_that_ran_to_its_end_with_failed_requests_is_completed_and_reports_them(tmp_path):
    staging = tmp_path / "staging"
    record = _record(staging, exit_code=1)  # Locust exits 1 when it saw a failed request
    (staging / "stats.csv").write_text(STATS_WITH_FAILURES)
    writer = RequestLogWriter(staging / "parts")
    for second in range(12):
        failed = second % 4 == 3
        writer.append(RequestRecord(float(second), "grpc" if second < 2 else "http",
                                    "CreateActor" if second < 2 else "WakeFirstTouch", 3.0, 3, 0, not failed,
                                    error="RouterError: 503" if failed else None))
    writer.flush()
    merge_parts(staging / "parts", staging / "requests.parquet")
    outcome, manifest = _finalize(staging, record)
    assert outcome.completed is True and outcome.requests is not None and outcome.requests.failures == 3
    assert (manifest["completed"], manifest["failed_requests"], manifest["locust_exit_code"]) == (True, 3, 1)
    # status.json keeps upstream's two keys, untouched.
    assert json.loads((staging / "status.json").read_text()) == {"locust_exit_code": 1, "stats_generated": True}
    directory = TrialDirectory(staging)
    assert directory.completed is True and directory.manifest_fields()["completed"] is True
    # The trials mart: completed, and its failed requests in their own column.
    with connect(tmp_path / "w.duckdb") as warehouse:
        load_trials(warehouse, [directory], ["trial_manifests", "locust_stats"])
        build_all(warehouse, {"trials": discover(ROOT / "dbt_like_sql")["trials"]})
        row = warehouse.execute("SELECT status, failed_requests, locust_exit_code FROM trials").fetchall()
    assert row == [("completed", 3, 1)]
    # A Locust that was killed (-9) or crashed (2) did not run to its end, whatever it wrote.
    for code in (-9, 2):
        other = tmp_path / f"exit{code}"
        ended = _record(other, exit_code=code)
        (other / "stats.csv").write_text(STATS_WITH_FAILURES)
        assert _finalize(other, ended)[0].completed is False
