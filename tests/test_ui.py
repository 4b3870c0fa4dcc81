"""`substrate-bench ui` stops with everything it started: a real `dagster dev` on 127.0.0.1, started the way a script
starts a background job (SIGINT ignored) or from a terminal, then asked to stop."""

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import psutil
import pytest

CLI = str(Path(sys.executable).parent / "substrate-bench")
STARTUP_S = 180.0
STOP_S = 60.0


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what `command &` in a non-interactive shell leaves a job with


# SIGINT to a job a script started in the background (where it is ignored) is the hard case, with a real dagster dev;
# SIGTERM, and a child that ignores the polite request, are driven below with a process tree of the test's own.
@pytest.mark.parametrize(("signum", "background"), [(signal.SIGINT, True)])
def test_the_ui_stops_with_all_its_processes(tmp_path, signum, background):
    port = free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path / "dagster_home"),
           "SUBSTRATE_BENCH_WAREHOUSE": str(tmp_path / "w.duckdb"), "SUBSTRATE_BENCH_STORE": str(tmp_path / "store")}
    ui = subprocess.Popen([CLI, "ui", "--port", str(port)], env=env, stdout=subprocess.DEVNULL,
                          stderr=(tmp_path / "ui.err").open("wb"), start_new_session=True,
                          preexec_fn=ignore_sigint if background else None)
    tree: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + STARTUP_S
        while not answers(port):
            assert ui.poll() is None, (tmp_path / "ui.err").read_text()[-3000:]
            assert time.monotonic() < deadline, "the UI did not answer"
            time.sleep(0.5)
        tree = psutil.Process(ui.pid).children(recursive=True)
        assert len(tree) >= 3  # dagster dev, its webserver, its daemon (and code servers)
        ui.send_signal(signum)
        assert ui.wait(timeout=STOP_S) == 128 + signum
        _gone, alive = psutil.wait_procs(tree, timeout=10)
        assert not alive, [process.cmdline() for process in alive]
        assert not answers(port)
    finally:
        for process in [*tree, psutil.Process(ui.pid)] if ui.poll() is None else tree:
            with contextlib.suppress(psutil.NoSuchProcess):
                process.kill()


# A stand-in for dagster dev: two children and a grandchild, all ignoring SIGTERM unless told otherwise, so the
# grace period and the kill are exercised; it writes its tree's pids, then waits.
TREE = """
import os, signal, subprocess, sys, time
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
children = [subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                              "signal.SIG_IGN); time.sleep(600)"]) for _ in range(2)]
open(sys.argv[2], "w").write(" ".join(str(child.pid) for child in children))
time.sleep(600)
"""


@pytest.mark.parametrize("parent", ["polite", "stubborn"])
def test_a_stop_request_ends_the_whole_tree(tmp_path, parent):
    script = tmp_path / "pids.txt"
    helper = subprocess.Popen([sys.executable, "-c", f"""
import os, signal, sys, threading
from substrate_assets.app import dagster_ui
dagster_ui.SHUTDOWN_GRACE_S = 1.0
code = dagster_ui.run_ui([sys.executable, "-c", {TREE!r}, {parent!r}, {str(script)!r}], {str(tmp_path)!r},
                         dict(os.environ), print)
sys.exit(code)
"""], stdout=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while not (script.exists() and script.read_text()):
        assert helper.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    children = [psutil.Process(int(pid)) for pid in script.read_text().split()]
    tree = [*psutil.Process(helper.pid).children(recursive=True)]
    helper.send_signal(signal.SIGTERM)
    assert helper.wait(timeout=30) == 128 + signal.SIGTERM
    assert "stopping the Dagster UI (SIGTERM)" in helper.stdout.read()
    _gone, alive = psutil.wait_procs([*tree, *children], timeout=10)
    assert not alive

