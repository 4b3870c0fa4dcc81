"""One virtual user of upstream's ``sweperf`` family: a recorded SWE-bench trajectory replayed in cycles on one actor.

Follows upstream's ``sweperf/sweperf.go`` @ bf5f54cc, as the reference (§15.5) does. Each VU owns one actor
``sb-<uuid4>`` of template ``benchmark-workloads/<sweperf_template>``. Starting it books ``CreateAtespace``
(AlreadyExists counts as success) and ``CreateActor``, then polls ``GET /status`` until its JSON ``status`` is
``up`` (30 tries 2 s apart, unbooked; the first request wakes the new actor), suspends it unmetered and polls
``GetActor`` every 200 ms (at most 150 times) until it is SUSPENDED, so that cycle 1's resume is a real restore.
A failed liveness poll suspends (unmetered) and deletes (metered) the actor; a failed start waits and the next
iteration starts over.

The trajectory's ``sweperf_total_steps`` steps are split into ``sweperf_num_cycles`` contiguous chunks
(:func:`generate_chunks`). Each iteration runs one cycle: ``ResumeActor``; ``POST /execute`` with the chunk's
1-based inclusive ``{start_step, end_step}``; on a ``job_id`` reply (the ack), ``GET /status?job_id=`` every
``sweperf_poll_interval_ms`` (at most 600 polls, polling first) until COMPLETED or FAILED; then a metered
``SuspendActor`` whose failure is only a row. After the last cycle the trajectory's ``TaskCEL`` and
``TaskWallClock`` are booked and the next iteration starts over at cycle 1 on the same actor. Every iteration
ends with a wait of U[min_wait, max_wait). As upstream, the actor is never replaced: a crashed actor's resumes
keep failing.

Rows:

- ``actor,ResumeToFirstExec`` (the wake): resume start → the ack; a failed resume or a failed ``/execute``
  without an ack is a failure with the time so far;
- ``actor,CycleCEL``: the job's ``execution_duration_ms``; a failed cycle is a failure of 0 (a synchronous
  reply, which carries no duration, books none);
- ``http,Workload_Cycle_<n>``: ``/execute`` plus all polling, client time; its response length is the
  ``/execute`` reply's bytes;
- ``actor,TaskCEL`` (Σ CycleCEL) and ``actor,TaskWallClock`` (Σ each cycle's resume → suspend time, waits
  excluded), failures if any cycle of the pass failed;
- ``grpc,CreateAtespace|CreateActor|ResumeActor|SuspendActor|DeleteActor``: the server's own time from the
  ``x-server-elapsed-us`` trailer when it came, else the client's; then ``grpc,<rpc>_rtt`` with the client round
  trip, written only when the trailer came, failures too.

One deviation, chosen: bf5f54cc polls ``/status`` every 200 ms whatever its ``--sweperf-poll-interval-ms`` says;
here the knob sets the interval (default 200 ms, upstream's fixed value; 0 or less reads as 200 ms).

Nothing here knows Locust: rows go to the injected ``record``; ``sleep``, the random source and the ``clock``
that times the derived ``actor`` rows (ResumeToFirstExec, TaskWallClock) are injected.
"""

from __future__ import annotations

import contextlib
import json
import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

import grpc
from google.protobuf.message import Message

from substrate_assets.driver.clients import ControlClient, RouterClient, server_elapsed_s
from substrate_assets.driver.failures import rpc_code
from substrate_assets.driver.users.base import Record, RestartingUser, StartFailed, new_actor_name
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.families import TEMPLATE_ATESPACE
from substrate_assets.protos import ateapi_pb2 as pb

log = logging.getLogger(__name__)

# Upstream reads zero (or less) as these.
DEFAULT_TOTAL_STEPS = 21
DEFAULT_NUM_CYCLES = 4
DEFAULT_POLL_INTERVAL_MS = 200
LIVENESS_POLLS = 30
LIVENESS_INTERVAL_S = 2.0
SUSPENDED_POLLS = 150
SUSPENDED_INTERVAL_S = 0.2
JOB_POLLS = 600
TRAJECTORY_FAILED = "cycle failure in trajectory"


class CycleFailed(Exception):
    """A cycle whose ``/execute`` or job failed: the failure booked on its rows (upstream's wording)."""


@dataclass(frozen=True)
class Chunk:
    """Steps ``start`` (0-based) up to ``end`` (exclusive): ``/execute`` asks for ``start + 1`` … ``end``."""

    start: int
    end: int


