"""Upstream runs are other people's bytes: hostile runs, made here at test time, are refused in one line naming the
run, the file and the reason, and nothing of them reaches the store; the runs beside them still import.

A chmod-000 file is not among them: the suite runs as root in CI, and root reads it anyway."""

import os
import shutil
from functools import partial
from pathlib import Path

import fsspec
import pytest

from substrate_assets.results.importer import import_all
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.results.upstream_files import KNOWN_FILES
from substrate_assets.warehouse.trial_rows import check_staged_trial

ROOT = Path(__file__).resolve().parents[2]
GOOD = ROOT / "tests" / "data" / "upstream_runs" / "runs" / "glutton_baseline_5_users" / "run_date=2026-11-20" / \
    "run_ts=1795132800" / "run_tag=4f8a1c0d2b9e7f6a5c3d1e0f9a8b7c6d5e4f3a2b"
GOOD_ID = "glutton_baseline_5_users-20261120t000000z"


@pytest.fixture
def upstream(tmp_path) -> Path:
    """An upstream root holding one good run."""
    root = tmp_path / "upstream"
    shutil.copytree(GOOD, root / GOOD.relative_to(GOOD.parents[4]))
    return root


def run_dir(root: Path, name: str = "hostile", ts: int = 1795219200, date: str = "2026-11-21",
            tag: str = "t") -> Path:
    """A copy of the good run under another path: what each case then spoils."""
    path = root / "runs" / name / f"run_date={date}" / f"run_ts={ts}" / f"run_tag={tag}"
    shutil.copytree(GOOD, path)
    return path


def imported(root: Path, store_root: Path) -> tuple[list[str], list[str]]:
    """The trial ids imported and the refusal lines."""
    batch = import_all(str(root), RunStore(store_root), check=check_staged_trial)
    return [run.trial_id for run in batch.imported], [str(refusal) for refusal in batch.refused]


def stored_files(store_root: Path) -> dict[str, bytes]:
    return {str(path.relative_to(store_root)): path.read_bytes() for path in store_root.rglob("*") if path.is_file()}


def only_the_good_run(store_root: Path) -> None:
    runs = [path for path in (store_root / "runs").rglob("run_tag=*")]
    assert [TrialDirectory(path).trial_id for path in runs] == [GOOD_ID]
    assert not list((store_root / ".staging").iterdir())


