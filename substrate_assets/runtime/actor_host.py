"""An actor host process: started warm, told to restore and serve one actor, then to checkpoint and exit.

The runtime talks to a host over its stdin/stdout, one JSON object per line:

- host → runtime, once imports are done: ``{"ready": true, "pid": …}``
- ``{"op": "start", "data_dir": …, "snapshot": path|null, "memory_limit": n|null, "service": "glutton"|"sweperf",
  "trajectory": path|null}`` → ``{"ok": true, "port": …, "pages": …, "files": …, "seconds": …}``: restores the
  snapshot (if any) and serves the template's service on 127.0.0.1: glutton's routes, or sweperf's trajectory
  service replaying ``trajectory`` (with the finished jobs the snapshot kept)
- ``{"op": "checkpoint", "target": …, "fsync": bool}`` → ``{"ok": true, "pages": …, "files": …,
  "seconds": …}``: stops serving (and interrupts a sweperf job still running), writes the snapshot, removes the
  data dir, exits 0
- ``{"op": "exit"}``: exits at once

A write that would take the actor past its memory limit makes the host print
``{"event": "over_limit", "used": …, "limit": …}`` and SIGKILL itself, as the
kernel's OOM killer would. The host dies with the runtime (PR_SET_PDEATHSIG).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import threading
import time
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from substrate_assets.processes.parent_death import signal_on_parent_death
from substrate_assets.runtime.glutton import Glutton
from substrate_assets.runtime.glutton_http import GluttonServer
from substrate_assets.runtime.snapshot import SnapshotSizes, restore_snapshot, snapshot_jobs, write_snapshot
from substrate_assets.runtime.sweperf_service import SweperfServer, SweperfService
from substrate_assets.runtime.trajectory import load_trajectory

_emit_lock = threading.Lock()


def emit(message: dict[str, Any]) -> None:
    line = json.dumps(message) + "\n"
    with _emit_lock:
        sys.stdout.write(line)
        sys.stdout.flush()


def _over_limit(used: int, limit: int) -> None:
    emit({"event": "over_limit", "used": used, "limit": limit})
    os.kill(os.getpid(), signal.SIGKILL)


class Host:
    def __init__(self) -> None:
        self.glutton: Glutton | None = None
        self.server: ThreadingHTTPServer | None = None
        self.sweperf: SweperfService | None = None
        self.data_dir: Path | None = None

    def start(self, command: dict[str, Any]) -> dict[str, Any]:
        started = time.perf_counter()
        self.data_dir = Path(command["data_dir"])
        shutil.rmtree(self.data_dir, ignore_errors=True)
        self.data_dir.mkdir(parents=True)
        self.glutton = Glutton(self.data_dir, command.get("memory_limit"), _over_limit)
        snapshot = command.get("snapshot")
        sizes = restore_snapshot(Path(snapshot), self.glutton) if snapshot else SnapshotSizes(0, 0)
        service = command.get("service") or "glutton"
        if service == "sweperf":
            trajectory = load_trajectory(Path(command["trajectory"]))
            jobs = snapshot_jobs(Path(snapshot)) if snapshot else []
            self.sweperf = SweperfService(self.glutton, trajectory, jobs)
            self.server = SweperfServer(("127.0.0.1", 0), self.sweperf)
        elif service == "glutton":
            self.server = GluttonServer(("127.0.0.1", 0), self.glutton)
        else:
            raise ValueError(f"unknown actor service {service!r}")
        threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return {"ok": True, "port": self.server.server_address[1], "pages": sizes.pages, "files": sizes.files,
                "seconds": time.perf_counter() - started}

    def checkpoint(self, command: dict[str, Any]) -> dict[str, Any]:
        if self.glutton is None or self.server is None or self.data_dir is None:
            return {"ok": False, "error": "nothing to checkpoint: the host serves no actor"}
        started = time.perf_counter()
        self.server.shutdown()
        self.server.server_close()
        jobs: list[dict[str, Any]] = []
        if self.sweperf is not None:
            self.sweperf.interrupt()  # no job writes RAM or files while they are copied
            jobs = self.sweperf.job_records()
        sizes = write_snapshot(self.glutton, Path(command["target"]), fsync=bool(command.get("fsync", True)),
                               jobs=jobs)
        shutil.rmtree(self.data_dir, ignore_errors=True)
        return {"ok": True, "pages": sizes.pages, "files": sizes.files, "seconds": time.perf_counter() - started}


def main() -> None:
    # Elsewhere than Linux nothing is set: the stdin EOF check below still ends the host.
    if signal_on_parent_death(signal.SIGKILL, int(os.environ.get("SUBSTRATE_RUNTIME_PID", os.getppid()))):
        os._exit(1)  # the parent died before the setting took effect
    host = Host()
    emit({"ready": True, "pid": os.getpid()})
    for line in sys.stdin:
        command = json.loads(line)
        operation = command.get("op")
        try:
            if operation == "start":
                emit(host.start(command))
            elif operation == "checkpoint":
                reply = host.checkpoint(command)
                emit(reply)
                if reply["ok"]:
                    os._exit(0)
            elif operation == "exit":
                os._exit(0)
            else:
                emit({"ok": False, "error": f"unknown op {operation!r}"})
        except Exception as error:  # report every failure to the runtime, which marks the actor crashed
            emit({"ok": False, "error": f"{type(error).__name__}: {error}"})
    os._exit(0)  # stdin closed: the runtime is gone


if __name__ == "__main__":
    main()
