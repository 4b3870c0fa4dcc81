"""Glutton semantics, route by route, on the service object itself."""

import hashlib
import threading
import time

import pytest

from substrate_assets.protos import glutton_pb2 as pb
from substrate_assets.runtime.glutton import PAGE, Glutton, GluttonError, parse_ram_size

MI = 1 << 20


@pytest.fixture
def glutton(tmp_path):
    return Glutton(tmp_path / "data")


def sampled_xor(data: bytes | bytearray, walk: int) -> int:
    checksum = 0
    for offset in range(0, walk, PAGE):
        checksum ^= data[offset]
    return checksum


def status_of(call) -> int:
    with pytest.raises(GluttonError) as caught:
        call()
    return caught.value.status


def test_ping_echoes_and_counts(glutton):
    assert glutton.ping(pb.PingRequest(message="think")).message == "think"
    glutton.ping(pb.PingRequest())
    assert glutton.pings == 2


@pytest.mark.parametrize(("text", "size"), [("4096", 4096), ("16Ki", 16384), ("512Mi", 512 * MI), ("2Gi", 2 << 30),
                                            ("1G", 10**9), ("0", 0), ("-1Gi", -(1 << 30))])
def test_ram_sizes(text, size):
    assert parse_ram_size(text) == size


@pytest.mark.parametrize("text", ["", "Gi", "1.5Gi", "1 Mi", "abc", "1KiB"])
def test_bad_ram_sizes(text):
    with pytest.raises(GluttonError) as caught:
        parse_ram_size(text)
    assert caught.value.status == 400


def test_write_ram_modes(glutton):
    glutton.write_ram(pb.WriteRAMRequest(key="a", size="1Mi", write_mode=pb.WRITE_MODE_TRUNCATE))
    first = bytes(glutton.arrays["a"].data)
    assert len(first) == MI and first != bytes(MI)
    # OVERWRITE with a smaller size re-randomizes only the prefix, in place.
    glutton.write_ram(pb.WriteRAMRequest(key="a", size="512Ki", write_mode=pb.WRITE_MODE_OVERWRITE))
    second = bytes(glutton.arrays["a"].data)
    assert second[512 * 1024:] == first[512 * 1024:] and second[:512 * 1024] != first[:512 * 1024]
    # OVERWRITE with a larger size allocates a new array and resets the cursor.
    glutton.arrays["a"].cursor = 7
    glutton.write_ram(pb.WriteRAMRequest(key="a", size="2Mi", write_mode=pb.WRITE_MODE_OVERWRITE))
    assert len(glutton.arrays["a"].data) == 2 * MI and glutton.arrays["a"].cursor == 0
    assert glutton.ram_written == MI + 512 * 1024 + 2 * MI


def test_overwrite_rotate_walks_a_wrapping_cursor(glutton):
    glutton.write_ram(pb.WriteRAMRequest(key="a", size="1Mi"))
    array = glutton.arrays["a"]
    before = bytes(array.data)
    glutton.write_ram(pb.WriteRAMRequest(key="a", size="768Ki", write_mode=pb.WRITE_MODE_OVERWRITE_ROTATE))
    assert array.cursor == 768 * 1024
    after = bytes(array.data)
    assert after[768 * 1024:] == before[768 * 1024:] and after[:768 * 1024] != before[:768 * 1024]
    # The next rotate wraps: bytes 768Ki..1Mi and 0..256Ki change, 256Ki..768Ki stay.
    glutton.write_ram(pb.WriteRAMRequest(key="a", size="512Ki", write_mode=pb.WRITE_MODE_OVERWRITE_ROTATE))
    assert array.cursor == 256 * 1024
    wrapped = bytes(array.data)
    assert wrapped[256 * 1024:768 * 1024] == after[256 * 1024:768 * 1024]
    assert wrapped[768 * 1024:] != after[768 * 1024:] and wrapped[:256 * 1024] != after[:256 * 1024]
    # A rotate larger than the array is clamped to its length: a full turn back to the same cursor.
    glutton.write_ram(pb.WriteRAMRequest(key="a", size="8Mi", write_mode=pb.WRITE_MODE_OVERWRITE_ROTATE))
    assert array.cursor == 256 * 1024 and len(array.data) == MI


