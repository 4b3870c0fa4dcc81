"""The router: finds the actor named by ``ate-target-actor``, parks requests while it wakes, forwards them.

- ``ate-target-actor: <atespace>/<actor>``; a missing or malformed header, or
  an unknown actor, is 404.
- A request for a suspended or paused actor is parked while exactly one
  resume (a lifecycle flight) runs; every parked request then goes through.
- 503 when no worker is free or too many requests are parked; 504 when the
  router's own deadline passes; 502 when the actor is crashed or its
  connection fails mid-request.
- Bodies are capped at ``max_body`` (glutton's largest legitimate request):
  a larger declared length is 413 before a byte of it is read, a chunked body
  that grows past it is 413 once it does. Bodies above ``STREAM_ABOVE`` —
  and answers above it — are streamed through, never held whole, so a
  benchmark's own router does not weigh on the node it measures. A body that
  stops arriving for ``body_timeout_s`` is 408 and its connection closed.
- A malformed request (bad request line, headers, length or chunking) is
  logged as one line, not a traceback.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import aiohttp
import grpc
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError

from substrate_assets.runtime.actors import NAME_PATTERN, ActorRecord, LifecycleError
from substrate_assets.runtime.glutton_http import MAX_REQUEST_BODY, BodyRefused
from substrate_assets.runtime.lifecycle import Lifecycle

TARGET_HEADER = "ate-target-actor"
_FORWARDED_HEADERS = ("Content-Type", "x-server-elapsed-us")
# Bodies up to this size are read whole (one write to the actor); larger ones are streamed in chunks.
STREAM_ABOVE = 1 << 20
STREAM_CHUNK = 1 << 20
DEFAULT_BODY_TIMEOUT_S = 30.0
log = logging.getLogger(__name__)


def _error(status: int, message: str) -> web.Response:
    return web.Response(status=status, text=message)


def one_line(error: BaseException) -> str:
    """An error as one line: aiohttp's parser errors span several (the bad bytes, a caret under them)."""
    text = error.message if isinstance(error, HttpProcessingError) and error.message else str(error)
    lines = [line for line in str(text).splitlines() if line.strip().strip("^")]
    return " ".join(" ".join(lines).split()) or type(error).__name__


