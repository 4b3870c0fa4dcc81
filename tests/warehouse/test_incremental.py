"""A load updates the models for the trials it loaded (warehouse/models/build.py's update, warehouse/changes.py's
bookkeeping), and the tables it leaves are the tables a rebuild of the same store builds: every model, every row
(EXCEPT ALL both ways), whether the trials come one by one, a trial comes again with other files, a model's SQL
changes, or the warehouse predates the bookkeeping. The store is realistic: two upstream runs and local trials of
two suites whose configurations repeat (series with a change point), some with failures, one stopped early."""

import dataclasses
import json
import logging
import random
import shutil
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest

from substrate_assets.results.importer import import_runs
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse import changes
from substrate_assets.warehouse import rebuild as rebuild_module
from substrate_assets.warehouse.change_points import CHANGE_POINTS
from substrate_assets.warehouse.checks import ColumnTest, load_tests, run_test, run_test_groups, run_tests
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.models.build import build
from substrate_assets.warehouse.models.discovery import ModelError, build_order, discover
from substrate_assets.warehouse.models.marts import refresh_marts
from substrate_assets.warehouse.models.narrowing import narrowed_source
from substrate_assets.warehouse.models.per_trial_check import per_trial_mismatches
from substrate_assets.warehouse.models.python_models import every_model
from substrate_assets.warehouse.models.tables import rows_apart
from substrate_assets.warehouse.raw_tables import ensure_schema
from substrate_assets.warehouse.rebuild import rebuild
from substrate_assets.warehouse.refresh import load_and_refresh
from substrate_assets.warehouse.trial_densities import DENSITY_FIGURES, trial_densities
from substrate_assets.warehouse.trial_rows import read_trials
from substrate_assets.warehouse.trial_writes import TrialIdTaken, load_trials
from tests.support.raw_rows import insert
from tests.support.synthetic_trials import write_trial

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "dbt_like_sql"
PER_TRIAL = {"trials", "density_frontiers", "wake_samples", "wake_latency_distribution", "wake_latency_histogram",
             "wake_latency_windows", "step_latency", "trial_summary", "load_points", "slo_capacity", "trial_figures",
             "metric_history"}
PARTITIONED = {"capacity_history": ("suite", "configuration")}


def _latencies(rng: np.random.Generator, wake_ms: float) -> dict[str, np.ndarray]:
    return {"WakeFirstTouch": rng.lognormal(np.log(wake_ms), 0.3, 40).round(3),
            "Step_01_edit": rng.lognormal(3.0, 0.5, 30).round(3), "Step_02_test": rng.lognormal(3.5, 0.5, 20).round(3)}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> RunStore:
    store = RunStore(tmp_path_factory.mktemp("incremental") / "store")
    import_runs(str(ROOT / "tests" / "data" / "upstream_runs"), store)
    rng = np.random.default_rng(7)
    for index in range(12):
        # suite "alpha": one configuration whose wake latency steps up at its 7th trial (a change point); "beta":
        # two configurations (users 4 and 8), one trial with failed requests and one stopped early.
        suite = "alpha" if index % 2 == 0 else "beta"
        wake_ms = (40.0 if index < 6 else 90.0) if suite == "alpha" else 30.0
        write_trial(store, suite, 1_700_000_000 + index * 600, _latencies(rng, wake_ms),
                    sut_version=f"v{index // 4}", users=4 if suite == "alpha" or index % 4 == 1 else 8,
                    failures=5 if index == 5 else 0, completed=index != 9)
    return store


def _tables(connection: duckdb.DuckDBPyConnection, database: str) -> list[str]:
    return [row[0] for row in connection.execute(
        "SELECT table_name FROM duckdb_tables() WHERE database_name = ? AND schema_name = 'main' ORDER BY 1",
        [database]).fetchall()]


def differences(built: Path, rebuilt: Path) -> dict[str, int]:
    """Per table of either warehouse, the rows one has and the other does not (both ways, with multiplicity; a
    map's entries in any order), -1 when a table's columns differ; only the tables that differ."""
    with duckdb.connect() as connection:
        connection.execute(f"ATTACH '{built}' AS built (READ_ONLY)")
        connection.execute(f"ATTACH '{rebuilt}' AS rebuilt (READ_ONLY)")
        names = _tables(connection, "built")
        assert names == _tables(connection, "rebuilt")
        differ = {}
        for name in names:
            columns = [connection.execute(f"DESCRIBE {side}.main.{name}").fetchall() for side in ("built", "rebuilt")]
            if columns[0] != columns[1]:
                differ[name] = -1
                continue
            count = rows_apart(connection, f"built.main.{name}", f"rebuilt.main.{name}")
            if count:
                differ[name] = count
        return differ


