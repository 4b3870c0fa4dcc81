"""The child that writes an import's Dagster records: it ends with its parent, writes what it is handed on the
project's instance, and says why when it cannot."""

import os
import signal
import subprocess
import sys
import time
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
    assert child.returncode == -signal.SIGKILL  # ended at once, not waited for while it imports Dagster
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
    """As after a signal that interrupted write(): part of the work in the pipe, the pipe still open. Leaving ends the
    child instead of waiting for the rest while the parent waits for it."""
    with RecordWriter() as writer:
        child = writer._child
        assert child.stdin is not None
        child.stdin.write(b"\x80\x04\x95half a pickle")
        child.stdin.flush()
    assert child.returncode == -signal.SIGKILL


def test_the_child_dies_with_a_parent_killed_outright(dagster_home: Path):
    """The parent hands its end of the child's stdin to a sleeper, so the child would never see the pipe close:
    only its parent's death can end it."""
    parent = subprocess.Popen([sys.executable, "-c", "import subprocess\n"
                               "from substrate_assets.app.load_records import RecordWriter\n"
                               "writer = RecordWriter()\nheld = writer._child.stdin.fileno()\n"
                               "holder = subprocess.Popen(['sleep', '600'], pass_fds=[held])\n"
                               "print(writer._child.pid, holder.pid, flush=True)\nimport time\ntime.sleep(600)"],
                              stdout=subprocess.PIPE, text=True)
    child, holder = (int(pid) for pid in parent.stdout.readline().split())
    try:
        parent.kill()
        parent.wait()
        # The kernel kills it as its parent goes; the loop only waits for that to be seen, bounded.
        for _ in range(600):
            if not _alive(child):
                break
            time.sleep(0.05)
        assert not _alive(child)
    finally:
        os.kill(holder, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().split(") ")[1][0] != "Z"  # a zombie has ended
    except FileNotFoundError:
        return False
