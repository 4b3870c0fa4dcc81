"""Where the project's files live: scripts, suites, SQL models, state."""

from __future__ import annotations

import os
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


def scripts_directory() -> Path:
    return project_root() / "scripts"


def store_directory() -> Path:
    """The run store: ``$SUBSTRATE_BENCH_STORE``, else ``<project>/store``."""
    configured = os.environ.get(STORE_ENV)
    return Path(configured).resolve() if configured else project_root() / "store"
