"""The glutton service: RAM arrays, files in a data directory, and CPU burns, with upstream semantics.

This is the in-sandbox workload every agent-session op calls. State is the
process's own: RAM arrays (with per-key rotate cursors) live in memory; files
live in the actor's data directory. One lock serializes RAM and file state;
BurnCPU takes no lock. Errors carry the HTTP status the route answers with
(400 invalid argument, 404 not found, 500 anything else).
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from google.protobuf.message import Message

from substrate_assets.protos import glutton_pb2 as pb
from substrate_assets.runtime.cpu_load import CpuLoad, CpuLoadSettings
from substrate_assets.runtime.random_bytes import CHUNK, RandomStream

KEY_PATTERN = re.compile(r"[a-zA-Z0-9_-]+")
PAGE = 4096
HASH_BLOCK = 64 * 1024
_SIZE = re.compile(r"(-?[0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E)?")
_MULTIPLIER = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40, "Pi": 1 << 50, "Ei": 1 << 60,
               "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "P": 10**15, "E": 10**18}


class GluttonError(Exception):
    """A failed RPC, with the HTTP status its route answers."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def invalid(message: str) -> GluttonError:
    return GluttonError(400, message)


def not_found(message: str) -> GluttonError:
    return GluttonError(404, message)


def parse_ram_size(text: str) -> int:
    """Glutton's size strings: whole numbers with an optional suffix (``4096``, ``16Ki``, ``512Mi``, ``1G``)."""
    match = _SIZE.fullmatch(text)
    if match is None:
        raise invalid(f"invalid size {text!r}: want a whole number with an optional suffix such as 16Ki or 2Gi")
    return int(match[1]) * _MULTIPLIER[match[2]]


@dataclass
class RamArray:
    data: bytearray
    cursor: int = 0


@dataclass
class Usage:
    ram: int
    files: int

    @property
    def total(self) -> int:
        return self.ram + self.files


