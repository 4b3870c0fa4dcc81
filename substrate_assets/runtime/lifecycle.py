"""Atespaces, actors and their state machine: create, resume (restore or unpause), suspend, pause, delete.

Every operation on one actor runs under that actor's lock, so an actor is
only ever in a stable state (RUNNING, SUSPENDED, PAUSED, CRASHED) when an
operation starts. Resumes are *flights*: concurrent callers (the router's
parked requests, an explicit ResumeActor) share one task, which is never
cancelled because one caller gave up. A host process that dies when nobody
asked it to makes its actor CRASHED until it is deleted.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import signal
import time
import uuid
from pathlib import Path

import aiohttp
import grpc

from substrate_assets.runtime.actors import STATE_NAMES, ActorRecord, Atespace, LifecycleError, State, check_name
from substrate_assets.runtime.config import RuntimeConfig, TemplateConfig
from substrate_assets.runtime.events import EventLog, RuntimeEvent
from substrate_assets.runtime.hosts import HostFailure, HostProcess, WarmPool
from substrate_assets.runtime.metrics import RuntimeMetrics
from substrate_assets.runtime.snapshot import FILES, PAGES
from substrate_assets.runtime.workers import NoFreeWorker, WorkerSlots

# Requests beyond this many queue in the router rather than opening more actor connections (and threads).
ROUTER_CONNECTIONS_PER_ACTOR = 64


class Lifecycle:
    def __init__(self, config: RuntimeConfig, state_dir: Path, live_root: Path, metrics: RuntimeMetrics,
                 events: EventLog, pool: WarmPool) -> None:
        self.config = config
        self.metrics = metrics
        self.events = events
        self.pool = pool
        self.snapshot_root = state_dir / "snapshots"
        self.live_root = live_root
        self.templates = {(t.atespace, t.name): t for t in config.all_templates()}
        self.atespaces: dict[str, Atespace] = {}
        self.actors: dict[tuple[str, str], ActorRecord] = {}
        self.slots = WorkerSlots(config.workers, config.actors_per_worker, metrics.update_workers)
        self.stopping = False

    # -- records ----------------------------------------------------------

    def create_atespace(self, name: str) -> Atespace:
        check_name("atespace", name)
        if name in self.atespaces:
            raise LifecycleError(grpc.StatusCode.ALREADY_EXISTS, f"atespace {name} already exists")
        atespace = Atespace(name, str(uuid.uuid4()), time.time())
        self.atespaces[name] = atespace
        return atespace

    def create_actor(self, atespace: str, name: str, template: tuple[str, str]) -> ActorRecord:
        check_name("actor", name)
        if not template[1]:
            raise LifecycleError(grpc.StatusCode.INVALID_ARGUMENT, "actor_template is required")
        if atespace not in self.atespaces:
            raise LifecycleError(grpc.StatusCode.FAILED_PRECONDITION, f"atespace {atespace!r} does not exist")
        found = self.templates.get(template)
        if found is None:
            raise LifecycleError(grpc.StatusCode.FAILED_PRECONDITION,
                                 f"actor template {template[0]}/{template[1]} not found")
        if (atespace, name) in self.actors:
            raise LifecycleError(grpc.StatusCode.ALREADY_EXISTS, f"actor {atespace}/{name} already exists")
        record = ActorRecord(atespace, name, found)
        self.actors[(atespace, name)] = record
        return record

    def actor(self, atespace: str, name: str) -> ActorRecord:
        record = self.actors.get((atespace, name))
        if record is None or record.deleted:
            raise LifecycleError(grpc.StatusCode.NOT_FOUND, f"actor {atespace}/{name} not found")
        return record

    def template(self, atespace: str, name: str) -> TemplateConfig:
        found = self.templates.get((atespace, name))
        if found is None:
            raise LifecycleError(grpc.StatusCode.NOT_FOUND, f"actor template {atespace}/{name} not found")
        return found

    # -- resume -----------------------------------------------------------

    def flight(self, record: ActorRecord) -> asyncio.Task[bool]:
        """The one resume in progress for ``record``, started if there is none."""
        if record.flight is None or record.flight.done():
            record.flight = asyncio.create_task(self._activate(record))
            record.flight.add_done_callback(lambda task: task.cancelled() or task.exception())
        return record.flight

    async def resume(self, record: ActorRecord) -> bool:
        """ResumeActor: True when a resume ran, False when the actor was already RUNNING."""
        if record.state == State.ACTOR_STATE_RUNNING and not record.lock.locked():
            return False
        return await asyncio.shield(self.flight(record))

    async def _activate(self, record: ActorRecord) -> bool:
        async with record.lock:
            if record.deleted:
                raise LifecycleError(grpc.StatusCode.NOT_FOUND, f"actor {record.key} not found")
            if record.state == State.ACTOR_STATE_RUNNING:
                return False
            if record.state == State.ACTOR_STATE_CRASHED:
                raise self._crashed(record)
            try:
                worker = self.slots.acquire()
            except NoFreeWorker as error:
                raise LifecycleError(grpc.StatusCode.RESOURCE_EXHAUSTED, str(error)) from None
            if record.state == State.ACTOR_STATE_PAUSED:
                await self._unpause(record, worker)
            else:
                await self._restore(record, worker)
            if self.config.inject_wake_delay_ms:
                # Under the actor's lock and before the flight ends: every caller waiting on this resume (the
                # router's parked first request above all) is answered that much later.
                await asyncio.sleep(self.config.inject_wake_delay_ms / 1000)
            return True

    async def _unpause(self, record: ActorRecord, worker: int) -> None:
        started, clock = time.time(), time.perf_counter()
        assert record.host is not None
        record.host.signal(signal.SIGCONT)
        record.worker = worker
        record.set_state(State.ACTOR_STATE_RUNNING)
        self.events.append(RuntimeEvent("unpause", record.atespace, record.name, started,
                                        time.perf_counter() - clock, worker=worker))

    async def _restore(self, record: ActorRecord, worker: int) -> None:
        started, clock = time.time(), time.perf_counter()
        record.set_state(State.ACTOR_STATE_RESUMING)
        host: HostProcess | None = None
        try:
            host, host_start = await self.pool.take()
            reply = await host.command({
                "op": "start",
                "data_dir": str(self.live_root / record.atespace / record.name),
                "snapshot": str(record.snapshot) if record.snapshot else None,
                "memory_limit": record.template.memory_limit,
                "service": record.template.service,
                "trajectory": str(record.template.trajectory_file) if record.template.service == "sweperf" else None,
            }, self.config.host_command_timeout_s)
        except (HostFailure, OSError) as error:
            if host is not None:
                await host.kill()
            self.slots.release(worker)
            self._mark_crashed(record, f"restore failed: {error}")
            raise self._crashed(record) from None
        except BaseException:
            # Cancelled (the runtime stopping) with a host taken from the pool: nobody else knows that host, so
            # it is killed here. The snapshot is untouched, so the actor is what it was before: suspended.
            if host is not None:
                await host.kill()
            self.slots.release(worker)
            record.set_state(State.ACTOR_STATE_SUSPENDED)
            raise
        record.host, record.port, record.worker = host, reply["port"], worker
        record.session = aiohttp.ClientSession(
            f"http://127.0.0.1:{record.port}",
            connector=aiohttp.TCPConnector(limit=ROUTER_CONNECTIONS_PER_ACTOR, keepalive_timeout=60),
            timeout=aiohttp.ClientTimeout(total=None),
            auto_decompress=False,
        )
        host.on_exit = lambda exited, code: self._host_exited(record, exited, code)
        record.set_state(State.ACTOR_STATE_RUNNING)
        if not host.alive:  # died between answering and being watched
            self._host_exited(record, host, host.exited.result())
        duration = time.perf_counter() - clock
        self.metrics.observe_restore(duration)
        self.events.append(RuntimeEvent(
            "restore", record.atespace, record.name, started, duration, reply["pages"] + reply["files"],
            reply["pages"], reply["files"], worker, None if record.snapshot else "boot", host_start))

    # -- suspend and pause ------------------------------------------------

    async def suspend(self, record: ActorRecord) -> ActorRecord:
        async with record.lock:
            self._require_present(record)
            if record.state == State.ACTOR_STATE_SUSPENDED:
                return record
            if record.state == State.ACTOR_STATE_CRASHED:
                raise LifecycleError(grpc.StatusCode.FAILED_PRECONDITION, f"actor {record.key} is crashed")
            if record.state == State.ACTOR_STATE_PAUSED:
                assert record.host is not None
                record.host.signal(signal.SIGCONT)
            record.set_state(State.ACTOR_STATE_SUSPENDING)
            await self._drain(record)
            await self._checkpoint(record)
            return record

    async def _checkpoint(self, record: ActorRecord) -> None:
        host = self._live_host(record)
        started, clock = time.time(), time.perf_counter()
        record.generation += 1
        target = self.snapshot_root / record.atespace / record.name / f"{record.generation:08d}"
        target.parent.mkdir(parents=True, exist_ok=True)
        host.expected_exit = True
        try:
            reply = await host.command({"op": "checkpoint", "target": str(target),
                                        "fsync": self.config.snapshot_fsync}, self.config.host_command_timeout_s)
            await asyncio.wait_for(asyncio.shield(host.exited), self.config.host_command_timeout_s)
        except (HostFailure, TimeoutError) as error:
            await host.kill()
            self._mark_crashed(record, f"checkpoint failed: {error}")
            # The same answer as any later call gets: a host that died before its checkpoint (over its memory
            # limit, just before the suspend) is a crash the caller should see as one (Aborted "crashed").
            raise self._crashed(record) from None
        worker = record.worker
        await self._release(record)
        previous, record.snapshot = record.snapshot, target
        if previous is not None:
            shutil.rmtree(previous, ignore_errors=True)
        record.set_state(State.ACTOR_STATE_SUSPENDED)
        duration = time.perf_counter() - clock
        self.metrics.observe_checkpoint(duration, {PAGES: reply["pages"], FILES: reply["files"]})
        self.events.append(RuntimeEvent("checkpoint", record.atespace, record.name, started, duration,
                                        reply["pages"] + reply["files"], reply["pages"], reply["files"], worker))

    async def pause(self, record: ActorRecord) -> ActorRecord:
        async with record.lock:
            self._require_present(record)
            if record.state == State.ACTOR_STATE_PAUSED:
                return record
            if record.state == State.ACTOR_STATE_SUSPENDED:
                raise LifecycleError(grpc.StatusCode.FAILED_PRECONDITION,
                                     f"actor {record.key} is suspended; only a running actor can be paused")
            if record.state == State.ACTOR_STATE_CRASHED:
                raise LifecycleError(grpc.StatusCode.FAILED_PRECONDITION, f"actor {record.key} is crashed")
            started, clock = time.time(), time.perf_counter()
            record.set_state(State.ACTOR_STATE_PAUSING)
            await self._drain(record)
            host = self._live_host(record)
            host.signal(signal.SIGSTOP)
            await host.stopped()
            worker = record.worker
            if worker is not None:
                self.slots.release(worker)
                record.worker = None
            record.set_state(State.ACTOR_STATE_PAUSED)
            self.events.append(RuntimeEvent("pause", record.atespace, record.name, started,
                                            time.perf_counter() - clock, worker=worker))
            return record

    async def _drain(self, record: ActorRecord) -> None:
        try:
            await asyncio.wait_for(record.idle.wait(), self.config.drain_timeout_s)
        except TimeoutError:
            raise LifecycleError(grpc.StatusCode.ABORTED,
                                 f"actor {record.key} still has {record.inflight} requests in flight after "
                                 f"{self.config.drain_timeout_s}s; another operation is in progress") from None
        finally:
            if record.state in (State.ACTOR_STATE_SUSPENDING, State.ACTOR_STATE_PAUSING) and record.inflight:
                record.set_state(State.ACTOR_STATE_RUNNING)
        self._live_host(record)

    # -- revert -----------------------------------------------------------

    async def revert(self, record: ActorRecord) -> ActorRecord:
        """RevertActor: a RUNNING, PAUSED or CRASHED actor back to SUSPENDED at its last snapshot (its template's
        boot state when it was never suspended). Its host is killed, its live data dropped and its crash forgotten;
        the next resume restores the snapshot."""
        async with record.lock:
            self._require_present(record)
            if record.state not in (State.ACTOR_STATE_RUNNING, State.ACTOR_STATE_PAUSED, State.ACTOR_STATE_CRASHED):
                raise LifecycleError(grpc.StatusCode.FAILED_PRECONDITION,
                                     f"cannot revert actor {record.key} in state {STATE_NAMES[record.state]}; only "
                                     "RUNNING, PAUSED or CRASHED actors can be reverted")
            started, clock = time.time(), time.perf_counter()
            worker = record.worker
            record.set_state(State.ACTOR_STATE_REVERTING)
            if record.host is not None:
                await record.host.kill()  # SIGKILL ends a stopped (paused) host too; its exit is expected
            await self._release(record)
            shutil.rmtree(self.live_root / record.atespace / record.name, ignore_errors=True)
            record.crash_reason = None
            record.set_state(State.ACTOR_STATE_SUSPENDED)
            self.events.append(RuntimeEvent("revert", record.atespace, record.name, started,
                                            time.perf_counter() - clock, worker=worker))
            return record

    # -- delete -----------------------------------------------------------

    async def delete(self, record: ActorRecord, any_state: bool) -> ActorRecord:
        async with record.lock:
            self._require_present(record)
            if not any_state and record.state not in (State.ACTOR_STATE_SUSPENDED, State.ACTOR_STATE_CRASHED):
                raise LifecycleError(grpc.StatusCode.FAILED_PRECONDITION,
                                     f"actor {record.key} is {STATE_NAMES[record.state]}; only SUSPENDED or CRASHED "
                                     "actors can be deleted without any_state")
            record.set_state(State.ACTOR_STATE_DELETING)
            if record.host is not None:
                await record.host.kill()
            await self._release(record)
            record.deleted = True
            self.actors.pop((record.atespace, record.name), None)
            shutil.rmtree(self.snapshot_root / record.atespace / record.name, ignore_errors=True)
            shutil.rmtree(self.live_root / record.atespace / record.name, ignore_errors=True)
            return record

    # -- failures ---------------------------------------------------------

    def _crashed(self, record: ActorRecord) -> LifecycleError:
        return LifecycleError(grpc.StatusCode.ABORTED,
                              f"actor {record.key} is crashed ({record.crash_reason or 'unknown reason'}); "
                              "delete it to start over")

    def _require_present(self, record: ActorRecord) -> None:
        if record.deleted:
            raise LifecycleError(grpc.StatusCode.NOT_FOUND, f"actor {record.key} not found")

    def _live_host(self, record: ActorRecord) -> HostProcess:
        if record.host is None or not record.host.alive or record.state == State.ACTOR_STATE_CRASHED:
            raise self._crashed(record)
        return record.host

    def _host_exited(self, record: ActorRecord, host: HostProcess, code: int) -> None:
        if host.expected_exit or record.host is not host or record.deleted:
            return
        self._mark_crashed(record, host.describe_exit())
        asyncio.get_running_loop().create_task(self._release(record))

    def _mark_crashed(self, record: ActorRecord, reason: str) -> None:
        if record.state == State.ACTOR_STATE_CRASHED or self.stopping:
            return
        started = time.time()
        worker = record.worker
        if worker is not None:
            self.slots.release(worker)
            record.worker = None
        record.crash_reason = reason
        record.set_state(State.ACTOR_STATE_CRASHED)
        self.events.append(RuntimeEvent("crash", record.atespace, record.name, started, 0.0, worker=worker,
                                        detail=reason))

    async def _release(self, record: ActorRecord) -> None:
        """Forget the host and its connections and free the worker slot it held."""
        session, record.session = record.session, None
        record.host, record.port = None, None
        if record.worker is not None:
            self.slots.release(record.worker)
            record.worker = None
        if session is not None:
            await session.close()

    async def shutdown(self) -> None:
        # From here on a host that exits was stopped by the runtime: no crash is booked for it.
        self.stopping = True
        flights = [record.flight for record in self.actors.values()
                   if record.flight is not None and not record.flight.done()]
        for flight in flights:
            flight.cancel()
        if flights:  # a cancelled restore kills the host it took; bounded, as a flight may wait on a stuck lock
            await asyncio.wait(flights, timeout=10)
        # A suspend, pause or delete in progress (a driver stopped mid-call leaves one) ends before its host is
        # killed, so its snapshot and event are whole.
        busy = [asyncio.ensure_future(record.lock.acquire()) for record in self.actors.values() if record.lock.locked()]
        if busy:
            _done, pending = await asyncio.wait(busy, timeout=self.config.stop_grace_s)
            for waiting in pending:
                waiting.cancel()
        for record in list(self.actors.values()):
            if record.host is not None:
                record.host.signal(signal.SIGCONT)
                await record.host.kill()
            if record.session is not None:
                with contextlib.suppress(Exception):
                    await record.session.close()
        await self.pool.close()
