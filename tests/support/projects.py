"""A project of its own, for a test or a benchmark: the checkout's workload scripts and SQL models, a suites.yaml of
its own, and the environment in which a substrate-bench command keeps every path (store, warehouse, Dagster home)
inside it."""

import os
import shutil
from pathlib import Path

from substrate_assets.project import DAGSTER_HOME_ENV, ROOT_ENV, STORE_ENV, WAREHOUSE_ENV

ROOT = Path(__file__).resolve().parents[2]
# Each would send a command's state elsewhere than the project: without them, it all lives in the project root.
PROJECT_PATHS = (DAGSTER_HOME_ENV, STORE_ENV, WAREHOUSE_ENV)
# A suite whose trial lasts a few seconds, for tests that run the main job end to end. Its trials run beside the
# rest of the test suite (two test files at a time), whose CPU they would count as other work: judging that
# disturbance here would make every trial of the test run run again, so this suite does not (test_disturbance does).
SMOKE_SUITES = """\
suites:
  - name: smoke
    script: quick-session
    users: 2
    spawn_rate: 2
    duration: 4s
    think_scale: 0.2
    workers: 4
    repeat: 1
    disturbance: {foreign_cpu_share: null, steal_share: null}
"""


def make_project(root: Path, suites: str) -> Path:
    """``root`` with the checkout's scripts and models and ``suites`` as its suites.yaml."""
    root.mkdir(parents=True, exist_ok=True)
    shutil.copytree(ROOT / "scripts", root / "scripts")
    shutil.copytree(ROOT / "dbt_like_sql", root / "dbt_like_sql")
    (root / "suites.yaml").write_text(suites)
    return root


def project_env(root: Path) -> dict[str, str]:
    """This process's environment, for a command that works in the project at ``root``."""
    env = {key: value for key, value in os.environ.items() if key not in PROJECT_PATHS}
    env[ROOT_ENV] = str(root)
    return env


def two_models(root: Path, schema: str) -> Path:
    """``root`` as a project of two SQL models, first (one row) and second, which reads it, with ``schema`` as their
    schema.yml: the smallest graph in which a model stops what reads it."""
    models = root / "dbt_like_sql"
    models.mkdir(parents=True)
    (models / "schema.yml").write_text(schema)
    (models / "first.sql").write_text("SELECT 'a' AS trial_id, 1 AS n")
    (models / "second.sql").write_text("-- Reads first.\nSELECT trial_id, n * 2 AS n FROM first")
    return root
