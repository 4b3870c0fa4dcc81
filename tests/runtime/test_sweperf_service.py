"""The sweperf trajectory service: its routes and jobs in-process, then for real behind the embedded runtime's
router: job state across a real suspend, a job interrupted by a checkpoint, and the over-limit crash."""

import json
import threading
import time
from http.client import HTTPConnection

import grpc
import pytest

from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig, TemplateConfig
from substrate_assets.runtime.config import DEFAULT_TRAJECTORY, SWEPERF_TEMPLATE_NAME
from substrate_assets.runtime.glutton import Glutton
from substrate_assets.runtime.snapshot import MANIFEST
from substrate_assets.runtime.sweperf_service import RAM_KEY, SweperfServer, SweperfService
from substrate_assets.runtime.trajectory import TrajectoryError, load_trajectory, parse_trajectory
from tests.runtime.conftest import ATESPACE, Control, rpc_error

Ki, Mi = 1 << 10, 1 << 20
TINY = {"format": 1, "name": "tiny", "steps": [
    {"kind": "checkout", "duration_ms": 15, "cpu_ms": 3, "ram_bytes": 2 * Mi, "file_bytes": 64 * Ki},
    {"kind": "search", "duration_ms": 5, "cpu_ms": 2, "ram_bytes": 512 * Ki},
    {"kind": "edit", "duration_ms": 5, "file_bytes": 16 * Ki},
    {"kind": "test", "duration_ms": 10, "cpu_ms": 5, "ram_bytes": 3 * Mi, "file_bytes": 32 * Ki},
]}
# Step 2 idles long enough for a suspend to land in it.
SLOW = {"format": 1, "name": "slow", "steps": [
    {"kind": "checkout", "duration_ms": 1, "ram_bytes": 1 * Mi, "file_bytes": 8 * Ki},
    {"kind": "test", "duration_ms": 60_000},
]}
# Its first step writes more RAM than the template allows.
GREEDY = {"format": 1, "name": "greedy", "steps": [{"kind": "install", "duration_ms": 1, "ram_bytes": 8 * Mi}]}


def write_json(path, document):
    path.write_text(json.dumps(document))
    return path


