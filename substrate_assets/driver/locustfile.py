"""Locust entry point: ``locust -f substrate_assets/driver/locustfile.py <UserClass>`` runs one workload family:
``AgentSessionUser`` (a script), ``GluttonUser``, ``DurdirUser``, ``SpawnUser``, ``BurstUser`` or ``SweperfUser``.

Knobs are Locust options with the reference's names (``--agentsession-script``,
``--agentsession-script-file``, ``--agentsession-think-scale``,
``--lifecycle-mode``, ``--resume-mode``, and each family's: ``--mem-target``,
``--durdir-file-size-bytes``, ``--total-actors``, ``--sweperf-num-cycles``, …)
plus the endpoints (``--control-endpoint``, ``--router-url``, ``--atespace``) and
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

import functools
import logging
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

import gevent
from grpc.experimental import gevent as grpc_gevent

# gRPC must cooperate with gevent before any channel exists.
grpc_gevent.init_gevent()

from substrate_assets.driver.heap import keep_freed_memory  # noqa: E402

keep_freed_memory()  # large request and reply buffers reused, not faulted in afresh for every step

from locust import User, constant, events, task  # noqa: E402
from locust.env import Environment  # noqa: E402
from locust.runners import STATE_INIT, STATE_RUNNING, STATE_SPAWNING  # noqa: E402

from substrate_assets.driver.clients import ControlClient, RouterClient  # noqa: E402
from substrate_assets.driver.gauges import gauges_requested, start_gauges  # noqa: E402
from substrate_assets.driver.scripts import DEFAULT_SCRIPT, ScriptSource  # noqa: E402
from substrate_assets.driver.users.base import VirtualUser  # noqa: E402
from substrate_assets.driver.users.burst import BurstVU  # noqa: E402
from substrate_assets.driver.users.durdir import DurdirVU  # noqa: E402
from substrate_assets.driver.users.glutton import GluttonVU  # noqa: E402
from substrate_assets.driver.users.knobs import WorkerKnobs  # noqa: E402
from substrate_assets.driver.users.session import AgentSessionVU, TemplateCheck  # noqa: E402
from substrate_assets.driver.users.spawn import SpawnVU  # noqa: E402
from substrate_assets.driver.users.sweperf import SweperfVU  # noqa: E402
from substrate_assets.families import ATESPACE, KNOBS, LifecycleMode, ResumeMode  # noqa: E402
from substrate_assets.processes.host_guard import is_local  # noqa: E402
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

if TYPE_CHECKING:
    from locust.web import WebUI

log = logging.getLogger(__name__)


@events.init_command_line_parser.add_listener  # type: ignore[untyped-decorator]  # Locust's add_listener is unannotated
def _knobs(parser: Any) -> None:
    group = parser.add_argument_group("agent sessions")
    group.add_argument("--agentsession-script", default=DEFAULT_SCRIPT, env_var="LOCUST_AGENTSESSION_SCRIPT",
                       help="Built-in script name (scripts/<name>.yaml).")
    group.add_argument("--agentsession-script-file", default="", help="Script file; wins over --agentsession-script.")
    group.add_argument("--agentsession-think-scale", type=float, default=1.0,
                       env_var="LOCUST_AGENTSESSION_THINK_SCALE", help="Multiplies think times; 0 reads as 1.")
    group.add_argument("--lifecycle-mode", default="", choices=get_args(LifecycleMode),
                       help="suspend (default) or pause.")
    group.add_argument("--resume-mode", default="", choices=get_args(ResumeMode),
                       help="The family's own default (implicit for sessions, explicit for durdir) or either.")
    group.add_argument("--control-endpoint", default="127.0.0.1:50051", help="Control API host:port (gRPC).")
    group.add_argument("--control-tls", action="store_true", default=False,
                       help="Reach the control API over TLS (system roots or GRPC_DEFAULT_SSL_ROOTS_FILE_PATH).")
    group.add_argument("--router-url", default="http://127.0.0.1:8080", help="Router base URL.")
    group.add_argument("--atespace", default=ATESPACE, help="Atespace the sessions' actors live in.")
    group.add_argument("--request-log-dir", default="",
                       help="Write every request with its exact latency as Parquet parts here.")
    group.add_argument("--request-log-upload", default="",
                       help="Also copy each part to this fsspec URL (distributed workers: the master merges them).")
    group.add_argument("--stop-reason-file", default="",
                       help="Where to leave, in one line, why the run stopped early (a request-log write failed).")
    _family_knobs(parser)


def _family_knobs(parser: Any) -> None:
    """Every family's knob as the flag of its name, with upstream's worker default (reference §16); a value
    outside the knob's bounds refuses the user that reads it, at its start."""
    group = parser.add_argument_group("workload families")
    for knob in KNOBS:
        group.add_argument(knob.flag, type=knob.kind, default=knob.default,
                           help=f"{knob.description} ({', '.join(knob.families)})")


