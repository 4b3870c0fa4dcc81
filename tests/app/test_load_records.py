"""The child that writes an import's Dagster records: it ends with its parent, writes what it is handed on the
project's instance, and says why when it cannot."""

from pathlib import Path

import dagster as dg
import pytest

from substrate_assets.app.load_records import LoadRecord, RecordNotWritten, RecordWriter


@pytest.fixture
def dagster_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "dagster"
    home.mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


def test_a_writer_left_without_work_ends_having_written_nothing(dagster_home: Path):
    with RecordWriter() as writer:
        child = writer._child
    assert child.returncode == 0
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        assert instance.get_dynamic_partitions("trial") == []


def test_a_model_handed_to_the_writer_is_recorded_on_the_instance(dagster_home: Path):
    from substrate_assets.warehouse.models.tables import BuiltTable

    table = BuiltTable("trials", 3, [("trial_id", "VARCHAR")], [{"trial_id": "t1"}])
    with RecordWriter() as writer:
        writer.write(LoadRecord([], {}, [table]))
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("trials"))
    assert event is not None and event.asset_materialization is not None
    assert event.asset_materialization.metadata["dagster/row_count"].value == 3


def test_a_record_the_child_cannot_write_is_an_error_saying_why(dagster_home: Path, tmp_path: Path):
    from substrate_assets.warehouse.trial_writes import LoadedTable

    missing = tmp_path / "no-such-trial"
    loaded = LoadedTable("trial_manifests", [("trial_id", "VARCHAR")], {"no-such-trial": 1}, {})
    with RecordWriter() as writer, pytest.raises(
            RecordNotWritten, match=f"records were not written .exit 1.: ValueError: {missing} has no trial.json"):
        writer.write(LoadRecord([missing], {"trial_manifests": loaded}, []))


def test_a_writer_left_halfway_through_handing_its_work_ends_its_child(dagster_home: Path):
    """As after a signal that interrupted write(): part of the work in the pipe, the pipe still open. Leaving closes
    it, so the child ends (failing on the half it read) instead of waiting for the rest while the parent waits for
    it."""
    with RecordWriter() as writer:
        child = writer._child
        assert child.stdin is not None
        child.stdin.write(b"\x80\x04\x95half a pickle")
        child.stdin.flush()
    assert child.returncode not in (None, 0)