def test_write_ram_errors(glutton):
    assert status_of(lambda: glutton.write_ram(pb.WriteRAMRequest(size="1Ki"))) == 400
    assert status_of(lambda: glutton.write_ram(pb.WriteRAMRequest(key="a", size="-1Ki"))) == 400
    assert status_of(lambda: glutton.write_ram(pb.WriteRAMRequest(key="a", size="1Ki", write_mode=7))) == 400
    with pytest.raises(GluttonError, match="rotate needs an existing array") as caught:
        glutton.write_ram(pb.WriteRAMRequest(key="none", size="1Ki", write_mode=pb.WRITE_MODE_OVERWRITE_ROTATE))
    assert caught.value.status == 404


def test_read_ram_touches_one_byte_per_page(glutton):
    glutton.write_ram(pb.WriteRAMRequest(key="a", size="1Mi"))
    data = glutton.arrays["a"].data
    whole = glutton.read_ram(pb.ReadRAMRequest(key="a"))
    assert whole.size == MI and whole.checksum == sampled_xor(data, MI)
    part = glutton.read_ram(pb.ReadRAMRequest(key="a", size="10000"))
    assert part.size == 10000 and part.checksum == sampled_xor(data, 10000)
    assert glutton.read_ram(pb.ReadRAMRequest(key="a", size="9Mi")).size == MI
    assert status_of(lambda: glutton.read_ram(pb.ReadRAMRequest(key="missing"))) == 404
    assert status_of(lambda: glutton.read_ram(pb.ReadRAMRequest())) == 400


def test_write_disk_truncate_and_overwrite(glutton):
    reply = glutton.write_disk(pb.WriteDiskRequest(key="f", size=3 * MI))
    path = glutton.data_dir / "f"
    assert reply.size == 3 * MI and reply.sha256 == hashlib.sha256(path.read_bytes()).digest()
    before = path.read_bytes()
    reply = glutton.write_disk(pb.WriteDiskRequest(key="f", size=MI, write_mode=pb.WRITE_MODE_OVERWRITE))
    after = path.read_bytes()
    assert reply.size == 3 * MI and after[MI:] == before[MI:] and after[:MI] != before[:MI]
    assert reply.sha256 == hashlib.sha256(after).digest()
    reply = glutton.write_disk(pb.WriteDiskRequest(key="f", size=1000, write_mode=pb.WRITE_MODE_TRUNCATE))
    assert reply.size == 1000 == path.stat().st_size
    assert glutton.file_sizes == {"f": 1000}


def test_write_disk_errors(glutton):
    assert status_of(lambda: glutton.write_disk(pb.WriteDiskRequest(key="f", size=-1))) == 400
    rotate = pb.WriteDiskRequest(key="f", size=1, write_mode=pb.WRITE_MODE_OVERWRITE_ROTATE)
    assert status_of(lambda: glutton.write_disk(rotate)) == 400


@pytest.mark.parametrize("key", ["../escape", "a/b", "", ".", "..", "/etc/passwd", "a b", "x\n"])
def test_keys_cannot_leave_the_data_directory(glutton, key):
    assert status_of(lambda: glutton.write_disk(pb.WriteDiskRequest(key=key, size=1))) == 400
    assert status_of(lambda: glutton.ingest(pb.IngestRequest(key=key, payload=b"x"))) == 400
    assert status_of(lambda: glutton.read_disk(pb.ReadDiskRequest(key=key))) == 400
    assert [p.name for p in glutton.data_dir.parent.iterdir()] == ["data"]


def test_read_disk_modes(glutton):
    glutton.write_disk(pb.WriteDiskRequest(key="f", size=100_000))
    content = (glutton.data_dir / "f").read_bytes()
    data = glutton.read_disk(pb.ReadDiskRequest(key="f", read_mode=pb.READ_MODE_DATA))
    digest = glutton.read_disk(pb.ReadDiskRequest(key="f", read_mode=pb.READ_MODE_DIGEST_ONLY))
    assert data.data == content and data.size == digest.size == 100_000
    assert data.sha256 == digest.sha256 == hashlib.sha256(content).digest() and digest.data == b""
    with pytest.raises(GluttonError, match='file "nope" not found') as caught:
        glutton.read_disk(pb.ReadDiskRequest(key="nope"))
    assert caught.value.status == 404
    assert status_of(lambda: glutton.read_disk(pb.ReadDiskRequest(key="f", read_mode=5))) == 400


