"""The trial-directory contract: one rule for "completed", one reader for native and upstream trials alike, and
no trial file named anywhere else in the package."""

import ast
import json
import shutil
from pathlib import Path

import pytest

from substrate_assets.families import family_of_rows
from substrate_assets.results import trial_directory
from substrate_assets.results.trial_directory import TrialDirectory, trial_completed

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "tests" / "data" / "upstream_runs" / "runs"
NEWEST = UPSTREAM / "glutton_baseline_5_users/run_date=2026-11-20/run_ts=1795132800/" \
    "run_tag=4f8a1c0d2b9e7f6a5c3d1e0f9a8b7c6d5e4f3a2b"
OLDEST = UPSTREAM / "glutton_baseline_1_user/run_date=2026-05-02/run_ts=1777708800/" \
    "run_tag=4f8a1c0d2b9e7f6a5c3d1e0f9a8b7c6d5e4f3a2b"


@pytest.mark.parametrize(("exit_code", "generated", "interrupted", "completed"), [
    (0, True, False, True),
    (0, False, False, False),  # Locust exited 0 having measured nothing
    (1, True, False, True),  # Locust exits 1 when any request failed: it still ran to its end
    (2, True, False, False),  # an unhandled error in Locust
    (-9, True, False, False),  # Locust killed
    (0, True, True, False),  # stopped before its run time
    (None, None, False, None),  # no status: not known
])
def test_one_rule_for_completed(exit_code, generated, interrupted, completed):
    assert trial_completed(exit_code, generated, interrupted) is completed


def native_trial(tmp_path: Path, *, exit_code: int, generated: bool, interrupted: bool) -> Path:
    directory = tmp_path / "runs/s/run_date=2026-11-30/run_ts=1796033700/run_tag=local"
    directory.mkdir(parents=True)
    (directory / "status.json").write_text(json.dumps({"locust_exit_code": exit_code, "stats_generated": generated}))
    (directory / "trial.json").write_text(json.dumps({
        "trial_id": "s-20261130t101500z", "suite": "s", "backend": "local", "interrupted": interrupted,
        "completed": trial_completed(exit_code, generated, interrupted), "knobs": {"users": 2},
        "cluster_facts": {"node_count": 1, "allocatable_cores": 2.0, "worker_actor_capacity": "4"},
        "run_start": 1796033700, "run_end": 1796033760}))
    return directory


def test_native_and_imported_trials_complete_by_the_same_rule(tmp_path):
    interrupted = TrialDirectory(native_trial(tmp_path, exit_code=0, generated=True, interrupted=True))
    assert interrupted.completed is False and interrupted.manifest_fields()["completed"] is False
    # A trial.json from before families said none: every native trial then was an agent session.
    assert interrupted.manifest_fields()["family"] == "agentsession"
    upstream = TrialDirectory(NEWEST)
    assert upstream.status == {"locust_exit_code": 1, "stats_generated": True}  # it saw failed requests
    assert upstream.completed is True and upstream.manifest_fields()["completed"] is True
    copied = tmp_path / "copy" / NEWEST.relative_to(UPSTREAM.parent)
    shutil.copytree(NEWEST, copied)
    (copied / "status.json").write_text('{"locust_exit_code": -15, "stats_generated": true}')
    assert TrialDirectory(copied).completed is False


def test_an_upstream_run_reads_like_a_native_trial():
    newest = TrialDirectory(NEWEST)
    assert newest.trial_id == "glutton_baseline_5_users-20261120t000000z"
    fields = newest.manifest_fields()
    assert (fields["suite"], fields["backend"], fields["started_at"].timestamp()) == \
        ("glutton_baseline_5_users", "import", 1795132800)
    assert fields["family"] == "glutton"  # from its rows: GluttonPing, no wake row of another family
    facts = newest.cluster_facts()
    assert (facts["machine_type"], facts["worker_pod_count"], facts["allocatable_cores"]) == ("c3-standard-4", 5, 3.92)
    assert newest.server_telemetry()["checkpoints_in_window"] == 597
    assert newest.requests().height == 0 and newest.stats().height == 5
    oldest = TrialDirectory(OLDEST)  # facts nested under raw_configuration, native numbers, no server summary
    assert (oldest.cluster_facts()["node_count"], oldest.cluster_facts()["gke_version"]) == (3, None)
    assert all(value is None for value in oldest.server_telemetry().values())