def load_one_by_one(store: RunStore, warehouse: Path, trial_dirs: list[Path]) -> list:
    """Each trial loaded and the marts updated after it, as a run or an import does; each update's results."""
    updates = []
    for directory in trial_dirs:
        with connect(warehouse) as connection:
            load_trials(connection, [TrialDirectory(directory)])
            refreshed = refresh_marts(connection, MODELS)
            updates.append((refreshed.tables, refreshed.tests))
    return updates


def suite_of(directory: Path) -> str:
    return json.loads((directory / "trial.json").read_text())["suite"]


def _rebuilt(store: RunStore, path: Path) -> Path:
    result = rebuild(store, path, MODELS)
    assert all(outcome.passed for outcome in result.tests)
    return path


def test_the_per_trial_models_are_per_trial_on_a_realistic_warehouse(store, tmp_path):
    warehouse = _rebuilt(store, tmp_path / "w.duckdb")
    models = discover(MODELS)
    assert {name for name, model in models.items() if model.per_trial} == PER_TRIAL | set(PARTITIONED)
    assert {name: model.partition_by for name, model in models.items() if model.partition_by} == PARTITIONED
    with connect(warehouse) as connection:
        assert connection.execute("SELECT count(*) FROM change_points").fetchone()[0] > 0  # the series move
        every = sorted(PER_TRIAL | set(PARTITIONED))
        assert {name: per_trial_mismatches(connection, models[name]) for name in every} == dict.fromkeys(every, 0)
        # The check sees a model that is not: capacity_history numbers each trial among its configuration's, so
        # run over each trial alone it is not itself.
        alone = dataclasses.replace(models["capacity_history"], partition_by=())
        assert per_trial_mismatches(connection, alone) > 0


def test_trials_loaded_one_by_one_give_the_rebuilds_tables(store, tmp_path):
    trial_dirs = store.trial_dirs()
    random.Random(3).shuffle(trial_dirs)
    warehouse = tmp_path / "w.duckdb"
    updates = load_one_by_one(store, warehouse, trial_dirs)
    assert differences(warehouse, _rebuilt(store, tmp_path / "r.duckdb")) == {}
    built, outcomes = updates[-1]
    last = TrialDirectory(trial_dirs[-1]).trial_id
    by_name = {table.name: table for table in built}
    # The last load rewrote only its own trial's rows of every per-trial model, tested only them, and rebuilt the
    # others; change_points analysed again only the series of that trial (the trial is new).
    partition = by_name["capacity_history"].updated
    assert {name: by_name[name].updated for name in PER_TRIAL - {"metric_history"}} == \
        dict.fromkeys(PER_TRIAL - {"metric_history"}, (last,))
    # capacity_history rewrote the trials of the last one's configuration; metric_history and change_points those.
    assert last in partition and len(partition) > 1
    assert by_name["metric_history"].updated == partition and by_name[CHANGE_POINTS].updated == partition
    assert outcomes and all(outcome.passed for outcome in outcomes)
    with connect(warehouse) as connection:
        # A load's figures (density_frontiers over its trial's rows alone) are the model's.
        assert trial_densities(connection, [last])[last] == dict(zip(DENSITY_FIGURES, connection.execute(
            f"SELECT {', '.join(DENSITY_FIGURES)} FROM density_frontiers WHERE trial_id = ?", [last]).fetchone(),
            strict=True))
        # Every model took up every load: the copies of the loads are gone.
        assert connection.execute(f"SELECT count(*) FROM {changes.STAGED}").fetchone()[0] == 0
        assert connection.execute("SELECT count(*) FROM changes.request_samples").fetchone()[0] == 0


