"""The sweperf service: upstream's SWE-bench trajectory service over HTTP JSON, replaying a trajectory as real work.

An actor of a ``service: sweperf`` template serves this instead of glutton's protobuf routes:

- ``GET /status`` → ``{"status": "up"}`` (upstream's liveness probe);
- ``POST /execute`` with ``{"start_step": s, "end_step": e}`` (1-based, inclusive) → ``{"job_id": …, "status":
  "RUNNING"}`` at once; the steps run in the background, one job at a time (409 while one runs);
- ``GET /status?job_id=<id>`` → ``{"job_id", "status": RUNNING|COMPLETED|FAILED, "exit_code" (null while
  running), "execution_duration_ms" (float, the job's measured time so far), "completed_step" (the last step
  finished), "error" (null unless failed)}``; 404 for a job the actor never ran;
- ``GET /readyz`` → ``ok``, as glutton.

Each step's RAM and files go through the actor's :class:`Glutton`, so they count against the template's memory
limit and exceeding it kills the actor as any glutton write does. A range outside the trajectory is a job that
fails at once (exit code 2), as a replay script refusing its arguments would. A step that fails is a FAILED job
(exit code 1) naming the step.

A checkpoint (suspend) interrupts a job still running at its next check, within one 64 KiB hash block or one
RAM/file write, and records it FAILED (exit code null, ``completed_step`` the last step done): the embedded
runtime cannot freeze a thread mid-step into a snapshot, and waiting for the job would make SuspendActor's time
the job's. Finished jobs (the newest ``MAX_JOBS``) go into the snapshot manifest and are answered again after a
resume. Errors are ``{"error": …}`` with 400 (bad body), 404, 405, 409 or 413. Every answer carries
``x-server-elapsed-us``, as glutton's do.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, fields
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from substrate_assets.protos import glutton_pb2 as pb
from substrate_assets.runtime.glutton import Glutton, GluttonError
from substrate_assets.runtime.trajectory import Trajectory, TrajectoryError, TrajectoryStep

RUNNING, COMPLETED, FAILED = "RUNNING", "COMPLETED", "FAILED"
EXIT_STEP_FAILED = 1
EXIT_BAD_RANGE = 2
RAM_KEY = "trajectory"
HASH_BLOCK = 64 * 1024
MAX_JOBS = 256
MAX_BODY = 64 * 1024
JSON_TYPE = "application/json"
ELAPSED_HEADER = "x-server-elapsed-us"


class ServiceError(Exception):
    """A request the service refuses, with the HTTP status it answers."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class _Interrupted(Exception):
    """The job was told to stop (a checkpoint)."""


@dataclass
class Job:
    job_id: str
    start_step: int
    end_step: int
    status: str = RUNNING
    exit_code: int | None = None
    execution_duration_ms: float = 0.0
    completed_step: int = 0
    error: str | None = None

    def reply(self) -> dict[str, Any]:
        return {"job_id": self.job_id, "status": self.status, "exit_code": self.exit_code,
                "execution_duration_ms": self.execution_duration_ms, "completed_step": self.completed_step,
                "error": self.error}

    def record(self) -> dict[str, Any]:
        """The job as the snapshot manifest keeps it."""
        return {field.name: getattr(self, field.name) for field in fields(self)}

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> Job:
        job = cls(**{field.name: record[field.name] for field in fields(cls) if field.name in record})
        if job.status == RUNNING:  # a snapshot never holds a running job; one that does is not running any more
            job.status, job.error = FAILED, "interrupted by a suspend"
        return job


def _int_field(document: Mapping[str, Any], name: str) -> int:
    value = document.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ServiceError(400, f"{name} must be an integer, got {value!r}")
    return value


