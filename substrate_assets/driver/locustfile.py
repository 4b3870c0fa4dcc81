"""Locust entry point: ``locust -f substrate_assets/driver/locustfile.py`` runs ``AgentSessionUser``.

Knobs are Locust options with the reference's names (``--agentsession-script``,
``--agentsession-script-file``, ``--agentsession-think-scale``,
``--lifecycle-mode``, ``--resume-mode``) plus the endpoints
(``--control-endpoint``, ``--router-url``, ``--atespace``) and
``--request-log-dir``, where every request is logged with its exact latency.

A request-log part that cannot be written (a full disk) stops the run at once:
the reason goes, as one line, to the log and to ``--stop-reason-file`` (which
the driver keeps on another filesystem), Locust exits with
``WRITE_FAILED_EXIT_CODE``, and the parts written before are kept.

Rows go to Locust with whole milliseconds, truncated, as upstream books them;
the request log keeps the exact float, the load phase the request completed in
and its position among the requests of its name (see :mod:`request_log`).
"""

from __future__ import annotations

import logging
from collections import Counter
from pathlib import Path
from typing import Any

import gevent
from grpc.experimental import gevent as grpc_gevent

# gRPC must cooperate with gevent before any channel exists.
grpc_gevent.init_gevent()

from locust import User, constant, events, task  # noqa: E402
from locust.env import Environment  # noqa: E402
from locust.runners import STATE_INIT, STATE_RUNNING, STATE_SPAWNING  # noqa: E402

from substrate_assets.driver.clients import ControlClient, RouterClient  # noqa: E402
from substrate_assets.driver.scripts import DEFAULT_SCRIPT, ScriptSource  # noqa: E402
from substrate_assets.driver.session import (  # noqa: E402
    LIFECYCLE_MODES,
    RESUME_MODES,
    AgentSessionVU,
    SessionKnobs,
    TemplateCheck,
)
from substrate_assets.project import scripts_directory  # noqa: E402
from substrate_assets.results.atomic import WriteFailed  # noqa: E402
from substrate_assets.results.request_log import (  # noqa: E402
    FLUSH_INTERVAL_S,
    WRITE_FAILED_EXIT_CODE,
    RequestLogWriter,
    RequestRecord,
    start_seconds,
    write_stop_reason,
)
from substrate_assets.workload import ScriptLibrary  # noqa: E402

log = logging.getLogger(__name__)


@events.init_command_line_parser.add_listener
def _knobs(parser: Any) -> None:
    group = parser.add_argument_group("agent sessions")
    group.add_argument("--agentsession-script", default=DEFAULT_SCRIPT, env_var="LOCUST_AGENTSESSION_SCRIPT",
                       help="Built-in script name (scripts/<name>.yaml).")
    group.add_argument("--agentsession-script-file", default="", help="Script file; wins over --agentsession-script.")
    group.add_argument("--agentsession-think-scale", type=float, default=1.0,
                       env_var="LOCUST_AGENTSESSION_THINK_SCALE", help="Multiplies think times; 0 reads as 1.")
    group.add_argument("--lifecycle-mode", default="", choices=LIFECYCLE_MODES, help="suspend (default) or pause.")
    group.add_argument("--resume-mode", default="", choices=RESUME_MODES, help="implicit (default) or explicit.")
    group.add_argument("--control-endpoint", default="127.0.0.1:50051", help="Control API host:port (gRPC).")
    group.add_argument("--control-tls", action="store_true", default=False,
                       help="Reach the control API over TLS (system roots or GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).")
    group.add_argument("--router-url", default="http://127.0.0.1:8080", help="Router base URL.")
    group.add_argument("--atespace", default="benchmark", help="Atespace the sessions' actors live in.")
    group.add_argument("--request-log-dir", default="",
                       help="Write every request with its exact latency as Parquet parts here.")
    group.add_argument("--request-log-upload", default="",
                       help="Also copy each part to this fsspec URL (distributed workers: the master merges them).")
    group.add_argument("--stop-reason-file", default="",
                       help="Where to leave, in one line, why the run stopped early (a request-log write failed).")