def generate_chunks(total_steps: int, num_cycles: int) -> list[Chunk]:
    """``total_steps`` split into ``num_cycles`` contiguous chunks whose lengths differ by at most one, the
    remainder going to the earliest (upstream's generateDynamicChunks): 21 in 4 → 6, 5, 5, 5. One cycle or fewer
    is a single chunk; more cycles than steps are cut to one step each."""
    if num_cycles <= 1:
        return [Chunk(0, total_steps)]
    total_steps = max(total_steps, 1)
    num_cycles = min(num_cycles, total_steps)
    base, remainder = divmod(total_steps, num_cycles)
    chunks, start = [], 0
    for index in range(num_cycles):
        end = start + base + (1 if index < remainder else 0)
        chunks.append(Chunk(start, end))
        start = end
    return chunks


class SweperfVU(RestartingUser):
    """One virtual user: one actor replaying the trajectory a cycle per iteration, pass after pass."""

    family = "sweperf"

    def __init__(self, control: ControlClient, router: RouterClient, knobs: WorkerKnobs, record: Record,
                 sleep: Callable[[float], None] = time.sleep, rng: random.Random | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        # The template and the chunks are fixed per actor, as upstream resolves them when a session starts.
        super().__init__(control, router, knobs, record, sleep, rng, clock)
        self.actor: str | None = None
        self.chunks: list[Chunk] = []
        self.cycle_index = 0
        self.lap = 0
        self.loop_cel_s = 0.0
        self.loop_wall_s = 0.0
        self.loop_failed = False
        self.loop_started: float | None = None

    # -- the loop ---------------------------------------------------------

    def started(self) -> bool:
        return self.actor is not None

    def step(self) -> None:
        self.cycle()
        if self.cycle_index >= len(self.chunks):
            self.book_task()
            log.info("actor %s finished all %d cycles; back to cycle 1", self.actor, len(self.chunks))

    def stop(self) -> None:
        """Locust's on_stop: suspend (unmetered) and delete (metered) the actor, once."""
        self.suspend_and_delete()

    @property
    def poll_interval_s(self) -> float:
        interval = self.knobs.sweperf_poll_interval_ms
        return (interval if interval > 0 else DEFAULT_POLL_INTERVAL_MS) / 1000

    # -- starting ---------------------------------------------------------

    def start(self) -> None:
        knobs = self.knobs
        atespace = knobs.atespace
        template = (TEMPLATE_ATESPACE, knobs.sweperf_template)
        total_steps = knobs.sweperf_total_steps if knobs.sweperf_total_steps > 0 else DEFAULT_TOTAL_STEPS
        num_cycles = knobs.sweperf_num_cycles if knobs.sweperf_num_cycles > 0 else DEFAULT_NUM_CYCLES
        request = pb.CreateAtespaceRequest(atespace=pb.Atespace(metadata=pb.ResourceMetadata(name=atespace)))
        if not self._rpc("CreateAtespace", request, actor=None, already_exists_ok=True):
            raise StartFailed(f"CreateAtespace {atespace} failed")
        actor = new_actor_name()
        if not self._rpc("CreateActor", ControlClient.create_request(atespace, actor, template), actor=actor):
            raise StartFailed(f"CreateActor {actor} of {template[0]}/{template[1]} failed")
        self.actor = actor
        if not self.poll_liveness():
            self.suspend_and_delete()
            raise StartFailed(f"failed to verify server liveness for actor {actor}")
        try:  # the liveness poll woke the actor: suspend it so that cycle 1 is a real restore
            self.control.suspend(atespace, actor)
        except grpc.RpcError as error:
            log.warning("bootstrap suspend of %s failed; cycle 1's resume will be a no-op: %s", actor, error)
        else:
            reason = self.poll_suspended()
            if reason is not None:
                log.warning("bootstrap suspend of %s did not settle; cycle 1's resume may fail: %s", actor, reason)
        self.chunks = generate_chunks(total_steps, num_cycles)
        self.cycle_index, self.lap = 0, 0
        self._reset_loop()

    def poll_liveness(self) -> bool:
        """``GET /status`` until it answers ``{"status": "up"}``; every failure is only another try."""
        for _ in range(LIVENESS_POLLS):
            try:
                document = self.router.get_json(self._target(), "/status")
                if str(document.get("status", "")).lower() == "up":
                    return True
            except Exception as error:  # a sandbox still starting answers anything; keep polling
                log.debug("liveness poll of %s: %s", self.actor, error)
            self.sleep(LIVENESS_INTERVAL_S)
        return False

    def poll_suspended(self) -> str | None:
        """``GetActor`` until SUSPENDED; None once it is, else why not."""
        for _ in range(SUSPENDED_POLLS):
            try:
                state = self.control.get_actor(self.knobs.atespace, self._actor()).status.state
            except grpc.RpcError:
                state = None
            if state == pb.ACTOR_STATE_SUSPENDED:
                return None
            if state == pb.ACTOR_STATE_CRASHED:
                return f"actor {self.actor} crashed while suspending"
            self.sleep(SUSPENDED_INTERVAL_S)
        return f"actor {self.actor} did not reach SUSPENDED"

    # -- one cycle --------------------------------------------------------

    def cycle(self) -> None:
        """Resume, execute this cycle's chunk and wait for its job, suspend; a failed resume ends the cycle early
        and it is tried again next iteration."""
        number, chunk = self.cycle_index + 1, self.chunks[self.cycle_index]
        resume_epoch, resume_start = time.time(), self.clock()
        if self.loop_started is None:
            self.loop_started = resume_epoch
        try:
            if not self._rpc("ResumeActor", pb.ResumeActorRequest(actor=self._ref()), actor=self.actor):
                self.loop_failed = True
                self._actor_row("ResumeToFirstExec", resume_epoch, self.clock() - resume_start,
                                RuntimeError("ResumeActor failed"), wake=True)
                return
            ack, cel_s, error = self.execute(number, chunk)
            if error is not None:
                self.loop_failed = True
            else:
                self.loop_cel_s += cel_s
            if ack is not None:  # the resume worked even if the job failed later
                self._actor_row("ResumeToFirstExec", resume_epoch, ack[1] - resume_start, None, wake=True)
            elif error is not None:
                self._actor_row("ResumeToFirstExec", resume_epoch, self.clock() - resume_start, error, wake=True)
            cel_epoch = ack[0] if ack is not None else resume_epoch
            if error is not None:
                self._actor_row("CycleCEL", cel_epoch, cel_s, error)
            elif cel_s > 0:
                self._actor_row("CycleCEL", cel_epoch, cel_s, None)
            self._rpc("SuspendActor", pb.SuspendActorRequest(actor=self._ref()), actor=self.actor)
            self.cycle_index += 1
        finally:
            self.loop_wall_s += self.clock() - resume_start

    def execute(self, number: int, chunk: Chunk) -> tuple[tuple[float, float] | None, float, Exception | None]:
        """``POST /execute`` and, on an ack, poll the job: ((ack epoch, ack clock) or None, CEL seconds, error).
        Books ``Workload_Cycle_<number>``."""
        name = f"Workload_Cycle_{number}"
        body = json.dumps({"start_step": chunk.start + 1, "end_step": chunk.end}).encode()
        started, clock = time.time(), time.perf_counter()
        try:
            payload = self.router.request("POST", self._target(), "/execute", body, "application/json")
        except Exception as error:  # router statuses and transport errors alike fail the cycle
            self._http_row(name, started, time.perf_counter() - clock, error)
            return None, 0.0, error
        ack: tuple[float, float] | None = None
        cel_s = 0.0
        try:
            reply = _json_object(payload, "executeResponse")
            job_id = reply.get("job_id")
            if job_id:
                ack = (time.time(), self.clock())
                cel_s = self.poll_job(str(job_id), number)
            else:
                exit_code = reply.get("exit_code") or 0
                if exit_code != 0:
                    raise CycleFailed(f"cycle {number} failed: exit code {exit_code}, stderr: "
                                      f"{reply.get('stderr') or ''}")
        except CycleFailed as error:
            self._http_row(name, started, time.perf_counter() - clock, error)
            return ack, 0.0, error
        self._http_row(name, started, time.perf_counter() - clock, None, len(payload))
        return ack, cel_s, None

    def poll_job(self, job_id: str, number: int) -> float:
        """Poll ``/status?job_id=`` until the job ends: its CEL in seconds, or :class:`CycleFailed`. A poll that
        fails or does not parse is only another try."""
        route = f"/status?job_id={quote(job_id, safe='')}"
        for _ in range(JOB_POLLS):
            try:
                status: dict[str, Any] | None = self.router.get_json(self._target(), route)
            except Exception as error:  # upstream retries any failed poll until its budget runs out
                log.debug("status poll of job %s: %s", job_id, error)
                status = None
            if status is not None:
                state = str(status.get("status", "")).upper()
                exit_code = status.get("exit_code")
                if state == "COMPLETED":
                    if exit_code is not None and exit_code != 0:
                        raise CycleFailed(f"cycle {number} job {job_id} failed with exit code {exit_code}")
                    return float(status.get("execution_duration_ms") or 0) / 1000
                if state == "FAILED":
                    raise CycleFailed(f"cycle {number} job {job_id} failed with exit code "
                                      f"{-1 if exit_code is None else exit_code}: {status.get('error') or ''}")
            self.sleep(self.poll_interval_s)
        raise CycleFailed(f"timed out waiting for job {job_id} to complete in cycle {number}")

    def book_task(self) -> None:
        """The finished pass's TaskCEL and TaskWallClock, then back to cycle 1."""
        started = self.loop_started if self.loop_started is not None else time.time()
        error = RuntimeError(TRAJECTORY_FAILED) if self.loop_failed else None
        self._actor_row("TaskCEL", started, self.loop_cel_s, error)
        self._actor_row("TaskWallClock", started, self.loop_wall_s, error)
        self.cycle_index = 0
        self.lap += 1
        self._reset_loop()

    def _reset_loop(self) -> None:
        self.loop_cel_s, self.loop_wall_s, self.loop_failed, self.loop_started = 0.0, 0.0, False, None

    # -- teardown ---------------------------------------------------------

    def suspend_and_delete(self) -> None:
        """At most once per actor: unmetered suspend (errors ignored), then a metered DeleteActor(any_state)."""
        actor, self.actor = self.actor, None
        if actor is None:
            return
        with contextlib.suppress(grpc.RpcError):
            self.control.suspend(self.knobs.atespace, actor)
        request = pb.DeleteActorRequest(actor=ControlClient.ref(self.knobs.atespace, actor), any_state=True)
        self._rpc("DeleteActor", request, actor=actor)

    # -- calls and rows ---------------------------------------------------

    def _actor(self) -> str:
        if self.actor is None:
            raise RuntimeError("sweperf VU has no actor")
        return self.actor

    # A pb.ObjectRef: the generated classes exist only at import, so to the checker it is a protobuf Message.
    def _ref(self) -> Message:
        return ControlClient.ref(self.knobs.atespace, self._actor())

    def _target(self) -> str:
        return f"{self.knobs.atespace}/{self._actor()}"

    def _rpc(self, name: str, request: Any, *, actor: str | None, already_exists_ok: bool = False) -> bool:
        """One control call booked with the server's time when its trailer came (and then a ``_rtt`` row with the
        client's), else the client's; True when it succeeded."""
        started, clock = time.time(), time.perf_counter()
        error: grpc.RpcError | None = None
        try:
            _, server_s = self.control.timed(name, request)
        except grpc.RpcError as failed:
            server_s = server_elapsed_s(failed)
            if not (already_exists_ok and rpc_code(failed) == grpc.StatusCode.ALREADY_EXISTS):
                error = failed
        client_s = time.perf_counter() - clock
        if server_s is not None:
            self.book("grpc", f"{name}_rtt", started, client_s, error, actor, lap=self.lap)
        self.book("grpc", name, started, client_s if server_s is None else server_s, error, actor, lap=self.lap)
        return error is None

    def _http_row(self, name: str, started: float, elapsed_s: float, error: BaseException | None,
                  response_length: int = 0) -> None:
        self.book("http", name, started, elapsed_s, error, self.actor, response_length=response_length, lap=self.lap)

    def _actor_row(self, name: str, started: float, elapsed_s: float, error: BaseException | None,
                   wake: bool = False) -> None:
        self.book("actor", name, started, elapsed_s, error, self.actor, wake=wake, lap=self.lap)


def _json_object(payload: bytes, what: str) -> dict[str, Any]:
    try:
        document = json.loads(payload)
    except ValueError as error:
        raise CycleFailed(f"unmarshal {what}: {error}") from None
    if not isinstance(document, dict):
        raise CycleFailed(f"unmarshal {what}: not a JSON object: {payload[:200]!r}")
    return document
