"""Faults at the warehouse's doors: a malformed run never enters the store (and its neighbours still load), a run
already in the store that does not read is skipped by `rebuild`, a load landing while a rebuild runs ends in the new
warehouse, and `sql` reaches nothing but the warehouse.

The CLI runs in-process through click's CliRunner, except the load racing a rebuild, which is a real second process;
the rebuild is held at its listing of the store by a hook, so the interleaving is built, not timed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pytest
from click.testing import CliRunner, Result

from substrate_assets.cli import main
from substrate_assets.results.importer import import_all, import_runs
from substrate_assets.results.layout import RunStore, TrialKey
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.raw_tables import RAW_TABLES
from substrate_assets.warehouse.rebuild import rebuild
from substrate_assets.warehouse.trial_rows import check_staged_trial
from tests.support.projects import PROJECT_PATHS

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = ROOT / "tests" / "data" / "upstream_runs"
MODELS = ROOT / "dbt_like_sql"
GOOD = "glutton_baseline_1_user-20260502t080000z"
BAD = "glutton_baseline_5_users-20261120t000000z"
BAD_RUN = "runs/glutton_baseline_5_users/run_date=2026-11-20/run_ts=1795132800/" \
          "run_tag=4f8a1c0d2b9e7f6a5c3d1e0f9a8b7c6d5e4f3a2b"
HELD_S = 120.0  # far beyond any normal wait; only a broken interleaving runs into it


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project root of its own (models, store, warehouse, Dagster home) that the CLI runs against."""
    shutil.copytree(MODELS, tmp_path / "dbt_like_sql")
    shutil.copytree(ROOT / "scripts", tmp_path / "scripts")
    (tmp_path / "suites.yaml").write_text("suites: []\n")
    for name in PROJECT_PATHS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("SUBSTRATE_BENCH_ROOT", str(tmp_path))
    return tmp_path


def cli(*args: str) -> Result:
    return CliRunner().invoke(main, list(args))


def stderr_lines(result: Result) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


def rows_of(warehouse: Path, trial_id: str) -> dict[str, int]:
    with connect(warehouse, read_only=True) as connection:
        return {name: connection.execute(f"SELECT count(*) FROM {name} WHERE trial_id = ?", [trial_id]).fetchone()[0]
                for name in RAW_TABLES}


def json_error(text: str) -> str:
    """What the JSON parser says of ``text``: the reason a refusal gives."""
    try:
        json.loads(text)
    except ValueError as error:
        return str(error)
    raise AssertionError(f"{text!r} is JSON")


BROKEN_SUMMARY = '{"cluster_packing": {"p50": 0.4,\n'
BROKEN_LINE = '{"metric": "request_stats", "measurements": {\n'


def empty_every_file(run: Path) -> None:
    for path in run.iterdir():
        path.write_bytes(b"")


def break_server_summary(run: Path) -> None:
    (run / "server_summary.json").write_text(BROKEN_SUMMARY)


def break_stats_jsonl_line_3(run: Path) -> None:
    lines = (run / "stats.jsonl").read_text().splitlines(keepends=True)
    lines[2] = BROKEN_LINE
    (run / "stats.jsonl").write_text("".join(lines))


FAULTS: dict[str, tuple[Callable[[Path], None], str]] = {
    # (how the run is broken, the refusal after "refused <run>: ")
    "empty files": (empty_every_file, "status.json: empty file"),
    "broken server_summary.json": (break_server_summary,
                                   f"server_summary.json: not JSON: {json_error(BROKEN_SUMMARY)}"),
    "bad stats.jsonl line": (break_stats_jsonl_line_3, f"stats.jsonl:3: not JSON: {json_error(BROKEN_LINE)}"),
}