class Shared:
    """What every AgentSessionUser of this process shares: knobs, control channel, script cache, log."""

    def __init__(self, environment: Environment) -> None:
        options = environment.parsed_options
        self.knobs = SessionKnobs(atespace=options.atespace, think_scale=options.agentsession_think_scale,
                                  lifecycle_mode=options.lifecycle_mode, resume_mode=options.resume_mode)
        self.router_url = options.router_url
        self.control = ControlClient(options.control_endpoint, tls=options.control_tls)
        self.scripts = ScriptSource(ScriptLibrary(scripts_directory()), options.agentsession_script,
                                    options.agentsession_script_file)
        self.template_check = TemplateCheck(self.control)
        self.request_log = RequestLogWriter(Path(options.request_log_dir), options.request_log_upload or None) \
            if options.request_log_dir else None
        self.environment = environment
        self.booked: Counter[tuple[str, str]] = Counter()
        self.stop_reason_file = Path(options.stop_reason_file) if options.stop_reason_file else None
        self.stopped: str | None = None

    def flush_request_log(self, finish: bool = False) -> None:
        """Flush (or finish) the request log; a part that cannot be written stops the run instead of raising."""
        if self.request_log is None:
            return
        try:
            if finish:
                self.request_log.finish()
            else:
                self.request_log.flush()
        except WriteFailed as error:
            self.stop_on_write_failure(error)

    def stop_on_write_failure(self, error: WriteFailed) -> None:
        """Stop the whole run: a trial whose requests cannot be logged measures nothing more."""
        if self.stopped is not None:
            return
        self.stopped = str(error)
        log.error("stopping the run: %s", self.stopped)
        if self.stop_reason_file is not None:
            write_stop_reason(self.stop_reason_file, self.stopped)
        self.environment.process_exit_code = WRITE_FAILED_EXIT_CODE
        runner = self.environment.runner
        if runner is not None:
            # From a greenlet of its own: quit() kills the greenlets it finds, and the caller may be one of them.
            gevent.spawn(runner.quit)

    def phase(self) -> str:
        """The load phase now: users being spawned, all running, or the run over and sessions tearing down."""
        state = self.environment.runner.state if self.environment.runner is not None else STATE_INIT
        if state in (STATE_INIT, STATE_SPAWNING):
            return "ramp_up"
        return "steady" if state == STATE_RUNNING else "stopping"

    def record(self, request_type: str, name: str, started: float, elapsed_s: float, error: BaseException | None,
               context: dict[str, object]) -> None:
        """Book one request; ``context`` may carry its ``response_length`` (bytes, as upstream books them) and
        ``wake`` (whether it is its family's wake row)."""
        latency_ms = elapsed_s * 1000.0
        length = context.get("response_length", 0)
        self.environment.events.request.fire(
            request_type=request_type, name=name, response_time=int(latency_ms),
            response_length=length if isinstance(length, int) else 0, exception=error,
            context={**context, "latency_ms": latency_ms, "ts": started}, start_time=started)


_shared: Shared | None = None


@events.init.add_listener
def _init(environment: Environment, **_: Any) -> None:
    global _shared
    if environment.parsed_options is None:
        return
    _shared = Shared(environment)
    if _shared.request_log is not None:
        shared = _shared

        def flush_forever() -> None:
            while shared.stopped is None:
                gevent.sleep(FLUSH_INTERVAL_S)
                shared.flush_request_log()

        gevent.spawn(flush_forever)


@events.request.add_listener
def _log_request(request_type: str, name: str, response_time: float, response_length: int,
                 exception: BaseException | None = None, context: dict[str, Any] | None = None,
                 start_time: float | None = None, **_: Any) -> None:
    if _shared is None or _shared.request_log is None:
        return
    context = context or {}
    latency = context.get("latency_ms", response_time)
    _shared.booked[request_type, name] += 1
    _shared.request_log.append(RequestRecord(
        ts=start_seconds(context.get("ts", start_time)), request_type=request_type, name=name,
        latency_ms=float(latency), response_time_ms=int(response_time), response_length=int(response_length or 0),
        success=exception is None, error=None if exception is None else f"{type(exception).__name__}: {exception}",
        session_id=context.get("session_id"), step=context.get("step"), step_index=context.get("step_index"),
        lap=context.get("lap"), phase=_shared.phase(), locust_seq=_shared.booked[request_type, name],
        wake=bool(context.get("wake"))))


@events.test_stop.add_listener
def _flush_at_stop(environment: Environment, **_: Any) -> None:
    if _shared is not None:
        _shared.flush_request_log()


@events.quitting.add_listener
def _finish_at_exit(environment: Environment, **_: Any) -> None:
    # A headless master quits without waiting for its workers' teardown (DeleteActor may take up to its 60 s
    # deadline), so each worker's last part is sent here, followed by the done marker the master waits for.
    if _shared is not None:
        _shared.flush_request_log(finish=True)


@events.quit.add_listener
def _flush_after_teardown(**_: Any) -> None:
    # Locust stops its users (their DeleteActor calls included) after ``quitting``; their rows are kept too.
    if _shared is not None and _shared.request_log is not None and _shared.request_log.upload_to is None:
        _shared.flush_request_log()


class AgentSessionUser(User):
    """An agent that replays a workload script against one actor at a time, parked while it thinks."""

    wait_time = constant(0)

    def on_start(self) -> None:
        assert _shared is not None, "the locustfile's init listener did not run"
        self.vu = AgentSessionVU(_shared.control, RouterClient(_shared.router_url), _shared.scripts, _shared.knobs,
                                 _shared.template_check, _shared.record, sleep=gevent.sleep)

    @task
    def iterate(self) -> None:
        self.vu.iterate()

    def on_stop(self) -> None:
        vu = getattr(self, "vu", None)
        if vu is not None:
            vu.stop()
            vu.router.close()