class _ServerLog(logging.LoggerAdapter[logging.Logger]):
    """aiohttp's server log for the router: a malformed request is one warning line (aiohttp logs one with a
    traceback, or — a bad method on a fresh connection — at debug level, unseen); anything else (a bug in a
    handler) keeps its traceback."""

    def _malformed(self, msg: object, args: tuple[object, ...], error: HttpProcessingError) -> None:
        text = str(msg) % args if args else str(msg)
        self.logger.warning("router: malformed request (%s): %s",
                            text.replace("Error handling request ", "").strip(), one_line(error))

    def exception(self, msg: object, *args: object, exc_info: Any = True, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            self._malformed(msg, args, exc_info)
            return
        self.logger.error(msg, *args, exc_info=exc_info, **kwargs)

    def debug(self, msg: object, *args: object, exc_info: Any = None, **kwargs: Any) -> None:
        if isinstance(exc_info, HttpProcessingError):
            self._malformed(msg, args, exc_info)
            return
        self.logger.debug(msg, *args, exc_info=exc_info, **kwargs)

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        return msg, kwargs


class Router:
    def __init__(self, lifecycle: Lifecycle, timeout_s: float, max_parked: int, *,
                 max_body: int = MAX_REQUEST_BODY, body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S) -> None:
        self.lifecycle = lifecycle
        self.timeout_s = timeout_s
        self.max_parked = max_parked
        self.max_body = max_body
        self.body_timeout_s = body_timeout_s
        self.parked = 0
        self.parked_peak = 0

    def application(self) -> web.Application:
        # The cap is enforced by the handler while it streams; aiohttp's own applies only to request.read().
        app = web.Application(client_max_size=STREAM_ABOVE + 1)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        return app

    def server_options(self) -> dict[str, Any]:
        """Keyword arguments for the router's ``web.AppRunner``: its one-line log of malformed requests."""
        return {"logger": _ServerLog(logging.getLogger("aiohttp.server"), {})}

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

    def _too_large(self, size: str) -> BodyRefused:
        return BodyRefused(413, f"request body of {size} is over the router's limit of {self.max_body} bytes "
                                 "(the largest glutton request)")

    async def _refuse(self, request: web.Request, refused: BodyRefused) -> web.StreamResponse:
        """Answer; a 413 lets aiohttp drain (and drop) what the client still sends, so it reads the answer rather
        than a reset, but a stalled or broken body has nothing more to come: its connection closes at once. A client
        that left mid-body (status 0: a driver stopping its users) hears nothing; it is one line at INFO."""
        if refused.status == 0:
            log.info("router: %s from %s left mid-body: %s", request.headers.get(TARGET_HEADER), request.remote,
                     refused.message)
            request.protocol.force_close()
            return web.Response(status=400, text=refused.message)
        if refused.status == 400:
            log.warning("router: malformed request from %s: %s", request.remote, refused.message)
        response = _error(refused.status, refused.message)
        if refused.status == 413:
            return response
        response.force_close()
        await response.prepare(request)
        await response.write_eof()
        request.protocol.force_close()
        return response

    async def _read_small(self, request: web.Request) -> bytes:
        try:
            return await asyncio.wait_for(request.read(), self.body_timeout_s)
        except TimeoutError:
            raise self._stalled() from None
        except ConnectionResetError:
            raise BodyRefused(0, "the client closed its connection") from None
        except (HttpProcessingError, aiohttp.ClientPayloadError, ValueError) as error:
            raise BodyRefused(400, f"malformed request body: {one_line(error)}") from None

    def _stalled(self) -> BodyRefused:
        return BodyRefused(408, f"request body stalled: nothing arrived for {self.body_timeout_s:g}s")

    async def _stream_body(self, request: web.Request, failure: list[BodyRefused]) -> AsyncIterator[bytes]:
        """The body as it arrives, counted against the cap; a failure is left in ``failure`` for the handler,
        since the client session reports it only as a broken upstream connection."""
        received = 0
        while True:
            try:
                chunk = await asyncio.wait_for(request.content.readany(), self.body_timeout_s)
            except TimeoutError:
                failure.append(self._stalled())
                raise failure[-1] from None
            except ConnectionResetError:
                failure.append(BodyRefused(0, "the client closed its connection"))
                raise failure[-1] from None
            except (HttpProcessingError, aiohttp.ClientPayloadError) as error:
                failure.append(BodyRefused(400, f"malformed request body: {one_line(error)}"))
                raise failure[-1] from None
            if not chunk:
                return
            received += len(chunk)
            if received > self.max_body:
                failure.append(self._too_large(f"more than {self.max_body} bytes"))
                raise failure[-1]
            yield chunk

    async def handle(self, request: web.Request) -> web.StreamResponse:
        deadline = time.monotonic() + self.timeout_s
        target = self._target(request)
        if isinstance(target, web.Response):
            return target
        record = target
        length = request.content_length
        if length is not None and length > self.max_body:
            return await self._refuse(request, self._too_large(f"{length} bytes"))
        small = not request.body_exists or (length is not None and length <= STREAM_ABOVE)
        try:
            # A small body is read before parking, as the client sent it with its headers; a large one waits in
            # the socket until the actor serves, then flows straight through.
            body: bytes | None = await self._read_small(request) if small else None
        except BodyRefused as refused:
            return await self._refuse(request, refused)
        while not record.serving:
            if record.deleted:
                return _error(404, f"actor {record.key} not found")
            if record.crashed:
                return _error(502, f"actor {record.key} is crashed ({record.crash_reason})")
            parked = await self._park(record, deadline)
            if parked is not None:
                return parked
        return await self._forward(request, record, body, deadline)

    async def _forward(self, request: web.Request, record: ActorRecord, body: bytes | None,
                       deadline: float) -> web.StreamResponse:
        session = record.session
        assert session is not None
        headers = {"Content-Type": request.headers.get("Content-Type", "")}
        failure: list[BodyRefused] = []
        data: bytes | AsyncIterator[bytes]
        if body is None:
            data = self._stream_body(request, failure)
            if request.content_length is not None:
                headers["Content-Length"] = str(request.content_length)  # else it goes on chunked
        else:
            data = body
        record.begin_request()
        try:
            remaining = max(deadline - time.monotonic(), 0.001)
            async with session.request(request.method, request.rel_url, data=data, headers=headers,
                                       timeout=aiohttp.ClientTimeout(total=remaining)) as upstream:
                answer = {name: upstream.headers[name] for name in _FORWARDED_HEADERS if name in upstream.headers}
                size = upstream.content_length
                if size is not None and size <= STREAM_ABOVE:
                    return web.Response(status=upstream.status, body=await upstream.read(), headers=answer)
                return await self._stream_answer(request, upstream, answer)
        except TimeoutError:
            if failure:
                return await self._refuse(request, failure[-1])
            return _error(504, f"router deadline of {self.timeout_s}s passed while actor {record.key} answered")
        except (aiohttp.ClientError, OSError) as error:
            if failure:
                return await self._refuse(request, failure[-1])
            crashed = record.crashed
            reason = record.crash_reason if crashed else str(error) or type(error).__name__
            return _error(502, f"actor {record.key} connection failed: {reason}")
        finally:
            record.end_request()
            if body is None and not failure and not request.content.is_eof():
                # The actor's side failed while the body still streamed: the client session may still be reading
                # it, and aiohttp's lingering drain would read beside it. Nothing more of it is wanted.
                request.protocol.force_close()

    async def _stream_answer(self, request: web.Request, upstream: aiohttp.ClientResponse,
                             headers: dict[str, str]) -> web.StreamResponse:
        response = web.StreamResponse(status=upstream.status, headers=headers)
        if upstream.content_length is not None:
            response.content_length = upstream.content_length
        await response.prepare(request)
        try:
            async for chunk in upstream.content.iter_chunked(STREAM_CHUNK):
                await response.write(chunk)
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            # Part of the answer is out: no status can follow, so the client sees the connection end early.
            log.warning("router: answer from %s broke off: %s", request.headers.get(TARGET_HEADER), one_line(error))
            request.protocol.force_close()
            return response
        await response.write_eof()
        return response

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
