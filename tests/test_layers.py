"""The layering of docs/architecture.md is enforced by import-linter: the contracts hold for the package as it is,
and each breaks when a copy of the package gets the import it forbids."""

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LINT_IMPORTS = str(Path(sys.executable).parent / "lint-imports")


def lint(root: Path) -> subprocess.CompletedProcess:
    return subprocess.run([LINT_IMPORTS, "--no-cache"], cwd=root, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(root)})


def test_every_contract_holds():
    done = lint(ROOT)
    assert done.returncode == 0, done.stdout[-3000:]
    assert "7 kept, 0 broken" in done.stdout


@pytest.mark.parametrize(("module", "statement", "contract"), [
    ("results/trial_directory.py", "import dagster", "Only the top layer (cli, app, definitions, defs) imports Dagster"),
    ("analysis/statistics.py", "from dagster_pipes import open_dagster_pipes",
     "Only the top layer (cli, app, definitions, defs) imports Dagster"),
    ("workload/model.py", "import substrate_assets.results.layout", "The layers, from the command line down"),
    ("defs/scripts/assets.py", "import substrate_assets.defs.trials.assets", "defs/: the warehouse follows trials"),
    ("driver/trial.py", "import substrate_assets.warehouse.query", "Running trials and keeping the warehouse"),
    ("app/pipes_trial.py", "import substrate_assets.defs.trials.assets", "The Pipes child of trial_run"),
    ("processes/owner.py", "import substrate_assets.runtime.scratch_dirs", "The layers, from the command line down"),
    ("driver/users/glutton.py", "import gevent", "driver/users/: the virtual users know neither Locust"),
    ("driver/users/base.py", "import substrate_assets.driver.locust_process", "driver/users/: the virtual users"),
    ("driver/trial.py", "import kubernetes", "driver/kubernetes/ alone drives a cluster"),
    ("runtime/server.py", "import substrate_assets.driver.kubernetes.pods", "driver/kubernetes/ alone drives"),
])
def test_a_forbidden_import_breaks_its_contract(tmp_path, module, statement, contract):
    shutil.copytree(ROOT / "substrate_assets", tmp_path / "substrate_assets",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    with (tmp_path / "substrate_assets" / module).open("a") as source:
        source.write(f"\n{statement}  # noqa\n")
    done = lint(tmp_path)
    assert done.returncode == 1
    summary = " ".join(done.stdout.split("Analyzed", 1)[1].split("Contracts:", 1)[0].split())
    verdicts = re.findall(r"(.+?) (KEPT|BROKEN)", summary)
    broken = [name for name, verdict in verdicts if verdict == "BROKEN"]
    assert len(verdicts) == 7 and any(contract in name for name in broken), done.stdout[-3000:]


# A module longer than this holds more than one purpose: split it by role (docs/architecture.md).
MODULE_LINES_AT_MOST = 450


def test_no_module_of_the_package_is_over_its_length():
    long = {str(path.relative_to(ROOT)): lines for path in sorted((ROOT / "substrate_assets").rglob("*.py"))
            if (lines := len(path.read_text().splitlines())) > MODULE_LINES_AT_MOST}
    assert long == {}