def test_ingest_truncates_or_appends_and_hashes_the_payload(glutton):
    reply = glutton.ingest(pb.IngestRequest(key="i", payload=b"abc"))
    assert reply.size == 3 and reply.sha256 == hashlib.sha256(b"abc").digest()
    reply = glutton.ingest(pb.IngestRequest(key="i", payload=b"defg", append=True))
    assert reply.size == 7 and reply.sha256 == hashlib.sha256(b"defg").digest()
    assert (glutton.data_dir / "i").read_bytes() == b"abcdefg"
    glutton.ingest(pb.IngestRequest(key="i", payload=b"z"))
    assert (glutton.data_dir / "i").read_bytes() == b"z"


class TickingClock:
    """A monotonic clock that moves on by ``tick`` seconds at every reading, and notes which threads read it."""

    def __init__(self, tick: float) -> None:
        self.tick = tick
        self.readings = 0
        self.readers: set[int] = set()
        self._lock = threading.Lock()

    def __call__(self) -> float:
        with self._lock:
            self.readers.add(threading.get_ident())
            now = self.readings * self.tick
            self.readings += 1
            return now


def test_burn_cpu_spins_every_worker_until_the_deadline(tmp_path):
    # Readings 0, 0.125, 0.25, ...: the deadline is 1.0, so exactly 7 readings fall before it, and each is one
    # hash by whichever worker read it. Every worker then stops at its first reading at or past the deadline.
    clock = TickingClock(0.125)
    glutton = Glutton(tmp_path / "data", clock=clock)
    reply = glutton.burn_cpu(pb.BurnCPURequest(duration_ms=1000, parallelism=2))
    assert reply.iterations == 7
    assert len(clock.readers) == 2  # the calling thread and one more worker, each spinning
    assert clock.readings == 1 + 7 + 2  # the deadline, the iterations, one last look per worker
    # A deadline that has already passed burns nothing: no iteration starts after it. Parallelism 0 means one.
    clock = TickingClock(0.125)
    assert Glutton(tmp_path / "data", clock=clock).burn_cpu(pb.BurnCPURequest(duration_ms=0)).iterations == 0
    assert clock.readings == 2 and len(clock.readers) == 1
    assert status_of(lambda: glutton.burn_cpu(pb.BurnCPURequest(duration_ms=-1))) == 400


def test_burn_cpu_never_returns_before_its_deadline(glutton):
    # On the real clock only the lower bound is certain; how much CPU the workers get is bench/glutton_burn.py's.
    started = time.monotonic()
    glutton.burn_cpu(pb.BurnCPURequest(duration_ms=50, parallelism=2))
    assert time.monotonic() - started >= 0.05


def test_memory_limit_refuses_growth_and_reports(tmp_path):
    reports = []
    glutton = Glutton(tmp_path / "d", memory_limit=2 * MI, on_over_limit=lambda used, limit: reports.append((used, limit)))
    glutton.write_ram(pb.WriteRAMRequest(key="a", size="1Mi"))
    glutton.write_disk(pb.WriteDiskRequest(key="f", size=512 * 1024))
    with pytest.raises(GluttonError, match="memory limit exceeded"):
        glutton.ingest(pb.IngestRequest(key="g", payload=bytes(600 * 1024)))
    assert reports == [(MI + 512 * 1024 + 600 * 1024, 2 * MI)]
    assert glutton.usage().total == MI + 512 * 1024 and "g" not in glutton.file_sizes
    # Re-writing a file replaces its bytes in the budget rather than adding to it.
    glutton.write_disk(pb.WriteDiskRequest(key="f", size=1000 * 1024))
    assert glutton.usage().files == 1000 * 1024


def test_existing_files_are_accounted_on_start(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "kept").write_bytes(b"x" * 10)
    assert Glutton(tmp_path / "d").file_sizes == {"kept": 10}
