"""One virtual user of upstream's ``durdir`` family: a file in an actor's durable directory, served across parks.

Each VU owns one actor ``sb-<uuid4>`` of template ``benchmark-workloads/<durdir_template>``. Starting it books
``CreateAtespace`` (AlreadyExists counts as success) and ``CreateActor``, then bootstraps: ``ResumeActor`` (not
in implicit mode), ``DurDirWrite`` (WriteDisk TRUNCATE of ``bench-data``, ``file_size`` bytes) and
``DurDirServeInitial`` (ReadDisk). A failed bootstrap hibernates the actor unmetered, deletes it metered and
waits; the next iteration starts over with a new actor. Every iteration then runs the step: hibernate
(``SuspendActor`` or ``PauseActor``; its failure is only a row), ``ResumeActor`` unless the resume mode is
``implicit`` (``""`` is explicit here), ``DurDirServeAfterResume`` (the wake row: in implicit mode the read
itself wakes the parked actor), ``DurDirServeWarm`` and ``DurDirOverwrite`` (a new random file), stopping at
the first failure, and waits U[min_wait, max_wait]. As upstream, the iteration that starts the actor also runs
the step.

Every write must answer ``size`` equal to the size asked for and a non-empty sha256, which become the expected
values; every read must match both, and in data mode the client also hashes the ``data`` it received. A
mismatch is a failure row with the client latency and a message naming what differed (upstream's wording).
HTTP rows are the client latency up to the whole reply read (upstream's clock stops at the reply's headers,
which for a data-mode read leaves out the file's transfer); their response length is the reply's body bytes.

gRPC rows are the client wall clock, as upstream's durdir.go @ 18d1c266 books them ("report wall clock; the
server's own elapsed time stays on the span"). The reference cites the older 727b8095, which booked the server
trailer when present; that version still addressed actors by Host header and had no pause mode and no
``any_state``, which this VU follows. ``stop`` (Locust's on_stop) hibernates unmetered and books a
``DeleteActor`` with ``any_state``.

Nothing here knows Locust: rows go to the injected ``record``; ``sleep`` and the random source are injected.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import random
import time
from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from substrate_assets.driver.clients import ControlClient, RouterClient
from substrate_assets.driver.users.base import Record, RestartingUser, StartFailed, new_actor_name
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.families import TEMPLATE_ATESPACE
from substrate_assets.protos import glutton_pb2 as g

log = logging.getLogger(__name__)

DURDIR_FILE = "bench-data"
WRITE_ROUTE = "/writedisk"
READ_ROUTE = "/readdisk"


class DurdirMismatch(Exception):
    """A reply that does not hold what was written: the failure booked on its row."""


def _decoded(reply: bytes, message: type[Any]) -> Any:
    try:
        return message.FromString(reply)
    except DecodeError as error:
        raise DurdirMismatch(f"unmarshal {message.__name__}: {error}") from None


def _same_size(call: str, got: int, want: int) -> None:
    if got != want:
        raise DurdirMismatch(f"{call} size mismatch: got {got}, want {want}")


def write_check(reply: bytes, size: int) -> tuple[int, bytes]:
    """The size and sha256 a WriteDisk reply promises, or :class:`DurdirMismatch`."""
    response = _decoded(reply, g.WriteDiskResponse)
    _same_size("WriteDisk", response.size, size)
    if not response.sha256:
        raise DurdirMismatch("WriteDisk sha256 is empty")
    return response.size, response.sha256


def read_check(reply: bytes, size: int, digest: bytes, data_mode: bool) -> None:
    """A ReadDisk reply must hold the expected size and sha256; in data mode its bytes must hash to it too."""
    response = _decoded(reply, g.ReadDiskResponse)
    _same_size("ReadDisk", response.size, size)
    if response.sha256 != digest:
        raise DurdirMismatch(f"ReadDisk response sha256 mismatch: got {response.sha256.hex()!r}, "
                             f"want {digest.hex()!r}")
    if data_mode:
        computed = hashlib.sha256(response.data).digest()
        if computed != digest:
            raise DurdirMismatch(f"ReadDisk payload sha256 mismatch: computed {computed.hex()!r}, "
                                 f"want {digest.hex()!r}")


class DurdirVU(RestartingUser):
    """One virtual user: one actor at a time, whose durable file must survive every suspend (or pause)."""

    family = "durdir"

    def __init__(self, control: ControlClient, router: RouterClient, knobs: WorkerKnobs, record: Record,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None) -> None:
        super().__init__(control, router, knobs, record, sleep, rng)
        self.actor: str | None = None
        self.lap = 0
        self.expected_size = 0
        self.expected_digest = b""

    def started(self) -> bool:
        return self.actor is not None

    def stop(self) -> None:
        """Locust's on_stop: unmetered hibernate, metered DeleteActor(any_state)."""
        self.teardown()

    # -- starting ---------------------------------------------------------

    def start(self) -> None:
        atespace = self.knobs.atespace
        if self.ensure_atespace(lap=self.lap) is not None:
            raise StartFailed(f"CreateAtespace {atespace} failed")
        actor = new_actor_name()
        template = (TEMPLATE_ATESPACE, self.knobs.durdir_template)
        if not self._rpc("CreateActor", lambda: self.control.create_actor(atespace, actor, template), actor=actor):
            raise StartFailed(f"CreateActor {actor} of {template[0]}/{template[1]} failed")
        self.actor, self.lap = actor, 0
        self.expected_size, self.expected_digest = 0, b""
        if not self.resume():
            reason = "initial resume failed"
        elif not self.write("DurDirWrite"):
            reason = "initial WriteDisk failed"
        elif not self.read("DurDirServeInitial"):
            reason = "initial ReadDisk failed"
        else:
            return
        self.teardown()
        raise StartFailed(f"actor {actor}: {reason}")

    # -- one step ---------------------------------------------------------

    def step(self) -> None:
        """Hibernate, resume, serve after resume, serve warm, overwrite; the first failure ends the step."""
        self.lap += 1
        self.hibernate()
        if not self.resume():
            return
        if not self.read("DurDirServeAfterResume", wake=True):
            return
        if not self.read("DurDirServeWarm"):
            return
        self.write("DurDirOverwrite")

    def hibernate(self) -> None:
        """A metered suspend (or pause); upstream carries on after a failure, which is only a row."""
        actor, atespace = self._actor(), self.knobs.atespace
        if self.knobs.pause:
            self._rpc("PauseActor", lambda: self.control.pause(atespace, actor), actor=actor)
        else:
            self._rpc("SuspendActor", lambda: self.control.suspend(atespace, actor), actor=actor)

    def resume(self) -> bool:
        """A metered ResumeActor, skipped in implicit mode where the next read wakes the actor."""
        if self.knobs.resume_mode == "implicit":  # durdir resumes explicitly unless told (unlike sessions)
            return True
        actor, atespace = self._actor(), self.knobs.atespace
        return self._rpc("ResumeActor", lambda: self.control.resume(atespace, actor), actor=actor)

    def write(self, name: str) -> bool:
        """WriteDisk TRUNCATE of a new random file; on success its size and sha256 become the expected ones."""
        size = self.knobs.file_size
        request = g.WriteDiskRequest(key=DURDIR_FILE, size=size, write_mode=g.WRITE_MODE_TRUNCATE)
        written: list[tuple[int, bytes]] = []
        if not self._http(name, WRITE_ROUTE, request.SerializeToString(),
                          lambda reply: written.append(write_check(reply, size))):
            return False
        self.expected_size, self.expected_digest = written[0]
        return True

    def read(self, name: str, wake: bool = False) -> bool:
        data_mode = not self.knobs.digest_reads
        mode = g.READ_MODE_DATA if data_mode else g.READ_MODE_DIGEST_ONLY
        request = g.ReadDiskRequest(key=DURDIR_FILE, read_mode=mode)
        size, digest = self.expected_size, self.expected_digest
        return self._http(name, READ_ROUTE, request.SerializeToString(),
                          lambda reply: read_check(reply, size, digest, data_mode), wake=wake)

    # -- teardown ---------------------------------------------------------

    def teardown(self) -> None:
        """At most once per actor: unmetered hibernate (errors ignored), then a metered DeleteActor(any_state)."""
        actor, self.actor = self.actor, None
        if actor is None:
            return
        atespace = self.knobs.atespace
        with contextlib.suppress(grpc.RpcError):
            if self.knobs.pause:
                self.control.pause(atespace, actor)
            else:
                self.control.suspend(atespace, actor)
        self._rpc("DeleteActor", lambda: self.control.delete(atespace, actor, any_state=True), actor=actor)

    # -- calls and rows ---------------------------------------------------

    def _actor(self) -> str:
        if self.actor is None:
            raise RuntimeError("durdir VU has no actor")
        return self.actor

    def _rpc(self, name: str, call: Callable[[], object], *, actor: str | None) -> bool:
        """One control call booked with its client wall clock; True when it succeeded."""
        return self.timed_rpc(name, call, actor, lap=self.lap) is None

    def _http(self, name: str, route: str, body: bytes, check: Callable[[bytes], object],
              wake: bool = False) -> bool:
        """One request through the router, timed by the client and checked; True when both passed."""
        actor = self._actor()
        started, clock = time.time(), time.perf_counter()
        try:
            reply = self.router.post(f"{self.knobs.atespace}/{actor}", route, body)
        except Exception as error:  # router statuses and transport errors alike are this row's failure
            self.book("http", name, started, time.perf_counter() - clock, error, actor, wake=wake, lap=self.lap)
            return False
        elapsed = time.perf_counter() - clock
        try:
            check(reply)
        except DurdirMismatch as error:
            self.book("http", name, started, elapsed, error, actor, wake=wake, lap=self.lap)
            return False
        self.book("http", name, started, elapsed, None, actor, wake=wake, response_length=len(reply), lap=self.lap)
        return True
