"""The durdir virtual user against a real embedded runtime: its rows, its checks of the file, its teardown."""

import hashlib
import random
import time

import pytest

from substrate_assets.driver.clients import ControlClient, RouterClient
from substrate_assets.driver.users.durdir import DURDIR_FILE, DurdirMismatch, DurdirVU
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.protos import glutton_pb2 as g
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
from tests.driver.conftest import Rows
from tests.support.driver_doubles import Sleeps, assert_gone

FILE_SIZE = 96 * 1024
BOOTSTRAP = ["CreateAtespace", "CreateActor", "ResumeActor", "DurDirWrite", "DurDirServeInitial"]
STEP = ["SuspendActor", "ResumeActor", "DurDirServeAfterResume", "DurDirServeWarm", "DurDirOverwrite"]
TYPES = {"CreateAtespace": "grpc", "CreateActor": "grpc", "ResumeActor": "grpc", "SuspendActor": "grpc",
         "PauseActor": "grpc", "DeleteActor": "grpc"}


@pytest.fixture(scope="module")
def runtime():
    with EmbeddedRuntime(RuntimeConfig(workers=2, actors_per_worker=2, warm_hosts=1, actor_memory="64Mi")) as rt:
        yield rt


def make_durdir(runtime, rows, *, router=None, control=None, sleeps=None, **knobs) -> DurdirVU:
    knobs = {"durdir_file_size_bytes": FILE_SIZE, **knobs}
    return DurdirVU(control or ControlClient(runtime.control_address), router or RouterClient(runtime.router_url),
                    WorkerKnobs(**knobs), rows, sleep=sleeps if sleeps is not None else (lambda s: None),
                    rng=random.Random(11))


def read_file(runtime, actor: str) -> g.ReadDiskResponse:
    reply = RouterClient(runtime.router_url).post(
        f"benchmark/{actor}", "/readdisk", g.ReadDiskRequest(key=DURDIR_FILE, read_mode=g.READ_MODE_DIGEST_ONLY)
        .SerializeToString())
    return g.ReadDiskResponse.FromString(reply)


def write_file(runtime, actor: str, size: int) -> g.WriteDiskResponse:
    reply = RouterClient(runtime.router_url).post(
        f"benchmark/{actor}", "/writedisk", g.WriteDiskRequest(key=DURDIR_FILE, size=size).SerializeToString())
    return g.WriteDiskResponse.FromString(reply)


def test_bootstrap_then_one_step_per_iteration(runtime):
    rows, sleeps = Rows(), Sleeps()
    vu = make_durdir(runtime, rows, sleeps=sleeps, min_wait_time=0.2, max_wait_time=0.6)
    for _ in range(3):
        vu.iterate()
    assert rows.names() == BOOTSTRAP + STEP * 3
    assert all(row.ok for row in rows.rows), [row.error for row in rows.rows if not row.ok]
    assert [row.request_type for row in rows.rows] == [TYPES.get(row.name, "http") for row in rows.rows]
    actor = vu.actor
    assert actor.startswith("sb-") and len(actor) == len("sb-") + 36
    assert {row.context["session_id"] for row in rows.rows} == {None, actor}
    assert rows.rows[0].context["session_id"] is None  # CreateAtespace belongs to no actor
    assert [row.name for row in rows.rows if row.context["wake"]] == ["DurDirServeAfterResume"] * 3
    assert [row.context["lap"] for row in rows.rows] == [0] * 5 + [1] * 5 + [2] * 5 + [3] * 5
    assert all(set(row.context) == {"session_id", "wake", "response_length", "lap"} for row in rows.rows)
    # Data-mode reads carry the file; writes only its size and digest; control calls nothing.
    for row in rows.rows:
        length = row.context["response_length"]
        if row.name in ("DurDirServeInitial", "DurDirServeAfterResume", "DurDirServeWarm"):
            assert FILE_SIZE < length < FILE_SIZE + 100, row
        elif row.name in ("DurDirWrite", "DurDirOverwrite"):
            assert 32 < length < 60, row
        else:
            assert length == 0, row
    # One wait per iteration, drawn from U[0.2, 0.6].
    assert len(sleeps) == 3 and all(0.2 <= s <= 0.6 for s in sleeps) and len(set(sleeps)) == 3
    template = ControlClient(runtime.control_address).get_actor("benchmark", actor).actor_template
    assert (template.atespace, template.name) == ("benchmark-workloads", "glutton-durdir-data")
    # What the VU expects is what the actor holds: the last overwrite, which survived nothing yet.
    held = read_file(runtime, actor)
    assert (held.size, held.sha256) == (vu.expected_size, vu.expected_digest) == (FILE_SIZE, held.sha256)
    restores = [e for e in runtime.event_log() if e.actor == actor and e.kind == "restore" and e.detail != "boot"]
    assert len(restores) == 3  # every step's ResumeActor restored the actor its SuspendActor had parked

    rows.clear()
    vu.stop()
    assert rows.names() == ["DeleteActor"] and rows.rows[0].ok  # the hibernate before it is not booked
    assert rows.rows[0].context["session_id"] == actor and vu.actor is None
    assert_gone(runtime, actor)
    vu.stop()
    assert rows.names() == ["DeleteActor"]  # nothing left to tear down


