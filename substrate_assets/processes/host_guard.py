"""A guard in front of a server on 127.0.0.1 that answers only requests addressed to this machine.

A server bound to 127.0.0.1 is still reachable from any web page the person's browser opens: the page's own name
can be made to resolve to 127.0.0.1 (DNS rebinding), and the browser then sends the page's requests, with the
page's name in their ``Host`` header, to the local server. Dagster's webserver answers whatever the ``Host`` says,
and holds the controls that launch runs. This guard listens where the person connects, reads the head of each
connection's first request, and passes the connection on to the server only when its ``Host`` is ``127.0.0.1``,
``localhost`` or ``[::1]`` at the guard's port; anything else is answered ``421 Misdirected Request`` and closed.
Checking the first request is enough: a browser opens a connection per origin, and every request it sends on one
names the same host. After the check the bytes are copied both ways unread (websockets included).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable

LOCAL_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]"})
# A request head longer than this is not a browser's: refused rather than buffered.
MAX_HEAD_BYTES = 64 * 1024
HEAD_TIMEOUT_S = 30.0
COPY_CHUNK = 64 * 1024


def request_host(head: bytes) -> str | None:
    """The ``Host`` header of a request head (``None`` when it has none, or two)."""
    hosts = [line.split(b":", 1)[1].strip() for line in head.split(b"\r\n")[1:]
             if b":" in line and line.split(b":", 1)[0].strip().lower() == b"host"]
    return hosts[0].decode("latin-1") if len(hosts) == 1 else None


def is_local(host: str | None, port: int) -> bool:
    """Whether ``host`` (a ``Host`` header) names this machine at ``port`` (without a port: the scheme's, 80)."""
    if host is None:
        return False
    host = host.lower()
    if host.startswith("["):
        name, _, rest = host.partition("]")
        name, given = f"{name}]", rest.removeprefix(":") if rest.startswith(":") or not rest else None
    else:
        name, _, given = host.partition(":")
    return name in LOCAL_NAMES and (given or "80") == str(port)


def refusal(host: str | None) -> bytes:
    body = (f"This server answers only requests addressed to 127.0.0.1 or localhost; this one named "
            f"{host!r}.\n").encode()
    return (b"HTTP/1.1 421 Misdirected Request\r\nContent-Type: text/plain; charset=utf-8\r\n"
            + f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(COPY_CHUNK):
            writer.write(chunk)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        with contextlib.suppress(Exception):
            writer.close()


class HostGuard:
    """The guard on ``listening`` (a bound socket), passing accepted connections on to 127.0.0.1:``upstream_port``;
    run in a thread of its own by :meth:`start`, stopped by :meth:`stop`."""

    def __init__(self, listening: socket.socket, upstream_port: int,
                 on_refused: Callable[[str | None], None] | None = None) -> None:
        self.listening, self.upstream_port, self.on_refused = listening, upstream_port, on_refused
        self.port = listening.getsockname()[1]
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._serve, name="host-guard", daemon=True)
        self._started = threading.Event()
        self._server: asyncio.Server | None = None

    def start(self) -> HostGuard:
        self._thread.start()
        self._started.wait()
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._server = self._loop.run_until_complete(
            asyncio.start_server(self._connection, sock=self.listening, limit=MAX_HEAD_BYTES))
        self._started.set()
        try:
            self._loop.run_forever()
        finally:
            self._server.close()
            for task in asyncio.all_tasks(self._loop):
                task.cancel()
            with contextlib.suppress(Exception):
                self._loop.run_until_complete(asyncio.sleep(0))
            self._loop.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, ConnectionError):
            writer.close()
            return
        host = request_host(head)
        if not is_local(host, self.port):
            if self.on_refused is not None:
                self.on_refused(host)
            with contextlib.suppress(ConnectionError):
                writer.write(refusal(host))
                await writer.drain()
            writer.close()
            return
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        except OSError:
            writer.close()
            return
        upstream_writer.write(head)
        await asyncio.gather(_copy(reader, upstream_writer), _copy(upstream_reader, writer))


def listening_socket(port: int) -> socket.socket:
    """A socket bound to 127.0.0.1:``port`` (0: any free port) and listening; OSError if the port is taken."""
    listening = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        listening.bind(("127.0.0.1", port))
        listening.listen(128)
    except OSError:
        listening.close()
        raise
    return listening


def free_port() -> int:
    """A port free on 127.0.0.1 now, for a server the guard stands in front of."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])
