"""One virtual user's agent sessions, exactly as the reference driver runs them.

A session is one actor (``agent-<uuid4>``) replaying its script in a loop:
think while parked, wake it with a ping (``WakeFirstTouch``), run the step's
ops (``Step_<name>``), park it again (``SuspendActor`` or ``PauseActor``).
Failures are classified (replace now, retry later, replace after 3 in a row);
a broken session is torn down (unmetered suspend, metered ``DeleteActor`` with
``any_state``) and the next iteration starts a new one.

Nothing here knows Locust: calls are timed and handed to a ``record`` callback;
``sleep`` and the random source are injected, so the same code runs under
Locust's gevent users and in plain tests.
"""

from __future__ import annotations

import contextlib
import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
from google.protobuf.message import Message

from substrate_assets.driver.clients import TEMPLATE, ControlClient, RouterClient
from substrate_assets.driver.failures import (
    MAX_CONSECUTIVE_FAILURES,
    Action,
    classify,
    is_crashed,
    retry_on_conflict,
)
from substrate_assets.driver.scripts import LoadedScript, ScriptSource
from substrate_assets.driver.users.base import CRASHED_MESSAGE, CrashedActor, Record, VirtualUser
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.protos import glutton_pb2 as g
from substrate_assets.workload import Op, OpKind, ScriptError, Step
from substrate_assets.workload.quantity import QuantityError, format_binary_si, parse_byte_count

log = logging.getLogger(__name__)

RETRY_PAUSE_S = 2.0
READY_PINGS = 30
READY_PING_INTERVAL_S = 2.0
TEMPLATE_RECHECK_S = 30.0
# Logged with the reason each time a session cannot start; a trial in which none started quotes the first.
SESSION_START_FAILED = "cannot start an agent session"


class SessionStartError(Exception):
    """A session could not start; the VU pauses and tries again."""


class TemplateRefused(SessionStartError):
    """The actor template cannot hold the script."""


class TemplateCheck:
    """The template memory check, shared by every VU of a process: success cached per script, refusal for 30 s."""

    def __init__(self, control: ControlClient, clock: Callable[[], float] = time.monotonic) -> None:
        self.control = control
        self.clock = clock
        self.passed: set[str] = set()
        self.refused: dict[str, tuple[float, str]] = {}
        self._lock = threading.Lock()

    def ensure(self, loaded: LoadedScript) -> None:
        with self._lock:
            if loaded.sha256 in self.passed:
                return
            refusal = self.refused.get(loaded.sha256)
            if refusal is not None and self.clock() < refusal[0]:
                raise TemplateRefused(refusal[1])
        try:
            template = self.control.get_template()
        except grpc.RpcError as error:  # not cached: the next session asks again
            raise SessionStartError(f"GetActorTemplate {TEMPLATE[0]}/{TEMPLATE[1]} failed: {error}") from None
        minimum = loaded.script.min_actor_memory
        quantity = next((limit.quantity for limit in template.resources.limits if limit.name == "memory"), None)
        if quantity is None:
            log.warning("actor template %s/%s has no memory limit; script %s needs %s", *TEMPLATE, loaded.name,
                        format_binary_si(minimum))
        else:
            try:
                limit = parse_byte_count(quantity)
            except QuantityError:
                self._refuse(loaded, f"actor template {TEMPLATE[0]}/{TEMPLATE[1]} memory limit {quantity!r} is "
                             "not a whole byte count")
            if limit < minimum:
                self._refuse(loaded, f"actor template {TEMPLATE[0]}/{TEMPLATE[1]} memory limit {quantity} is below "
                             f"script {loaded.name}'s min_actor_memory {format_binary_si(minimum)}; redeploy the "
                             f"workloads with --actor-memory {format_binary_si(minimum)}")
        with self._lock:
            self.passed.add(loaded.sha256)

    def _refuse(self, loaded: LoadedScript, message: str) -> None:
        with self._lock:
            self.refused[loaded.sha256] = (self.clock() + TEMPLATE_RECHECK_S, message)
        raise TemplateRefused(message)


@dataclass
class Session:
    actor: str
    loaded: LoadedScript
    step_index: int = 0
    lap: int = 0
    consecutive_failures: int = 0
    broken: bool = False
    hibernate_pending: bool = False
    torn_down: bool = False
    steps_completed: int = 0
    started: float = field(default_factory=time.time)

    @property
    def step(self) -> Step:
        return self.loaded.script.steps[self.step_index]