def test_a_file_that_is_a_link_refuses_its_run_and_its_target_is_never_read(upstream, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("root:$6$not-for-the-store\n")
    secret.chmod(0o600)
    hostile = run_dir(upstream)
    (hostile / "logs.txt").symlink_to(secret)  # this run has none of its own
    ids, refusals = imported(upstream, tmp_path / "store")
    assert ids == [GOOD_ID]
    assert refusals == [f"refused {hostile}: logs.txt is a symbolic link: import never follows links"]
    only_the_good_run(tmp_path / "store")
    assert not any(b"not-for-the-store" in data for data in stored_files(tmp_path / "store").values())


def test_a_run_directory_that_is_a_link_is_refused_by_name(upstream, tmp_path):
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(GOOD, elsewhere)
    link = upstream / "runs" / "hostile" / "run_date=2026-11-21" / "run_ts=1795219200" / "run_tag=t"
    link.parent.mkdir(parents=True)
    link.symlink_to(elsewhere, target_is_directory=True)
    ids, refusals = imported(upstream, tmp_path / "store")
    assert ids == [GOOD_ID]
    assert refusals == [f"refused {link}: a symbolic link: import never follows links"]
    only_the_good_run(tmp_path / "store")


def test_a_trial_json_in_a_run_cannot_name_another_trial(upstream, tmp_path):
    store_root = tmp_path / "store"
    assert imported(upstream, store_root) == ([GOOD_ID], [])
    before = stored_files(store_root)
    hostile = run_dir(upstream)
    for name in ("trial.json", "zz_trial.json"):
        (hostile / name).write_text(f'{{"trial_id": "{GOOD_ID}", "suite": "glutton_baseline_5_users"}}')
    ids, refusals = imported(upstream, store_root)
    assert refusals == []
    assert ids == [GOOD_ID, "hostile-20261121t000000z"]  # the first already in the store, left alone
    assert {key: value for key, value in stored_files(store_root).items() if key in before} == before
    copied = next((store_root / "runs" / "hostile").rglob("run_tag=t"))
    assert not (copied / "trial.json").exists() and not (copied / "zz_trial.json").exists()
    assert TrialDirectory(copied).trial_id == "hostile-20261121t000000z"


@pytest.mark.parametrize(("name", "ts", "date", "reason"), [
    ("a\\runs\\..", 1795219200, "2026-11-21", "a run's name is [a-z0-9_-], starting with a letter or digit"),
    ("hostile", -5, "2026-11-21", "not a run time (whole Unix seconds from 2000 to 2100)"),
    ("hostile", 10**19, "2026-11-21", "not a run time (whole Unix seconds from 2000 to 2100)"),
    ("hostile", 253402300800, "10000-01-01", "not a date (YYYY-MM-DD)"),
    ("hostile", 4102444800, "2100-01-01", "not a run time (whole Unix seconds from 2000 to 2100)"),
    ("hostile", 1795219200, "2026-11-22", "is not the date of 'run_ts=1795219200' (2026-11-21, UTC)"),
])
def test_a_path_outside_the_partition_grammar_is_refused(upstream, tmp_path, name, ts, date, reason):
    hostile = run_dir(upstream, name=name, ts=ts, date=date)
    ids, refusals = imported(upstream, tmp_path / "store")
    assert ids == [GOOD_ID]
    assert len(refusals) == 1 and refusals[0].startswith(f"refused {hostile}: ") and reason in refusals[0]
    only_the_good_run(tmp_path / "store")


def test_a_fifo_a_hard_link_and_an_oversized_file_are_refused_saying_which(upstream, tmp_path):
    fifo = run_dir(upstream, name="fifo")
    (fifo / "stats.csv").unlink()
    os.mkfifo(fifo / "stats.csv")
    linked = run_dir(upstream, name="linked")
    outside = tmp_path / "outside.csv"
    outside.write_bytes((linked / "failures.csv").read_bytes())
    (linked / "failures.csv").unlink()
    os.link(outside, linked / "failures.csv")
    big = run_dir(upstream, name="big")
    with open(big / "status.json", "r+b") as grown:
        grown.truncate(KNOWN_FILES["status.json"] + 1)
    ids, refusals = imported(upstream, tmp_path / "store")
    assert ids == [GOOD_ID]
    assert sorted(refusals) == sorted([
        f"refused {fifo}: stats.csv is a FIFO, not a regular file",
        f"refused {linked}: failures.csv has 2 hard links: a file linked from elsewhere is not taken",
        f"refused {big}: status.json is 1,048,577 bytes, over its cap of 1 MiB"])
    only_the_good_run(tmp_path / "store")


def test_only_the_files_upstream_writes_are_taken_and_with_the_projects_modes(upstream, tmp_path):
    hostile = run_dir(upstream)
    (hostile / "notes.txt").write_text("not a file upstream writes")
    (hostile / "stats.csv").chmod(0o666)
    fifo_elsewhere = hostile / "pipe"
    os.mkfifo(fifo_elsewhere)  # a name it does not know: left out, never opened
    ids, refusals = imported(upstream, tmp_path / "store")
    assert refusals == [] and ids == [GOOD_ID, "hostile-20261121t000000z"]
    copied = next((tmp_path / "store" / "runs" / "hostile").rglob("run_tag=t"))
    assert sorted(path.name for path in copied.iterdir()) == sorted(path.name for path in GOOD.iterdir())
    umask = os.umask(0)
    os.umask(umask)
    assert (copied / "stats.csv").stat().st_mode & 0o777 == 0o666 & ~umask


def test_an_empty_run_directory_is_not_a_trial(upstream, tmp_path):
    empty = upstream / "runs" / "empty" / "run_date=2026-11-21" / "run_ts=1795219200" / "run_tag=t"
    empty.mkdir(parents=True)
    ids, refusals = imported(upstream, tmp_path / "store")
    assert ids == [GOOD_ID]
    assert refusals == [f"refused {empty}: holds no status.json, which every upstream run has: not a run"]
    only_the_good_run(tmp_path / "store")


def test_object_store_runs_are_taken_by_key_under_the_same_rules(tmp_path):
    memory = fsspec.filesystem("memory")
    base = "/hostile-bucket/prefix/runs"
    good = GOOD.relative_to(GOOD.parents[3]).as_posix()
    for path in GOOD.iterdir():
        memory.pipe_file(f"{base}/{good}/{path.name}", path.read_bytes())
        memory.pipe_file(f"{base}/bad/run_date=2026-11-21/run_ts=-5/run_tag=t/{path.name}", path.read_bytes())
    memory.pipe_file(f"{base}/{good}/trial.json", b'{"trial_id": "someone-else-20200101t000000z"}')
    batch = import_all("memory://hostile-bucket/prefix", RunStore(tmp_path / "store"), check=check_staged_trial)
    assert [run.trial_id for run in batch.imported] == [GOOD_ID]
    assert [refusal.reason for refusal in batch.refused] == [
        "'run_ts=-5': not a run time (whole Unix seconds from 2000 to 2100)"]
    assert not (batch.imported[0].trial_dir / "trial.json").exists()


def test_a_ladder_of_more_steps_than_any_suite_may_have_is_refused(tmp_path):
    ladder = ROOT / "tests" / "data" / "upstream_ladder_runs" / "runs"
    root = tmp_path / "upstream"
    shutil.copytree(ladder, root / "runs")
    logs = next(root.rglob("logs.txt"))
    steps = ",".join(f"{users}:1s" for users in range(1, 200_001))
    logs.write_text(logs.read_text().replace("5:20s,10:30s,15:25s,20:40s", steps))
    ids, refusals = imported(root, tmp_path / "store")
    assert ids == []
    assert len(refusals) == 1 and refusals[0].startswith(f"refused {logs.parent}: ")
    assert "a ladder of 200,000 steps is too long: at most 100" in refusals[0]
    assert not list((tmp_path / "store").rglob("stats_history.csv"))


def test_a_ladder_on_a_line_longer_than_any_runner_logs_is_refused(tmp_path):
    # The log is read in 64 KiB pieces; a spec cut by a piece's end would otherwise be read as a shorter ladder.
    ladder = ROOT / "tests" / "data" / "upstream_ladder_runs" / "runs"
    root = tmp_path / "upstream"
    shutil.copytree(ladder, root / "runs")
    logs = next(root.rglob("logs.txt"))
    flag = "    --ladder 5:20s,10:30s,15:25s,20:40s"
    padding = "x" * (64 * 1024 - len(flag) + len("5:20s,10:3"))
    logs.write_text(logs.read_text().replace(flag, padding + flag, 1))
    ids, refusals = imported(root, tmp_path / "store")
    assert ids == []
    assert len(refusals) == 1
    assert "--ladder: its line runs past 65,536 characters, longer than any line a runner logs" in refusals[0]


@pytest.mark.parametrize(("spoil", "said"), [
    (lambda run: (run / "stats.csv").write_text((run / "stats.csv").read_text().replace(",190.2,", ",NaN,")),
     "not a finite number (the first nan)"),
    (lambda run: (run / "stats.csv").write_text((run / "stats.csv").read_text().replace(",190.2,", ",-inf,")),
     "not a finite number (the first -inf)"),
    (lambda run: (run / "server_summary.json").write_text(
        (run / "server_summary.json").read_text().replace('"steady_start_ts": 1795132805', '"steady_start_ts": 1e308')),
     "server_summary.json: metadata.steady_start_ts is 1e+308: not a time from 2000 to 2100"),
    (lambda run: (run / "server_summary.json").write_text(
        (run / "server_summary.json").read_text().replace('"steady_end_ts": 1795132810', '"steady_end_ts": -1')),
     "not a time from 2000 to 2100"),
])
def test_numbers_that_are_not_numbers_are_refused_naming_the_file(upstream, tmp_path, spoil, said):
    hostile = run_dir(upstream)
    spoil(hostile)
    ids, refusals = imported(upstream, tmp_path / "store")
    assert ids == [GOOD_ID]
    assert len(refusals) == 1 and refusals[0].startswith(f"refused {hostile}: ") and said in refusals[0], refusals
    only_the_good_run(tmp_path / "store")


def test_the_import_command_counts_what_it_refused_and_says_when_it_cannot_list(upstream, tmp_path):
    import subprocess
    import sys

    from tests.support.projects import make_project, project_env

    for number in range(25):
        (upstream / "runs" / f"empty{number:02d}" / "run_date=2026-11-21" / "run_ts=1795219200" / "run_tag=t").mkdir(
            parents=True)
    env = project_env(make_project(tmp_path / "project", "suites: []\n"))
    cli = str(Path(sys.executable).parent / "substrate-bench")
    done = subprocess.run([cli, "import", str(upstream), "--max-runs", "25"], capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        f"Error: {upstream} holds 26 runs, more than the 25 one import takes; nothing was imported (--max-runs takes "
        "more)"]
    assert not list((tmp_path / "project").rglob("status.json"))
    done = subprocess.run([cli, "import", str(upstream)], capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert sum(line.startswith("refused ") for line in lines) == 20
    assert "… and 5 more refused (most often: holds no status.json, which every upstream run has: not a run ×5)" \
        in done.stderr
    assert "Traceback" not in done.stderr and GOOD_ID in done.stdout
    unreachable = {**env, "AWS_ENDPOINT_URL": "http://127.0.0.1:9", "AWS_ACCESS_KEY_ID": "x",
                   "AWS_SECRET_ACCESS_KEY": "x", "AWS_MAX_ATTEMPTS": "1"}
    done = subprocess.run([cli, "import", "s3://nowhere/prefix"], capture_output=True, text=True, env=unreachable,
                          timeout=300)
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith("Error: s3://nowhere/prefix cannot be listed: ")


def test_runs_copied_by_an_import_whose_load_fails_leave_the_store_with_it(upstream, tmp_path):
    from substrate_assets.app.loads import import_upstream

    store = RunStore(tmp_path / "store")
    not_a_database = tmp_path / "warehouse.duckdb"
    not_a_database.write_bytes(b"this is no DuckDB file" * 100)
    with pytest.raises(Exception):  # noqa: B017 - whatever DuckDB says of the file; what matters is the store
        import_upstream(str(upstream), store, not_a_database, record=pytest.fail)
    assert not list((tmp_path / "store" / "runs").rglob("status.json"))
    assert not list((tmp_path / "store" / ".staging").iterdir())


def test_a_trial_id_the_warehouse_holds_for_another_trial_is_refused_naming_both(upstream, tmp_path):
    """Two projects sharing one warehouse (as machines share the lake), each with its own store: a run of the same
    suite and second under another tag names the same trial id, and must not replace the first one's rows."""
    import dagster as dg

    from substrate_assets.app.load_records import write_record
    from substrate_assets.app.loads import import_upstream
    from substrate_assets.warehouse.connection import connect
    from substrate_assets.warehouse.trial_writes import TrialIdTaken, load_trials

    warehouse = tmp_path / "warehouse.duckdb"
    first_store = RunStore(tmp_path / "first")
    with dg.DagsterInstance.ephemeral() as instance:
        first = import_upstream(str(upstream), first_store, warehouse, record=partial(write_record, instance))
        assert [run.trial_id for run in first.runs] == [GOOD_ID] and not first.refused
        with connect(warehouse, read_only=True) as connection:
            before = connection.execute("SELECT trial_dir, (SELECT count(*) FROM request_samples) "
                                        "FROM trial_manifests").fetchall()

        other = tmp_path / "other-upstream"
        same_second = run_dir(other, name="glutton_baseline_5_users", ts=1795132800, date="2026-11-20", tag="other")
        second = import_upstream(str(other), RunStore(tmp_path / "second"), warehouse,
                                 record=partial(write_record, instance))
    assert second.runs == []
    assert [str(refusal) for refusal in second.refused] == [
        f"refused {same_second}: trial {GOOD_ID} is already in the warehouse from {before[0][0]}; "
        f"{tmp_path / 'second' / 'runs' / 'glutton_baseline_5_users' / 'run_date=2026-11-20' / 'run_ts=1795132800'}"
        "/run_tag=other names the same id and is refused (a trial id names one trial)"]
    assert not list((tmp_path / "second" / "runs").rglob("status.json"))
    with connect(warehouse) as connection:
        assert connection.execute("SELECT trial_dir, (SELECT count(*) FROM request_samples) "
                                  "FROM trial_manifests").fetchall() == before
        # The warehouse's own guarantee, whatever path a load comes by.
        with pytest.raises(TrialIdTaken, match=f"trial {GOOD_ID} is already in the warehouse"):
            load_trials(connection, [TrialDirectory(same_second)])
        # The same trial loaded again (here from where its first store is) replaces its own rows.
        load_trials(connection, [TrialDirectory(first.runs[0].trial_dir)])
        assert connection.execute("SELECT trial_dir, (SELECT count(*) FROM request_samples) "
                                  "FROM trial_manifests").fetchall() == before


def test_a_long_import_counts_its_runs_as_it_goes():
    import io

    from rich.console import Console

    from substrate_assets.cli.output import COUNT_LINE_EVERY_S, count_display

    written = io.StringIO()
    now = [0.0]
    display, counted = count_display(Console(file=written, width=200), "runs imported", clock=lambda: now[0])
    with display:
        for done in range(1, 6):
            now[0] += COUNT_LINE_EVERY_S / 2
            counted(done, 5)
    # Off a terminal: a line each time the interval has passed, none for the last run (the summary follows it).
    assert written.getvalue().splitlines() == ["2 of 5 runs imported", "4 of 5 runs imported"]


@pytest.mark.parametrize(("header", "said"), [
    (",".join(f"c{number}" for number in range(1_000_000)), "stats.csv: its header is longer than 16 KiB; no Locust "
                                                            "CSV's is"),
    (",".join(f"c{number}" for number in range(200)), "stats.csv: a header of 200 columns or more; a Locust CSV has "
                                                      "at most 128"),
])
def test_a_csv_header_no_locust_csv_has_is_refused_before_it_is_read(upstream, tmp_path, header, said):
    hostile = run_dir(upstream)
    (hostile / "stats.csv").write_text(header + "\n")
    ids, refusals = imported(upstream, tmp_path / "store")
    assert ids == [GOOD_ID]
    assert refusals == [f"refused {hostile}: {said}"]
    only_the_good_run(tmp_path / "store")


@pytest.mark.parametrize(("name", "spoil", "said"), [
    ("server_summary.json", lambda doc: {**doc, "node_psi": "high"},
     "server_summary.json, stats.jsonl: does not read as server_telemetry: ValueError: node_psi is a string, where "
     "an object goes"),
    ("server_summary.json", lambda doc: {**doc, "cluster_packing": [1, 2]},
     "server_summary.json, stats.jsonl: does not read as server_telemetry: ValueError: cluster_packing is a list, "
     "where an object goes"),
    ("server_summary.json", lambda doc: {**doc, "snapshots": {**doc["snapshots"], "size_p50_mb": {"x": 1}}},
     "server_summary.json, stats.jsonl: does not read as server_telemetry: ValueError: snapshots.size_p50_mb is an "
     "object, where a number goes"),
    ("status.json", lambda doc: [doc],
     "status.json, stats.jsonl, stats.csv: does not read as trial_manifests: ValueError: status.json is a list, "
     "where an object goes"),
    ("status.json", lambda doc: {**doc, "locust_exit_code": "zero"},
     "status.json, stats.jsonl, stats.csv: does not read as trial_manifests: ValueError: status.json: "
     "locust_exit_code is a string, where a whole number goes"),
])
def test_a_value_of_the_wrong_kind_is_refused_naming_its_key(upstream, tmp_path, name, spoil, said):
    import json

    hostile = run_dir(upstream)
    (hostile / name).write_text(json.dumps(spoil(json.loads((hostile / name).read_text()))))
    ids, refusals = imported(upstream, tmp_path / "store")
    assert ids == [GOOD_ID]
    assert refusals == [f"refused {hostile}: {said}"]
    only_the_good_run(tmp_path / "store")


@pytest.mark.parametrize(("spoil", "said"), [
    (lambda row: {**row, "measurements": "str"} if row["metric"] == "trial_summary" else row,
     "stats.jsonl: the last trial_summary row's measurements is a string, where an object goes"),
    (lambda row: [row] if row["metric"] == "server_summary" else row, ":6: not a JSON object but list"),
])
def test_a_stats_jsonl_row_of_the_wrong_kind_is_refused_naming_it(upstream, tmp_path, spoil, said):
    import json

    hostile = run_dir(upstream)
    rows = [json.loads(line) for line in (hostile / "stats.jsonl").read_text().splitlines() if line.strip()]
    (hostile / "stats.jsonl").write_text("".join(json.dumps(spoil(row)) + "\n" for row in rows))
    ids, refusals = imported(upstream, tmp_path / "store")
    assert ids == [GOOD_ID]
    [refusal] = refusals
    assert refusal.startswith(f"refused {hostile}: ") and said in refusal and "Error: 'str'" not in refusal
    only_the_good_run(tmp_path / "store")
