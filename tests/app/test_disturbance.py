"""A trial run while other work takes the machine's CPU is marked disturbed wherever a person looks, left out of
verdicts, and run again; when every trial is disturbed, `run` says the machine is too busy to judge (exit 4).

The other work is a process this test starts apart from itself (its launching shell exits at once, so it is no child
of the test, as another user's work is not), spinning for as long as the test runs; the suite's limit on other
processes' CPU is 0, so any CPU it gets over a trial's steady window disturbs the trial: nothing here depends on how
busy the machine is otherwise."""

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import duckdb
import pytest

from tests.support.projects import make_project, project_env

CLI = str(Path(sys.executable).parent / "substrate-bench")
SUITES = """\
suites:
  - name: busy
    script: quick-session
    users: 2
    spawn_rate: 2
    duration: 4s
    think_scale: 0.2
    workers: 4
    repeat: 1
    disturbance: {foreign_cpu_share: 0.0}
"""
# At the lowest priority: it takes only CPU that the trial and the other tests leave idle, which disturbs a trial
# all the same (any CPU another process gets is foreign), and does not slow the rest of the suite down.
SPIN = "import os; os.nice(19)\nwhile True: pass"


@pytest.fixture(scope="module")
def busy_run(tmp_path_factory):
    project = make_project(tmp_path_factory.mktemp("project"), SUITES)
    other = subprocess.Popen(["sh", "-c", f"{sys.executable} -c '{SPIN}' & echo $!"], stdout=subprocess.PIPE,
                             text=True, start_new_session=True)
    spinner = int(other.stdout.readline())
    other.wait()
    try:
        done = subprocess.run([CLI, "run", "busy"], capture_output=True, text=True, timeout=600,
                              env=project_env(project), cwd=project)
    finally:
        os.kill(spinner, signal.SIGKILL)
    return project, done


def test_run_runs_a_disturbed_trial_again_then_says_the_machine_is_too_busy(busy_run):
    _project, done = busy_run
    assert done.returncode == 4, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.count("was disturbed (CPU taken by other processes") == 2
    assert "trial 1 of 1 again" in done.stdout
    assert "the machine is too busy with other work to judge: 3 of 3 trials were disturbed" in done.stderr


def test_each_disturbed_trial_says_so_in_its_manifest_and_the_trials_table(busy_run):
    project, _ = busy_run
    manifests = [json.loads(path.read_text()) for path in (project / "store").glob("runs/**/trial.json")]
    assert len(manifests) == 3
    for manifest in manifests:
        load = manifest["machine_load"]
        assert load["disturbed"] is True and load["foreign_cpu_share"] > 0 and load["limits"]["foreign_cpu_share"] == 0
        assert any(line.startswith("disturbed: the machine was busy with other work") for line in manifest["warnings"])
    with duckdb.connect(str(project / "warehouse.duckdb"), read_only=True) as connection:
        rows = connection.execute("SELECT disturbed, disturbed_because, foreign_cpu_share FROM trials").fetchall()
        assert len(rows) == 3 and all(row[0] is True and "CPU taken by other processes" in row[1] for row in rows)
        assert connection.execute("SELECT count(*) FROM metric_history").fetchone()[0] == 0
    import dagster as dg

    instance = dg.DagsterInstance.from_config(str(project / ".dagster_home"))
    records = instance.fetch_materializations(dg.AssetKey("trial_run"), limit=10).records
    assert len(records) == 3
    for record in records:
        metadata = record.asset_materialization.metadata
        assert metadata["disturbed"].value is True and metadata["busy/foreign_cpu_share"].value > 0
        assert "CPU taken by other processes" in metadata["disturbed_because"].value
    checks = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("trial_run"), "no_regression_against_history"), limit=5)
    assert len(checks) == 3


def test_compare_leaves_them_out_and_keeps_them_when_asked(busy_run):
    project, _ = busy_run
    with duckdb.connect(str(project / "warehouse.duckdb"), read_only=True) as connection:
        first, second = (row[0] for row in connection.execute(
            "SELECT trial_id FROM trials ORDER BY trial_id LIMIT 2").fetchall())
    env = project_env(project)
    refused = subprocess.run([CLI, "compare", first, second], capture_output=True, text=True, env=env, cwd=project)
    assert refused.returncode == 4 and "every trial is disturbed" in refused.stderr
    kept = subprocess.run([CLI, "compare", first, second, "--include-disturbed", "--format", "json"],
                          capture_output=True, text=True, env=env, cwd=project)
    report = json.loads(kept.stdout)
    assert sum("kept as asked" in warning for warning in report["warnings"]) == 2


def test_a_job_the_machine_stopped_still_draws_the_site_with_its_trials(busy_run):
    """Its loads left the site to a last trial that never came: the job draws it on its way out."""
    project, _ = busy_run
    trial_ids = [json.loads(path.read_text())["trial_id"] for path in (project / "store").glob("runs/**/trial.json")]
    pages = "\n".join(page.read_text() for page in (project / "site").rglob("*.html"))
    assert (project / "site" / "index.html").is_file()
    assert len(trial_ids) == 3 and all(trial_id in pages for trial_id in trial_ids)
