"""Snapshots: RAM arrays with their cursors and the data files survive a write and a restore, atomically."""

import json

import pytest

from substrate_assets.protos import glutton_pb2 as pb
from substrate_assets.runtime.glutton import Glutton
from substrate_assets.runtime.snapshot import restore_snapshot, snapshot_bytes, write_snapshot


@pytest.mark.parametrize("fsync", [True, False])
def test_round_trip(tmp_path, fsync):
    source = Glutton(tmp_path / "live")
    source.write_ram(pb.WriteRAMRequest(key="a", size="300Ki"))
    source.write_ram(pb.WriteRAMRequest(key="b", size="64Ki"))
    source.write_ram(pb.WriteRAMRequest(key="a", size="100Ki", write_mode=pb.WRITE_MODE_OVERWRITE_ROTATE))
    source.write_disk(pb.WriteDiskRequest(key="f", size=123_456))
    source.ingest(pb.IngestRequest(key="g", payload=b"payload"))
    source.ping(pb.PingRequest())
    sizes = write_snapshot(source, tmp_path / "snap" / "00000001", fsync=fsync)
    assert (sizes.pages, sizes.files) == (364 * 1024, 123_456 + 7)
    assert snapshot_bytes(tmp_path / "snap" / "00000001") == sizes.total
    assert [p.name for p in (tmp_path / "snap").iterdir()] == ["00000001"]  # no partial directory left

    restored = Glutton(tmp_path / "live2")
    assert restore_snapshot(tmp_path / "snap" / "00000001", restored) == sizes
    assert {k: (bytes(a.data), a.cursor) for k, a in restored.arrays.items()} == \
        {k: (bytes(a.data), a.cursor) for k, a in source.arrays.items()}
    assert restored.arrays["a"].cursor == 100 * 1024
    assert restored.file_sizes == source.file_sizes
    for key in ("f", "g"):
        assert (restored.data_dir / key).read_bytes() == (source.data_dir / key).read_bytes()
    assert restored.pings == 1
    manifest = json.loads((tmp_path / "snap" / "00000001" / "manifest.json").read_text())
    assert [(a["key"], a["cursor"]) for a in manifest["arrays"]] == [("a", 102400), ("b", 0)]


def test_an_existing_target_is_never_overwritten(tmp_path):
    glutton = Glutton(tmp_path / "live")
    (tmp_path / "snap").mkdir()
    (tmp_path / "snap" / "marker").write_text("kept")
    with pytest.raises(OSError):
        write_snapshot(glutton, tmp_path / "snap", fsync=False)
    assert (tmp_path / "snap" / "marker").read_text() == "kept"


def test_truncated_pages_are_refused(tmp_path):
    glutton = Glutton(tmp_path / "live")
    glutton.write_ram(pb.WriteRAMRequest(key="a", size="8Ki"))
    write_snapshot(glutton, tmp_path / "s", fsync=False)
    (tmp_path / "s" / "pages.img").write_bytes(b"short")
    with pytest.raises(ValueError, match="truncated"):
        restore_snapshot(tmp_path / "s", Glutton(tmp_path / "other"))