@pytest.mark.parametrize("fault", FAULTS)
def test_a_malformed_run_is_refused_whole_and_its_neighbour_loads(project: Path, tmp_path: Path, fault: str) -> None:
    source = tmp_path / "upstream"
    shutil.copytree(UPSTREAM, source)
    breaks, refusal = FAULTS[fault]
    breaks(source / BAD_RUN)

    imported = cli("import", str(source))

    assert imported.exit_code == 1, imported.output
    assert stderr_lines(imported) == [f"refused {source / BAD_RUN}: {refusal}",
                                      "Error: 1 of 2 runs refused (above); the other 1 loaded"]
    store = RunStore(project / "store")
    assert [TrialKey.parse(path.as_posix()).trial_id for path in store.trial_dirs()] == [GOOD]
    assert list((project / "store" / ".staging").iterdir()) == []
    warehouse = project / "warehouse.duckdb"
    assert set(rows_of(warehouse, BAD).values()) == {0}
    assert rows_of(warehouse, GOOD)["trial_manifests"] == 1 and rows_of(warehouse, GOOD)["locust_stats"] > 0

    rebuilt = cli("rebuild")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert "from 1 trials" in rebuilt.stdout
    assert rows_of(warehouse, GOOD)["trial_manifests"] == 1 and set(rows_of(warehouse, BAD).values()) == {0}


def test_an_unreadable_run_in_the_store_is_skipped_by_rebuild(project: Path) -> None:
    """Put there by hand (or by an older version): rebuild loads the rest, names the file, and exits 1."""
    store = project / "store"
    shutil.copytree(UPSTREAM / "runs", store / "runs")
    break_stats_jsonl_line_3(store / BAD_RUN)

    rebuilt = cli("rebuild")

    assert rebuilt.exit_code == 1, rebuilt.output
    assert stderr_lines(rebuilt) == [
        f"skipped {store / BAD_RUN}: {FAULTS['bad stats.jsonl line'][1]}",
        "Error: 1 unreadable trials skipped (above: fix or remove them in the run store); 1 loaded"]
    assert "from 1 trials" in rebuilt.stdout
    warehouse = project / "warehouse.duckdb"
    assert rows_of(warehouse, GOOD)["trial_manifests"] == 1 and set(rows_of(warehouse, BAD).values()) == {0}
    with connect(warehouse, read_only=True) as connection:
        assert connection.execute("SELECT trial_id FROM trials").fetchall() == [(GOOD,)]

    # Importing the (intact) original again does not overwrite the stored copy: it is reported, the other loads.
    imported = cli("import", str(UPSTREAM))
    assert imported.exit_code == 1, imported.output
    assert stderr_lines(imported)[0] == (f"refused {store / BAD_RUN}: in the store but unreadable: "
                                         f"{FAULTS['bad stats.jsonl line'][1]}")
    assert rows_of(warehouse, GOOD)["trial_manifests"] == 1 and set(rows_of(warehouse, BAD).values()) == {0}


def test_an_import_never_removes_a_staging_directory_another_process_owns(project: Path) -> None:
    """The run's id is being assembled by a live process (here: this one, through the store's own claim): the import
    refuses that run, leaves the directory alone, and loads the other. Once its owner is dead the directory is swept
    and the run imports."""
    store = RunStore(project / "store")
    key = TrialKey.parse(BAD_RUN)
    staging = store.claim(key)
    (staging / "stats.csv").write_text("being written\n")

    batch = import_all(str(UPSTREAM), store, check_staged_trial)

    assert [run.trial_id for run in batch.imported] == [GOOD]
    [refused] = batch.refused
    assert str(refused) == (f"refused {UPSTREAM / BAD_RUN}: trial {BAD} is being assembled in {staging} by another "
                            "run (or was interrupted there)")
    assert (staging / "stats.csv").read_text() == "being written\n"

    shutil.rmtree(staging)  # claimed again by a process that then dies without landing
    subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                    "from substrate_assets.results.layout import RunStore, TrialKey; "
                    "RunStore(Path(sys.argv[1])).claim(TrialKey.parse(sys.argv[2]))", str(store.root), BAD_RUN],
                   check=True, timeout=HELD_S)
    again = import_all(str(UPSTREAM), store, check_staged_trial)
    assert [(run.trial_id, run.copied) for run in again.imported] == [(GOOD, False), (BAD, True)]
    assert again.refused == [] and not staging.exists()
    assert sorted(path.name for path in store.trial_dir(key).iterdir()) == sorted(
        path.name for path in (UPSTREAM / BAD_RUN).iterdir())  # whole, and without the claim's owner record