@pytest.mark.parametrize(("knobs", "bootstrap", "step"), [
    ({"durdir_template": "glutton-durdir-full", "durdir_read_mode": "digest", "lifecycle_mode": "pause"},
     BOOTSTRAP, ["PauseActor", *STEP[1:]]),
    ({"resume_mode": "implicit"},
     [n for n in BOOTSTRAP if n != "ResumeActor"], [n for n in STEP if n != "ResumeActor"]),
    ({"resume_mode": "explicit", "durdir_read_mode": "digest"}, BOOTSTRAP, STEP),
], ids=["full-digest-pause", "implicit", "explicit-digest"])
def test_modes_and_templates(runtime, knobs, bootstrap, step):
    rows = Rows()
    vu = make_durdir(runtime, rows, **knobs)
    vu.iterate()
    vu.iterate()
    assert rows.names() == bootstrap + step * 2
    assert all(row.ok for row in rows.rows), [row.error for row in rows.rows if not row.ok]
    actor = vu.actor
    template = ControlClient(runtime.control_address).get_actor("benchmark", actor).actor_template.name
    assert template == knobs.get("durdir_template", "glutton-durdir-data")
    digest = knobs.get("durdir_read_mode") == "digest"
    for row in rows.rows:
        if row.name.startswith("DurDirServe"):
            assert (row.context["response_length"] < 100) if digest else (row.context["response_length"] > FILE_SIZE)
    if knobs.get("resume_mode") == "implicit":
        # Parked by the step's SuspendActor, woken by the read itself: the wake row is the router's resume.
        wake = next(row for row in reversed(rows.rows) if row.name == "DurDirServeAfterResume")
        restores = [e for e in runtime.event_log() if e.actor == actor and e.kind == "restore"
                    and wake.started - 0.001 <= e.start_ts <= wake.started + wake.elapsed_s]
        assert len(restores) == 1
    rows.clear()
    vu.stop()
    assert rows.names() == ["DeleteActor"] and rows.rows[0].ok
    assert_gone(runtime, actor)


