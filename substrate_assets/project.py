"""Where the project's files live: scripts, suites, SQL models, state."""

from __future__ import annotations

import hashlib
import os
import subprocess
from enum import StrEnum
from pathlib import Path

ROOT_ENV = "SUBSTRATE_BENCH_ROOT"


def project_root() -> Path:
    """``$SUBSTRATE_BENCH_ROOT``, else the checkout this package runs from, else the working directory."""
    configured = os.environ.get(ROOT_ENV)
    if configured:
        return Path(configured).resolve()
    checkout = Path(__file__).resolve().parent.parent
    if (checkout / "scripts").is_dir():
        return checkout
    return Path.cwd().resolve()


STORE_ENV = "SUBSTRATE_BENCH_STORE"
WAREHOUSE_ENV = "SUBSTRATE_BENCH_WAREHOUSE"
DEPLOYMENT_ENV = "SUBSTRATE_BENCH_DEPLOYMENT"
SITE_ENV = "SUBSTRATE_BENCH_SITE"
# `substrate-bench ui`'s port; it serves the benchmark site on the next one.
UI_PORT = 3000
# Where people open the site: set by `substrate-bench ui`, which serves it; the site asset links to it.
SITE_URL_ENV = "SUBSTRATE_BENCH_SITE_URL"
DAGSTER_HOME_ENV = "DAGSTER_HOME"
INSTANCE_CONFIG = """\
# The project's Dagster instance (created by substrate-bench). Every asset that writes the DuckDB
# warehouse runs in the pool "duckdb" (DuckDB allows one writer per file) and every trial in the
# pool "trials" (two trials at once would measure each other); each pool admits one at a time.
concurrency:
  pools:
    default_limit: 1
# With the UI's daemon running, a run that has ended gives back any pool slot it still holds. A run whose process
# was killed is failed, and its slots freed, by the next run or the sensor dead_runs (defs/runs/).
run_monitoring:
  enabled: true
  free_slots_after_run_end_seconds: 60
# A run whose worker died (killed, failed by the sweep of dead runs) is launched again by the daemon when it asks for
# it (warehouse_refresh's loads do: a load lost that way would leave its trial missing and hold every mart back); a
# run that failed in a step of its own is not.
run_retries:
  enabled: true
  max_retries: 0
  retry_on_asset_or_op_failure: false
telemetry:
  enabled: false
# No welcome dialog over the UI asking for an e-mail address: this machine may have no way out, and a dialog over the
# page hides what a person came to see.
nux:
  enabled: false
# The UI's runs start within a second of being queued (Dagster's default looks every 5 s): a trial launched from the
# UI is followed by three runs (its raw tables, the models, its comparison), each queued by warehouse_refresh.
run_coordinator:
  module: dagster.core.run_coordinator
  class: QueuedRunCoordinator
  config:
    dequeue_interval_seconds: 1
"""


def code_version() -> str | None:
    """The project checkout's git commit; with uncommitted changes to tracked files, ``<commit>-dirty-<12 hex of
    the diff's sha256>``, so two different sets of changes are two versions. None outside a checkout (an image
    without git): a version that cannot be known is not guessed."""
    root = project_root()
    try:
        commit = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True,
                                timeout=10, check=True).stdout.strip()
        changes = subprocess.run(["git", "-C", str(root), "diff", "HEAD", "--no-ext-diff", "--binary"],
                                 capture_output=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    if not commit:
        return None
    return f"{commit}-dirty-{hashlib.sha256(changes).hexdigest()[:12]}" if changes else commit


def scripts_directory() -> Path:
    return project_root() / "scripts"


def store_directory() -> Path:
    """The run store: ``$SUBSTRATE_BENCH_STORE``, else ``<project>/store``."""
    configured = os.environ.get(STORE_ENV)
    return Path(configured).resolve() if configured else project_root() / "store"


def warehouse_path() -> Path:
    """The DuckDB warehouse: ``$SUBSTRATE_BENCH_WAREHOUSE``, else ``<project>/warehouse.duckdb``."""
    configured = os.environ.get(WAREHOUSE_ENV)
    return Path(configured).resolve() if configured else project_root() / "warehouse.duckdb"


def site_url() -> str:
    """Where people open the benchmark site: ``$SUBSTRATE_BENCH_SITE_URL`` (``substrate-bench ui`` sets it for what
    it runs), else where ``make ui`` serves it."""
    return os.environ.get(SITE_URL_ENV) or f"http://127.0.0.1:{UI_PORT + 1}/"


def site_directory() -> Path:
    """The benchmark site: ``$SUBSTRATE_BENCH_SITE``, else ``<project>/site``."""
    configured = os.environ.get(SITE_ENV)
    return Path(configured).resolve() if configured else project_root() / "site"


# A warehouse setting that starts so names a DuckLake (warehouse/location.py reads it); anything else is a file.
LAKE_PREFIX = "ducklake:"


def shares_warehouse() -> bool:
    """Whether ``$SUBSTRATE_BENCH_WAREHOUSE`` names a shared DuckLake rather than a file."""
    return os.environ.get(WAREHOUSE_ENV, "").startswith(LAKE_PREFIX)


def dagster_home() -> Path:
    """``$DAGSTER_HOME``, else ``<project>/.dagster_home``, created with the project's instance config."""
    configured = os.environ.get(DAGSTER_HOME_ENV)
    home = Path(configured).resolve() if configured else project_root() / ".dagster_home"
    home.mkdir(parents=True, exist_ok=True)
    config = home / "dagster.yaml"
    if not config.exists():
        config.write_text(INSTANCE_CONFIG)
    return home


class Deployment(StrEnum):
    """Where the code location runs: on a ``workstation`` (the whole graph; the warehouse lives here or is shared) or
    in a ``cluster`` (the whole graph when the warehouse is a shared DuckLake; scripts and trials only when it is a
    file, which no pod could share)."""

    WORKSTATION = "workstation"
    CLUSTER = "cluster"

    @classmethod
    def current(cls) -> Deployment:
        """``$SUBSTRATE_BENCH_DEPLOYMENT``, default ``workstation``: the one place the switch is read."""
        configured = os.environ.get(DEPLOYMENT_ENV, cls.WORKSTATION.value)
        try:
            return cls(configured)
        except ValueError:
            raise ValueError(f"{DEPLOYMENT_ENV}={configured!r}: expected workstation or cluster") from None

    @property
    def holds_warehouse(self) -> bool:
        return self is Deployment.WORKSTATION

    def runs_backend(self, backend: str) -> bool:
        """A cluster deployment has no embedded runtime: it runs kubernetes trials only."""
        return self.holds_warehouse or backend == "kubernetes"
