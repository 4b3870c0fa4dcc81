"""Locust column names as stats.jsonl keys: ``50%`` → ``p50``, ``Requests/s`` → ``requests_per_s``."""

from __future__ import annotations

import re

_NON_ALNUM = re.compile(r"[^a-z0-9]+")


def measurement_key(column: str) -> str:
    """The reference's key mapping, applied to every CSV column name."""
    if column.endswith("%"):
        return "p" + column[:-1].replace(".", "_")
    return _NON_ALNUM.sub("_", column.lower().replace("/", "_per_")).strip("_")