def test_a_run_that_cannot_be_put_in_the_store_is_refused_and_nothing_of_it_stays(project: Path) -> None:
    """Where the run's directory goes is a file (a damaged store): that run is refused in one line, its staged copy
    removed, and the other run imports."""
    store = RunStore(project / "store")
    key = TrialKey.parse(BAD_RUN)
    blocked = store.trial_dir(key).parent
    blocked.parent.mkdir(parents=True)
    blocked.write_text("not a directory\n")

    batch = import_all(str(UPSTREAM), store, check_staged_trial)

    assert [run.trial_id for run in batch.imported] == [GOOD]
    [refused] = batch.refused
    assert str(refused).startswith(f"refused {UPSTREAM / BAD_RUN}: cannot be put in the store (")
    assert "\n" not in str(refused)
    assert not store.staging_dir(key).exists() and blocked.read_text() == "not a directory\n"


class HeldRebuild:
    """`rebuild` in a thread, held at its first listing of the store (the warehouse already held as its writer)
    until ``release``."""

    def __init__(self, store: RunStore, warehouse: Path) -> None:
        self.listed = threading.Event()
        self.go = threading.Event()
        self.listings: list[list[str]] = []
        self.outcome: dict[str, object] = {}
        self.thread = threading.Thread(target=self._run, args=(store, warehouse))
        self.thread.start()
        assert self.listed.wait(HELD_S), "the rebuild never listed the store"

    def _hold(self, found: list[Path]) -> None:
        self.listings.append([path.parent.parent.parent.name for path in found])
        if not self.listed.is_set():
            self.listed.set()
            assert self.go.wait(HELD_S), "the test never let the rebuild go"

    def _run(self, store: RunStore, warehouse: Path) -> None:
        try:
            self.outcome["rebuilt"] = rebuild(store, warehouse, MODELS, on_listed=self._hold)
        except BaseException as error:  # handed to the test thread
            self.outcome["error"] = error

    def release(self) -> None:
        self.go.set()
        self.thread.join(HELD_S)
        assert not self.thread.is_alive()
        if "error" in self.outcome:
            raise self.outcome["error"]  # type: ignore[misc]


@pytest.fixture
def store_with_one_trial(project: Path) -> Iterator[RunStore]:
    store = RunStore(project / "store")
    import_runs(str(UPSTREAM), store)
    shutil.rmtree(store.root / "runs" / "glutton_baseline_5_users")  # the late trial lands during the rebuild
    yield store