class Http:
    """JSON requests to a sweperf server, or through the router to an actor."""

    def __init__(self, port: int, actor: str | None = None) -> None:
        self.port = port
        self.actor = actor

    def call(self, method: str, route: str, body: bytes = b"", content_type: str | None = None):
        connection = HTTPConnection("127.0.0.1", self.port, timeout=30)
        headers = {} if content_type is None else {"Content-Type": content_type}
        if self.actor is not None:
            headers["ate-target-actor"] = f"{ATESPACE}/{self.actor}"
        connection.request(method, route, body=body or None, headers=headers)
        response = connection.getresponse()
        payload = response.read()
        connection.close()
        try:
            return response.status, json.loads(payload), response
        except ValueError:
            return response.status, payload, response

    def execute(self, start_step: int, end_step: int):
        body = json.dumps({"start_step": start_step, "end_step": end_step}).encode()
        return self.call("POST", "/execute", body, "application/json")

    def job(self, job_id: str):
        return self.call("GET", f"/status?job_id={job_id}")

    def wait(self, job_id: str, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            status, reply, _ = self.job(job_id)
            assert status == 200, reply
            if reply["status"] != "RUNNING":
                return reply
            time.sleep(0.005)
        raise AssertionError(f"job {job_id} still running after {timeout}s")


# -- the trajectory format ---------------------------------------------------


def test_bundled_trajectory_is_21_steps_of_a_few_seconds():
    trajectory = load_trajectory(DEFAULT_TRAJECTORY)
    assert trajectory.name == SWEPERF_TEMPLATE_NAME
    assert len(trajectory) == 21
    assert 2_000 <= trajectory.recorded_ms <= 6_000
    assert [step.number for step in trajectory.steps] == list(range(1, 22))
    # A mix of work: every step records a duration; some burn CPU, hold RAM, write files, some do not.
    assert all(step.duration_ms > 0 and step.cpu_ms <= step.duration_ms for step in trajectory.steps)
    assert {step.file_bytes > 0 for step in trajectory.steps} == {True, False}
    assert max(step.ram_bytes for step in trajectory.steps) + sum(step.file_bytes for step in trajectory.steps) \
        < 64 * Mi  # fits a small actor


@pytest.mark.parametrize(("document", "message"), [
    ({"format": 2, "steps": [{"duration_ms": 1}]}, "unknown trajectory format"),
    ({"format": 1, "steps": []}, "non-empty list"),
    ({"format": 1, "steps": [{"kind": "x"}]}, "no duration_ms"),
    ({"format": 1, "steps": [{"duration_ms": -1}]}, "duration_ms must be a number of at least 0"),
    ({"format": 1, "steps": [{"duration_ms": 1, "ram_bytes": 1.5}]}, "ram_bytes must be a whole number"),
    ({"format": 1, "steps": [{"duration_ms": 1, "cpu": 3}]}, "unknown fields"),
])
def test_a_bad_trajectory_is_refused(document, message):
    with pytest.raises(TrajectoryError, match=message):
        parse_trajectory(document)


def test_templates_name_their_service_and_trajectory(tmp_path):
    built_in = {t.name: t for t in RuntimeConfig(actor_memory="96Mi").all_templates()}
    sweperf = built_in[SWEPERF_TEMPLATE_NAME]
    assert (sweperf.service, sweperf.trajectory_file, sweperf.memory_limit) == ("sweperf", DEFAULT_TRAJECTORY, 96 * Mi)
    assert built_in["glutton"].service == "glutton"
    tiny = write_json(tmp_path / "tiny.json", TINY)
    assert TemplateConfig(name="t", service="sweperf", trajectory=tiny).trajectory_file == tiny.resolve()
    with pytest.raises(ValueError, match="cannot read trajectory"):
        TemplateConfig(name="t", service="sweperf", trajectory=tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(ValueError, match="not JSON"):
        TemplateConfig(name="t", service="sweperf", trajectory=tmp_path / "bad.json")
    with pytest.raises(ValueError, match="for service sweperf only"):
        TemplateConfig(name="t", trajectory=tiny)


# -- the service in-process --------------------------------------------------


@pytest.fixture
def served(tmp_path):
    """A service on a glutton of its own, served on a free port; the over-limit callback only records."""
    over_limit = []
    glutton = Glutton(tmp_path / "data", 64 * Mi, lambda used, limit: over_limit.append((used, limit)))
    service = SweperfService(glutton, parse_trajectory(TINY))
    server = SweperfServer(("127.0.0.1", 0), service)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
    thread.start()
    yield service, Http(server.server_address[1]), over_limit
    server.shutdown()
    server.server_close()
    service.interrupt()


def test_status_is_up(served):
    _, http, _ = served
    status, reply, response = http.call("GET", "/status")
    assert (status, reply) == (200, {"status": "up"})
    assert response.getheader("Content-Type") == "application/json"
    assert int(response.getheader("x-server-elapsed-us")) >= 0


def test_a_job_runs_in_the_background_and_does_real_work(served):
    service, http, over_limit = served
    status, reply, _ = http.execute(1, 4)
    assert status == 200 and reply["status"] == "RUNNING" and set(reply) == {"job_id", "status"}
    job_id = reply["job_id"]
    status, running, _ = http.job(job_id)
    assert status == 200 and running["status"] in ("RUNNING", "COMPLETED")
    done = http.wait(job_id)
    assert done == {"job_id": job_id, "status": "COMPLETED", "exit_code": 0,
                    "execution_duration_ms": done["execution_duration_ms"], "completed_step": 4, "error": None}
    recorded = sum(step["duration_ms"] for step in TINY["steps"])
    assert isinstance(done["execution_duration_ms"], float) and done["execution_duration_ms"] >= recorded
    # RAM grew to the largest step's and files of the steps that write them are in the data dir.
    glutton = service.glutton
    assert len(glutton.arrays[RAM_KEY].data) == 3 * Mi
    assert glutton.file_sizes == {"step-1": 64 * Ki, "step-3": 16 * Ki, "step-4": 32 * Ki}
    assert (glutton.data_dir / "step-1").stat().st_size == 64 * Ki
    assert over_limit == []
    # A finished job answers the same again.
    assert http.job(job_id)[1] == done


def test_a_chunk_runs_only_its_steps(served):
    service, http, _ = served
    done = http.wait(http.execute(2, 3)[1]["job_id"])
    assert (done["status"], done["completed_step"]) == ("COMPLETED", 3)
    assert service.glutton.file_sizes == {"step-3": 16 * Ki}
    assert len(service.glutton.arrays[RAM_KEY].data) == 512 * Ki


@pytest.mark.parametrize(("start", "end"), [(0, 2), (3, 2), (4, 5), (9, 9)])
def test_a_range_outside_the_trajectory_is_a_failed_job(served, start, end):
    service, http, _ = served
    status, reply, _ = http.execute(start, end)
    assert status == 200 and reply["status"] == "FAILED"
    done = http.wait(reply["job_id"])
    assert (done["status"], done["exit_code"], done["completed_step"]) == ("FAILED", 2, 0)
    assert "not a range within the trajectory's steps 1..4" in done["error"]
    assert service.glutton.file_sizes == {}


def test_one_job_at_a_time(served):
    service, http, _ = served
    service.trajectory = parse_trajectory(SLOW)
    first = http.execute(1, 2)[1]["job_id"]
    status, reply, _ = http.execute(1, 1)
    assert status == 409 and first in reply["error"]
    service.interrupt()
    done = http.job(first)[1]
    assert (done["status"], done["exit_code"]) == ("FAILED", None)
    assert done["error"].startswith("interrupted by a suspend after step")
    assert http.wait(http.execute(1, 1)[1]["job_id"])["status"] == "COMPLETED"  # the next job runs again


@pytest.mark.parametrize(("method", "route", "body", "expected"), [
    ("GET", "/status?job_id=nope", b"", (404, "unknown job 'nope'")),
    ("POST", "/execute", b"{", (400, "the body is not JSON")),
    ("POST", "/execute", b"[1, 2]", (400, "must be a JSON object")),
    ("POST", "/execute", b'{"start_step": "1", "end_step": 2}', (400, "start_step must be an integer")),
    ("POST", "/execute", b'{"start_step": 1}', (400, "end_step must be an integer")),
    ("GET", "/execute", b"", (405, "method GET not allowed on /execute")),
    ("POST", "/status", b"{}", (405, "method POST not allowed on /status")),
    ("GET", "/ping", b"", (404, "no route /ping")),
])
def test_refusals(served, method, route, body, expected):
    _, http, _ = served
    status, reply, _ = http.call(method, route, body, "application/json" if body else None)
    assert status == expected[0] and expected[1] in reply["error"], reply


def test_over_the_memory_limit_fails_the_write(tmp_path):
    # In-process the over-limit callback only records; in an actor host it kills the process (below).
    over_limit = []
    glutton = Glutton(tmp_path / "data", 4 * Mi, lambda used, limit: over_limit.append((used, limit)))
    service = SweperfService(glutton, parse_trajectory(GREEDY))
    job_id = service.execute({"start_step": 1, "end_step": 1})["job_id"]
    service.interrupt()  # waits for the job's thread
    done = service.status(job_id)
    assert (done["status"], done["exit_code"]) == ("FAILED", 1)
    assert done["error"].startswith("step 1: memory limit exceeded")
    assert over_limit == [(8 * Mi, 4 * Mi)]


def test_job_records_restore_finished_jobs(tmp_path):
    glutton = Glutton(tmp_path / "data")
    service = SweperfService(glutton, parse_trajectory(TINY))
    job_id = service.execute({"start_step": 1, "end_step": 2})["job_id"]
    service.interrupt()
    records = service.job_records()
    restored = SweperfService(Glutton(tmp_path / "other"), parse_trajectory(TINY), json.loads(json.dumps(records)))
    assert restored.status(job_id) == service.status(job_id)
    # A record of a job still running (no snapshot writes one) reads as interrupted.
    running = {**records[0], "job_id": "x", "status": "RUNNING"}
    assert SweperfService(glutton, parse_trajectory(TINY), [running]).status("x")["status"] == "FAILED"


# -- for real, behind the router ---------------------------------------------


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    directory = tmp_path_factory.mktemp("trajectories")
    templates = (
        TemplateConfig(name="swebench-tiny", service="sweperf", memory_limit="64Mi",
                       trajectory=write_json(directory / "tiny.json", TINY)),
        TemplateConfig(name="swebench-slow", service="sweperf", memory_limit="64Mi",
                       trajectory=write_json(directory / "slow.json", SLOW)),
        TemplateConfig(name="swebench-greedy", service="sweperf", memory_limit="4Mi",
                       trajectory=write_json(directory / "greedy.json", GREEDY)),
    )
    config = RuntimeConfig(workers=2, actors_per_worker=2, warm_hosts=1, actor_memory="64Mi", templates=templates)
    with EmbeddedRuntime(config) as started:
        yield started


@pytest.fixture(scope="module")
def control(runtime):
    return Control(runtime)


def new_actor(control: Control, template: str) -> str:
    name = f"sweperf-{template}-{time.monotonic_ns()}"
    control.stub.CreateActor(pb.CreateActorRequest(actor=pb.Actor(
        metadata=pb.ResourceMetadata(atespace=ATESPACE, name=name),
        actor_template=pb.ObjectRef(atespace="benchmark-workloads", name=template))))
    return name


def manifest(runtime, actor: str) -> dict:
    return json.loads((runtime.snapshot_path(ATESPACE, actor) / MANIFEST).read_text())


def test_job_state_and_work_survive_a_real_suspend(runtime, control):
    actor = new_actor(control, "swebench-tiny")
    http = Http(runtime.router_port, actor)
    # The first request wakes the new actor; the JSON routes pass the router both ways.
    assert http.call("GET", "/status")[:2] == (200, {"status": "up"})
    status, reply, response = http.execute(1, 4)
    assert status == 200 and reply["status"] == "RUNNING"
    assert response.getheader("Content-Type") == "application/json"
    done = http.wait(reply["job_id"])
    assert (done["status"], done["exit_code"], done["completed_step"]) == ("COMPLETED", 0, 4)
    control.suspend(actor)
    assert control.state(actor) == "ACTOR_STATE_SUSPENDED"
    kept = manifest(runtime, actor)
    assert [job["job_id"] for job in kept["jobs"]] == [reply["job_id"]]
    assert [(a["key"], a["length"]) for a in kept["arrays"]] == [(RAM_KEY, 3 * Mi)]
    assert {f["key"]: f["size"] for f in kept["files"]} == {"step-1": 64 * Ki, "step-3": 16 * Ki, "step-4": 32 * Ki}
    control.resume(actor)
    assert http.job(reply["job_id"])[1] == done
    # A second job on the restored actor: its RAM is the snapshot's array, rotated, not grown.
    second = http.wait(http.execute(2, 2)[1]["job_id"])
    assert second["status"] == "COMPLETED"
    control.suspend(actor)
    kept = manifest(runtime, actor)
    assert [job["job_id"] for job in kept["jobs"]] == [reply["job_id"], second["job_id"]]
    assert [(a["key"], a["length"]) for a in kept["arrays"]] == [(RAM_KEY, 3 * Mi)]
    control.delete(actor)


def test_a_checkpoint_interrupts_a_running_job_and_records_it_failed(runtime, control):
    actor = new_actor(control, "swebench-slow")
    http = Http(runtime.router_port, actor)
    job_id = http.execute(1, 2)[1]["job_id"]
    deadline = time.monotonic() + 30
    while http.job(job_id)[1]["completed_step"] < 1:  # step 2, a minute of idling, has begun
        assert time.monotonic() < deadline
        time.sleep(0.005)
    started = time.monotonic()
    control.suspend(actor)
    assert time.monotonic() - started < 30  # the suspend did not wait out the minute-long step
    assert control.state(actor) == "ACTOR_STATE_SUSPENDED"
    kept = manifest(runtime, actor)
    assert [(job["job_id"], job["status"]) for job in kept["jobs"]] == [(job_id, "FAILED")]
    # A request wakes the actor (implicitly): the job is over, failed, and says why.
    status, reply, _ = http.job(job_id)
    assert status == 200
    assert (reply["status"], reply["exit_code"], reply["completed_step"]) == ("FAILED", None, 1)
    assert reply["error"] == "interrupted by a suspend after step 1"
    assert reply["execution_duration_ms"] < 60_000
    control.delete(actor, any_state=True)


def test_a_job_over_the_memory_limit_crashes_the_actor(runtime, control):
    actor = new_actor(control, "swebench-greedy")
    http = Http(runtime.router_port, actor)
    # The job's first write kills the host, which may be before or after /execute's answer left it.
    status, reply, _ = http.execute(1, 1)
    assert status in (200, 502), reply
    deadline = time.monotonic() + 30
    while control.state(actor) != "ACTOR_STATE_CRASHED":
        assert time.monotonic() < deadline
        time.sleep(0.01)
    status, body, _ = http.job(reply["job_id"]) if status == 200 else http.call("GET", "/status")
    assert status == 502 and b"crashed" in body
    error = rpc_error(lambda: control.resume(actor))
    assert error.code() == grpc.StatusCode.ABORTED
    assert "crashed" in error.details() and "memory limit" in error.details()
    control.delete(actor)