def test_a_trial_loaded_again_with_other_files_gives_the_rebuilds_tables(store, tmp_path):
    copy = RunStore(tmp_path / "store")
    shutil.copytree(store.root, copy.root)
    warehouse = tmp_path / "w.duckdb"
    load_one_by_one(copy, warehouse, copy.trial_dirs())
    # One alpha trial ran with other users (it leaves its series for another) and other wake latencies.
    changed = next(directory for directory in copy.trial_dirs() if suite_of(directory) == "alpha")
    manifest = json.loads((changed / "trial.json").read_text())
    manifest["knobs"]["users"] = 16
    (changed / "trial.json").write_text(json.dumps(manifest))
    shutil.copy(next(directory for directory in copy.trial_dirs() if suite_of(directory) == "beta") / "requests.parquet",
                changed / "requests.parquet")
    [(built, outcomes)] = load_one_by_one(copy, warehouse, [changed])
    assert all(outcome.passed for outcome in outcomes)
    assert {table.name: table.updated for table in built}[CHANGE_POINTS] is None  # a series lost a trial: all again
    assert differences(warehouse, _rebuilt(copy, tmp_path / "r.duckdb")) == {}


def test_a_changed_model_is_built_whole_and_so_is_every_model_that_reads_it(store, tmp_path):
    models = tmp_path / "models"
    shutil.copytree(MODELS, models)
    warehouse = tmp_path / "w.duckdb"
    first, *rest = store.trial_dirs()
    with connect(warehouse) as connection:
        load_trials(connection, [TrialDirectory(directory) for directory in rest])
        refresh_marts(connection, models)
    # A new column in step_latency; every trial's actors_per_node doubled in density_frontiers, which trial_summary
    # reads (and so takes up whole, though its own SQL did not change).
    sql = models / "step_latency.sql"
    sql.write_text(sql.read_text().replace("    substr(name, 6) AS step,", "    substr(name, 6) AS step,\n"
                                           "    count(*) AS requests,"))
    sql = models / "density_frontiers.sql"
    sql.write_text(sql.read_text().replace("recomputed_actors_per_node END AS actors_per_node,",
                                           "recomputed_actors_per_node END * 2 AS actors_per_node,"))
    with connect(warehouse) as connection:
        load_trials(connection, [TrialDirectory(first)])
        built = refresh_marts(connection, models).tables
    updated = {table.name: table.updated for table in built}
    assert updated["step_latency"] is None and updated["density_frontiers"] is None
    assert updated["trial_summary"] is None and updated["trials"] == (TrialDirectory(first).trial_id,)
    rebuild(store, tmp_path / "r.duckdb", models)
    assert differences(warehouse, tmp_path / "r.duckdb") == {}


def test_a_warehouse_from_before_the_bookkeeping_is_brought_up_to_date(store, tmp_path):
    first, *rest = store.trial_dirs()
    warehouse = tmp_path / "w.duckdb"
    with connect(warehouse) as connection:
        load_trials(connection, [TrialDirectory(directory) for directory in rest])
        refresh_marts(connection, MODELS)
        connection.execute(f"DROP SCHEMA {changes.SCHEMA} CASCADE")  # as a warehouse written before it existed
    [(built, outcomes)] = load_one_by_one(store, warehouse, [first])
    assert all(outcome.passed for outcome in outcomes)
    assert all(table.updated is None for table in built)  # no marks: every model built whole, once
    assert differences(warehouse, _rebuilt(store, tmp_path / "r.duckdb")) == {}
    # From then on it updates per trial: a reload of one trial touches its rows only.
    [(built, _)] = load_one_by_one(store, warehouse, [first])
    assert {table.name: table.updated for table in built}["load_points"] == (TrialDirectory(first).trial_id,)
    assert differences(warehouse, tmp_path / "r.duckdb") == {}


class _Counting:
    """A connection that counts the statements run through it (``execute``)."""

    def __init__(self, connection: duckdb.DuckDBPyConnection) -> None:
        self.connection, self.statements = connection, 0

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self.statements += 1
        result = self.connection.execute(*args, **kwargs)
        return self if result is self.connection else result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.connection, name)