def op_call(op: Op, payload: bytes) -> tuple[str, Message, type[Message]]:
    """The glutton route, request and response type of one op."""
    kind = op.kind
    if kind is OpKind.INGEST:
        return "/ingest", g.IngestRequest(key=op.key, payload=payload[:op.size], append=False), g.IngestResponse
    if kind is OpKind.BURN_CPU:
        return "/burncpu", g.BurnCPURequest(duration_ms=op.millis, parallelism=op.parallel), g.BurnCPUResponse
    if kind is OpKind.WRITE_DISK:
        return ("/writedisk", g.WriteDiskRequest(key=op.key, size=op.size, write_mode=g.WRITE_MODE_TRUNCATE),
                g.WriteDiskResponse)
    if kind is OpKind.READ_DISK_DIGEST:
        return ("/readdisk", g.ReadDiskRequest(key=op.key, read_mode=g.READ_MODE_DIGEST_ONLY), g.ReadDiskResponse)
    if kind is OpKind.READ_DISK_DATA:
        return "/readdisk", g.ReadDiskRequest(key=op.key, read_mode=g.READ_MODE_DATA), g.ReadDiskResponse
    if kind is OpKind.FILL_RAM:
        return ("/writeram", g.WriteRAMRequest(key=op.key, size=str(op.size), write_mode=g.WRITE_MODE_OVERWRITE),
                g.WriteRAMResponse)
    if kind is OpKind.CHURN_RAM:
        request = g.WriteRAMRequest(key=op.key, size=str(op.size), write_mode=g.WRITE_MODE_OVERWRITE_ROTATE)
        return "/writeram", request, g.WriteRAMResponse
    if kind is OpKind.WALK_RAM:
        return "/readram", g.ReadRAMRequest(key=op.key, size=""), g.ReadRAMResponse
    return "/ping", g.PingRequest(message="think"), g.PingResponse


@dataclass(frozen=True)
class OpCall:
    """One op as it goes on the wire: its route, its serialized request, the reply's type and, for a ping, the
    message the reply must echo."""

    route: str
    body: bytes
    reply: type[Message]
    echo: str | None


def prepared_call(loaded: LoadedScript, op: Op) -> OpCall:
    """``op``'s call, serialized once per script and shared by every session: an ingest's request is tens of MiB,
    and slicing, building and serializing it on every call was half of the driver's CPU."""
    call: OpCall | None = loaded.calls.get(op)
    if call is None:
        route, request, reply = op_call(op, loaded.payload)
        call = OpCall(route, request.SerializeToString(), reply, request.message if op.kind is OpKind.PING else None)
        call = loaded.calls.setdefault(op, call)  # two sessions racing build the same bytes; one copy is kept
    return call


