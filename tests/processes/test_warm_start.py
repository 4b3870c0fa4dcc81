"""A child started ahead of its launch: it runs nothing until launched, then with the launch's environment and the
launcher's stdout; discarded, or its launcher gone, it exits having run nothing. Real processes throughout."""

import os
import subprocess
import sys
from pathlib import Path

import psutil

from substrate_assets.processes import warm_start

# The child: waits when started ahead, then says what it was told and where it writes.
CHILD = (
    "import os, sys\n"
    "from substrate_assets.processes.warm_start import WARM_FLAG, await_launch\n"
    "waited = await_launch() if WARM_FLAG in sys.argv[1:] else None\n"
    "print('ran', os.environ.get('TOLD'), os.environ.get('AT_START'), waited is not None, flush=True)\n"
    "open(os.environ['MARK'], 'w').close()\n"
)


def command() -> list[str]:
    return [sys.executable, "-c", CHILD]


def test_a_child_started_ahead_runs_with_its_launch_environment_and_writes_to_the_launchers_stdout(tmp_path, capfd):
    child = warm_start.WarmChild(command(), str(tmp_path), {"AT_START": "spawned"})
    mark = tmp_path / "ran"
    # Nothing runs before the launch; once launched, it has the launch's environment, not the one it started with.
    process = child.launch({**os.environ, "TOLD": "launched", "MARK": str(mark)})
    assert process.wait(timeout=60) == 0 and mark.exists()
    assert "ran launched None True" in capfd.readouterr().out


def test_a_discarded_child_exits_having_run_nothing(tmp_path):
    child = warm_start.WarmChild(command(), str(tmp_path), {"MARK": str(tmp_path / "ran")})
    child.discard()
    assert child.process.returncode == 0 and not (tmp_path / "ran").exists()


def test_only_a_launch_of_the_same_command_from_the_same_directory_takes_the_child(tmp_path):
    warm_start.prepare(command(), str(tmp_path), {"MARK": str(tmp_path / "ran")})
    waiting = warm_start._waiting
    assert waiting is not None
    assert warm_start.take([sys.executable, "-c", "pass"], str(tmp_path)) is None  # another command: discarded
    assert waiting.process.returncode == 0 and warm_start.take(command(), str(tmp_path)) is None
    warm_start.prepare(command(), str(tmp_path), {"MARK": str(tmp_path / "ran")})
    taken = warm_start.take(command(), str(tmp_path))
    assert taken is not None and warm_start.take(command(), str(tmp_path)) is None  # taken once
    taken.discard()
    assert not (tmp_path / "ran").exists()


def test_a_child_whose_launcher_died_exits_having_run_nothing(tmp_path: Path):
    """The launcher is killed outright: the child's stdin closes with it, and the child ends unlaunched."""
    launcher = subprocess.Popen([sys.executable, "-c", (
        "import sys\nfrom substrate_assets.processes import warm_start\n"
        f"warm_start.prepare([sys.executable, '-c', {CHILD!r}], {str(tmp_path)!r}, {{'MARK': {str(tmp_path / 'ran')!r}}})\n"
        "print(warm_start._waiting.process.pid, flush=True)\n"
        "sys.stdin.read()\n")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert launcher.stdout is not None
    pid = int(launcher.stdout.readline())
    launcher.kill()
    launcher.wait()
    # The orphan is not this test's child (its exit code is not ours to read): it ends once its stdin is closed.
    psutil.Process(pid).wait(timeout=60)
    assert not (tmp_path / "ran").exists()
