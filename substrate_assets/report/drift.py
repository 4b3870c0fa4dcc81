"""A long trial's wake latency window by window (``wake_latency_windows``): whether a soak's wakes drift.

A trial shorter than two windows has nothing to compare and gets no section; a warehouse without the model says so.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import altair as alt
import duckdb

from substrate_assets.report.html import Html, chart, note, section, table
from substrate_assets.report.plots import HEIGHT, SERIES_COLOURS, WIDTH, inline_values, styled, svg
from substrate_assets.warehouse.introspection import has_table

WINDOW_COLUMNS = ("window_index", "window_start_s", "window_end_s", "n_wakes", "n_failed_wakes", "p50_ms", "p99_ms",
                  "max_ms")
DRIFT_PERCENTILES = ("p50_ms", "p99_ms")


def drift_chart(windows: Sequence[dict[str, Any]],
                title: str = "wake latency by five-minute window") -> alt.TopLevelMixin:
    """p50 and p99 of each window's wakes against the window's start (minutes into the trial), one line each; the
    window, its span and its wakes in the tooltip."""
    rows = [{"minute": window["window_start_s"] / 60, "until_minute": window["window_end_s"] / 60,
             "window": window["window_index"], "wakes": window["n_wakes"], "percentile": name.removesuffix("_ms"),
             "latency_ms": window[name]}
            for window in windows for name in DRIFT_PERCENTILES if window[name] is not None]
    percentile = alt.Color("percentile:N", scale=alt.Scale(domain=["p50", "p99"], range=list(SERIES_COLOURS[:2])),
                           legend=alt.Legend(title=None, orient="top-left"))
    x = alt.X("minute:Q", title="minutes into the trial (window start)", scale=alt.Scale(zero=True))
    y = alt.Y("latency_ms:Q", title="wake latency (ms)", scale=alt.Scale(zero=True))
    tips = [alt.Tooltip("window:Q", format="d"), alt.Tooltip("minute:Q", title="from minute", format=",.1f"),
            alt.Tooltip("until_minute:Q", title="to minute", format=",.1f"), alt.Tooltip("wakes:Q", format=",d"),
            alt.Tooltip("percentile:N"), alt.Tooltip("latency_ms:Q", format=",.1f")]
    lines = alt.Chart(inline_values(rows)).mark_line(point=True, strokeWidth=2).encode(x=x, y=y, color=percentile,
                                                                                tooltip=tips)
    return styled(lines.properties(width=WIDTH, height=HEIGHT, title=title))


def drift_section(connection: duckdb.DuckDBPyConnection, trial_id: str) -> Html | None:
    """The trial's wake latency per window, drawn and tabled; None for a trial of fewer than two windows."""
    if not has_table(connection, "wake_latency_windows"):
        return section("Wake latency over the trial", [
            note("The warehouse has no wake_latency_windows table yet: substrate-bench rebuild builds every model.")])
    cursor = connection.execute("SELECT * FROM wake_latency_windows WHERE trial_id = ? ORDER BY window_index",
                                [trial_id])
    names = [description[0] for description in cursor.description]
    windows = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    if len(windows) < 2:
        return None
    return section("Wake latency over the trial", [
        chart(svg(drift_chart(windows)), "Each five-minute window's wakes, from the trial's first request; the last "
                                         "window ends with the trial and may be shorter. Percentiles are floor-index "
                                         "of the exact samples."),
        table([{column: window[column] for column in WINDOW_COLUMNS} for window in windows])])