class AgentSessionVU(VirtualUser):
    """One virtual user: at most one session at a time, replaced when it breaks."""

    family = "agentsession"

    def __init__(self, control: ControlClient, router: RouterClient, scripts: ScriptSource, knobs: WorkerKnobs,
                 template_check: TemplateCheck, record: Record, sleep: Callable[[float], None] = time.sleep,
                 rng: random.Random | None = None) -> None:
        super().__init__(control, router, knobs, record, sleep, rng)
        self.scripts = scripts
        self.template_check = template_check
        self.session: Session | None = None
        self.sessions_started = 0

    # -- the loop ---------------------------------------------------------

    def iterate(self) -> None:
        if self.session is None:
            try:
                loaded = self.scripts.load()
            except (ScriptError, OSError) as error:
                log.error("cannot load the agent-session script: %s", error)
                self.sleep(RETRY_PAUSE_S)
                return
            try:
                self.session = self.start(loaded)
            except SessionStartError as error:
                log.error("%s: %s", SESSION_START_FAILED, error)
                self.sleep(RETRY_PAUSE_S)
                return
        session = self.session
        self.sleep(self.think_seconds(session.step))
        if self.run_step(session):
            session.steps_completed += 1
            session.step_index += 1
            if session.step_index == len(session.loaded.script.steps):
                session.step_index = 0
                session.lap += 1
                log.info("session %s finished lap %d of %s", session.actor, session.lap, session.loaded.name)
        if session.broken:
            self.teardown()

    def stop(self) -> None:
        """Tear down the current session, if any (Locust's on_stop)."""
        self.teardown()

    def think_seconds(self, step: Step) -> float:
        return float(step.think_ns / 1e9 * self.knobs.think_multiplier * (0.8 + 0.4 * self.rng.random()))

    # -- starting ---------------------------------------------------------

    def start(self, loaded: LoadedScript) -> Session:
        self.template_check.ensure(loaded)
        for op in loaded.script.ops:  # serialized before the session's first request, not during a step
            prepared_call(loaded, op)
        atespace = self.knobs.atespace
        started, clock = time.time(), time.perf_counter()
        try:
            self.control.ensure_atespace(atespace)
        except grpc.RpcError as error:
            self._book("grpc", "CreateAtespace", started, clock, error)
            raise SessionStartError(f"CreateAtespace {atespace}: {error.details()}") from None
        self._book("grpc", "CreateAtespace", started, clock, None)
        session = Session(f"agent-{uuid.uuid4()}", loaded)
        started, clock = time.time(), time.perf_counter()
        try:
            self.control.create_actor(atespace, session.actor)
        except grpc.RpcError as error:
            self._book("grpc", "CreateActor", started, clock, error, session)
            raise SessionStartError(f"CreateActor {session.actor}: {error.details()}") from None
        self._book("grpc", "CreateActor", started, clock, None, session)
        self.sessions_started += 1
        try:
            self._wait_serving(session)
        except SessionStartError:
            self.session = session
            self.teardown()
            raise
        self.hibernate(session)
        return session

    def _wait_serving(self, session: Session) -> None:
        """Unrecorded pings until the actor answers; the first one is also its first activation."""
        last: BaseException | None = None
        for attempt in range(READY_PINGS):
            try:
                self.router.post(self._target(session), "/ping", g.PingRequest(message="hello").SerializeToString())
                return
            except Exception as error:  # any failure: wait and ping again
                last = error
            if attempt < READY_PINGS - 1:
                self.sleep(READY_PING_INTERVAL_S)
        raise SessionStartError(f"actor {session.actor} never answered: {last}")

    # -- one step ---------------------------------------------------------

    def run_step(self, session: Session) -> bool:
        """Run the current step; True when it completed and the session may advance."""
        if session.hibernate_pending:
            self.hibernate(session)
            return False
        context = self._context(session)
        if self.knobs.resume_mode == "explicit":  # agent sessions wake implicitly unless told
            started, clock = time.time(), time.perf_counter()
            try:
                retry_on_conflict(lambda: self.control.resume(self.knobs.atespace, session.actor), self.sleep)
            except grpc.RpcError as error:
                self._book("grpc", "ResumeActor", started, clock, error, session)
                self.note_failure(session, error)
                if is_crashed(error):
                    self.record("actor", "CrashCount", time.time(), 0.0, CrashedActor(CRASHED_MESSAGE), context)
                return False
            self._book("grpc", "ResumeActor", started, clock, None, session)

        started, clock = time.time(), time.perf_counter()
        try:
            self._call(session, Op(OpKind.PING))
        except Exception as error:  # every failure of the wake probe counts
            self._book("http", "WakeFirstTouch", started, clock, error, session, wake=True)
            self.note_failure(session, error)
            self.hibernate(session)
            return False
        self._book("http", "WakeFirstTouch", started, clock, None, session, wake=True)

        step = session.step
        started, clock = time.time(), time.perf_counter()
        for op in step.ops:
            try:
                self._call(session, op)
            except Exception as error:  # the first failing op ends the step
                self._book("http", step.row_name, started, clock, error, session)
                self.note_failure(session, error)
                self.hibernate(session)
                return False
        session.consecutive_failures = 0
        self._book("http", step.row_name, started, clock, None, session)
        self.hibernate(session)
        return True

    def _call(self, session: Session, op: Op) -> None:
        call = prepared_call(session.loaded, op)
        response = call.reply.FromString(self.router.post(self._target(session), call.route, call.body))
        if call.echo is not None and response.message != call.echo:
            raise ValueError(f"ping echo mismatch: sent {call.echo!r}, got {response.message!r}")

    def hibernate(self, session: Session) -> None:
        name = "PauseActor" if self.knobs.pause else "SuspendActor"
        started, clock = time.time(), time.perf_counter()
        try:
            if self.knobs.pause:
                self.control.pause(self.knobs.atespace, session.actor)
            else:
                self.control.suspend(self.knobs.atespace, session.actor)
        except grpc.RpcError as error:
            self._book("grpc", name, started, clock, error, session)
            session.hibernate_pending = True
            self.note_failure(session, error)
            return
        self._book("grpc", name, started, clock, None, session)
        session.hibernate_pending = False

    def note_failure(self, session: Session, error: BaseException) -> None:
        action = classify(error)
        if action is Action.REPLACE_NOW:
            session.broken = True
        elif action is Action.REPLACE_IF_PERSISTENT:
            session.consecutive_failures += 1
            if session.consecutive_failures >= MAX_CONSECUTIVE_FAILURES:
                session.broken = True

    # -- teardown ---------------------------------------------------------

    def teardown(self) -> None:
        """At most once per session: unmetered suspend (errors ignored), then a metered DeleteActor(any_state)."""
        session, self.session = self.session, None
        if session is None or session.torn_down:
            return
        session.torn_down = True
        with contextlib.suppress(grpc.RpcError):
            self.control.suspend(self.knobs.atespace, session.actor)
        started, clock = time.time(), time.perf_counter()
        try:
            self.control.delete(self.knobs.atespace, session.actor, any_state=True)
        except grpc.RpcError as error:
            self._book("grpc", "DeleteActor", started, clock, error, session)
            return
        self._book("grpc", "DeleteActor", started, clock, None, session)

    # -- recording --------------------------------------------------------

    def _target(self, session: Session) -> str:
        return f"{self.knobs.atespace}/{session.actor}"

    def _context(self, session: Session | None) -> dict[str, object]:
        if session is None:
            return {}
        return {"session_id": session.actor, "step": session.step.name, "step_index": session.step_index,
                "lap": session.lap}

    def _book(self, request_type: str, name: str, started: float, clock: float, error: BaseException | None,
              session: Session | None = None, wake: bool = False) -> None:
        self.record(request_type, name, started, time.perf_counter() - clock, error,
                    {**self._context(session), "wake": wake})