@pytest.mark.parametrize("joins", ["at-its-end", "before-the-others"])
def test_a_load_of_one_trial_runs_as_many_statements_whatever_the_history(store, tmp_path, joins):
    """A load and its refresh cost the trial, not the history, in statements too (each costs about a millisecond):
    the same trial loaded into a warehouse of two trials and into one of all of them runs as many. The trial is of
    alpha's configuration (4 users), which both warehouses hold trials of: joining it at its end, it leaves the
    others' capacity_history rows as they were (only its own is written); started before them, it moves every one
    of theirs (their trial_number), and capacity_history rewrites them too."""
    alpha = [directory for directory in store.trial_dirs()
             if (directory / "trial.json").exists() and suite_of(directory) == "alpha"]
    new = RunStore(tmp_path / "new")
    started = 1_800_000_000 if joins == "at-its-end" else 1_000_000_000
    trial_id = write_trial(new, "alpha", started, _latencies(np.random.default_rng(11), 40.0), users=4)
    counted = {}
    for name, trial_dirs in (("two", alpha[:2]), ("all", store.trial_dirs())):
        with connect(tmp_path / f"{name}.duckdb") as connection:
            load_trials(connection, [TrialDirectory(directory) for directory in trial_dirs])
            refresh_marts(connection, MODELS)
        with connect(tmp_path / f"{name}.duckdb") as connection:
            counting = _Counting(connection)
            load_trials(counting, [TrialDirectory(directory) for directory in new.trial_dirs()])
            refreshed = refresh_marts(counting, MODELS)
            built, outcomes = refreshed.tables, refreshed.tests
        assert all(outcome.passed for outcome in outcomes)
        rewritten = {table.name: table.updated for table in built}["capacity_history"]
        assert trial_id in rewritten and (len(rewritten) == 1) == (joins == "at-its-end"), rewritten
        counted[name] = counting.statements
    assert counted["two"] == counted["all"], counted


def test_the_tests_of_a_table_counted_in_one_scan_find_what_each_alone_finds(tmp_path):
    with connect(tmp_path / "w.duckdb") as connection:
        ensure_schema(connection)
        insert(connection, "trial_manifests", [{"trial_id": "t", "suite": "s", "backend": "local"},
                                                {"trial_id": "t", "suite": "s", "backend": "mars"},
                                                {"trial_id": "u", "suite": "s", "backend": "mars"}])
        for model in build_order(discover(MODELS)):
            build(connection, model)
        tests = load_tests(MODELS / "schema.yml", set(every_model(MODELS)))["trials"]
        for scope in (None, ["u"], []):
            batched = run_tests(connection, tests, trial_ids=scope)
            assert batched == [run_test(connection, test, trial_ids=scope) for test in tests]
        # Every group's tests counted in one query, each over its own trials: what each group alone finds.
        scopes = [None, ["u"], [], ["t"]]
        assert run_test_groups(connection, [(tests, scope) for scope in scopes]) == \
            [run_tests(connection, tests, trial_ids=scope) for scope in scopes]
        # Over a relation holding exactly the scoped trials' rows (an update's new rows), the same violations and
        # samples as picking them out of the table, duplicates of trial t included.
        # A unique test of another column finds copies of a new row's value among the other trials' rows; a
        # combination with trial_id finds them among the trial's own.
        backend_unique = ColumnTest("trials", "backend", "unique")
        combination = ColumnTest("trials", "trial_id__suite", "unique_combination_of_columns", ("trial_id", "suite"))
        assert [outcome.violations for outcome in run_tests(connection, [combination], trial_ids=["t"])] == [1]
        assert [outcome.violations for outcome in run_tests(connection, [combination], trial_ids=["u"])] == [0]
        for scope in (["t"], ["u"], ["t", "u"]):
            connection.execute("CREATE OR REPLACE TEMP TABLE held AS SELECT * FROM trials "
                               "WHERE list_contains(?, trial_id)", [scope])
            assert run_tests(connection, [*tests, backend_unique, combination], trial_ids=scope,
                             rows={"trials": "temp.main.held"}) == \
                run_tests(connection, [*tests, backend_unique, combination], trial_ids=scope)
            assert run_tests(connection, [backend_unique], trial_ids=scope)[0].violations == 1
            assert run_test_groups(connection, [(tests, scope), (tests, None)], rows={"trials": "temp.main.held"}) \
                == [run_tests(connection, tests, trial_ids=scope), run_tests(connection, tests)]
        by_name = {outcome.test.name: outcome for outcome in run_tests(connection, tests)}
        assert by_name["trial_id_unique"].violations == 1 and by_name["backend_accepted_values"].violations == 2
        assert by_name["backend_accepted_values"].sample[0]["backend"] == "mars"
        # More violations than a sample holds: counted, not just sampled.
        insert(connection, "trial_manifests", [{"trial_id": f"v{index}", "suite": "s", "backend": "venus"}
                                                for index in range(7)])
        build(connection, discover(MODELS)["trials"])
        [wrong] = [test for test in tests if test.name == "backend_accepted_values"]
        assert run_test(connection, wrong, sample_rows=5).violations == 9
        assert len(run_test(connection, wrong, sample_rows=5).sample) == 5


