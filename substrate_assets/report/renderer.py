"""The chart renderer: vl-convert in a process of its own, turning Vega-Lite specs into SVG documents.

vl-convert holds the interpreter's lock while it renders (a chart of a suite's history takes ~0.3 s), so in this
process it could never overlap anything. In a child, a page's charts render on the second core while this process
builds the next page (``site_files``: two pages at a time; a thread waiting for the child gives up the lock), the
engine's start (~0.7 s) overlaps the main job's imports, and the process that draws never imports its engine.

The child reads length-prefixed specs from its stdin and answers each with a status byte and a length-prefixed SVG
(or error text). It ends when its stdin closes, as it does when this process ends in any way (kill -9 too). Only this
project's processes speak over the pipe, and only specs this package made."""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading
from typing import IO

LENGTH = struct.Struct("!Q")
RENDERED, FAILED = b"\x00", b"\x01"


class RenderFailed(ValueError):
    """vl-convert did not render a spec; the message is its own."""


class RendererGone(RuntimeError):
    """The renderer's process ended (its pipe closed) while rendering, twice in a row; the message says how. A child
    that hangs is not detected: the drawing waits for it."""


def _read_exactly(stream: IO[bytes], size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise EOFError(f"the stream ended after {len(data)} of {size} bytes")
    return data


class _Child:
    def __init__(self, vl_version: str) -> None:
        self.owner = os.getpid()
        # -P: the directory a command runs in is not on the child's path.
        self.process = subprocess.Popen([sys.executable, "-P", "-m", __name__, vl_version], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def render(self, spec: str) -> tuple[bytes, str]:
        assert self.process.stdin is not None and self.process.stdout is not None
        data = spec.encode()
        self.process.stdin.write(LENGTH.pack(len(data)) + data)
        self.process.stdin.flush()
        status = _read_exactly(self.process.stdout, 1)
        (size,) = LENGTH.unpack(_read_exactly(self.process.stdout, LENGTH.size))
        return status, _read_exactly(self.process.stdout, size).decode()

    def end(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                stream.close()


class Renderer:
    """A renderer child, started when first asked for, used by one thread at a time. A child that ended (killed,
    out of memory) is started again once per spec."""

    def __init__(self, vl_version: str) -> None:
        self.vl_version = vl_version
        self._child: _Child | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Start the child if it is not running: its engine starts while this process goes on."""
        with self._lock:
            self._started()

    def _started(self) -> _Child:
        if self._child is not None and self._child.owner != os.getpid():
            # A forked copy of the process that started the child: the child and its pipe are that process's.
            self._child = None
        if self._child is None or self._child.process.poll() is not None:
            if self._child is not None:
                self._child.end()
            self._child = _Child(self.vl_version)
        return self._child

    def svg(self, spec: str) -> str:
        """The spec (Vega-Lite JSON) as an SVG document; RenderFailed when vl-convert refuses it."""
        with self._lock:
            for attempt in range(2):
                child = self._started()
                try:
                    status, text = child.render(spec)
                except (OSError, EOFError) as error:
                    child.end()
                    self._child = None
                    if attempt:
                        raise RendererGone(f"the chart renderer (pid {child.process.pid}) ended twice while "
                                           f"rendering: {error}") from None
                    continue
                except BaseException:
                    # Interrupted between its question and its answer (a signal): the answer would be read as the
                    # next chart's, so the child goes with it.
                    child.end()
                    self._child = None
                    raise
                if status == FAILED:
                    raise RenderFailed(text)
                return text
        raise AssertionError("unreachable: the loop returns or raises")


def _serve(vl_version: str, requests: IO[bytes], answers: IO[bytes]) -> None:
    import vl_convert

    vl_convert.vegalite_to_svg('{"mark": "point"}', vl_version=vl_version)  # the engine's start, before any asks
    while True:
        head = requests.read(LENGTH.size)
        if len(head) < LENGTH.size:
            return  # stdin closed: the process that drew is gone, or done
        (size,) = LENGTH.unpack(head)
        spec = _read_exactly(requests, size).decode()
        try:
            status, text = RENDERED, vl_convert.vegalite_to_svg(spec, vl_version=vl_version, allowed_base_urls=[])
        except ValueError as error:
            status, text = FAILED, str(error)
        data = text.encode()
        answers.write(status + LENGTH.pack(len(data)) + data)
        answers.flush()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.stdin.buffer, sys.stdout.buffer)
