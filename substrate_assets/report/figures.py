"""How a figure is shown to a person, by what it is: the one rule for numbers, changes and units of the command
line's tables, the HTML report, the comparisons' text (:mod:`~substrate_assets.report.verdict_text`) and the Dagster
UI's metadata and previews. Machine formats (JSON, CSV, Dagster's float metadata through :func:`rounded`) keep the
numbers; a figure not measured (null) reads as a dash."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any, Literal, overload

MISSING = "—"
# Columns of times in epoch seconds (started_at, run_ts, run_start, a history row's timestamp): no separators.
EPOCH_SUFFIXES = ("_at", "_ts", "_start", "_end", "timestamp")
# The smallest p-value a double holds is about 1e-308: below this one it reads as a bound, not a number.
SMALLEST_P = 1e-300

Kind = Literal["p", "pct", "ms", "ratio", "share", "density", "plain"]
# Decimal places of each kind that rounds to a fixed number of them.
DECIMALS: dict[str, int] = {"ms": 1, "pct": 1, "ratio": 4, "share": 3, "density": 2}


def kind_of(column: str, unit: str | None) -> Kind:
    """How a figure rounds: by its column's name first (a p-value in a row of milliseconds is still a p-value), then
    by its unit."""
    name, unit = column.lower(), (unit or "").lower()
    if "p_value" in name:
        return "p"
    if name.endswith("_pct"):
        return "pct"
    if name.endswith("_ms"):
        return "ms"
    if name.endswith("_share"):
        return "share"
    if "ratio" in name or name.endswith("cpu_pressure"):
        return "ratio"
    if "per_" in name:
        return "density"
    if unit == "ms":
        return "ms"
    if unit in ("%", "pct", "percent"):
        return "pct"
    if unit == "ratio":
        return "ratio"
    if unit == "share":
        return "share"
    if unit == "users" or "/" in unit or unit.startswith("actors"):
        return "density"
    return "plain"


def figure(value: Any, column: str = "", unit: str | None = None, *, signed: bool = False) -> str:
    """A figure as a person reads it, by what it is (its column's name, else its unit): milliseconds to 0.1,
    failure ratios to 4 dp, shares to 3 dp, densities (actors per node, vCPU, GiB) and users to 2 dp, p-values to 2
    significant digits, percent changes signed to 0.1 (``+1.5 %``); thousands separated; whole numbers whole; times
    in UTC to the second, and in epoch seconds (a column named as :data:`EPOCH_SUFFIXES` say) without separators;
    null as a dash. ``signed``: a + before a positive figure (a difference)."""
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
    sign = "+" if signed else ""
    if isinstance(value, int):
        return f"{value:{sign},}" if abs(value) >= 10_000 else f"{value:{sign}}"
    if not isinstance(value, float):
        return str(value)
    kind = kind_of(column, unit)
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        infinite = "+∞" if value > 0 else "-∞"
        return f"{infinite} %" if kind == "pct" else infinite.lstrip("+")
    if kind == "p":
        # A p-value of 0 is one that underflowed a double, not a certainty.
        return f"< {SMALLEST_P:g}" if value < SMALLEST_P else f"{value:.2g}"
    if kind in DECIMALS:
        # Rounded first, so that a figure that rounds to zero reads 0, never -0.
        value = round(value, DECIMALS[kind]) + 0.0
        if kind == "pct":
            return f"{value:+.1f} %"
        return f"{value:{sign},.{DECIMALS[kind]}f}"
    if value.is_integer() and abs(value) < 1e15:
        return f"{value:{sign},.0f}"
    return f"{value:{sign},.4g}" if abs(value) < 1 else f"{value:{sign},.2f}"


def change(value: float | None) -> str:
    """A change in percent: signed, to 0.1 (``+12.5 %``)."""
    return figure(value, unit="%")


def percent(value: float | None) -> str:
    """A size in percent (a spread, a change a test could detect): unsigned, to 0.1 (``12.5 %``)."""
    if value is None:
        return MISSING
    return "∞ %" if math.isinf(value) else f"{round(value, DECIMALS['pct']) + 0.0:,.{DECIMALS['pct']}f} %"


@overload
def rounded(value: float, column: str = "", unit: str | None = None) -> float: ...
@overload
def rounded(value: None, column: str = "", unit: str | None = None) -> None: ...
@overload
def rounded(value: float | None, column: str = "", unit: str | None = None) -> float | None: ...
def rounded(value: float | None, column: str = "", unit: str | None = None) -> float | None:
    """A float rounded as :func:`figure` shows it, for places that take a number (Dagster's float metadata, which
    it charts across materializations). None stays None: not measured."""
    if value is None or math.isnan(value) or math.isinf(value):
        return value
    kind = kind_of(column, unit)
    if kind in DECIMALS:
        return round(value, DECIMALS[kind])
    if kind == "p" or abs(value) < 1:
        return float(f"{value:.{2 if kind == 'p' else 4}g}")
    return round(value, 2)


def charted_key(suite: str | None, name: str) -> str:
    """A figure's metadata key where Dagster charts it across trials: one per suite (``quick-smoke/wake_p50_ms``),
    so a chart never draws one suite's ~800 ms wakes on a line with another's ~5 ms; a trial of no known suite keeps
    the plain name."""
    return f"{suite}/{name}" if suite else name
