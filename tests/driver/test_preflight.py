"""Checks before load against a real embedded runtime: a trial that could measure nothing is refused in one line."""

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from substrate_assets.driver.preflight import TrialRefused, check_before_load
from substrate_assets.results.layout import RunStore
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
from substrate_assets.workload import ScriptLibrary
from substrate_assets.workload.quantity import parse_byte_count

ROOT = Path(__file__).resolve().parents[2]
CLI = str(Path(sys.executable).parent / "substrate-bench")


@pytest.fixture(scope="module")
def script():
    return ScriptLibrary(ROOT / "scripts").load("quick-session")  # min_actor_memory 256Mi


def closed_port() -> int:
    """A port nothing listens on: bound, then released."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_runtime_that_fits_the_script_passes(runtime, script):
    check_before_load(script, runtime.control_address, runtime.router_url)


def test_a_template_below_the_memory_floor_is_refused(script):
    small = RuntimeConfig(workers=1, actors_per_worker=1, warm_hosts=0, actor_memory=parse_byte_count("128Mi"))
    refusal = r"memory limit 128Mi is below script quick-session's min_actor_memory 256Mi"
    with EmbeddedRuntime(small) as runtime, pytest.raises(TrialRefused, match=refusal):
        check_before_load(script, runtime.control_address, runtime.router_url)


def test_endpoints_that_do_not_answer_are_named(runtime, script):
    port = closed_port()
    with pytest.raises(TrialRefused, match=rf"the control API at 127.0.0.1:{port} does not answer"):
        check_before_load(script, f"127.0.0.1:{port}", runtime.router_url, timeout_s=2.0)
    with pytest.raises(TrialRefused, match=rf"the router at http://127.0.0.1:{port} does not answer"):
        check_before_load(script, runtime.control_address, f"http://127.0.0.1:{port}", timeout_s=2.0)


def test_the_command_refuses_before_any_load_and_keeps_nothing(tmp_path):
    done = subprocess.run([CLI, "trial", "quick-smoke", "--store", str(tmp_path), "--duration", "10m",
                           "--actor-memory", "128Mi"], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("trial refused, nothing was run: ") and "--actor-memory 256Mi" in line
    assert RunStore(tmp_path).trial_dirs() == []
    assert not any((tmp_path / ".staging").iterdir())