def test_while_reading_a_file_of_rows_is_read_once_and_let_go_after():
    trial = TrialDirectory(NEWEST)
    assert trial.stats_history() is not trial.stats_history()  # outside: read each time, nothing held
    with trial.reading():
        history = trial.stats_history()
        assert trial.stats_history() is history and trial.stats() is trial.stats()
    assert trial.stats_history() is not history

def test_typed_facts_from_a_native_manifest(tmp_path):
    trial = TrialDirectory(native_trial(tmp_path, exit_code=0, generated=True, interrupted=False))
    facts = trial.cluster_facts()
    assert facts["node_count"] == 1 and facts["worker_actor_capacity"] == "4" and facts["machine_type"] is None
    assert (facts["run_start"], facts["run_end"]) == (1796033700, 1796033760)
    assert trial.stats().height == 0 and trial.stats_history().height == 0  # not written: empty, never invented


def test_what_the_driver_cost_is_read_from_trial_json_and_null_when_not_measured(tmp_path):
    directory = native_trial(tmp_path, exit_code=0, generated=True, interrupted=False)
    keys = ("driver_cpu_s", "driver_core_share", "machine_cpu_saturation")
    assert [TrialDirectory(directory).manifest_fields()[key] for key in keys] == [None, None, None]
    manifest = json.loads((directory / "trial.json").read_text())
    manifest["driver_load"] = {"window_start_ts": 10, "window_end_ts": 70, "cores": 2, "driver_cpu_s": 6.0,
                               "driver_core_share": 0.05, "machine_cpu_saturation": 0.0}
    (directory / "trial.json").write_text(json.dumps(manifest))
    # A measured idle machine is 0, not null.
    assert [TrialDirectory(directory).manifest_fields()[key] for key in keys] == [6.0, 0.05, 0.0]
    assert all(TrialDirectory(NEWEST).manifest_fields()[key] is None for key in keys)  # upstream runs do not say


def test_upstream_local_file_names(tmp_path):
    """Upstream's runner, run locally, prefixes its files with the test name."""
    directory = tmp_path / "local-run"
    directory.mkdir()
    shutil.copy(NEWEST / "stats.csv", directory / "glutton_baseline_stats.csv")
    assert TrialDirectory(directory).file("stats.csv") == directory / "glutton_baseline_stats.csv"
    assert TrialDirectory(directory).stats().height == 5


def _trial_file_names() -> set[str]:
    names = {value for name, value in vars(trial_directory).items()
             if name.isupper() and isinstance(value, str) and "." in value}
    # The scratch area's own names (script.yaml, locust.log) are not trial files; a pod mounts its own script.yaml.
    return names - {trial_directory.WORK_SCRIPT, trial_directory.LOCUST_LOG}


def test_no_trial_file_is_named_outside_the_contract():
    names = _trial_file_names()
    assert {"trial.json", "runtime_samples.parquet", ".uploading", ".work"} <= names
    found = []
    for path in sorted((ROOT / "substrate_assets").rglob("*.py")):
        if path.name == "trial_directory.py":
            continue
        tree = ast.parse(path.read_text())
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
                      and node.body and isinstance(node.body[0], ast.Expr)}
        found += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
                  and any(name in node.value for name in names)]
    assert found == []


RECORDED = ROOT / "tests" / "data" / "upstream_runs_newest" / "runs"
TAG = "run_tag=4f8a1c0d2b9e7f6a5c3d1e0f9a8b7c6d5e4f3a2b"
THREE_PER_USER = RECORDED / "glutton_actors_per_user_3/run_date=2026-11-21/run_ts=1795219200" / TAG
NO_HISTORY = RECORDED / "glutton_no_stats_history/run_date=2026-11-22/run_ts=1795305600" / TAG
FLAT_SERVER_SUMMARY = RECORDED / "glutton_flat_server_summary/run_date=2026-11-23/run_ts=1795392000" / TAG


