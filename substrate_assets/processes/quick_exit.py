"""Ending a process whose work is done without the interpreter's teardown.

A command that imported Dagster, DuckDB, polars and the chart libraries holds ~2,700 modules. Tearing them down
takes about a second (``run`` ended 1.0 s after its last atexit handler), while the person or the parent (a shell, a
Dagster run waiting for its Pipes child) waits for a process that has nothing left to do. :func:`exit_now` does what
matters of an exit: every atexit handler (logging's flush among them) and stdout and stderr flushed; then the
process ends. While a thread other than the main one still runs, it ends nothing: that thread's work would be cut
short, and the interpreter's own exit waits for it."""

from __future__ import annotations

import atexit
import contextlib
import os
import sys
import threading

# The status the interpreter exits with when its output could not be flushed at exit.
UNWRITTEN_OUTPUT = 120


def _exit_status(code: object) -> int:
    """The status ``sys.exit(code)`` ends with, printing what it prints (anything but None or an int)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _others_running() -> bool:
    main = threading.main_thread()
    return any(thread is not main and not thread.daemon and thread.is_alive() for thread in threading.enumerate())


def exit_now(code: object = None) -> None:
    """End the process as ``sys.exit(code)`` would, without the interpreter's teardown; returns (having done
    nothing) when another thread still runs, for the caller to exit as usual."""
    if _others_running():
        return
    status = _exit_status(code)
    atexit._run_exitfuncs()
    try:
        sys.stdout.flush()
    except ValueError:  # closed by the command itself: nothing is left in it
        pass
    except OSError as error:
        # As the interpreter's own exit does: the output that was not written is said, and the status says so too.
        with contextlib.suppress(OSError, ValueError):
            print(f"the output was not all written: {error}", file=sys.stderr)
        status = status or UNWRITTEN_OUTPUT
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.flush()
    os._exit(status)
