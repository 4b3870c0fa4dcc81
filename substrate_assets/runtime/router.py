"""The router: finds the actor named by ``ate-target-actor``, parks requests while it wakes, forwards them.

- ``ate-target-actor: <atespace>/<actor>``; a missing or malformed header, or
  an unknown actor, is 404.
- A request for a suspended or paused actor is parked while exactly one
  resume (a lifecycle flight) runs; every parked request then goes through.
- 503 when no worker is free or too many requests are parked; 504 when the
  router's own deadline passes; 502 when the actor is crashed or its
  connection fails mid-request.
"""

from __future__ import annotations

import asyncio
import time

import aiohttp
import grpc
from aiohttp import web

from substrate_assets.runtime.actors import NAME_PATTERN, ActorRecord, LifecycleError
from substrate_assets.runtime.lifecycle import Lifecycle

TARGET_HEADER = "ate-target-actor"
_FORWARDED_HEADERS = ("Content-Type", "x-server-elapsed-us")


def _error(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message)


class Router:
    def __init__(self, lifecycle: Lifecycle, timeout_s: float, max_parked: int) -> None:
        self.lifecycle = lifecycle
        self.timeout_s = timeout_s
        self.max_parked = max_parked
        self.parked = 0
        self.parked_peak = 0

    def application(self) -> web.Application:
        app = web.Application(client_max_size=2**31)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    def _target(self, request: web.Request) -> ActorRecord | web.Response:
        header = request.headers.get(TARGET_HEADER)
        if not header:
            return _error(404, f"missing {TARGET_HEADER} header (want <atespace>/<actor>)")
        atespace, _, name = header.strip().partition("/")
        if not (NAME_PATTERN.fullmatch(atespace) and NAME_PATTERN.fullmatch(name)):
            return _error(404, f"malformed {TARGET_HEADER} {header!r} (want <atespace>/<actor>)")
        try:
            return self.lifecycle.actor(atespace, name)
        except LifecycleError as error:
            return _error(404, error.message)

    async def handle(self, request: web.Request) -> web.StreamResponse:
        deadline = time.monotonic() + self.timeout_s
        target = self._target(request)
        if isinstance(target, web.Response):
            return target
        record = target
        body = await request.read()
        while not record.serving:
            if record.deleted:
                return _error(404, f"actor {record.key} not found")
            if record.crashed:
                return _error(502, f"actor {record.key} is crashed ({record.crash_reason})")
            refused = await self._park(record, deadline)
            if refused is not None:
                return refused
        session = record.session
        assert session is not None
        record.begin_request()
        try:
            remaining = max(deadline - time.monotonic(), 0.001)
            async with session.request(request.method, request.rel_url, data=body,
                                       headers={"Content-Type": request.headers.get("Content-Type", "")},
                                       timeout=aiohttp.ClientTimeout(total=remaining)) as upstream:
                payload = await upstream.read()
                headers = {name: upstream.headers[name] for name in _FORWARDED_HEADERS if name in upstream.headers}
                return web.Response(status=upstream.status, body=payload, headers=headers)
        except TimeoutError:
            return _error(504, f"router deadline of {self.timeout_s}s passed while actor {record.key} answered")
        except (aiohttp.ClientError, OSError) as error:
            crashed = record.crashed
            reason = record.crash_reason if crashed else str(error) or type(error).__name__
            return _error(502, f"actor {record.key} connection failed: {reason}")
        finally:
            record.end_request()

    async def _park(self, record: ActorRecord, deadline: float) -> web.Response | None:
        """Wait for the actor's resume flight; a response when the request cannot be served."""
        if self.parked >= self.max_parked:
            return _error(503, f"router parking lot is full ({self.max_parked} requests)")
        self.parked += 1
        self.parked_peak = max(self.parked_peak, self.parked)
        try:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            await asyncio.wait_for(asyncio.shield(self.lifecycle.flight(record)), remaining)
        except TimeoutError:
            return _error(504, f"router deadline of {self.timeout_s}s passed while actor {record.key} woke")
        except LifecycleError as error:
            if error.code in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE):
                return _error(503, error.message)
            if error.code == grpc.StatusCode.NOT_FOUND:
                return _error(404, error.message)
            if error.code == grpc.StatusCode.ABORTED and not record.crashed:
                await asyncio.sleep(0.01)  # another operation held the actor; look at its next state
                return None
            return _error(502, error.message)
        finally:
            self.parked -= 1
        return None