def test_an_upstream_run_takes_users_and_actors_per_user_from_its_own_log():
    fields = TrialDirectory(THREE_PER_USER).manifest_fields()
    assert (fields["users"], fields["actors_per_user"]) == (10, 3)  # -u 10; boomer started --actors-per-user 3
    assert json.loads(fields["metadata"]) == {"cluster_name": "bench-c3", "nodes": "1"}  # as its row stores them
    assert (TrialDirectory(NO_HISTORY).manifest_fields()["users"],
            TrialDirectory(NO_HISTORY).manifest_fields()["actors_per_user"]) == (10, 1)


def test_a_run_that_does_not_say_gets_no_default():
    for run in (NEWEST, OLDEST):  # no logs.txt: nothing records -u or --actors-per-user
        fields = TrialDirectory(run).manifest_fields()
        assert (fields["users"], fields["actors_per_user"]) == (None, None)
    assert json.loads(TrialDirectory(NEWEST).manifest_fields()["metadata"]) == {"runner": "nightly"}


def test_the_figures_a_run_reported():
    newest = TrialDirectory(NEWEST).reported_figures()
    assert newest["has_trial_summary"] is True
    assert (newest["reported_actors_per_node"], newest["reported_actors_per_pod_p50"],
            newest["reported_aggregate_failure_ratio"]) == (10.0, 2.0, 0.0017)
    oldest = TrialDirectory(OLDEST).reported_figures()  # nested under frontiers, actors per pod as ap_ratio_*
    assert (oldest["reported_actors_per_vcpu"], oldest["reported_actors_per_pod_p99"]) == (0.42, 1.0)
    assert TrialDirectory(NO_HISTORY).reported_figures()["reported_actors_per_pod_p50"] is None  # reported null


def test_a_native_trial_without_a_trial_summary_reported_nothing(tmp_path):
    figures = TrialDirectory(native_trial(tmp_path, exit_code=0, generated=True, interrupted=False)).reported_figures()
    assert figures.pop("has_trial_summary") is False and set(figures.values()) == {None}


def test_the_flat_server_summary_row_stands_in_for_missing_blocks(tmp_path):
    telemetry = TrialDirectory(FLAT_SERVER_SUMMARY).server_telemetry()
    assert (telemetry["cluster_packing_p50"], telemetry["psi_cpu_stall_p90"], telemetry["pod_psi_cpu_stall_p50"],
            telemetry["checkpoints_in_window"], telemetry["checkpoint_mb_s"]) == (0.4, 4.0, 1.5, 597, 512.25)
    assert telemetry["psi_mem_stall_p50"] is None  # null in the row too: not measured
    assert TrialDirectory(NEWEST).server_telemetry() == telemetry  # the same figures, from the blocks
    # A document with its blocks stays the source, whatever the row says.
    copied = tmp_path / "copy" / NEWEST.relative_to(UPSTREAM.parent)
    shutil.copytree(NEWEST, copied)
    rows = (copied / "stats.jsonl").read_text().replace('"cluster_packing_p50": "0.4"', '"cluster_packing_p50": "9"')
    (copied / "stats.jsonl").write_text(rows)
    assert TrialDirectory(copied).server_telemetry()["cluster_packing_p50"] == 0.4


@pytest.mark.parametrize(("names", "family"), [
    (["CreateActor", "WakeFirstTouch", "Step_01_edit"], "agentsession"),
    (["ResumeActor", "GluttonPing", "GluttonFillRAM"], "glutton"),
    (["ResumeActor", "DurDirServeAfterResume"], "durdir"),
    (["CreateActor", "GluttonPing", "TimeToReady_10pct", "ActorTimeToReady"], "spawn"),
    (["GluttonReadyPing", "ActorTimeToFirstResume", "GluttonPing"], "burst"),
    (["ResumeActor", "ResumeToFirstExec", "Workload_Cycle_1"], "sweperf"),
    (["CreateActor", "DeleteActor"], None),
])
def test_an_upstream_runs_family_is_read_from_its_rows(names, family):
    assert family_of_rows(names) == family
