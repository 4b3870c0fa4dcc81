"""A child started ahead of its launch: it imports what it needs while this process does other work, then waits on
its stdin for the launch (one JSON line: its environment, and where its stdout and stderr go by then).

A trial's Pipes child spends ~1 s importing before its trial can start; started ahead, that second passes while this
process loads the trial before it (``app/main_job``), on the machine's other core, and not between trials. The child
runs nothing until it is launched: closing its stdin (:meth:`WarmChild.discard`, or this process ending however it
ends) makes it exit having done nothing. Only this process's own children read the line, never a file or input.

One child waits at a time (:func:`prepare`); a launch of the same command from the same directory takes it
(:func:`take`), any other launch starts its process as before."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from typing import IO

WARM_FLAG = "--started-ahead"
_DISCARD_WAIT_S = 5.0
_waiting: WarmChild | None = None


class WarmChild:
    """``command`` with :data:`WARM_FLAG`, started in ``cwd`` with this process's environment and ``env``."""

    def __init__(self, command: Sequence[str], cwd: str, env: Mapping[str, str]) -> None:
        self.command, self.cwd = list(command), cwd
        self.process = subprocess.Popen([*command, WARM_FLAG], cwd=cwd, env={**os.environ, **env},
                                        stdin=subprocess.PIPE)

    def launch(self, env: Mapping[str, str]) -> subprocess.Popen[bytes]:
        """Hand the child its whole environment and this process's stdout and stderr as they are now (a Dagster
        step's captured logs), and let it run; its process."""
        assert self.process.stdin is not None
        here = os.getpid()
        launch = {"env": dict(env), "stdout": f"/proc/{here}/fd/1", "stderr": f"/proc/{here}/fd/2"}
        self.process.stdin.write(json.dumps(launch).encode() + b"\n")
        self.process.stdin.close()
        return self.process

    def discard(self) -> None:
        """End the child unlaunched: it exits when its stdin closes (killed if it has not within a few seconds)."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=_DISCARD_WAIT_S)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def prepare(command: Sequence[str], cwd: str, env: Mapping[str, str]) -> None:
    """Start ``command`` ahead of its launch (a child already waiting is discarded first)."""
    global _waiting
    discard()
    _waiting = WarmChild(command, cwd, env)


def take(command: Sequence[str], cwd: str) -> WarmChild | None:
    """The child waiting for a launch of ``command`` from ``cwd``, now this caller's; None when there is none (one
    waiting for another command is discarded)."""
    global _waiting
    child, _waiting = _waiting, None
    if child is None:
        return None
    if child.command != list(command) or child.cwd != cwd or child.process.poll() is not None:
        child.discard()
        return None
    return child


def discard() -> None:
    """End the child waiting for a launch, if any."""
    global _waiting
    child, _waiting = _waiting, None
    if child is not None:
        child.discard()


def await_launch(stdin: IO[bytes] | None = None) -> float:
    """In a child started ahead: wait for the launch, then take its environment and its stdout and stderr; how long
    it waited, ready. Exits quietly when it is discarded (stdin closed) or interrupted while it waits."""
    ready = time.monotonic()
    try:
        line = (stdin or sys.stdin.buffer).readline()
    except KeyboardInterrupt:  # the terminal's Ctrl-C reaches the whole process group: nothing was started
        raise SystemExit(130) from None
    if not line:
        raise SystemExit(0)
    launch = json.loads(line)
    os.environ.clear()
    os.environ.update(launch["env"])
    sys.stdout.flush()
    sys.stderr.flush()
    for fd, path in ((1, launch.get("stdout")), (2, launch.get("stderr"))):
        try:
            target = os.open(path, os.O_WRONLY | os.O_APPEND) if path else None
        except OSError:  # elsewhere than Linux (no /proc): the streams it was started with
            continue
        if target is not None:
            os.dup2(target, fd)
            os.close(target)
    return time.monotonic() - ready
