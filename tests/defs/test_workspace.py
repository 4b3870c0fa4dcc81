"""The code location loads through workspace.yaml with Dagster's own CLI."""

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_dagster_definitions_validate(tmp_path):
    dagster = Path(sys.executable).parent / "dagster"
    done = subprocess.run([str(dagster), "definitions", "validate", "-w", "workspace.yaml"], cwd=ROOT,
                          env={**os.environ, "DAGSTER_HOME": str(tmp_path)}, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "All code locations passed validation" in done.stderr + done.stdout
