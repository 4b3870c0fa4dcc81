"""RevertActor on real actor processes: from RUNNING, PAUSED and CRASHED (a real crash: over its memory limit) the
actor is SUSPENDED again, and its RAM and files are those of its last snapshot; a SUSPENDED actor cannot be
reverted, a missing one is not found."""

import grpc
import pytest

from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import glutton_pb2 as g
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
from tests.runtime.conftest import Control, Router, rpc_error
from tests.support.waiting import wait_until

MI = 1 << 20


@pytest.fixture(scope="module")
def small_actors():
    with EmbeddedRuntime(RuntimeConfig(workers=2, actors_per_worker=1, warm_hosts=1, actor_memory="8Mi")) as rt:
        yield rt, Control(rt), Router(rt)


KEYS = ("a", "b", "c", "d")


def ram(router: Router, name: str) -> tuple[int, ...]:
    """The actor's RAM, by the checksum of each array. One checksum is a single byte (the XOR of one byte per page),
    so a rewrite keeps it by chance once in 256; four arrays make that once in 2**32."""
    checksums = []
    for key in KEYS:
        status, body = router.post(name, "/readram", g.ReadRAMRequest(key=key))
        assert status == 200, body
        checksums.append(g.ReadRAMResponse.FromString(body).checksum)
    return tuple(checksums)


def disk(router: Router, name: str, key: str) -> tuple[int, bytes | None]:
    status, body = router.post(name, "/readdisk", g.ReadDiskRequest(key=key, read_mode=g.READ_MODE_DIGEST_ONLY))
    return status, g.ReadDiskResponse.FromString(body).sha256 if status == 200 else None


@pytest.fixture
def actor(small_actors):
    """A new actor, deleted afterwards whatever its state, so one failing case cannot hold the next one's worker."""
    _runtime, control, _router = small_actors
    name = control.new_actor("revert")
    yield name
    control.delete(name, any_state=True)


@pytest.mark.parametrize("state", ["RUNNING", "PAUSED", "CRASHED"])
def test_a_reverted_actor_is_its_last_snapshot_again(small_actors, actor, state):
    runtime, control, router = small_actors
    name = actor
    # What the snapshot holds: 1 MiB of RAM in four arrays and a file "f".
    for key in KEYS:
        assert router.post(name, "/writeram", g.WriteRAMRequest(key=key, size="256Ki"))[0] == 200
    assert router.post(name, "/writedisk", g.WriteDiskRequest(key="f", size=4096))[0] == 200
    kept_ram, (_, kept_file) = ram(router, name), disk(router, name, "f")
    control.suspend(name)
    # After it: the RAM re-randomized, the file rewritten, a new file.
    for key in KEYS:
        assert router.post(name, "/writeram", g.WriteRAMRequest(key=key, size="256Ki",
                                                                 write_mode=g.WRITE_MODE_OVERWRITE))[0] == 200
    assert router.post(name, "/writedisk", g.WriteDiskRequest(key="f", size=4096))[0] == 200
    assert router.post(name, "/writedisk", g.WriteDiskRequest(key="g", size=4096))[0] == 200
    assert ram(router, name) != kept_ram and disk(router, name, "f")[1] != kept_file
    if state == "PAUSED":
        control.pause(name)
    if state == "CRASHED":  # past its 8 MiB: the runtime kills it, for real
        assert router.post(name, "/writedisk", g.WriteDiskRequest(key="big", size=9 * MI))[0] == 502
        wait_until(lambda: control.state(name) == "ACTOR_STATE_CRASHED", f"{name} to be CRASHED")
    assert control.state(name) == f"ACTOR_STATE_{state}"

    reverted = control.stub.RevertActor(pb.RevertActorRequest(actor=control.ref(name)))
    assert reverted.actor.status.state == pb.ACTOR_STATE_SUSPENDED
    assert runtime.snapshot_state()["running_actors"] == 0  # its host is gone and its worker free
    assert any(event.kind == "revert" and event.actor == name for event in runtime.event_log())
    # The next request resumes it from the snapshot: what it did since is gone.
    assert ram(router, name) == kept_ram
    assert disk(router, name, "f") == (200, kept_file)
    assert disk(router, name, "g")[0] != 200


def test_a_suspended_actor_cannot_be_reverted_and_a_missing_one_is_not_found(small_actors, actor):
    _runtime, control, _router = small_actors
    name = actor
    error = rpc_error(lambda: control.stub.RevertActor(pb.RevertActorRequest(actor=control.ref(name))))
    assert error.code() == grpc.StatusCode.FAILED_PRECONDITION and "ACTOR_STATE_SUSPENDED" in error.details()
    missing = rpc_error(lambda: control.stub.RevertActor(pb.RevertActorRequest(actor=control.ref("never-made"))))
    assert missing.code() == grpc.StatusCode.NOT_FOUND
