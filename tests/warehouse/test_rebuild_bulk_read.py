"""A rebuild reads a batch's small tables table by table (bulk_load.py's bulk_read_trials): its CSVs parsed together, its
one-row tables built once. It gives read_trial's rows, trial for trial, whatever the files: upstream runs, a
ladder's load_steps.json, CSVs of another header, CSVs it leaves to read_trial (quoted names, CRLF line ends, a
blank line, a missing file), in one process or in worker processes; and a file that does not read is named, with
its trial, as read_trial names it."""

import json
import shutil
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from substrate_assets.results.importer import import_runs
from substrate_assets.results.layout import RunStore
from substrate_assets.results.load_steps import LoadStep, write_load_steps
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.warehouse.bulk_load import BULK_TABLES, bulk_read_trials
from substrate_assets.warehouse.rebuild import rebuild
from substrate_assets.warehouse.trial_rows import read_trials, reading_processes
from tests.support.synthetic_trials import write_trial

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "dbt_like_sql"


def _latencies(rng: np.random.Generator) -> dict[str, np.ndarray]:
    return {"WakeFirstTouch": rng.lognormal(3.5, 0.3, 20).round(3), "Step_01_edit": rng.lognormal(3.0, 0.5, 10)}


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> RunStore:
    """Upstream runs, plain local trials, and trials whose files the bulk reading takes differently."""
    store = RunStore(tmp_path_factory.mktemp("bulk") / "store")
    import_runs(str(ROOT / "tests" / "data" / "upstream_runs"), store)
    rng = np.random.default_rng(3)
    ids = [write_trial(store, "alpha", 1_700_000_000 + index * 600, _latencies(rng), users=2 + index % 3,
                       failures=index % 2, completed=index != 4) for index in range(10)]
    directories = {TrialDirectory(directory).trial_id: directory for directory in store.trial_dirs()}

    def directory(index: int) -> Path:
        return directories[ids[index]]

    # A request name that needs quotes; CRLF line ends; a blank line; no stats_history.csv.
    stats = directory(1) / "stats.csv"
    stats.write_text(stats.read_text().replace("Step_01_edit", '"Step_01_edit, again"'))
    history = directory(2) / "stats_history.csv"
    history.write_bytes(history.read_bytes().replace(b"\n", b"\r\n"))
    history = directory(3) / "stats_history.csv"
    history.write_text(history.read_text() + "\n")
    (directory(5) / "stats_history.csv").unlink()
    # Another header: an older Locust without the last two percentile columns.
    for index in (6, 7):
        for name in ("stats.csv", "stats_history.csv"):
            path = directory(index) / name
            rows = [line.split(",") for line in path.read_text().splitlines()]
            cut = rows[0].index("99.99%")
            path.write_text("\n".join(",".join(row[:cut] + row[cut + 2:]) for row in rows) + "\n")
    # A ladder trial with its steps, and one whose server_summary.json names its steady window.
    run_ts = json.loads((directory(8) / "trial.json").read_text())["run_ts"]
    write_load_steps(directory(8) / "load_steps.json", "2:30s,4:30s", 2.0, [
        LoadStep(1, 2, 30, run_ts + 1.0, run_ts + 31.0, run_ts + 3, run_ts + 30, None, {"metadata": {}}, True),
        LoadStep(2, 4, 30, run_ts + 31.0, run_ts + 59.0, run_ts + 33, run_ts + 58, "no user count above 0", None,
                 False)])
    (directory(9) / "server_summary.json").write_text(json.dumps({
        "metadata": {"steady_start_ts": run_ts + 5, "steady_end_ts": run_ts + 50},
        "snapshots": {"size_p50_mb": 16.0}}))
    return store


def _trials(store: RunStore) -> list[TrialDirectory]:
    return [TrialDirectory(directory) for directory in store.trial_dirs()]


def _same(expected: tuple[list, list], got: tuple[list, list]) -> None:
    """The same trials read, in order, with the same rows in every table, and the same ones refused, alike."""
    (read, unreadable), (bulk, bulk_unreadable) = expected, got
    assert [part.trial_id for part in bulk] == [part.trial_id for part in read]
    assert [part.trial.path for part in bulk] == [part.trial.path for part in read]
    assert [(error.trial_dir, str(error)) for error in bulk_unreadable] == \
        [(error.trial_dir, str(error)) for error in unreadable]
    for ours, theirs in zip(bulk, read, strict=True):
        assert list(ours.frames) == list(theirs.frames)
        for name in theirs.frames:
            assert_frame_equal(ours.frames[name], theirs.frames[name], check_exact=True)


def test_the_bulk_reading_gives_each_trials_rows_as_read_trial_does(store):
    trials = _trials(store)
    assert len(trials) == 12
    expected = read_trials(trials, BULK_TABLES)
    assert not expected[1]
    _same(expected, bulk_read_trials(trials))
    # Some tables only; and over worker processes, a chunk each.
    _same(read_trials(trials, ["load_steps"]), bulk_read_trials(trials, ["load_steps"]))
    _same(read_trials(trials, ["locust_stats", "cluster_facts"]), bulk_read_trials(trials, ["locust_stats",
                                                                                         "cluster_facts"]))
    with reading_processes() as processes:
        _same(expected, bulk_read_trials(trials, processes=processes))
    with pytest.raises(ValueError, match="not request_samples"):
        bulk_read_trials(trials, ["request_samples"])


@pytest.mark.parametrize(("file", "damage"), [
    ("stats_history.csv", lambda text: text[:-30]),
    ("stats.csv", lambda text: text.replace("http,", "http,,", 1)),
    ("trial.json", lambda text: text[:40]),
    ("server_summary.json", lambda text: "{not json"),
])
def test_a_file_that_does_not_read_is_named_with_its_trial(store, tmp_path, file, damage):
    copy = RunStore(tmp_path / "store")
    shutil.copytree(store.root, copy.root)
    broken = next(directory for directory in copy.trial_dirs() if (directory / "server_summary.json").exists()
                  and (directory / "stats_history.csv").exists() and not (directory / "load_steps.json").exists())
    path = broken / file
    path.write_text(damage(path.read_text()))
    trials = _trials(copy)
    read, unreadable = bulk_read_trials(trials)
    [error] = unreadable
    assert error.trial_dir == broken and error.where.startswith(file)
    assert len(read) == len(trials) - 1
    _same(read_trials(trials, BULK_TABLES), (read, unreadable))
    result = rebuild(copy, tmp_path / "w.duckdb", MODELS)
    assert [(problem.trial_dir, problem.where) for problem in result.skipped] == [(broken, error.where)]
    assert result.raw_rows["trial_manifests"] == len(trials) - 1


def test_a_trial_without_small_files_reads_alike(tmp_path):
    """A trial directory holding only its request log: every small table empty or its one row of nulls."""
    store = RunStore(tmp_path / "store")
    write_trial(store, "alpha", 1_700_000_000, {"WakeFirstTouch": np.array([10.0, 20.0])})
    [directory] = store.trial_dirs()
    for name in ("stats.csv", "stats_history.csv", "status.json"):
        (directory / name).unlink()
    trials = _trials(store)
    _same(read_trials(trials, BULK_TABLES), bulk_read_trials(trials))
    assert bulk_read_trials(trials)[0][0].frames["locust_stats"].schema == \
        pl.Schema({"trial_id": pl.Utf8(), **read_trials(trials, ["locust_stats"])[0][0].frames["locust_stats"]
                   .drop("trial_id").schema})
