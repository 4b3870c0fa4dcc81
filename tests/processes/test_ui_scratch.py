"""A ``dagster dev``'s temporary directory, owned by its pid: removed by the next ``substrate-bench ui`` once that
process is gone, unless something inside is owned by a process still alive. Real processes, killed for real."""

from __future__ import annotations

import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from substrate_assets.processes.leftovers import mark
from substrate_assets.processes.owner import Owner
from substrate_assets.processes.ui_scratch import UI_PREFIX, discard_unless_in_use, new_scratch, own, sweep_ui_leftovers

SLEEPER = [sys.executable, "-c", "import time; time.sleep(600)"]


@pytest.fixture
def scratch_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


@pytest.fixture
def sleepers() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    try:
        yield started
    finally:
        for process in started:
            process.kill()
            process.wait()


def test_a_dead_uis_directory_goes_once_nothing_inside_is_alive(scratch_root, sleepers):
    ui, run_worker = subprocess.Popen(SLEEPER), subprocess.Popen(SLEEPER)
    sleepers += [ui, run_worker]
    directory = new_scratch()
    own(directory, ui.pid)
    (directory / "tmpsocket").write_text("")
    pipes = directory / "substrate-pipes-x"
    pipes.mkdir()
    mark(pipes, Owner.of_process(run_worker.pid))
    assert directory.parent == scratch_root and directory.name.startswith(UI_PREFIX)

    assert sweep_ui_leftovers() == []  # its dagster dev lives
    ui.kill()
    ui.wait()
    assert sweep_ui_leftovers() == []  # a run inside still lives
    discard_unless_in_use(directory)
    assert directory.exists()

    run_worker.kill()
    run_worker.wait()
    [line] = sweep_ui_leftovers()
    assert line.startswith(f"removed leftovers of a dead Dagster UI: {directory} (owner pid {ui.pid} gone")
    assert not directory.exists()
