"""Actor host processes seen from the runtime: spawn, command over a pipe, signal, watch for exit.

A host runs in a session (and process group) of its own: a terminal's Ctrl-C reaches the trial or the runtime
command, never a host, so only the runtime stops hosts and the event log holds no crash that did not happen.
A host dies with the runtime's process all the same (PR_SET_PDEATHSIG, set by ``actor_host``).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from substrate_assets.processes.child_env import child_environment
from substrate_assets.runtime.events import EventLog, RuntimeEvent

log = logging.getLogger(__name__)


class HostFailure(Exception):
    """A host did not do what it was told: it answered an error, timed out or died."""


class HostProcess:
    """One ``actor_host`` process. Commands are answered in order, one at a time."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.pid = process.pid
        self.expected_exit = False
        self.last_event: dict[str, Any] | None = None
        self.on_exit: Callable[[HostProcess, int], None] | None = None
        self._replies: asyncio.Queue[dict[str, Any] | None] = asyncio.Queue()
        self._command_lock = asyncio.Lock()
        self._ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.exited: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read())

    @property
    def alive(self) -> bool:
        return not self.exited.done()

    async def _read(self) -> None:
        assert self.process.stdout is not None
        try:
            while line := await self.process.stdout.readline():
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if message.get("ready"):
                    if not self._ready.done():
                        self._ready.set_result(None)
                elif "event" in message:
                    self.last_event = message
                else:
                    await self._replies.put(message)
        finally:
            code = await self.process.wait()
            await self._replies.put(None)
            if not self._ready.done():
                self._ready.set_exception(HostFailure(f"host {self.pid} exited with {code} before it was ready"))
            self.exited.set_result(code)
            if self.on_exit is not None:
                self.on_exit(self, code)

    async def ready(self, timeout: float) -> None:
        await asyncio.wait_for(asyncio.shield(self._ready), timeout)

    async def command(self, message: dict[str, Any], timeout: float) -> dict[str, Any]:
        async with self._command_lock:
            if not self.alive:
                raise HostFailure(f"host {self.pid} has exited ({self.exited.result()})")
            assert self.process.stdin is not None
            try:
                self.process.stdin.write((json.dumps(message) + "\n").encode())
                await self.process.stdin.drain()
            except (BrokenPipeError, ConnectionResetError) as error:
                raise HostFailure(f"host {self.pid} is gone: {error}") from None
            try:
                reply = await asyncio.wait_for(self._replies.get(), timeout)
            except TimeoutError:
                raise HostFailure(f"host {self.pid} did not answer {message.get('op')} within {timeout}s") from None
            if reply is None:
                reason = self.describe_exit()
                raise HostFailure(f"host {self.pid} died during {message.get('op')}: {reason}")
            if not reply.get("ok"):
                raise HostFailure(str(reply.get("error", "unknown host error")))
            return reply

    def describe_exit(self) -> str:
        if self.last_event and self.last_event.get("event") == "over_limit":
            return (f"killed for exceeding its memory limit ({self.last_event['used']} bytes > "
                    f"{self.last_event['limit']})")
        if not self.exited.done():
            return "still running"
        code = self.exited.result()
        if code < 0:
            return f"killed by {signal.Signals(-code).name}"
        return f"exited with status {code}"

    def signal(self, signum: int) -> None:
        with contextlib.suppress(ProcessLookupError):
            self.process.send_signal(signum)

    async def stopped(self, timeout: float = 5.0) -> None:
        """Wait until SIGSTOP has taken effect: the kernel stops a process asynchronously, after the signal is sent,
        and a paused actor must not answer while its pause is reported done. Without /proc, returns at once."""
        deadline = time.monotonic() + timeout
        while self.alive and time.monotonic() < deadline:
            try:
                stat = Path(f"/proc/{self.pid}/stat").read_text()
            except OSError:
                return
            if stat[stat.rindex(")") + 2] in "Tt":
                return
            await asyncio.sleep(0.001)

    async def kill(self) -> None:
        self.expected_exit = True
        self.signal(signal.SIGKILL)
        with contextlib.suppress(Exception):
            await asyncio.wait_for(asyncio.shield(self.exited), 10)


async def spawn_host(log_path: Path, ready_timeout: float) -> HostProcess:
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("ab") as log:
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "substrate_assets.runtime.actor_host",
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=log,
            env=child_environment({"SUBSTRATE_RUNTIME_PID": str(os.getpid())}),
            start_new_session=True,
        )
    host = HostProcess(process)
    try:
        await host.ready(ready_timeout)
    except BaseException:
        await host.kill()
        raise
    return host


class WarmPool:
    """Keeps ``size`` started, idle hosts so a wake never waits for a Python start."""

    def __init__(self, size: int, log_dir: Path, ready_timeout: float, events: EventLog | None = None) -> None:
        self.size = size
        self.events = events
        self.log_dir = log_dir
        self.ready_timeout = ready_timeout
        self._idle: list[HostProcess] = []
        self._spawning = 0
        self._serial = 0
        self._closed = False
        self._tasks: set[asyncio.Task[None]] = set()
        self._spawned: set[HostProcess] = set()

    async def _spawn(self) -> HostProcess:
        self._serial += 1
        host = await spawn_host(self.log_dir / f"host-{self._serial:05d}.log", self.ready_timeout)
        self._spawned.add(host)
        host.exited.add_done_callback(lambda _: self._spawned.discard(host))
        return host

    def _refill(self) -> None:
        while not self._closed and len(self._idle) + self._spawning < self.size:
            self._spawning += 1
            task = asyncio.create_task(self._add_one())
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _add_one(self) -> None:
        started = time.time()
        try:
            host = await self._spawn()
        except Exception as error:
            # The pool stays short until the next take refills it, and a wake that finds it empty waits for a
            # cold start: that changes wake latencies, so it is said and kept in the event log.
            log.warning("warm pool: a host failed to start (%s)", error)
            if self.events is not None:
                self.events.append(RuntimeEvent("host_start_failed", "", "", started, time.time() - started,
                                                detail=f"{type(error).__name__}: {error}"))
            return
        finally:
            self._spawning -= 1
        if self._closed:
            await host.kill()
        else:
            self._idle.append(host)

    def start(self) -> None:
        self._refill()

    async def take(self) -> tuple[HostProcess, str]:
        """A started host, and whether it was waiting idle (``warm``) or was started for this caller (``cold``)."""
        while self._idle:
            host = self._idle.pop()
            if host.alive:
                self._refill()
                return host, "warm"
        host = await self._spawn()
        self._refill()
        return host, "cold"

    @property
    def idle(self) -> list[HostProcess]:
        return list(self._idle)

    async def close(self) -> None:
        self._closed = True
        for task in list(self._tasks):
            with contextlib.suppress(BaseException):
                await task
        idle, self._idle = self._idle, []
        await asyncio.gather(*(host.kill() for host in idle))
        # Every host still alive, whoever took it: one nobody kills keeps its reader task waiting for its exit,
        # and the runtime's loop, which waits for every task, would never end.
        await asyncio.gather(*(host.kill() for host in list(self._spawned) if host.alive))