@pytest.mark.parametrize("old_warehouse", [False, True], ids=["no warehouse yet", "an old warehouse"])
def test_a_load_landing_while_rebuild_runs_ends_in_the_new_warehouse(project: Path, store_with_one_trial: RunStore,
                                                                   old_warehouse: bool) -> None:
    """A real second process imports a run while the rebuild is held after listing the store: the import waits for
    the warehouse (a rebuild with no warehouse to hold used to let it write a file about to be replaced), and its
    trial is in the warehouse the rebuild leaves."""
    warehouse = project / "warehouse.duckdb"
    if old_warehouse:
        rebuild(RunStore(project / "nothing"), warehouse, MODELS)
    held = HeldRebuild(store_with_one_trial, warehouse)
    assert held.listings == [["glutton_baseline_1_user"]]
    assert warehouse.exists(), "the rebuild holds no warehouse: a load now would write a file it then replaces"
    inode = warehouse.stat().st_ino

    loader = subprocess.Popen([str(Path(sys.executable).parent / "substrate-bench"), "import", str(UPSTREAM)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    said = []
    try:
        assert loader.stderr is not None
        for line in loader.stderr:  # until the loader waits for the warehouse, or ends without waiting
            said.append(line)
            if line.startswith("waiting for the warehouse"):
                break
        assert said and said[-1].startswith(f"waiting for the warehouse {warehouse}"), "".join(said)
        assert store_with_one_trial.trial_dir(TrialKey.parse(BAD_RUN)).is_dir()  # landed while the rebuild runs
        assert warehouse.stat().st_ino == inode
    finally:
        held.release()
        out, err = loader.communicate(timeout=HELD_S)
    assert loader.returncode == 0, "".join(said) + err
    assert BAD in out

    assert warehouse.stat().st_ino != inode
    assert rows_of(warehouse, BAD)["trial_manifests"] == 1 and rows_of(warehouse, BAD)["locust_stats"] > 0
    assert rows_of(warehouse, GOOD)["trial_manifests"] == 1
    with connect(warehouse, read_only=True) as connection:
        assert sorted(connection.execute("SELECT trial_id FROM trials").fetchall()) == [(GOOD,), (BAD,)]


def test_a_trial_landing_without_its_load_during_rebuild_is_loaded_before_the_swap(
        project: Path, store_with_one_trial: RunStore) -> None:
    """A trial copied into the store while the rebuild runs whose own load never came (it gave up waiting): the
    rebuild lists the store again before building the models and loads it."""
    warehouse = project / "warehouse.duckdb"
    held = HeldRebuild(store_with_one_trial, warehouse)
    import_runs(str(UPSTREAM), store_with_one_trial)  # into the store only
    held.release()
    assert held.listings == [["glutton_baseline_1_user"], ["glutton_baseline_5_users"]]
    assert [trial.trial_id for trial in held.outcome["rebuilt"].trials] == [GOOD, BAD]  # type: ignore[attr-defined]
    assert rows_of(warehouse, BAD)["trial_manifests"] == 1 and rows_of(warehouse, BAD)["locust_stats"] > 0


@pytest.fixture
def queryable(project: Path, tmp_path: Path) -> tuple[Path, Path]:
    """A warehouse with one trial, and another DuckDB file beside it holding one row."""
    store = RunStore(project / "store")
    import_runs(str(UPSTREAM), store)
    rebuild(store, project / "warehouse.duckdb", MODELS)
    other = tmp_path / "other.duckdb"
    with duckdb.connect(str(other)) as connection:
        connection.execute("CREATE TABLE kept AS SELECT 1 AS one")
    return project / "warehouse.duckdb", other


ESCAPES = {
    "COPY TO a file": ("COPY (SELECT * FROM trials) TO '{out}'", "reads the warehouse only"),
    "EXPORT DATABASE": ("EXPORT DATABASE '{out}'", "reads the warehouse only"),
    "ATTACH read-write and INSERT": ("ATTACH '{other}' AS other (READ_ONLY false); INSERT INTO other.kept VALUES (2)",
                                     "reads the warehouse only"),
    "read_text": ("SELECT * FROM read_text('/etc/shadow')", "reads the warehouse only"),
    "glob": ("SELECT * FROM glob('/root/*')", "reads the warehouse only"),
    "INSTALL httpfs": ("INSTALL httpfs", "reads the warehouse only"),
    "LOAD httpfs": ("LOAD httpfs", "reads the warehouse only"),
    "SET enable_external_access": ("SET enable_external_access = true", "reads the warehouse only"),
    "DROP": ("DROP TABLE trials", "reads the warehouse only"),
    "CREATE": ("CREATE TABLE x (i INTEGER)", "reads the warehouse only"),
    "INSERT": (f"INSERT INTO trial_manifests (trial_id) VALUES ('{GOOD}')", "reads the warehouse only"),
}


@pytest.mark.parametrize("escape", ESCAPES)
def test_sql_refuses_to_reach_past_the_warehouse(queryable: tuple[Path, Path], tmp_path: Path, escape: str) -> None:
    warehouse, other = queryable
    out = tmp_path / "x"
    statement, why = ESCAPES[escape]
    before = warehouse.read_bytes()

    refused = cli("sql", statement.format(out=out, other=other))

    assert refused.exit_code == 1, refused.output
    [line] = stderr_lines(refused)
    assert line.startswith(f"Error: refused: sql {why}")
    assert not out.exists()
    with duckdb.connect(str(other), read_only=True) as connection:
        assert connection.execute("SELECT * FROM kept").fetchall() == [(1,)]
    assert warehouse.read_bytes() == before
    # and the warehouse itself still opens for reading
    allowed = cli("sql", "SELECT trial_id FROM trials ORDER BY 1", "--format", "csv")
    assert allowed.exit_code == 0 and allowed.stdout.splitlines() == ["trial_id", GOOD, BAD], allowed.output


def test_sql_never_folds_a_value_inside_its_cell(queryable: tuple[Path, Path]) -> None:
    # 300 characters in one cell and a dozen columns beside it: far wider than the 200 columns of a pipe.
    columns = ", ".join(f"'{'y' * 20}' AS c{n}" for n in range(12))
    shown = cli("sql", f"SELECT repeat('x', 300) AS long_value, {columns}")
    assert shown.exit_code == 0, shown.output
    assert "x" * 300 in shown.stdout
    assert all(line.count("y" * 20) in (0, 12) for line in shown.stdout.splitlines())