class SweperfService:
    """One actor's trajectory jobs. ``clock`` times the steps and the jobs (monotonic seconds)."""

    def __init__(self, glutton: Glutton, trajectory: Trajectory, jobs: Iterable[Mapping[str, Any]] = (),
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.glutton = glutton
        self.trajectory = trajectory
        self.clock = clock
        self._jobs: dict[str, Job] = {}
        for record in jobs:
            job = Job.from_record(record)
            self._jobs[job.job_id] = job
        self._lock = threading.Lock()
        self._running: Job | None = None
        self._started = 0.0
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._block = bytes(HASH_BLOCK)

    # -- the routes -------------------------------------------------------

    def execute(self, document: Any) -> dict[str, Any]:
        if not isinstance(document, dict):
            raise ServiceError(400, "the body must be a JSON object {start_step, end_step}")
        start_step, end_step = _int_field(document, "start_step"), _int_field(document, "end_step")
        with self._lock:
            if self._running is not None:
                raise ServiceError(409, f"job {self._running.job_id} is still running")
            job = Job(uuid.uuid4().hex, start_step, end_step, completed_step=max(start_step - 1, 0))
            self._jobs[job.job_id] = job
            self._forget_old()
            try:
                steps = self.trajectory.step_range(start_step, end_step)
            except TrajectoryError as error:
                job.status, job.exit_code, job.error, job.completed_step = FAILED, EXIT_BAD_RANGE, str(error), 0
                return {"job_id": job.job_id, "status": job.status}
            self._running, self._started, self._stop = job, self.clock(), threading.Event()
            self._thread = threading.Thread(target=self._run, args=(job, steps, self._stop), daemon=True,
                                            name=f"sweperf-job-{job.job_id[:8]}")
            self._thread.start()
            return {"job_id": job.job_id, "status": job.status}

    def status(self, job_id: str | None) -> dict[str, Any]:
        if job_id is None:
            return {"status": "up"}
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None:
                raise ServiceError(404, f"unknown job {job_id!r}")
            if job is self._running:
                job.execution_duration_ms = (self.clock() - self._started) * 1000
            return job.reply()

    # -- checkpoints ------------------------------------------------------

    def interrupt(self) -> None:
        """Stop a running job (it is recorded FAILED) and wait for its thread: the snapshot comes next."""
        with self._lock:
            thread = self._thread
            self._stop.set()
        if thread is not None:
            thread.join()

    def job_records(self) -> list[dict[str, Any]]:
        with self._lock:
            return [job.record() for job in self._jobs.values()]

    def _forget_old(self) -> None:
        while len(self._jobs) > MAX_JOBS:
            oldest = next(job_id for job_id, job in self._jobs.items() if job is not self._running)
            del self._jobs[oldest]

    # -- the work ---------------------------------------------------------

    def _run(self, job: Job, steps: tuple[TrajectoryStep, ...], stop: threading.Event) -> None:
        exit_code: int | None
        status, exit_code, error = COMPLETED, 0, None
        try:
            for step in steps:
                self._step(step, stop)
                with self._lock:
                    job.completed_step = step.number
        except _Interrupted:
            status, exit_code, error = FAILED, None, f"interrupted by a suspend after step {job.completed_step}"
        except GluttonError as failed:
            status, exit_code = FAILED, EXIT_STEP_FAILED
            error = f"step {job.completed_step + 1}: {failed.message}"
        except Exception as failed:  # any other failure of a step fails the job, never the service
            status, exit_code = FAILED, EXIT_STEP_FAILED
            error = f"step {job.completed_step + 1}: {type(failed).__name__}: {failed}"
        with self._lock:
            job.execution_duration_ms = (self.clock() - self._started) * 1000
            job.status, job.exit_code, job.error = status, exit_code, error
            self._running, self._thread = None, None

    def _step(self, step: TrajectoryStep, stop: threading.Event) -> None:
        deadline = self.clock() + step.duration_ms / 1000
        if step.ram_bytes:
            self._write_ram(step.ram_bytes)
        self._check(stop)
        if step.file_bytes:
            self.glutton.write_disk(pb.WriteDiskRequest(key=f"step-{step.number}", size=step.file_bytes,
                                                        write_mode=pb.WRITE_MODE_TRUNCATE))
        self._check(stop)
        if step.cpu_ms:
            self._burn(step.cpu_ms / 1000, stop)
        rest = deadline - self.clock()
        if rest > 0 and stop.wait(rest):
            raise _Interrupted

    def _write_ram(self, size: int) -> None:
        """Grow the trajectory's array to ``size`` (a fresh fill), else rotate ``size`` bytes through it."""
        array = self.glutton.arrays.get(RAM_KEY)  # only the running job writes this key
        grow = array is None or len(array.data) < size
        mode = pb.WRITE_MODE_OVERWRITE if grow else pb.WRITE_MODE_OVERWRITE_ROTATE
        self.glutton.write_ram(pb.WriteRAMRequest(key=RAM_KEY, size=str(size), write_mode=mode))

    def _burn(self, cpu_s: float, stop: threading.Event) -> None:
        # The thread's own CPU time, as a recorded command's; sha256 releases the GIL, so the service still answers.
        started = time.thread_time()
        while time.thread_time() - started < cpu_s:
            self._check(stop)
            hashlib.sha256(self._block).digest()

    @staticmethod
    def _check(stop: threading.Event) -> None:
        if stop.is_set():
            raise _Interrupted


class SweperfServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True
    request_queue_size = 512

    def __init__(self, address: tuple[str, int], service: SweperfService) -> None:
        self.service = service
        super().__init__(address, _Handler)


_ROUTES = {"/status": "GET", "/execute": "POST", "/readyz": "GET"}


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: SweperfServer

    def log_message(self, format: str, *args: Any) -> None:
        return

    def _reply(self, status: int, body: bytes, content_type: str, started: float) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header(ELAPSED_HEADER, str(int((time.perf_counter() - started) * 1e6)))
        self.end_headers()
        self.wfile.write(body)

    def _json(self, status: int, document: dict[str, Any], started: float) -> None:
        self._reply(status, json.dumps(document).encode(), JSON_TYPE, started)

    def _body(self) -> bytes:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self.close_connection = True
            raise ServiceError(411, "send the body with a Content-Length")
        text = (self.headers.get("Content-Length") or "0").strip()
        if not text.isdigit():
            self.close_connection = True
            raise ServiceError(400, f"malformed Content-Length {text!r}")
        length = int(text)
        if length > MAX_BODY:
            self.close_connection = True
            raise ServiceError(413, f"request body of {length} bytes is over the limit of {MAX_BODY} bytes")
        body = self.rfile.read(length) if length else b""
        if len(body) < length:
            self.close_connection = True
            raise ServiceError(400, "the connection ended mid-body")
        return body

    def _handle(self) -> None:
        started = time.perf_counter()
        try:
            body = self._body()
            parts = urlsplit(self.path)
            method = _ROUTES.get(parts.path)
            if method is None:
                raise ServiceError(404, f"no route {parts.path}")
            if method != self.command:
                raise ServiceError(405, f"method {self.command} not allowed on {parts.path}")
            service = self.server.service
            if parts.path == "/readyz":
                self._reply(200, b"ok", "text/plain; charset=utf-8", started)
            elif parts.path == "/status":
                job_ids = parse_qs(parts.query, keep_blank_values=True).get("job_id")
                self._json(200, service.status(job_ids[0] if job_ids else None), started)
            else:
                try:
                    document = json.loads(body)
                except ValueError as error:
                    raise ServiceError(400, f"the body is not JSON: {error}") from None
                self._json(200, service.execute(document), started)
        except ServiceError as error:
            self._json(error.status, {"error": error.message}, started)
        except Exception as error:  # a bug answers 500 rather than dropping the connection
            self._json(500, {"error": f"{type(error).__name__}: {error}"}, started)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = _handle