def worker_knobs(options: Any) -> WorkerKnobs:
    """What the users read, from the parsed options: every knob's flag, the atespace and the modes."""
    return WorkerKnobs(atespace=options.atespace, think_scale=options.agentsession_think_scale,
                       lifecycle_mode=options.lifecycle_mode, resume_mode=options.resume_mode,
                       **{knob.name: getattr(options, knob.name) for knob in KNOBS})


class Shared:
    """What every AgentSessionUser of this process shares: knobs, control channel, script cache, log."""

    def __init__(self, environment: Environment) -> None:
        options = environment.parsed_options
        assert options is not None  # the init listener shares nothing before Locust has parsed its command line
        self.options = options
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

    @functools.cached_property
    def knobs(self) -> WorkerKnobs:
        """The knobs every user reads, built when the first user starts: a bad one refuses each user's start."""
        return worker_knobs(self.options)

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
        self.environment.events.request.fire(  # type: ignore[no-untyped-call]  # Locust's fire is unannotated
            request_type=request_type, name=name, response_time=int(latency_ms),
            response_length=length if isinstance(length, int) else 0, exception=error,
            context={**context, "latency_ms": latency_ms, "ts": started}, start_time=started)


_shared: Shared | None = None


def read_only(web_ui: WebUI) -> None:
    """Locust's web UI of a live trial shows the load and changes nothing: every request that is not a read (start,
    stop, reset, a user count: Locust's controls are POSTs) is refused, as is one addressed to another host than
    this machine (a web page elsewhere cannot read it by rebinding its name to 127.0.0.1)."""
    from flask import request

    assert web_ui.app is not None  # a WebUI makes its Flask app as it is built

    @web_ui.app.before_request
    def _refuse() -> tuple[str, int] | None:
        if not is_local(request.headers.get("Host"), int(web_ui.port)):
            return "This server answers only requests addressed to 127.0.0.1 or localhost.\n", 421
        if request.method not in ("GET", "HEAD"):
            return "This trial runs as its suite says: its live view is read-only.\n", 403
        return None


@events.init.add_listener  # type: ignore[untyped-decorator]  # Locust's add_listener is unannotated
def _init(environment: Environment, web_ui: Any = None, **_: Any) -> None:
    global _shared
    if web_ui is not None:
        read_only(web_ui)
    if environment.parsed_options is None:
        return
    _shared = Shared(environment)
    gauges = gauges_requested()
    if gauges is not None:
        start_gauges(gauges)
    if _shared.request_log is not None:
        shared = _shared

        def flush_forever() -> None:
            while shared.stopped is None:
                gevent.sleep(FLUSH_INTERVAL_S)
                shared.flush_request_log()

        gevent.spawn(flush_forever)


@events.request.add_listener  # type: ignore[untyped-decorator]  # Locust's add_listener is unannotated
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


@events.test_stop.add_listener  # type: ignore[untyped-decorator]  # Locust's add_listener is unannotated
def _flush_at_stop(environment: Environment, **_: Any) -> None:
    if _shared is not None:
        _shared.flush_request_log()


