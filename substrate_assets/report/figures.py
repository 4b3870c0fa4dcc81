"""How a figure is shown to a person, by what it is: the one rounding rule of reports, the Dagster UI's metadata and
its previews."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

MISSING = "—"
EPOCH_SUFFIXES = ("_at", "_ts")


def _digits_for(column: str, unit: str | None) -> str:
    """How a figure rounds: by its column's name first (a p-value in a row of milliseconds is still a p-value), then
    by its unit."""
    name, unit = column.lower(), (unit or "").lower()
    if "p_value" in name:
        return "p"
    if name.endswith("_pct"):
        return "pct"
    if name.endswith("_ms"):
        return "ms"
    if "ratio" in name or name.endswith(("_share", "cpu_pressure")):
        return "ratio"
    if "per_" in name:
        return "density"
    if unit == "ms":
        return "ms"
    if unit in ("%", "pct", "percent"):
        return "pct"
    if unit == "ratio":
        return "ratio"
    if "/" in unit or unit.startswith("actors per"):
        return "density"
    return "plain"


def figure(value: Any, column: str = "", unit: str | None = None) -> str:
    """A figure as a person reads it, by what it is (its column's name, else its unit): milliseconds to 0.1, failure
    ratios to 4 dp and densities (actors per node, vCPU, GiB) to 2 dp, p-values to 2 significant digits, percent
    changes signed to 0.1; whole numbers whole; times in UTC to the second, and in epoch seconds (a column named
    ``*_at`` or ``*_ts``) without separators; null as a dash."""
    if value is None:
        return MISSING
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, datetime):
        moment = value.astimezone(UTC) if value.tzinfo else value
        return moment.strftime("%Y-%m-%d %H:%M:%S") + (" UTC" if value.tzinfo else "")
    if isinstance(value, Decimal):
        value = float(value)
    if column.lower().endswith(EPOCH_SUFFIXES) and isinstance(value, int | float) and float(value).is_integer():
        return str(int(value))  # a time in epoch seconds: separators would read as a count
    if isinstance(value, int):
        return f"{value:,}" if abs(value) >= 10_000 else str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "∞" if value > 0 else "−∞"
        kind = _digits_for(column, unit)
        if kind == "ms":
            return f"{value:,.1f}"
        if kind == "p":
            return f"{value:.2g}"
        if kind == "pct":
            return f"{value:+.1f}%"
        if kind == "ratio":
            return f"{value:.4f}"
        if kind == "density":
            return f"{value:,.2f}"
        if value.is_integer() and abs(value) < 1e15:
            return f"{value:,.0f}"
        return f"{value:,.4g}" if abs(value) < 1 else f"{value:,.2f}"
    return str(value)


ROUNDING_DIGITS = {"ms": 1, "ratio": 4, "density": 2, "pct": 1}


def rounded(value: float | None, column: str = "", unit: str | None = None) -> float | None:
    """A float rounded as :func:`figure` shows it, for places that take a number (Dagster's float metadata, which
    it charts across materializations): milliseconds to 0.1, ratios to 4 dp, densities to 2 dp, percent changes to
    0.1, p-values to 2 significant digits, anything else below 1 to 4 significant digits and above to 2 dp. None
    stays None: not measured."""
    if value is None or math.isnan(value) or math.isinf(value):
        return value
    kind = _digits_for(column, unit)
    if kind in ROUNDING_DIGITS:
        return round(value, ROUNDING_DIGITS[kind])
    if kind == "p" or abs(value) < 1:
        return float(f"{value:.{2 if kind == 'p' else 4}g}")
    return round(value, 2)


def charted_key(suite: str | None, name: str) -> str:
    """A figure's metadata key where Dagster charts it across trials: one per suite (``quick-smoke/wake_p50_ms``),
    so a chart never draws one suite's ~800 ms wakes on a line with another's ~5 ms; a trial of no known suite keeps
    the plain name."""
    return f"{suite}/{name}" if suite else name