@dataclass
class Glutton:
    """One actor's glutton. ``on_over_limit(used, limit)`` is called instead of exceeding ``memory_limit``.

    ``clock`` is the monotonic clock BurnCPU's deadline is read from, replaceable so that a burn can be driven
    without spending real time; every burn thread reads it, so it must be safe to call from several at once.
    """

    data_dir: Path
    memory_limit: int | None = None
    on_over_limit: Callable[[int, int], None] | None = None
    clock: Callable[[], float] = time.monotonic
    arrays: dict[str, RamArray] = field(default_factory=dict)
    file_sizes: dict[str, int] = field(default_factory=dict)
    pings: int = 0
    ram_written: int = 0
    cpu_load: CpuLoad = field(default_factory=CpuLoad)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _random: threading.local = field(default_factory=threading.local)

    def __post_init__(self) -> None:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        for path in self.data_dir.iterdir():
            if path.is_file() and KEY_PATTERN.fullmatch(path.name):
                self.file_sizes[path.name] = path.stat().st_size

    # -- accounting -------------------------------------------------------

    def usage(self) -> Usage:
        return Usage(sum(len(a.data) for a in self.arrays.values()), sum(self.file_sizes.values()))

    def _admit(self, ram_delta: int = 0, files_delta: int = 0) -> None:
        """Refuse growth past the memory limit the way the kernel does: the process is killed."""
        if self.memory_limit is None:
            return
        used = self.usage()
        projected = used.total + ram_delta + files_delta
        if projected > self.memory_limit:
            if self.on_over_limit is not None:
                self.on_over_limit(projected, self.memory_limit)
            raise GluttonError(500, f"memory limit exceeded: {projected} bytes > limit {self.memory_limit}")

    def _stream(self) -> RandomStream:
        stream = getattr(self._random, "stream", None)
        if stream is None:
            stream = self._random.stream = RandomStream()
        return stream

    def _path(self, key: str) -> Path:
        if not KEY_PATTERN.fullmatch(key):
            raise invalid(f"key {key!r} must match ^[a-zA-Z0-9_-]+$")
        path = self.data_dir / key
        if path.parent != self.data_dir:  # defence in depth; the pattern already forbids separators
            raise invalid(f"key {key!r} leaves the data directory")
        return path

    # -- RPCs -------------------------------------------------------------
    # Each takes its route's request and returns its response (glutton_pb2's PingRequest and PingResponse, …:
    # generated at import, to the checker they are protobuf Messages).

    def ping(self, request: Message) -> Message:
        with self._lock:
            self.pings += 1
        return pb.PingResponse(message=request.message)

    def write_ram(self, request: Message) -> Message:
        if not request.key:
            raise invalid("key is required")
        size = parse_ram_size(request.size)
        if size < 0:
            raise invalid(f"size must not be negative, got {request.size!r}")
        mode = request.write_mode
        with self._lock:
            existing = self.arrays.get(request.key)
            current = len(existing.data) if existing else 0
            if mode == pb.WRITE_MODE_TRUNCATE:
                self._admit(ram_delta=size - current)
                array = RamArray(bytearray(size))
                self._stream().fill(memoryview(array.data))
                self.arrays[request.key] = array
            elif mode == pb.WRITE_MODE_OVERWRITE:
                if existing is None or size > current:
                    self._admit(ram_delta=size - current)
                    existing = RamArray(bytearray(size))
                    self.arrays[request.key] = existing
                self._stream().fill(memoryview(existing.data)[:size])
            elif mode == pb.WRITE_MODE_OVERWRITE_ROTATE:
                if existing is None or current == 0:
                    raise not_found(f"rotate needs an existing array {request.key!r}; fill with TRUNCATE first")
                self._rotate(existing, min(size, current))
            else:
                raise invalid(f"unsupported write mode {mode}")
            self.ram_written += size
        return pb.WriteRAMResponse()

    def _rotate(self, array: RamArray, size: int) -> None:
        view = memoryview(array.data)
        length = len(view)
        first = min(size, length - array.cursor)
        self._stream().fill(view[array.cursor:array.cursor + first])
        if size > first:
            self._stream().fill(view[:size - first])
        array.cursor = (array.cursor + size) % length

    def read_ram(self, request: Message) -> Message:
        if not request.key:
            raise invalid("key is required")
        with self._lock:
            array = self.arrays.get(request.key)
            if array is None:
                raise not_found(f"no RAM array {request.key!r}")
            walk = len(array.data)
            if request.size:
                size = parse_ram_size(request.size)
                if size < 0:
                    raise invalid(f"size must not be negative, got {request.size!r}")
                walk = min(size, walk)
            sampled = array.data[0:walk:PAGE]
        checksum = 0
        for byte in sampled:
            checksum ^= byte
        return pb.ReadRAMResponse(size=walk, checksum=checksum)

    def write_disk(self, request: Message) -> Message:
        path = self._path(request.key)
        if request.size < 0:
            raise invalid(f"size must not be negative, got {request.size}")
        if request.write_mode not in (pb.WRITE_MODE_TRUNCATE, pb.WRITE_MODE_OVERWRITE):
            raise invalid(f"unsupported write mode {request.write_mode} for disk")
        with self._lock:
            old = self.file_sizes.get(request.key, 0)
            truncate = request.write_mode == pb.WRITE_MODE_TRUNCATE
            new_size = request.size if truncate else max(old, request.size)
            self._admit(files_delta=new_size - old)
            digest = hashlib.sha256()
            flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if truncate else 0)
            with os.fdopen(os.open(path, flags, 0o644), "wb") as handle:
                remaining = request.size
                stream = self._stream()
                while remaining > 0:
                    chunk = stream.chunk(min(CHUNK, remaining))
                    handle.write(chunk)
                    digest.update(chunk)
                    remaining -= len(chunk)
            if new_size > request.size:
                with path.open("rb") as handle:
                    handle.seek(request.size)
                    while block := handle.read(CHUNK):
                        digest.update(block)
            self.file_sizes[request.key] = new_size
        return pb.WriteDiskResponse(size=new_size, sha256=digest.digest())

    def read_disk(self, request: Message) -> Message:
        path = self._path(request.key)
        if request.read_mode not in (pb.READ_MODE_DATA, pb.READ_MODE_DIGEST_ONLY):
            raise invalid(f"unsupported read mode {request.read_mode}")
        with self._lock:
            if request.key not in self.file_sizes:
                raise not_found(f'file "{request.key}" not found')
            if request.read_mode == pb.READ_MODE_DATA:
                data = path.read_bytes()
                return pb.ReadDiskResponse(size=len(data), sha256=hashlib.sha256(data).digest(), data=data)
            digest = hashlib.sha256()
            size = 0
            with path.open("rb") as handle:
                while block := handle.read(CHUNK):
                    digest.update(block)
                    size += len(block)
        return pb.ReadDiskResponse(size=size, sha256=digest.digest())

    def ingest(self, request: Message) -> Message:
        path = self._path(request.key)
        payload = request.payload
        with self._lock:
            old = self.file_sizes.get(request.key, 0)
            new_size = old + len(payload) if request.append else len(payload)
            self._admit(files_delta=new_size - old)
            with path.open("ab" if request.append else "wb") as handle:
                handle.write(payload)
            self.file_sizes[request.key] = new_size
        return pb.IngestResponse(size=new_size, sha256=hashlib.sha256(payload).digest())

    def burn_cpu(self, request: Message) -> Message:
        if request.duration_ms < 0:
            raise invalid(f"duration_ms must not be negative, got {request.duration_ms}")
        workers = min(max(request.parallelism, 1), 4 * (os.cpu_count() or 1))
        clock = self.clock
        deadline = clock() + request.duration_ms / 1000
        counts = [0] * workers
        block = self._stream().chunk(HASH_BLOCK)

        def spin(index: int) -> None:
            # sha256 of a 64 KiB block releases the GIL, so the workers burn in parallel.
            n = 0
            while clock() < deadline:
                hashlib.sha256(block).digest()
                n += 1
            counts[index] = n

        threads = [threading.Thread(target=spin, args=(i,), daemon=True) for i in range(1, workers)]
        for thread in threads:
            thread.start()
        spin(0)
        for thread in threads:
            thread.join()
        return pb.BurnCPUResponse(iterations=sum(counts))

    def use_cpu(self, request: Message) -> Message:
        if request.num_cores < 0:
            raise invalid(f"num_cores must not be negative, got {request.num_cores}")
        if not 0 <= request.duty_cycle <= 1:
            raise invalid(f"duty_cycle must be within [0, 1], got {request.duty_cycle:g}")
        if request.cycle_length_ms < 0:
            raise invalid(f"cycle_length_ms must not be negative, got {request.cycle_length_ms}")
        cores = request.num_cores
        if not request.HasField("cap_at_gomaxprocs") or request.cap_at_gomaxprocs:
            cores = min(cores, len(os.sched_getaffinity(0)))
        started = self.cpu_load.apply(CpuLoadSettings(cores, request.duty_cycle, request.cycle_length_ms))
        return pb.UseCPUResponse(num_cores=started)
