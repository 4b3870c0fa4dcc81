"""The control API's state machine on real actor processes, including the illegal transitions."""

import grpc
import psutil

from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import glutton_pb2 as g
from tests.runtime.conftest import ATESPACE, TEMPLATE, rpc_error


def test_atespaces_and_actor_records(control):
    assert rpc_error(lambda: control.stub.CreateAtespace(pb.CreateAtespaceRequest(atespace=pb.Atespace(
        metadata=pb.ResourceMetadata(name=ATESPACE))))).code() == grpc.StatusCode.ALREADY_EXISTS
    name = control.new_actor()
    actor = control.stub.GetActor(pb.GetActorRequest(actor=control.ref(name)))
    assert actor.status.state == pb.ACTOR_STATE_SUSPENDED  # created as a record only
    assert actor.metadata.uid and actor.metadata.version >= 1
    assert (actor.actor_template.atespace, actor.actor_template.name) == ("benchmark-workloads", "glutton")
    duplicate = pb.CreateActorRequest(actor=pb.Actor(metadata=pb.ResourceMetadata(atespace=ATESPACE, name=name),
                                                     actor_template=TEMPLATE))
    assert rpc_error(lambda: control.stub.CreateActor(duplicate)).code() == grpc.StatusCode.ALREADY_EXISTS
    nowhere = pb.CreateActorRequest(actor=pb.Actor(metadata=pb.ResourceMetadata(atespace="nowhere", name="x"),
                                                   actor_template=TEMPLATE))
    assert rpc_error(lambda: control.stub.CreateActor(nowhere)).code() == grpc.StatusCode.FAILED_PRECONDITION
    bad = pb.CreateActorRequest(actor=pb.Actor(metadata=pb.ResourceMetadata(atespace=ATESPACE, name="Bad_Name"),
                                               actor_template=TEMPLATE))
    assert rpc_error(lambda: control.stub.CreateActor(bad)).code() == grpc.StatusCode.INVALID_ARGUMENT
    assert rpc_error(lambda: control.state("never-created")).code() == grpc.StatusCode.NOT_FOUND
    assert rpc_error(lambda: control.resume("never-created")).code() == grpc.StatusCode.NOT_FOUND


def test_template_memory_limit(control):
    template = control.stub.GetActorTemplate(pb.GetActorTemplateRequest(actor_template=TEMPLATE))
    assert [(limit.name, limit.quantity) for limit in template.resources.limits] == [("memory", "1Gi")]
    missing = pb.GetActorTemplateRequest(actor_template=pb.ObjectRef(atespace="x", name="y"))
    assert rpc_error(lambda: control.stub.GetActorTemplate(missing)).code() == grpc.StatusCode.NOT_FOUND


def test_resume_suspend_pause_delete(control, router, runtime):
    name = control.new_actor()
    first = control.resume(name)
    assert first.resumed and first.actor.status.state == pb.ACTOR_STATE_RUNNING
    assert control.resume(name).resumed is False  # already RUNNING
    assert router.post(name, "/ping", g.PingRequest(message="x"))[0] == 200
    assert control.suspend(name).actor.status.state == pb.ACTOR_STATE_SUSPENDED
    assert control.suspend(name).actor.status.state == pb.ACTOR_STATE_SUSPENDED  # idempotent
    # Pausing a suspended actor is refused; a running one pauses, and pausing again is a no-op.
    assert rpc_error(lambda: control.pause(name)).code() == grpc.StatusCode.FAILED_PRECONDITION
    assert control.resume(name).resumed
    assert control.pause(name).actor.status.state == pb.ACTOR_STATE_PAUSED
    assert control.pause(name).actor.status.state == pb.ACTOR_STATE_PAUSED
    process = _host_of(runtime, name)
    assert process.status() == psutil.STATUS_STOPPED
    # Deleting a paused actor needs any_state; a paused actor can also be suspended.
    assert rpc_error(lambda: control.delete(name)).code() == grpc.StatusCode.FAILED_PRECONDITION
    assert control.suspend(name).actor.status.state == pb.ACTOR_STATE_SUSPENDED
    assert not process.is_running() or process.status() == psutil.STATUS_ZOMBIE
    control.delete(name)
    assert rpc_error(lambda: control.state(name)).code() == grpc.StatusCode.NOT_FOUND
    assert not (runtime.state_dir / "snapshots" / ATESPACE / name).exists()


def test_delete_any_state_kills_a_running_actor(control, runtime):
    name = control.new_actor()
    control.resume(name)
    process = _host_of(runtime, name)
    assert rpc_error(lambda: control.delete(name)).code() == grpc.StatusCode.FAILED_PRECONDITION
    control.delete(name, any_state=True)
    process.wait(timeout=10)
    assert rpc_error(lambda: control.state(name)).code() == grpc.StatusCode.NOT_FOUND


def test_worker_slots_are_held_only_while_running(control, runtime):
    name = control.new_actor()
    before = runtime.snapshot_state()["running_actors"]
    control.resume(name)
    assert runtime.snapshot_state()["running_actors"] == before + 1
    control.pause(name)
    assert runtime.snapshot_state()["running_actors"] == before
    control.resume(name)
    control.suspend(name)
    assert runtime.snapshot_state()["running_actors"] == before
    control.delete(name)


def _host_of(runtime, name) -> psutil.Process:
    async def pid() -> int:
        record = runtime.lifecycle.actor(ATESPACE, name)
        return record.host.pid

    return psutil.Process(runtime.call(pid()))


def test_every_answer_carries_the_servers_elapsed_time(control):
    """x-server-elapsed-us on a success and on a refusal alike: sweperf books the server's time for both."""
    request = pb.GetActorRequest(actor=pb.ObjectRef(atespace=ATESPACE, name="nobody-here"))
    error = rpc_error(lambda: control.stub.GetActor(request))
    assert error.code() == grpc.StatusCode.NOT_FOUND
    assert int(dict(error.trailing_metadata())["x-server-elapsed-us"]) >= 0
    _, call = control.stub.GetActorTemplate.with_call(pb.GetActorTemplateRequest(actor_template=TEMPLATE))
    assert int(dict(call.trailing_metadata())["x-server-elapsed-us"]) >= 0
