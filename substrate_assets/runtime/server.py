"""The embedded runtime as one object: control API, router and metrics on 127.0.0.1, actor hosts as children.

``EmbeddedRuntime`` runs an asyncio loop in a background thread. Use it as a
context manager (tests, trials) or call :meth:`run_until_signalled` (the
``substrate-bench runtime`` command). Stopping kills every actor host and
removes the state directory unless ``keep_state`` was set. Starting first removes the directories of runtimes
whose process died without stopping (``scratch_dirs.py``), one line each, kept in :attr:`swept` and logged.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import threading
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

import grpc
import polars as pl
from aiohttp import web
from prometheus_client import generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from substrate_assets.processes.leftovers import mark
from substrate_assets.processes.stop_signals import STOP_SIGNALS
from substrate_assets.protos import ateapi_pb2_grpc
from substrate_assets.runtime import scratch_dirs
from substrate_assets.runtime.actors import STATE_NAMES
from substrate_assets.runtime.config import RuntimeConfig
from substrate_assets.runtime.control import ControlService
from substrate_assets.runtime.events import EventLog, RuntimeEvent
from substrate_assets.runtime.hosts import WarmPool
from substrate_assets.runtime.lifecycle import Lifecycle
from substrate_assets.runtime.metrics import RuntimeMetrics
from substrate_assets.runtime.router import Router
from substrate_assets.runtime.scratch_dirs import LIVE_PREFIX, STATE_PREFIX, sweep_runtime_leftovers

T = TypeVar("T")
LOOPBACK = "127.0.0.1"
log = logging.getLogger(__name__)


class EmbeddedRuntime:
    def __init__(self, config: RuntimeConfig | None = None) -> None:
        self.config = config or RuntimeConfig()
        self.events = EventLog()
        self.metrics = RuntimeMetrics(self.config.workerpool_name)
        self.control_port = 0
        self.router_port = 0
        self.metrics_port = 0
        self.state_dir: Path | None = None
        self.live_dir: Path | None = None
        self._created_state_dir = False
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._started = threading.Event()
        self._startup_error: BaseException | None = None
        self._stop: asyncio.Event | None = None
        self.lifecycle: Lifecycle | None = None
        self.router: Router | None = None
        self.swept: list[str] = []

    # -- addresses --------------------------------------------------------

    @property
    def control_address(self) -> str:
        return f"{LOOPBACK}:{self.control_port}"

    @property
    def router_url(self) -> str:
        return f"http://{LOOPBACK}:{self.router_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://{LOOPBACK}:{self.metrics_port}/metrics"

    # -- start and stop ---------------------------------------------------

    def start(self) -> EmbeddedRuntime:
        if self._thread is not None:
            raise RuntimeError("the runtime is already started")
        self.swept = sweep_runtime_leftovers()
        for line in self.swept:
            log.info(line)
        if self.config.state_dir is None:
            self.state_dir = Path(tempfile.mkdtemp(prefix=STATE_PREFIX))
            self._created_state_dir = True
            mark(self.state_dir)
        else:
            self.state_dir = self.config.state_dir.resolve()
            self._created_state_dir = not self.state_dir.exists()
            self.state_dir.mkdir(parents=True, exist_ok=True)
        self.live_dir = self._make_live_dir()
        self.events.spill_to(self.state_dir / "events")
        self._thread = threading.Thread(target=self._run, name="substrate-runtime", daemon=True)
        self._thread.start()
        try:
            self._started.wait()
        except BaseException:
            # Ctrl-C or SIGTERM while starting: the loop thread goes on starting hosts, so it is stopped here
            # rather than left to die with the process and leave its directories behind.
            self._abandon_start()
            raise
        if self._startup_error is not None:
            self._thread.join()
            self._thread = None
            self._remove_state()
            raise self._startup_error
        return self

    def _abandon_start(self) -> None:
        self._started.wait(timeout=self.config.host_command_timeout_s)
        if self._startup_error is None and self._loop is not None and self._stop is not None:
            self.stop()
            return
        if self._thread is not None:
            self._thread.join(timeout=self.config.host_command_timeout_s)
            self._thread = None
        self._remove_state()

    def stop(self) -> None:
        if self._thread is None or self._loop is None or self._stop is None:
            return
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join()
        self._thread = None
        self.events.keep_in_memory()
        self._remove_state()

    def __enter__(self) -> EmbeddedRuntime:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _make_live_dir(self) -> Path:
        assert self.state_dir is not None
        if self.config.live_dir is not None:
            live = self.config.live_dir.resolve() / f"runtime-{os.getpid()}-{id(self):x}"
        else:
            shm = scratch_dirs.live_root()
            if shm.is_dir() and os.access(shm, os.W_OK):
                live = Path(tempfile.mkdtemp(prefix=LIVE_PREFIX, dir=shm))
                mark(live)
                return live
            live = self.state_dir / "live"
        live.mkdir(parents=True, exist_ok=True)
        return live

    def _remove_state(self) -> None:
        if self.live_dir is not None:
            shutil.rmtree(self.live_dir, ignore_errors=True)
        if self.state_dir is None or self.config.keep_state:
            return
        if self._created_state_dir:
            shutil.rmtree(self.state_dir, ignore_errors=True)
        else:
            for part in ("snapshots", "live", "logs", "events"):
                shutil.rmtree(self.state_dir / part, ignore_errors=True)

    def run_until_signalled(self, announce: bool = True) -> None:
        """Run in the foreground until SIGINT or SIGTERM, then stop every actor process."""
        stop = threading.Event()
        previous = {sig: signal.signal(sig, lambda *_: stop.set()) for sig in STOP_SIGNALS}
        try:
            self.start()
            if announce:
                for line in self.swept:  # on stderr: stdout's first lines are the addresses, which tools read
                    print(line, file=sys.stderr, flush=True)
                print(f"control  {self.control_address}  (gRPC ateapi.Control)", flush=True)
                print(f"router   {self.router_url}  (HTTP, header ate-target-actor: <atespace>/<actor>)", flush=True)
                print(f"metrics  {self.metrics_url}", flush=True)
                print(f"state    {self.state_dir}", flush=True)
            while not stop.wait(0.5):
                if self._thread is None or not self._thread.is_alive():
                    break
        finally:
            self.stop()
            for sig, handler in previous.items():
                signal.signal(sig, handler)

    # -- calls into the loop ---------------------------------------------

    def call(self, coroutine: Coroutine[Any, Any, T], timeout: float = 60) -> T:
        """Run ``coroutine`` on the runtime's loop and return its result (for tests and tools)."""
        if self._loop is None:
            raise RuntimeError("the runtime is not started")
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(timeout)

    def event_log(self) -> list[RuntimeEvent]:
        return self.events.events()

    def events_frame(self) -> pl.DataFrame:
        """The event log so far, one row per event (EVENT_SCHEMA)."""
        return self.events.frame()

    def snapshot_path(self, atespace: str, name: str) -> Path | None:
        """The directory of an actor's latest snapshot, if it has one."""
        async def find() -> Path | None:
            assert self.lifecycle is not None
            return self.lifecycle.actor(atespace, name).snapshot

        return self.call(find())

    def snapshot_state(self) -> dict[str, Any]:
        """Workers by state, actors by state, the router's parked requests: what /state serves."""
        async def collect() -> dict[str, Any]:
            return self._state()

        return self.call(collect())

    def _state(self) -> dict[str, Any]:
        assert self.lifecycle is not None and self.router is not None
        actors: dict[str, int] = {}
        for record in self.lifecycle.actors.values():
            name = STATE_NAMES[record.state]
            actors[name] = actors.get(name, 0) + 1
        return {"workers": self.lifecycle.slots.states(), "running_actors": self.lifecycle.slots.running_actors,
                "actors": actors, "parked": self.router.parked, "parked_peak": self.router.parked_peak}

    # -- the loop thread --------------------------------------------------

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as error:  # surfaced to start() if startup failed
            if not self._started.is_set():
                self._startup_error = error
                self._started.set()

    async def _main(self) -> None:
        assert self.state_dir is not None
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        pool = WarmPool(self.config.warm_hosts, self.state_dir / "logs", self.config.host_command_timeout_s,
                        self.events)
        assert self.live_dir is not None
        self.lifecycle = Lifecycle(self.config, self.state_dir, self.live_dir, self.metrics, self.events, pool)
        self.router = Router(self.lifecycle, self.config.router_timeout_s, self.config.max_parked,
                             max_body=self.config.router_max_body, body_timeout_s=self.config.router_body_timeout_s)
        grpc_server = grpc.aio.server(options=[("grpc.so_reuseport", 0)])
        ateapi_pb2_grpc.add_ControlServicer_to_server(ControlService(self.lifecycle), grpc_server)
        runners: list[web.AppRunner] = []
        try:
            self.control_port = grpc_server.add_insecure_port(f"{LOOPBACK}:{self.config.control_port}")
            if not self.control_port:
                raise OSError(f"cannot bind the control API to {LOOPBACK}:{self.config.control_port}")
            await grpc_server.start()
            self.router_port = await self._serve(self.router.application(), self.config.router_port, runners,
                                                 **self.router.server_options())
            self.metrics_port = await self._serve(self._metrics_application(), self.config.metrics_port, runners)
            pool.start()
        except BaseException as error:
            self._startup_error = error
            self._started.set()
            await self._shutdown(grpc_server, runners)
            return
        self._started.set()
        try:
            await self._stop.wait()
        finally:
            await self._shutdown(grpc_server, runners)

    async def _serve(self, app: web.Application, port: int, runners: list[web.AppRunner], **options: Any) -> int:
        runner = web.AppRunner(app, access_log=None, handle_signals=False, **options)
        await runner.setup()
        runners.append(runner)
        site = web.TCPSite(runner, LOOPBACK, port, backlog=1024)
        await site.start()
        server = site._server
        # aiohttp types the site's server as an asyncio.AbstractServer; it is the loop's server, with its sockets.
        assert server is not None and server.sockets  # type: ignore[attr-defined]  # aiohttp's type is too broad
        bound: int = server.sockets[0].getsockname()[1]  # type: ignore[attr-defined]  # aiohttp's type is too broad
        return bound

    async def _shutdown(self, grpc_server: grpc.aio.Server, runners: list[web.AppRunner]) -> None:
        with contextlib.suppress(Exception):
            await grpc_server.stop(grace=1)
        for runner in runners:
            with contextlib.suppress(Exception):
                await runner.cleanup()
        if self.lifecycle is not None:
            await self.lifecycle.shutdown()

    def _metrics_application(self) -> web.Application:
        async def metrics(_: web.Request) -> web.Response:
            return web.Response(body=generate_latest(self.metrics.registry),
                                headers={"Content-Type": CONTENT_TYPE_LATEST})

        async def events(_: web.Request) -> web.Response:
            return web.json_response([event.__dict__ for event in self.events.events()])

        async def state(_: web.Request) -> web.Response:
            return web.Response(text=json.dumps(self._state()), content_type="application/json")

        app = web.Application()
        app.router.add_get("/metrics", metrics)
        app.router.add_get("/events", events)
        app.router.add_get("/state", state)
        return app