def _request_logs(store: RunStore) -> list[Path]:
    return [directory / "requests.parquet" for directory in store.trial_dirs()
            if (directory / "requests.parquet").exists()]


@pytest.fixture(scope="module")
def older_log(store, tmp_path_factory) -> tuple[RunStore, Path]:
    """A copy of the store whose first request log is as an older writer left it (Int64 step_index, no wake
    column), and that copy loaded trial by trial as a run or an import loads it: what each way of rebuilding is
    held to."""
    root = tmp_path_factory.mktemp("older-log")
    copy = RunStore(root / "store")
    shutil.copytree(store.root, copy.root)
    first = _request_logs(copy)[0]
    pl.read_parquet(first).with_columns(pl.col("step_index").cast(pl.Int64)).drop("wake").write_parquet(first)
    load_one_by_one(copy, root / "w.duckdb", copy.trial_dirs())
    return copy, root / "w.duckdb"


@pytest.mark.parametrize(("batch", "processes_from"), [(500, 200), (4, 1)], ids=["one-batch", "batches-processes"])
def test_a_rebuild_reads_request_logs_of_other_types_or_that_do_not_read_as_a_single_load_does(
        older_log, tmp_path, caplog, monkeypatch, batch, processes_from):
    """The rebuild scans the request logs with DuckDB; a log whose columns are of other types (an older writer's
    Int64 step_index) goes through polars' casts, and one that does not read is skipped with its trial; in one
    batch on threads, or in batches of 4 read by worker processes."""
    monkeypatch.setattr(rebuild_module, "BATCH_TRIALS", batch)
    monkeypatch.setattr(rebuild_module, "PROCESS_READ_TRIALS", processes_from)
    older, loaded = older_log
    with caplog.at_level(logging.INFO, logger="substrate_assets.warehouse.rebuild"):
        rebuilt = _rebuilt(older, tmp_path / "r.duckdb")
    assert "loading request logs trial by trial" in caplog.text
    assert differences(loaded, rebuilt) == {}
    copy = RunStore(tmp_path / "store")
    shutil.copytree(older.root, copy.root)
    log = _request_logs(copy)[1]
    broken = log.parent
    log.write_bytes(log.read_bytes()[:-100])
    result = rebuild(copy, tmp_path / "r.duckdb", MODELS)
    assert [problem.trial_dir for problem in result.skipped] == [broken]
    assert broken not in {trial.path for trial in result.trials} and len(result.trials) == len(copy.trial_dirs()) - 1
    shutil.rmtree(broken)
    assert differences(tmp_path / "r.duckdb", _rebuilt(copy, tmp_path / "without.duckdb")) == {}


def _wal_bytes(warehouse: Path) -> int:
    wal = Path(f"{warehouse}.wal")
    return wal.stat().st_size if wal.exists() else 0


