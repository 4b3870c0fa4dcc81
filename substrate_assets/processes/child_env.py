"""The environment a trial's child processes start with: this process's, less what is secret.

Actor hosts and Locust run workload code, and a workload may be someone else's: they need the interpreter's and the
project's settings, never the object store's keys, a database password or the shared warehouse's connection string
(which may carry one)."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

# Names that hold a secret by convention (cloud SDKs, libpq, tokens and keys of any tool), and the warehouse's
# location, whose DuckLake form names the catalog database and its credentials.
_SECRET = re.compile(r"SECRET|TOKEN|PASSWORD|PASSWD|CREDENTIAL|PRIVATE|API_?KEY|ACCESS_?KEY|SESSION_?KEY"
                     r"|^AWS_|^AZURE_|^GOOGLE_APPLICATION|^GCS_|^PG(PASSFILE|SERVICEFILE|USER|HOST)$|^DATABASE_URL$"
                     r"|^SUBSTRATE_BENCH_WAREHOUSE", re.IGNORECASE)


def is_secret(name: str) -> bool:
    return _SECRET.search(name) is not None


def child_environment(extra: Mapping[str, str] | None = None,
                      environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) without its secrets, with ``extra`` set."""
    source = os.environ if environ is None else environ
    return {**{name: value for name, value in source.items() if not is_secret(name)}, **(extra or {})}
