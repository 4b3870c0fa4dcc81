"""Protobuf modules are generated from protos/ at import time and speak the reference's wire format."""

import subprocess
import sys
from pathlib import Path

from substrate_assets.protos import ateapi_pb2, ateapi_pb2_grpc, glutton_pb2

ROOT = Path(__file__).resolve().parents[1]


def test_no_generated_code_is_committed():
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True).stdout.split()
    assert not [name for name in tracked if name.endswith(("_pb2.py", "_pb2_grpc.py", "_pb2.pyi"))]


def test_glutton_messages_and_enums():
    assert glutton_pb2.WRITE_MODE_TRUNCATE == 0
    assert glutton_pb2.WRITE_MODE_OVERWRITE == 1
    assert glutton_pb2.WRITE_MODE_OVERWRITE_ROTATE == 2
    assert glutton_pb2.READ_MODE_DATA == 0 and glutton_pb2.READ_MODE_DIGEST_ONLY == 1
    request = glutton_pb2.WriteDiskRequest(key="repo", size=2**31 - 1, write_mode=glutton_pb2.WRITE_MODE_TRUNCATE)
    assert glutton_pb2.WriteDiskRequest.FromString(request.SerializeToString()) == request
    # Field numbers fix the wire: key=1 (string), size=2 (int32), write_mode=3.
    assert glutton_pb2.WriteDiskRequest(key="a", size=1).SerializeToString() == b"\n\x01a\x10\x01"
    assert glutton_pb2.BurnCPURequest(duration_ms=500, parallelism=2).SerializeToString() == b"\x08\xf4\x03\x10\x02"
    routes = {m.name for m in glutton_pb2.DESCRIPTOR.services_by_name["Glutton"].methods}
    assert routes == {"Ping", "WriteRAM", "ReadRAM", "WriteDisk", "ReadDisk", "Ingest", "BurnCPU", "UseCPU"}
    # UseCPU as upstream numbers it; cap_at_gomaxprocs is optional, so unset and false differ on the wire.
    assert glutton_pb2.UseCPURequest(num_cores=2, duty_cycle=0.5, cycle_length_ms=100).SerializeToString() == \
        b"\x08\x02\x11" + bytes.fromhex("000000000000e03f") + b"\x18\x64"  # 0.5 as a little-endian double
    assert not glutton_pb2.UseCPURequest().HasField("cap_at_gomaxprocs")
    assert glutton_pb2.UseCPURequest(cap_at_gomaxprocs=False).HasField("cap_at_gomaxprocs")


def test_ateapi_lifecycle_subset():
    service = ateapi_pb2.DESCRIPTOR.services_by_name["Control"]
    assert {m.name for m in service.methods} == {
        "CreateAtespace", "CreateActor", "GetActor", "ResumeActor", "SuspendActor", "PauseActor", "DeleteActor",
        "RevertActor", "GetActorTemplate"}
    assert ateapi_pb2.ActorState.Name(4) == "ACTOR_STATE_SUSPENDED"
    assert ateapi_pb2.ActorState.Value("ACTOR_STATE_CRASHED") == 7
    assert ateapi_pb2.ActorState.Value("ACTOR_STATE_REVERTING") == 9
    actor = ateapi_pb2.Actor(metadata=ateapi_pb2.ResourceMetadata(atespace="benchmark", name="agent-1"),
                             actor_template=ateapi_pb2.ObjectRef(atespace="benchmark-workloads", name="glutton"),
                             status=ateapi_pb2.ActorStatus(state=ateapi_pb2.ACTOR_STATE_RUNNING))
    assert ateapi_pb2.Actor.FromString(actor.SerializeToString()) == actor
    assert ateapi_pb2.ResumeActorResponse(resumed=True).resumed
    assert ateapi_pb2.DeleteActorRequest(any_state=True).any_state
    template = ateapi_pb2.ActorTemplate(resources=ateapi_pb2.ResourceRequirements(
        limits=[ateapi_pb2.ResourceLimit(name="memory", quantity="1Gi")]))
    assert template.resources.limits[0].quantity == "1Gi"
    assert hasattr(ateapi_pb2_grpc, "ControlStub") and hasattr(ateapi_pb2_grpc, "add_ControlServicer_to_server")


def test_generation_from_an_empty_cache(tmp_path):
    code = "from substrate_assets.protos import glutton_pb2; print(glutton_pb2.PingRequest(message='x'))"
    done = subprocess.run([sys.executable, "-c", code], env={"SUBSTRATE_BENCH_CACHE": str(tmp_path),
                                                              "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert 'message: "x"' in done.stdout
    assert list(tmp_path.glob("protos/*/substrate_protos/glutton_pb2.py"))
