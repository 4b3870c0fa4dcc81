"""A suite's primary figures through time (:class:`~substrate_assets.warehouse.primary_history.SuiteHistory`) as one
chart: a panel per figure, stacked, each on its own y scale and all on one time axis.

In a panel: x is the trial's start (UTC; a trial without one is not drawn, and the panel says how many); a line
per configuration through its judged trials; every trial a point shaped by what it is (judged: a filled circle;
disturbed: a cross; stopped early: a square), so a disturbed trial is seen where it ran without pulling the
line; a group of repeated trials (``run --repeat``, ``ab``) a dashed grey box from its first to its last trial around
their values; each series' noise band a shaded band in its configuration's colour over its window; each change
point a vertical rule, red regressed and green improved. One suite's rows only, whatever it is given.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import altair as alt

from substrate_assets.report.plots import (
    DIRECTION_COLOURS,
    INDEPENDENT_COLOURS,
    PANEL_HEIGHT,
    SERIES_COLOURS,
    STYLE,
    WIDTH,
    inline_values,
    note_chart,
    styled,
    value_scale,
)
from substrate_assets.warehouse.primary_history import HistoryPoint, SuiteHistory

KINDS = {"judged": "circle", "disturbed": "cross", "stopped early": "square"}
GROUP_COLOUR, GROUP_STROKE = "#888888", "#444444"


def kind(point: HistoryPoint) -> str:
    if point.disturbed:
        return "disturbed"
    return "stopped early" if point.completed is False else "judged"


def _groups(points: Sequence[HistoryPoint]) -> list[dict[str, Any]]:
    grouped: dict[str, list[tuple[datetime, HistoryPoint]]] = {}
    for point in points:
        if point.group_id and point.started_at is not None:
            grouped.setdefault(point.group_id, []).append((point.started_at, point))
    return [{"group": group, "start": min(started for started, _ in members),
             "end": max(started for started, _ in members), "low": min(p.value for _, p in members),
             "high": max(p.value for _, p in members), "trials": len(members)}
            for group, members in grouped.items() if len(members) > 1]


def primary_history_chart(history: SuiteHistory, suite: str) -> alt.TopLevelMixin:
    """The suite's primary figures by time, as described above; only ``suite``'s rows are drawn."""
    points = [point for point in history.points if point.suite == suite]
    if not points:
        return styled(note_chart("no trial of this suite measured a primary figure", suite))
    configurations = list(dict.fromkeys(p.configuration for p in sorted(points, key=lambda p: p.trial_number)))
    colours = [SERIES_COLOURS[index % len(SERIES_COLOURS)] for index in range(len(configurations))]
    figures = list(dict.fromkeys(point.figure for point in points))
    time = alt.Scale(type="utc", padding=14)
    # The day on every label (a history spans days), and labels that would touch left out.
    time_axis = alt.Axis(format="%d %b %H:%M", labelOverlap="greedy", labelAngle=0)
    panels = []
    for number, figure in enumerate(figures):
        rows = [point for point in points if point.figure == figure]
        dated = [point for point in rows if point.started_at is not None]
        x = alt.X("started_at:T", title="trial start (UTC)" if number == len(figures) - 1 else None, scale=time,
                  axis=time_axis)
        y = alt.Y("value:Q", title="ms", scale=value_scale([p.value for p in rows]), axis=alt.Axis(format=",.4~g"))
        colour = alt.Color("configuration:N", scale=alt.Scale(domain=configurations, range=colours),
                           legend=alt.Legend(title="configuration", orient="right") if number == 0 else None)
        values = [{"trial_id": p.trial_id, "configuration": p.configuration, "started_at": p.started_at,
                   "value": p.value, "trial_number": p.trial_number, "sut_version": p.sut_version,
                   "group": p.group_id or "", "kind": kind(p), "suite": p.suite} for p in dated]
        layers: list[alt.Chart] = []
        groups = _groups(dated)
        if groups:
            layers.append(alt.Chart(inline_values(groups)).mark_rect(
                fillOpacity=0.04, color=GROUP_COLOUR, stroke=GROUP_STROKE, strokeWidth=1.5, strokeOpacity=1,
                strokeDash=[5, 3]).encode(
                x=alt.X("start:T", scale=time), x2="end:T", y=alt.Y("low:Q"), y2="high:Q",
                tooltip=[alt.Tooltip("group:N"), alt.Tooltip("trials:Q", format="d")]))
        bands = [band for band in history.bands if band.figure == figure and band.configuration in configurations]
        if bands:
            layers.append(alt.Chart(inline_values([{
                "configuration": band.configuration, "start": band.start, "end": band.end, "low": band.low,
                "high": band.high, "level": band.level, "trials": band.trials,
                "noise": f"±{band.noise * 100:.1f} %"} for band in bands])).mark_rect(opacity=0.15).encode(
                x=alt.X("start:T", scale=time), x2="end:T", y=alt.Y("low:Q"), y2="high:Q",
                color=alt.Color("configuration:N", scale=alt.Scale(domain=configurations, range=colours),
                                legend=None),
                tooltip=[alt.Tooltip("configuration:N"), alt.Tooltip("noise:N", title="noise"),
                         alt.Tooltip("trials:Q", format="d"), alt.Tooltip("level:Q", format=",.4~f")]))
        changes = [change for change in history.changes if change.metric == figure and change.started_at is not None
                   and change.suite == suite]
        if changes:
            layers.append(alt.Chart(inline_values([{
                "started_at": change.started_at, "direction": change.direction, "trial_id": change.trial_id,
                "configuration": change.configuration, "change_pct": change.change_pct} for change in changes]))
                .mark_rule(strokeWidth=2, opacity=0.8).encode(
                x=alt.X("started_at:T", scale=time),
                color=alt.Color("direction:N", scale=alt.Scale(domain=list(DIRECTION_COLOURS),
                                                               range=list(DIRECTION_COLOURS.values())),
                                legend=alt.Legend(title="change point", orient="right") if number == 0 else None),
                tooltip=[alt.Tooltip("configuration:N"), alt.Tooltip("trial_id:N"), alt.Tooltip("direction:N"),
                         alt.Tooltip("change_pct:Q", format="+.1f", title="change %")]))
        judged = [row for row in values if row["kind"] == "judged"]
        if judged:
            line_colour = alt.Color("configuration:N", scale=alt.Scale(domain=configurations, range=colours),
                                    legend=None)
            layers.append(alt.Chart(inline_values(judged)).mark_line(strokeWidth=1.5).encode(x=x, y=y,
                                                                                              color=line_colour))
        shape = alt.Shape("kind:N", scale=alt.Scale(domain=list(KINDS), range=list(KINDS.values())),
                          legend=alt.Legend(title="trial", orient="right") if number == 0 else None)
        # One legend for both: shape and size tell the same thing (a disturbed cross is drawn larger to be seen).
        size = alt.Size("kind:N", scale=alt.Scale(domain=list(KINDS), range=[55, 110, 70]),
                        legend=alt.Legend(title="trial", orient="right") if number == 0 else None)
        layers.append(alt.Chart(inline_values(values)).mark_point(filled=True, opacity=1).encode(
            x=x, y=y, color=colour, shape=shape, size=size,
            tooltip=[alt.Tooltip("trial_id:N"), alt.Tooltip("started_at:T", format="%Y-%m-%d %H:%M:%S",
                                                             title="started (UTC)"),
                     alt.Tooltip("configuration:N"), alt.Tooltip("sut_version:N"), alt.Tooltip("group:N"),
                     alt.Tooltip("kind:N", title="trial"), alt.Tooltip("value:Q", format=",.4~f")]))
        undated = len(rows) - len(dated)
        subtitle = "lower is better" + (f"; {undated} trial(s) without a start time not drawn" if undated else "")
        # Made whole by their constructors (plots.CHARTS_WHOLE).
        panels.append(alt.LayerChart(layer=layers, width=WIDTH, height=PANEL_HEIGHT,
                                     title=alt.TitleParams(f"{figure} (ms)", subtitle=subtitle, fontSize=12),
                                     resolve=INDEPENDENT_COLOURS))
    return alt.VConcatChart(vconcat=panels, spacing=18, title=suite, config=STYLE,
                            resolve=alt.Resolve(scale=alt.ScaleResolveMap(color="independent", shape="shared")))