def test_a_file_changed_under_its_feet_is_a_failure_row(runtime):
    rows = Rows()
    vu = make_durdir(runtime, rows)
    vu.iterate()
    actor = vu.actor
    # Another writer replaces the file with as many new bytes: only the digest differs.
    changed = write_file(runtime, actor, FILE_SIZE)
    rows.clear()
    vu.iterate()
    assert rows.names() == ["SuspendActor", "ResumeActor", "DurDirServeAfterResume"]  # the rest is skipped
    failed = rows.rows[-1]
    assert isinstance(failed.error, DurdirMismatch) and failed.context["wake"] and failed.elapsed_s > 0
    assert str(failed.error) == (f"ReadDisk response sha256 mismatch: got {changed.sha256.hex()!r}, "
                                 f"want {vu.expected_digest.hex()!r}")
    # Now a different size: named first.
    write_file(runtime, actor, FILE_SIZE // 2)
    rows.clear()
    vu.iterate()
    assert rows.names() == ["SuspendActor", "ResumeActor", "DurDirServeAfterResume"]
    assert str(rows.rows[-1].error) == f"ReadDisk size mismatch: got {FILE_SIZE // 2}, want {FILE_SIZE}"
    assert rows.rows[-1].context["response_length"] == 0
    vu.stop()
    assert_gone(runtime, actor)


class CorruptingRouter:
    """The real router, except that ReadDisk replies come back with their first data byte flipped (the server's
    digest left as it was) and, when asked, WriteDisk replies lose their digest."""

    def __init__(self, inner: RouterClient, drop_write_digest: bool = False) -> None:
        self.inner = inner
        self.drop_write_digest = drop_write_digest
        self.corrupted = 0

    def post(self, actor: str, route: str, body: bytes) -> bytes:
        reply = self.inner.post(actor, route, body)
        if route == "/readdisk":
            response = g.ReadDiskResponse.FromString(reply)
            if response.data:
                response.data = bytes([response.data[0] ^ 0xFF]) + response.data[1:]
                self.corrupted += 1
            return response.SerializeToString()
        if route == "/writedisk" and self.drop_write_digest:
            response = g.WriteDiskResponse.FromString(reply)
            response.sha256 = b""
            return response.SerializeToString()
        return reply


def test_data_mode_hashes_the_bytes_and_a_failed_bootstrap_starts_over(runtime):
    rows, sleeps = Rows(), Sleeps()
    router = CorruptingRouter(RouterClient(runtime.router_url))
    vu = make_durdir(runtime, rows, router=router, sleeps=sleeps, min_wait_time=0.25, max_wait_time=0.25)
    vu.iterate()
    # The initial read fails the client's own sha256: the bootstrap fails, the actor is deleted, the VU waits.
    assert rows.names() == ["CreateAtespace", "CreateActor", "ResumeActor", "DurDirWrite", "DurDirServeInitial",
                            "DeleteActor"]
    failed = rows.rows[4]
    assert str(failed.error).startswith("ReadDisk payload sha256 mismatch: computed ")
    assert str(failed.error).endswith(f"want {vu.expected_digest.hex()!r}")
    assert vu.expected_digest != hashlib.sha256(b"").digest() and vu.expected_size == FILE_SIZE
    assert [row.ok for row in rows.rows] == [True, True, True, True, False, True]
    first = rows.rows[1].context["session_id"]
    assert vu.actor is None and sleeps == [0.25]  # max <= min waits min, as upstream
    assert_gone(runtime, first)
    # Digest mode never sees the bytes: the same router passes, and the next iteration starts a new actor.
    vu.knobs = WorkerKnobs(durdir_file_size_bytes=FILE_SIZE, durdir_read_mode="digest")
    rows.clear()
    vu.iterate()
    assert rows.names() == BOOTSTRAP + STEP and all(row.ok for row in rows.rows)
    assert vu.actor != first and router.corrupted == 1
    vu.stop()


def test_a_write_without_a_digest_fails(runtime):
    rows = Rows()
    vu = make_durdir(runtime, rows, router=CorruptingRouter(RouterClient(runtime.router_url), drop_write_digest=True))
    vu.iterate()
    assert rows.names() == ["CreateAtespace", "CreateActor", "ResumeActor", "DurDirWrite", "DeleteActor"]
    assert str(rows.rows[3].error) == "WriteDisk sha256 is empty"
    assert vu.actor is None


class SlowControl(ControlClient):
    """The real control API, with a pause on the client side before CreateAtespace is sent."""

    def create_atespace(self, name: str):
        time.sleep(0.2)
        return super().create_atespace(name)


def test_grpc_rows_are_the_client_wall_clock(runtime):
    rows = Rows()
    vu = make_durdir(runtime, rows, control=SlowControl(runtime.control_address))
    vu.iterate()
    create_atespace = rows.rows[0]
    # AlreadyExists (the earlier tests made it) is a success, and its row holds the client's 0.2 s the server
    # never saw: the server trailer would say microseconds.
    assert create_atespace.name == "CreateAtespace" and create_atespace.ok
    assert create_atespace.elapsed_s >= 0.2
    vu.stop()


def test_a_start_that_cannot_create_the_actor_waits_and_keeps_nothing(runtime):
    rows, sleeps = Rows(), Sleeps()
    vu = make_durdir(runtime, rows, sleeps=sleeps, max_wait_time=0.0)
    # A template the runtime does not hold (the knob's own bounds refuse one outside its choices, so it is set
    # past them): CreateActor fails.
    vu.knobs = vu.knobs.model_copy(update={"durdir_template": "no-such-template"})
    vu.iterate()
    assert rows.names() == ["CreateAtespace", "CreateActor"] and not rows.rows[1].ok
    assert vu.actor is None and sleeps == [0.0]