def test_a_load_refreshed_in_its_own_transaction_gives_the_rebuilds_tables_and_commits_straight_into_the_file(
        store, tmp_path):
    """load_and_refresh (an import's load) commits the raw rows and every model's update together: the tables are
    the rebuild's, the copies a load keeps for the models' update are written and pruned inside the transaction,
    and the commit is a checkpoint: no write-ahead log, where the two commits of a load and a refresh leave one
    (the connection's own checkpoint threshold and threads are back afterwards)."""
    last = [directory for directory in store.trial_dirs() if (directory / "requests.parquet").exists()][-1]
    earlier = [directory for directory in store.trial_dirs() if directory != last]
    for name in ("two-commits", "one"):
        with connect(tmp_path / f"{name}.duckdb") as connection:
            load_trials(connection, [TrialDirectory(directory) for directory in earlier])
            refresh_marts(connection, MODELS)
    logged = {}
    with connect(tmp_path / "two-commits.duckdb") as connection:
        load_trials(connection, [TrialDirectory(last)])
        refresh_marts(connection, MODELS)
        logged["two-commits"] = _wal_bytes(tmp_path / "two-commits.duckdb")
    with connect(tmp_path / "one.duckdb") as connection:
        read, unreadable = read_trials([TrialDirectory(last)])
        settings = "SELECT current_setting('checkpoint_threshold'), current_setting('threads')"
        before = connection.execute(settings).fetchone()
        refreshed = load_and_refresh(connection, read, directory=MODELS, figures_of=[TrialDirectory(last).trial_id])
        logged["one"] = _wal_bytes(tmp_path / "one.duckdb")
        assert connection.execute("SELECT count(*) FROM changes.request_samples").fetchone()[0] == 0
        assert connection.execute(settings).fetchone() == before
        # The figures read from density_frontiers' updated rows are the model's SQL over the trial's rows alone.
        assert refreshed.densities == trial_densities(connection, [TrialDirectory(last).trial_id])
        assert any(value is not None for value in refreshed.densities[TrialDirectory(last).trial_id].values())
    assert not unreadable and all(outcome.passed for outcome in refreshed.tests)
    assert refreshed.raw["request_samples"].total == pl.read_parquet(last / "requests.parquet").height
    assert list(refreshed.densities) == [TrialDirectory(last).trial_id]
    assert logged["one"] == 0 < logged["two-commits"], logged
    # Earlier trials loaded without a refresh leave their copies in the warehouse: the refresh reads those beside the
    # last load's own, kept in the connection only, and leaves no copy of either behind.
    with connect(tmp_path / "pending.duckdb") as connection:
        load_trials(connection, [TrialDirectory(directory) for directory in earlier[:-1]])
        refresh_marts(connection, MODELS)
        load_trials(connection, [TrialDirectory(earlier[-1])])
        staged = connection.execute("SELECT count(*) FROM changes.staged").fetchone()[0]
        load_and_refresh(connection, read, directory=MODELS)
        assert staged > 0 and connection.execute("SELECT count(*) FROM changes.staged").fetchone() == (0,)
        assert connection.execute("SELECT count(*) FROM changes.request_samples").fetchone() == (0,)
        assert connection.execute("SELECT count(*) FROM duckdb_tables() WHERE temporary").fetchone() == (0,)
    rebuilt = _rebuilt(store, tmp_path / "r.duckdb")
    assert differences(tmp_path / "one.duckdb", rebuilt) == {}
    assert differences(tmp_path / "two-commits.duckdb", rebuilt) == {}
    assert differences(tmp_path / "pending.duckdb", rebuilt) == {}


def test_a_refresh_reads_a_raw_tables_rows_from_the_copies_that_hold_every_trial_else_from_the_table():
    books = changes.Books("w", 3, {}, set(), {"request_samples": {"a": 1, "b": 2}},
                          transient={"request_samples": {"c"}})
    assert narrowed_source("request_samples", ["a", "b"], books, "w") == '"w".changes."request_samples"'
    assert narrowed_source("request_samples", ["c"], books, "w") == changes.transient_copy("request_samples")
    assert narrowed_source("request_samples", ["a", "c"], books, "w") == (
        '(SELECT * FROM "w".changes."request_samples" UNION ALL BY NAME SELECT * FROM '
        f'{changes.transient_copy("request_samples")})')
    assert narrowed_source("request_samples", ["a", "d"], books, "w") == '"w".main."request_samples"'
    assert narrowed_source("stats_history", ["c"], books, "w") == '"w".main."stats_history"'


def test_a_model_that_does_not_build_keeps_the_trial_out_of_the_marts_not_out_of_the_warehouse(store, tmp_path):
    models = tmp_path / "models"
    shutil.copytree(MODELS, models)
    first, second, *_ = store.trial_dirs()
    warehouse = tmp_path / "w.duckdb"
    with connect(warehouse) as connection:
        read, _ = read_trials([TrialDirectory(first)])
        load_and_refresh(connection, read, directory=models)
    sql = models / "step_latency.sql"
    sql.write_text(sql.read_text().replace("    substr(name, 6) AS step,", "    substr(name, 6) AS step, no_such_column,"))
    with connect(warehouse) as connection:
        read, _ = read_trials([TrialDirectory(second)])
        with pytest.raises(ModelError, match=r"step_latency\.sql"):
            load_and_refresh(connection, read, directory=models)
        trial_ids = {row[0] for row in connection.execute("SELECT DISTINCT trial_id FROM request_samples").fetchall()}
        assert trial_ids == {TrialDirectory(first).trial_id, TrialDirectory(second).trial_id}
        assert connection.execute("SELECT DISTINCT trial_id FROM trials").fetchall() == [
            (TrialDirectory(first).trial_id,)]