@events.quitting.add_listener  # type: ignore[untyped-decorator]  # Locust's add_listener is unannotated
def _finish_at_exit(environment: Environment, **_: Any) -> None:
    # A headless master quits without waiting for its workers' teardown (DeleteActor may take up to its 60 s
    # deadline), so each worker's last part is sent here, followed by the done marker the master waits for.
    if _shared is not None:
        _shared.flush_request_log(finish=True)


@events.quit.add_listener  # type: ignore[untyped-decorator]  # Locust's add_listener is unannotated
def _flush_after_teardown(**_: Any) -> None:
    # Locust stops its users (their DeleteActor calls included) after ``quitting``; their rows are kept too.
    if _shared is not None and _shared.request_log is not None and _shared.request_log.upload_to is None:
        _shared.flush_request_log()


def _started() -> Shared:
    assert _shared is not None, "the locustfile's init listener did not run"
    return _shared


def _stopping() -> bool:
    """Once the run is over, spawn and burst book no more rows of their own (upstream's cancelled context)."""
    return _shared is None or _shared.phase() == "stopping"


class FamilyUser(User):
    """A Locust user of one workload family: builds its virtual user at start, one iteration per task."""

    abstract = True
    wait_time = constant(0)

    def make_vu(self, shared: Shared, router: RouterClient) -> VirtualUser:
        raise NotImplementedError

    def requests_at_once(self, shared: Shared) -> int:
        """The most router requests the VU has in flight at once."""
        return 2

    def on_start(self) -> None:
        shared = _started()
        self.router = RouterClient(shared.router_url, concurrency=self.requests_at_once(shared))
        self.vu = self.make_vu(shared, self.router)

    @task
    def iterate(self) -> None:
        self.vu.iterate()

    def on_stop(self) -> None:
        vu = getattr(self, "vu", None)
        if vu is not None:
            vu.stop()
            self.router.close()


class AgentSessionUser(FamilyUser):
    """An agent that replays a workload script against one actor at a time, parked while it thinks."""

    def make_vu(self, shared: Shared, router: RouterClient) -> AgentSessionVU:
        return AgentSessionVU(shared.control, router, shared.scripts, shared.knobs, shared.template_check,
                              shared.record, sleep=gevent.sleep)


class GluttonUser(FamilyUser):
    """Actors woken, loaded (RAM fill, read, churn, CPU), pinged through a live window and parked, round robin."""

    def make_vu(self, shared: Shared, router: RouterClient) -> GluttonVU:
        return GluttonVU(shared.control, router, shared.knobs, shared.record, sleep=gevent.sleep)


class DurdirUser(FamilyUser):
    """A file in an actor's durable directory, written, served across suspends, overwritten, verified."""

    def make_vu(self, shared: Shared, router: RouterClient) -> DurdirVU:
        return DurdirVU(shared.control, router, shared.knobs, shared.record, sleep=gevent.sleep)


class SpawnUser(FamilyUser):
    """One batch of actors created, resumed and pinged until ready: how long a cohort takes to come up."""

    def requests_at_once(self, shared: Shared) -> int:
        workers: int = shared.knobs.spawn_workers  # a knob of a model create_model builds: Any to the checker
        return workers

    def make_vu(self, shared: Shared, router: RouterClient) -> SpawnVU:
        return SpawnVU(shared.control, router, shared.knobs, shared.record, sleep=gevent.sleep, stopped=_stopping)


class BurstUser(FamilyUser):
    """One cohort of glutton actors resumed and suspended all at once, batch after batch."""

    def requests_at_once(self, shared: Shared) -> int:
        actors: int = shared.knobs.total_actors  # every actor of the cohort at once
        return actors

    def make_vu(self, shared: Shared, router: RouterClient) -> BurstVU:
        return BurstVU(shared.control, router, shared.knobs, shared.record, sleep=gevent.sleep, stopped=_stopping)


class SweperfUser(FamilyUser):
    """A recorded SWE-bench trajectory replayed in cycles, suspended between them."""

    def make_vu(self, shared: Shared, router: RouterClient) -> SweperfVU:
        return SweperfVU(shared.control, router, shared.knobs, shared.record, sleep=gevent.sleep)
