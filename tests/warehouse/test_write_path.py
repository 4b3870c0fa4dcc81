"""One warehouse write path: writers wait for whoever holds the file (with backoff, saying so once), and a rebuild
never replaces a warehouse another process has open — a query (`sql`) or a run loading a trial. Another process
holds the file for real here; the waits are driven by events, not by timing."""

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from substrate_assets.results.importer import import_runs
from substrate_assets.results.layout import RunStore
from substrate_assets.warehouse.connection import WarehouseBusy, connect
from substrate_assets.warehouse.rebuild import rebuild

ROOT = Path(__file__).resolve().parents[2]
MODELS = ROOT / "dbt_like_sql"
HOLDER = """
import sys, duckdb
connection = duckdb.connect(sys.argv[1], read_only=sys.argv[2] == "read")
print(connection.execute("SELECT count(*) FROM trials").fetchone()[0], flush=True)
sys.stdin.readline()  # hold the file until told to let go
print(connection.execute("SELECT count(*) FROM trials").fetchone()[0], flush=True)
"""


class Holder:
    """Another process with the warehouse open, as `substrate-bench sql` (read) or a run's raw load (write) has."""

    def __init__(self, warehouse: Path, mode: str) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", HOLDER, str(warehouse), mode], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        self.first_count = int(self.process.stdout.readline())

    def release(self) -> int:
        """Let go of the file; the trial count it still read just before."""
        self.process.stdin.write("\n")
        self.process.stdin.flush()
        count = int(self.process.stdout.readline())
        self.process.wait(timeout=60)
        return count


@pytest.fixture
def store_and_warehouse(tmp_path):
    store = RunStore(tmp_path / "store")
    import_runs(str(ROOT / "tests" / "data" / "upstream_runs"), store)
    warehouse = tmp_path / "warehouse.duckdb"
    rebuild(RunStore(tmp_path / "empty"), warehouse, MODELS)  # an old warehouse with no trials in it
    return store, warehouse


@pytest.mark.parametrize("mode", ["read", "write"])
def test_a_rebuild_waits_for_whoever_has_the_warehouse_open(store_and_warehouse, mode):
    store, warehouse = store_and_warehouse
    holder = Holder(warehouse, mode)
    assert holder.first_count == 0
    old_inode = warehouse.stat().st_ino
    waiting = threading.Event()
    told = []
    outcome = {}

    def run() -> None:
        outcome["rebuilt"] = rebuild(store, warehouse, MODELS, on_wait=lambda message: (told.append(message),
                                                                                        waiting.set()))

    rebuilding = threading.Thread(target=run)
    rebuilding.start()
    assert waiting.wait(timeout=120)
    assert warehouse.stat().st_ino == old_inode  # not replaced while another process has it open
    assert holder.release() == 0  # the holder read a consistent old warehouse to the end
    rebuilding.join(timeout=300)
    assert len(outcome["rebuilt"].trials) == 2 and len(told) == 1 and str(warehouse) in told[0]
    assert warehouse.stat().st_ino != old_inode
    with connect(warehouse, read_only=True) as connection:
        assert connection.execute("SELECT count(*) FROM trials").fetchone()[0] == 2
    assert sorted(path.name for path in warehouse.parent.iterdir()) == ["store", "warehouse.duckdb"]


def test_a_rebuild_that_cannot_wait_leaves_the_warehouse_as_it_was(store_and_warehouse):
    store, warehouse = store_and_warehouse
    holder = Holder(warehouse, "read")
    before = warehouse.read_bytes()
    with pytest.raises(WarehouseBusy, match="held by another process"):
        rebuild(store, warehouse, MODELS, wait_s=0)
    assert holder.release() == 0
    assert warehouse.read_bytes() == before
    assert sorted(path.name for path in warehouse.parent.iterdir()) == ["store", "warehouse.duckdb"]


def test_a_writer_backs_off_while_the_file_is_held(store_and_warehouse):
    """The wait itself, on a clock the test drives: pauses double from 50 ms to at most 2 s, one message."""
    _, warehouse = store_and_warehouse
    holder = Holder(warehouse, "read")
    now = [0.0]
    pauses: list[float] = []
    told: list[str] = []

    def sleep(seconds: float) -> None:
        pauses.append(seconds)
        now[0] += seconds

    with pytest.raises(WarehouseBusy), connect(warehouse, wait_s=10.0, on_wait=told.append, sleep=sleep,
                                               clock=lambda: now[0]):
        pass
    holder.release()
    assert pauses[:7] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.6, 2.0] and max(pauses) == 2.0
    assert sum(pauses) == pytest.approx(10.0) and len(told) == 1
    with connect(warehouse) as connection:  # let go of, the file is a writer's again
        assert connection.execute("SELECT count(*) FROM trials").fetchone() == (0,)