class _Recording(_Counting):
    """A :class:`_Counting` connection that also keeps each statement's text."""

    def __init__(self, connection: duckdb.DuckDBPyConnection) -> None:
        super().__init__(connection)
        self.texts: list[str] = []

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self.texts.append(str(args[0]))
        return super().execute(*args, **kwargs)


def test_a_trial_id_is_looked_for_in_trial_manifests_only_when_the_bookkeeping_says_it_was_loaded(tmp_path):
    """A new trial's load asks trial_manifests nothing (the bookkeeping says which trials it ever loaded: on the lake
    each table read is a catalog round trip); a trial loaded before is looked for there, so another trial under its
    id is still refused."""
    first, other = RunStore(tmp_path / "first"), RunStore(tmp_path / "other")
    rng = np.random.default_rng(5)
    trial_id = write_trial(first, "alpha", 1_800_000_000, _latencies(rng, 40.0))
    assert write_trial(other, "alpha", 1_800_000_000, _latencies(rng, 40.0), tag="other") == trial_id
    with connect(tmp_path / "w.duckdb") as connection:
        recording = _Recording(connection)
        load_trials(recording, [TrialDirectory(directory) for directory in first.trial_dirs()])
        assert not [text for text in recording.texts if "FROM trial_manifests" in text]
        recording = _Recording(connection)
        with pytest.raises(TrialIdTaken, match=f"trial {trial_id} is already in the warehouse from"):
            load_trials(recording, [TrialDirectory(directory) for directory in other.trial_dirs()])
        assert [text for text in recording.texts if "FROM trial_manifests" in text]
        assert connection.execute("SELECT count(*) FROM changes.loads WHERE seq > 1").fetchone() == (0,)


def test_a_model_updated_for_a_trial_previews_that_trials_rows_and_counts_its_whole_table(store, tmp_path):
    """The preview on a load's materialization is what the load wrote: the new trials' rows, newest first, read
    where the update left them; the count is the whole table's. A model built otherwise (change_points, rebuilt
    for its series) previews its newest rows."""
    trials = store.trial_dirs()
    with connect(tmp_path / "w.duckdb") as connection:
        load_trials(connection, [TrialDirectory(directory) for directory in trials])
        refresh_marts(connection, MODELS)
        new = RunStore(tmp_path / "new")
        # Started before every trial held: a whole-table preview, newest first, would not show it.
        trial_id = write_trial(new, "alpha", 1_000_000_000, _latencies(np.random.default_rng(5), 40.0), users=4)
        # And one of beta's, loaded with it: two trials' rows, each table's ordered as a whole table's preview is.
        other = write_trial(new, "beta", 1_000_000_600, _latencies(np.random.default_rng(6), 30.0), users=8)
        load_trials(connection, [TrialDirectory(directory) for directory in new.trial_dirs()])
        refreshed = refresh_marts(connection, MODELS, preview_rows=10)
        built = {table.name: table for table in refreshed.tables}
        for name in sorted(PER_TRIAL | set(PARTITIONED)):
            table = built[name]
            # A model whose rows of other trials the new one moves (their trial_number) wrote theirs again too.
            assert table.updated is not None and {trial_id, other} <= set(table.updated), name
            shown = {row["trial_id"] for row in table.preview}
            assert shown and shown <= set(table.updated), name
            # Newest first, as the whole table's preview orders its rows.
            order = ('t."started_at" DESC NULLS LAST' if "started_at" in {column for column, _ in table.columns} else
                     "(SELECT max(m.started_at) FROM trial_manifests AS m WHERE m.trial_id = t.trial_id) DESC NULLS LAST")
            expected = connection.execute(f"SELECT trial_id FROM {name} AS t WHERE list_contains(?, trial_id) "
                                          f"ORDER BY {order}, t.trial_id DESC LIMIT 10", [list(table.updated)])
            assert [row["trial_id"] for row in table.preview] == [row[0] for row in expected.fetchall()], name
            counted = connection.execute(f"SELECT count(*) FROM {name}").fetchone()[0]
            assert table.rows == counted, name
        newest = connection.execute(f"SELECT trial_id FROM {CHANGE_POINTS} ORDER BY started_at DESC NULLS LAST, "
                                    "trial_id DESC LIMIT 10").fetchall()
        assert [row["trial_id"] for row in built[CHANGE_POINTS].preview] == [row[0] for row in newest]
