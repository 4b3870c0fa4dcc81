"""The agent-session driver replayed deterministically: the same script, clock-free doubles for the control API and
the router, a seeded rng and numbered actor names. What it sends (each op's route and body bytes, by SHA-256) and
the rows it books (type, name, success, error class and text, session, step, lap, wake) must match the golden
fixture pinned before the driver's CPU work (issue 16): a faster driver sends and books exactly the same things.

Regenerate the fixture only for an intended change:
``.venv/bin/python -m tests.driver.test_session_replay > tests/driver/golden/session_replay.json``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import uuid
from pathlib import Path
from typing import Any

import grpc

from substrate_assets.driver import scripts as scripts_module
from substrate_assets.driver.failures import RouterError
from substrate_assets.driver.scripts import ScriptSource
from substrate_assets.driver.users import session as session_module
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.driver.users.session import AgentSessionVU, TemplateCheck
from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import glutton_pb2 as g
from substrate_assets.workload import ScriptLibrary
from tests.driver.conftest import Rows
from tests.support.driver_doubles import Sleeps, Status

GOLDEN = Path(__file__).with_name("golden") / "session_replay.json"
SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
ITERATIONS = 70  # three and a half laps of coding-session, with the injected failures below
REPLIES = {"/ping": None, "/ingest": g.IngestResponse, "/burncpu": g.BurnCPUResponse,
           "/writedisk": g.WriteDiskResponse, "/readdisk": g.ReadDiskResponse, "/writeram": g.WriteRAMResponse,
           "/readram": g.ReadRAMResponse}


class SeededStream:
    """The ingest payload's bytes from a seeded generator instead of the driver's AES-CTR stream over os.urandom."""

    def chunk(self, size: int) -> bytes:
        return random.Random(size).randbytes(size)


class ScriptedRouter:
    """Answers every glutton route as glutton would (a ping echoes), and fails the calls numbered in ``failures``
    (1-based, over all calls) with the given HTTP status; records what each call sent."""

    def __init__(self, failures: dict[int, int]) -> None:
        self.failures = failures
        self.sent: list[list[Any]] = []

    def post(self, actor: str, route: str, body: bytes) -> bytes:
        self.sent.append([actor, route, len(body), hashlib.sha256(body).hexdigest()])
        status = self.failures.get(len(self.sent))
        if status is not None:
            raise RouterError(route, status, b"injected")
        reply = REPLIES[route]
        if reply is None:
            return g.PingResponse(message=g.PingRequest.FromString(body).message).SerializeToString()
        return reply(size=len(body)).SerializeToString() if route == "/readdisk" else reply().SerializeToString()


class ScriptedControl:
    """The control API: every call succeeds but those numbered in ``failures`` (1-based), which raise the status."""

    def __init__(self, failures: dict[int, grpc.StatusCode]) -> None:
        self.failures = failures
        self.calls: list[list[str]] = []

    def _call(self, rpc: str, *args: object) -> None:
        self.calls.append([rpc, *map(str, args)])
        code = self.failures.get(len(self.calls))
        if code is not None:
            raise Status(code, f"injected {code.name}")

    def get_template(self) -> pb.ActorTemplate:
        self._call("GetActorTemplate")
        template = pb.ActorTemplate()
        template.resources.limits.add(name="memory", quantity="1Gi")
        return template

    def ensure_atespace(self, name: str) -> None:
        self._call("CreateAtespace", name)

    def create_actor(self, atespace: str, name: str) -> None:
        self._call("CreateActor", atespace, name)

    def suspend(self, atespace: str, name: str) -> None:
        self._call("SuspendActor", atespace, name)

    def pause(self, atespace: str, name: str) -> None:
        self._call("PauseActor", atespace, name)

    def resume(self, atespace: str, name: str) -> None:
        self._call("ResumeActor", atespace, name)

    def delete(self, atespace: str, name: str, any_state: bool = True) -> None:
        self._call("DeleteActor", atespace, name, any_state)


def replay(monkeypatch: Any | None = None) -> dict[str, Any]:
    """coding-session through one VU: a 503 (kept), three transport-like 500s in a row (replaced), a 404 (replaced
    at once) and a failed suspend (hibernate pending), then back to normal."""
    numbers = itertools.count(1)
    named = lambda: uuid.UUID(int=next(numbers))  # noqa: E731 - actor names in order, not at random
    if monkeypatch is not None:
        monkeypatch.setattr(session_module.uuid, "uuid4", named)
        monkeypatch.setattr(scripts_module, "RandomStream", SeededStream)
    else:
        session_module.uuid.uuid4 = named  # type: ignore[assignment]
        scripts_module.RandomStream = SeededStream  # type: ignore[assignment,misc]
    router = ScriptedRouter({5: 503, 30: 500, 33: 500, 36: 500, 80: 404, 120: 500})
    control = ScriptedControl({40: grpc.StatusCode.UNAVAILABLE, 60: grpc.StatusCode.NOT_FOUND})
    rows = Rows()
    vu = AgentSessionVU(control, router, ScriptSource(ScriptLibrary(SCRIPTS), "coding-session"),  # type: ignore[arg-type]
                        WorkerKnobs(think_scale=0.5), TemplateCheck(control), rows, sleep=Sleeps(),  # type: ignore[arg-type]
                        rng=random.Random(16))
    for _ in range(ITERATIONS):
        vu.iterate()
    vu.stop()
    booked = [[row.request_type, row.name, row.ok,
               None if row.error is None else f"{type(row.error).__name__}: {row.error}",
               row.context.get("session_id"), row.context.get("step"), row.context.get("step_index"),
               row.context.get("lap"), row.context.get("wake")] for row in rows.rows]
    return {"sent": router.sent, "control": control.calls, "booked": booked, "sleeps": vu.sleep}


def test_the_driver_sends_and_books_what_it_did_before(monkeypatch):
    pinned = json.loads(GOLDEN.read_text())
    replayed = json.loads(json.dumps(replay(monkeypatch)))
    for part in ("sent", "control", "booked", "sleeps"):
        assert len(replayed[part]) == len(pinned[part]), part
        for index, (now, before) in enumerate(zip(replayed[part], pinned[part], strict=True)):
            assert now == before, (part, index)
    assert any(not row[2] for row in pinned["booked"]), "the fixture must cover failures"


if __name__ == "__main__":
    print(json.dumps(replay(), indent=0))
