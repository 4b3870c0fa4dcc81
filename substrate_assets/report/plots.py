"""Charts of the platform's figures as Altair (Vega-Lite) specs, built from plain data — polars frames, numpy arrays —
and rendered without a browser by vl-convert: SVG for an HTML page, PNG for a Dagster markdown image.

- :func:`latency_cdf`: the empirical CDF of one or several wake-latency sample sets, p50 and p99 marked.
- :func:`load_points_chart`: a ladder trial's wake p99 by density, with its SLO, knee and capacity.
- :func:`history_chart`: a suite's figures trial by trial, one panel per metric, with its change points.
"""

from __future__ import annotations

import base64
import functools
import json
import math
from collections.abc import Mapping, Sequence
from datetime import date, datetime
from typing import Any

import altair as alt
import numpy as np
import numpy.typing as npt
import polars as pl
import vl_convert
from altair.utils.schemapi import SchemaBase, disable_debug_mode

from substrate_assets.analysis.statistics import floor_index, permille
from substrate_assets.report.renderer import Renderer

# Altair's debug mode validates every schema object against Vega-Lite's JSON schema as it is made, data included:
# a CDF's thousand points a series, again at each layer. Nothing here renders a spec it validated (see ``svg``), and
# the charts' tests validate each whole spec (``to_dict()``), where a fault in one shows.
disable_debug_mode()

# vl-convert bundles several Vega-Lite versions; render with the one Altair writes its specs for.
VEGA_LITE_VERSION = ".".join(alt.SCHEMA_VERSION.removeprefix("v").split(".")[:2])
# vl-convert in a process of its own (``renderer``): it renders holding the interpreter's lock.
_RENDERER = Renderer(VEGA_LITE_VERSION)

# A CDF of 100k samples drawn through every sample is a 100k-point SVG path that says nothing more than one through
# a thousand ranks.
CDF_RANKS = 1000
MARKED_PERCENTILES = ("p50", "p99")

# One colour per series, in order, so a comparison's baseline is always blue and its candidate always orange.
SERIES_COLOURS = ("#4c78a8", "#f58518", "#54a24b", "#b279a2", "#e45756", "#72b7b2", "#eeca3b", "#9d755d")
DIRECTION_COLOURS = {"regressed": "#d62728", "improved": "#2ca02c"}
SLO_COLOUR, KNEE_COLOUR, CAPACITY_COLOUR, MEAN_COLOUR = "#d62728", "#d62728", "#2ca02c", "#555555"
WIDTH, HEIGHT, PANEL_HEIGHT = 600, 320, 150
# The SVG's text is laid out with vl-convert's fonts and drawn with the browser's: the same family first on both sides
# (Debian's default sans-serif), so a title measured to fit still fits.
FONT = "DejaVu Sans, Liberation Sans, Helvetica, Arial, sans-serif"

Samples = npt.NDArray[np.floating[Any]]


def _plain(value: Any) -> Any:
    """A value as JSON takes it: a time as ISO text, a non-finite float as null (JSON has no NaN)."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, np.generic):
        return _plain(value.item())
    return value


def inline_values(rows: Sequence[Mapping[str, Any]]) -> alt.Data:
    # A tuple: Altair deep-copies a chart's lists (not its tuples) at every layer, property or configure call.
    values = tuple({key: _plain(value) for key, value in row.items()} for row in rows)
    return alt.Data(values=values)  # type: ignore[no-untyped-call]  # Altair's Data wrapper takes its fields untyped


STYLE = alt.Config(font=FONT, view=alt.ViewConfig(stroke="#dddddd"),
                   axis=alt.AxisConfig(gridColor="#eeeeee", labelFontSize=11, titleFontSize=12),
                   title=alt.TitleConfig(fontSize=14, subtitleFontSize=11, subtitleColor="#555555", anchor="start"),
                   legend=alt.LegendConfig(labelFontSize=11, titleFontSize=11, labelLimit=420))
INDEPENDENT_COLOURS = alt.Resolve(scale=alt.ScaleResolveMap(color="independent"))
# CHARTS_WHOLE: a layered or stacked chart is made by its constructor with its size, title, scales and style, not by
# alt.layer() and then properties(), resolve_scale() and configure(): Altair deep-copies the chart, each layer and
# each panel at every one of those calls (a third of a suite's history drawn, 0.4 s against 0.25 s).


def styled(chart: alt.TopLevelMixin) -> alt.TopLevelMixin:
    """``chart`` with the site's style: a copy of its top alone, as Altair's ``configure`` makes."""
    assert isinstance(chart, SchemaBase)  # every top-level chart is a schema object
    configured = chart.copy(deep=False)
    configured.config = STYLE
    assert isinstance(configured, alt.TopLevelMixin)
    return configured


def note_chart(text: str, title: str, height: int = 120) -> alt.Chart:
    # A mark method returns a copy of the chart, a type lost to the schema's signature Altair gives the method.
    chart: alt.Chart = alt.Chart(inline_values([{"text": text}]), title=title).mark_text(
        fontSize=13, color="#555555").encode(text="text:N").properties(width=WIDTH, height=height)
    return chart


def _finite_sorted(samples: Samples) -> Samples:
    values = np.asarray(samples, dtype=float)
    return np.sort(values[np.isfinite(values)])


def cdf_points(samples: Samples, ranks: int = CDF_RANKS) -> tuple[Samples, Samples]:
    """The empirical CDF of the finite ``samples`` at about ``ranks`` evenly spaced ranks of their sorted order, the
    first and last always among them: (the exact sample values at those ranks, the fraction of samples at or below
    each rank, (rank + 1) / n). No interpolation: every value is one of the samples."""
    ordered = _finite_sorted(samples)
    n = len(ordered)
    if n == 0:
        return ordered, np.empty(0)
    chosen = np.unique(np.rint(np.linspace(0, n - 1, min(max(ranks, 2), n))).astype(np.int64))
    return ordered[chosen], (chosen + 1) / n


def latency_cdf(samples: Mapping[str, Samples], title: str) -> alt.TopLevelMixin:
    """The empirical CDF of each labelled sample set (one trial's wakes; a comparison's baseline and candidate), in
    the given order and colours: x the latency in ms on a log scale, y the fraction of samples at or below it, each
    set's floor-index p50 and p99 marked and labelled. Each set is thinned to :data:`CDF_RANKS` exact samples."""
    labels = list(samples)
    colours = [SERIES_COLOURS[index % len(SERIES_COLOURS)] for index in range(len(labels))]
    curve: list[dict[str, Any]] = []
    marks: list[dict[str, Any]] = []
    counts: list[str] = []
    unshown = 0
    for index, label in enumerate(labels):
        ordered = _finite_sorted(samples[label])
        values, fractions = cdf_points(ordered)
        counts.append(f"{label}: n = {len(ordered):,}")
        # A log scale has no place for 0 ms; such samples still count in every fraction.
        unshown += int(np.count_nonzero(values <= 0))
        curve += [{"series": label, "latency_ms": float(value), "fraction": float(fraction)}
                  for value, fraction in zip(values, fractions, strict=True) if value > 0]
        for name in MARKED_PERCENTILES:
            value = floor_index(ordered, permille(name))
            if value is not None and value > 0:
                marks.append({"series": label, "percentile": name, "latency_ms": float(value),
                              "fraction": permille(name) / 1000, "label": f"{name} {value:,.1f} ms",
                              "offset": index})
    subtitle = "; ".join(counts) + (f" ({unshown} samples at 0 ms not drawn on the log scale)" if unshown else "")
    if not curve:
        return styled(note_chart("no wake latencies measured", title))
    colour = alt.Color("series:N", scale=alt.Scale(domain=labels, range=colours),
                       legend=alt.Legend(title=None, orient="bottom-right") if len(labels) > 1 else None)
    x = alt.X("latency_ms:Q", scale=alt.Scale(type="log", nice=False), title="wake latency (ms, log scale)")
    y = alt.Y("fraction:Q", scale=alt.Scale(domain=[0, 1]), title="fraction of wakes at or below")
    line = alt.Chart(inline_values(curve)).mark_line(interpolate="step-after", strokeWidth=2).encode(
        x=x, y=y, color=colour,
        tooltip=[alt.Tooltip("series:N"), alt.Tooltip("latency_ms:Q", format=",.1f"),
                 alt.Tooltip("fraction:Q", format=".4f")])
    levels = alt.Chart(inline_values([{"fraction": permille(name) / 1000, "percentile": name}
                                for name in MARKED_PERCENTILES])).mark_rule(
        color="#999999", strokeDash=[3, 3], strokeWidth=1).encode(y=alt.Y("fraction:Q"))
    level_labels = alt.Chart(inline_values([{"fraction": permille(name) / 1000, "percentile": name}
                                      for name in MARKED_PERCENTILES])).mark_text(
        align="left", dx=3, dy=-5, color="#777777", fontSize=10).encode(
        y=alt.Y("fraction:Q"), x=alt.value(0), text="percentile:N")
    layers: list[alt.Chart] = [levels, level_labels, line]
    if marks:
        points = alt.Chart(inline_values(marks)).mark_point(filled=True, size=70, opacity=1).encode(
            x=x, y=y, color=colour, shape=alt.value("circle"),
            tooltip=[alt.Tooltip("series:N"), alt.Tooltip("percentile:N"),
                     alt.Tooltip("latency_ms:Q", format=",.1f")])
        # Stagger the labels of several series so that two close percentiles do not print over each other.
        for offset in sorted({mark["offset"] for mark in marks}):
            text = alt.Chart(inline_values([m for m in marks if m["offset"] == offset])).mark_text(
                align="left", dx=7, dy=12 + 13 * offset, fontSize=11, fontWeight="bold").encode(
                x=x, y=y, color=colour, text="label:N")
            layers.append(text)
        layers.insert(3, points)
    return alt.LayerChart(layer=layers, width=WIDTH, height=HEIGHT, title=alt.TitleParams(title, subtitle=subtitle),
                          config=STYLE)


def _first(frame: pl.DataFrame, column: str, value: float | None) -> dict[str, Any] | None:
    if value is None or column not in frame.columns:
        return None
    found = frame.filter(pl.col(column) == value)
    return found.row(0, named=True) if found.height else None


def load_points_chart(points: pl.DataFrame, slo_wake_p99_ms: float | None, knee_users: float | None,
                      capacity_users: float | None, title: str = "wake p99 by load point") -> alt.TopLevelMixin:
    """A ladder trial's load points (rows of the load_points model): x the density (actors per node; users when a
    point's density is not known), y the wake p99, complete points joined by a line and points cut short hollow;
    the SLO's wake p99 as a horizontal line, and the knee and capacity points (found by their users) marked and
    labelled."""
    columns = set(points.columns)
    by_density = "actors_per_node" in columns and points.height > 0 and points["actors_per_node"].null_count() == 0
    x_field = "actors_per_node" if by_density else "users"
    x_title = "actors per node" if by_density else "users (actors per node not known)"
    frame = points.with_columns(
        pl.col(x_field).cast(pl.Float64).alias("x"),
        (pl.col("complete").fill_null(True) if "complete" in columns else pl.lit(True)).alias("complete"),
    ).filter(pl.col("x").is_not_null())
    rows = [{**row, "point": "complete" if row["complete"] else "cut short"} for row in frame.to_dicts()]
    tips = [alt.Tooltip(f"{name}:Q", format=",.2f" if name != "step" else "d")
            for name in ("step", "users", "actors_per_node", "wake_p99_ms", "failure_ratio") if name in columns]
    x = alt.X("x:Q", title=x_title, scale=alt.Scale(zero=True))
    y = alt.Y("wake_p99_ms:Q", title="wake p99 (ms)", scale=alt.Scale(zero=True))
    line = alt.Chart(inline_values([row for row in rows if row["complete"]])).mark_line(color=SERIES_COLOURS[0]).encode(
        x=x, y=y, order="x:Q")
    dots = alt.Chart(inline_values(rows)).mark_point(size=60, strokeWidth=2).encode(
        x=x, y=y, tooltip=tips,
        color=alt.Color("point:N", scale=alt.Scale(domain=["complete", "cut short"],
                                                  range=[SERIES_COLOURS[0], "#aaaaaa"]),
                        legend=alt.Legend(title=None, orient="top-left")),
        fill=alt.Fill("point:N", scale=alt.Scale(domain=["complete", "cut short"],
                                                range=[SERIES_COLOURS[0], "white"]), legend=None))
    layers: list[alt.Chart] = [line, dots]
    if slo_wake_p99_ms is not None:
        slo = inline_values([{"wake_p99_ms": slo_wake_p99_ms, "label": f"SLO: wake p99 ≤ {slo_wake_p99_ms:,.1f} ms"}])
        layers.append(alt.Chart(slo).mark_rule(color=SLO_COLOUR, strokeDash=[6, 4], strokeWidth=2).encode(y=y))
        layers.append(alt.Chart(slo).mark_text(align="left", dy=-6, color=SLO_COLOUR, fontSize=11).encode(
            y=y, x=alt.value(4), text="label:N"))
    widest = max((row["x"] for row in rows), default=0.0) or 1.0
    for line_number, (name, users, colour) in enumerate((("knee", knee_users, KNEE_COLOUR),
                                                         ("capacity", capacity_users, CAPACITY_COLOUR))):
        row = _first(frame, "users", users)
        if row is None:
            continue
        mark = inline_values([{**row, "label": f"{name}: {row['users']:,.0f} users"
                         + (f", {row['actors_per_node']:,.2f} actors/node" if by_density else "")}])
        # A label right of its rule would run off a chart whose knee is at the far right: it goes left of it there.
        leftward = row["x"] / widest > 0.6
        layers.append(alt.Chart(mark).mark_rule(color=colour, strokeDash=[2, 3], strokeWidth=1.5).encode(x=x))
        layers.append(alt.Chart(mark).mark_text(align="right" if leftward else "left", dx=-5 if leftward else 5,
                                                color=colour, fontSize=11, fontWeight="bold", baseline="top").encode(
            x=x, y=alt.value(4 + 16 * line_number), text="label:N"))
        if row.get("wake_p99_ms") is not None:
            layers.append(alt.Chart(mark).mark_point(shape="diamond", size=260, strokeWidth=2.5, color=colour,
                                                     filled=False).encode(x=x, y=y))
    # Without a request log (an upstream run) no point has a wake p99: the axes alone would look like a broken chart.
    unmeasured = not any(row.get("wake_p99_ms") is not None for row in rows)
    heading = alt.TitleParams(title, subtitle="no load point measured its wake p99 (the trial kept no request log)"
                              if unmeasured else "")
    return alt.LayerChart(layer=layers, width=WIDTH, height=HEIGHT, title=heading,
                          resolve=alt.Resolve(scale=alt.ScaleResolveMap(color="shared")), config=STYLE)


def _mean_segments(changes: list[dict[str, Any]], first: dict[str, int], last: dict[str, int],
                   started: Mapping[tuple[str, int], Any]) -> list[dict[str, Any]]:
    """Per change point, the mean before it (from the previous change point of its configuration, or its first
    trial) and after it (to the next, or its last trial), as horizontal segments between those trials' start times
    (``started``: by configuration and trial number); a segment whose end has no start time is not drawn."""
    segments: list[dict[str, Any]] = []
    ordered = sorted(changes, key=lambda change: (change["configuration"], change["trial_number"]))
    for index, change in enumerate(ordered):
        same = change["configuration"]
        before = ordered[index - 1]["trial_number"] if index and ordered[index - 1]["configuration"] == same \
            else first.get(same, change["trial_number"])
        after = ordered[index + 1]["trial_number"] if index + 1 < len(ordered) \
            and ordered[index + 1]["configuration"] == same else last.get(same, change["trial_number"])
        for side, start, end, mean in (("before", before, change["trial_number"], change["mean_before"]),
                                       ("after", change["trial_number"], after, change["mean_after"])):
            start_at, end_at = started.get((same, start)), started.get((same, end))
            if mean is not None and start_at is not None and end_at is not None:
                segments.append({"configuration": same, "side": side, "start": start_at, "end": end_at,
                                 "mean": mean, "trial_id": change["trial_id"]})
    return segments


def value_scale(values: Sequence[float | None]) -> alt.Scale:
    """The y scale of a history panel: its values' range, and around a constant series a band of ±5 % (else the
    renderer makes a one-value domain of a nearby round tick, and 0.17 reads as 0)."""
    measured = [value for value in values if value is not None and math.isfinite(value)]
    if measured and min(measured) == max(measured):
        value = measured[0]
        half = abs(value) * 0.05 or 1.0
        return alt.Scale(domain=[value - half, value + half], zero=False, nice=False)
    return alt.Scale(zero=False)


def noise_bands(noise_floor: list[dict[str, Any]], last: dict[str, int],
                started: Mapping[tuple[str, int], Any]) -> list[dict[str, Any]]:
    """Each configuration's noise floor (rows of noise_floor) as a band around its window's level, one spread
    either way (a factor ``e^±noise`` on the ratio scale, ``± noise`` in the unit otherwise), from the start time of
    the window's first trial to that of the configuration's last (``started``: by configuration and trial number);
    none where the noise or either time is unknown."""
    bands = []
    for row in noise_floor:
        noise, level, configuration = row.get("noise"), row.get("level"), row["configuration"]
        if noise is None or level is None or configuration not in last:
            continue
        start_at = started.get((configuration, row["since_trial_number"]))
        end_at = started.get((configuration, last[configuration]))
        if start_at is None or end_at is None:
            continue
        ratio = row.get("scale") == "ratio"
        low, high = (level * math.exp(-noise), level * math.exp(noise)) if ratio else (level - noise, level + noise)
        bands.append({"configuration": configuration, "start": start_at, "end": end_at, "low": low, "high": high,
                      "level": level, "since_trial_number": row["since_trial_number"],
                      "trials": row["trials_used"],
                      "noise": f"±{noise * 100:.1f} %" if ratio else f"±{noise:.4g} {row.get('unit') or ''}".strip()})
    return bands


def history_chart(history: pl.DataFrame, change_points: pl.DataFrame,
                  title: str = "history", noise_floor: pl.DataFrame | None = None) -> alt.TopLevelMixin:
    """A suite's history (rows of metric_history: one per trial and metric) as one panel per metric, stacked, each
    with its own y scale: x the trial's start time (a time axis, so a month without trials is a month wide; the
    trial's number in its configuration and its id are in the tooltip; a trial without a start time is not drawn,
    and the panel's subtitle counts it), a line and points per configuration (one colour each, the same in every
    panel); each configuration's noise floor (rows of noise_floor) a shaded band in
    its colour over the trials it was measured from; each change point a vertical rule coloured by direction
    (regressed red, improved green) and the means before and after it as dashed horizontal segments."""
    if history.height == 0:
        return styled(note_chart("no trials with figures", title))
    configurations = list(dict.fromkeys(history.sort("trial_number")["configuration"].to_list()))
    colours = [SERIES_COLOURS[index % len(SERIES_COLOURS)] for index in range(len(configurations))]
    metrics = list(dict.fromkeys(history["metric"].to_list()))
    panels: list[alt.LayerChart] = []
    for number, metric in enumerate(metrics):
        rows = history.filter(pl.col("metric") == metric).sort("configuration", "trial_number").to_dicts()
        first_row = rows[0]
        unit, better = first_row.get("unit"), first_row.get("better")
        changes = change_points.filter(pl.col("metric") == metric).to_dicts() if change_points.height else []
        spans = history.filter(pl.col("metric") == metric).group_by("configuration").agg(
            pl.col("trial_number").min().alias("first"), pl.col("trial_number").max().alias("last"))
        first = dict(zip(spans["configuration"].to_list(), spans["first"].to_list(), strict=True))
        last = dict(zip(spans["configuration"].to_list(), spans["last"].to_list(), strict=True))
        started = {(row["configuration"], row["trial_number"]): row["started_at"] for row in rows
                   if row.get("started_at") is not None}
        undated = sum(1 for row in rows if row.get("started_at") is None)
        value_title = f"{metric} ({unit})" if unit else metric
        trials = alt.Scale(type="utc", padding=12)
        x = alt.X("started_at:T", title="trial start (UTC)" if number == len(metrics) - 1 else None, scale=trials)
        y = alt.Y("value:Q", title=unit or None, scale=value_scale([row["value"] for row in rows]),
                  axis=alt.Axis(format=",.4~g"))
        colour = alt.Color("configuration:N", scale=alt.Scale(domain=configurations, range=colours),
                           legend=alt.Legend(title="configuration", orient="right") if number == 0 else None)
        series = alt.Chart(inline_values(rows)).mark_line(point=alt.OverlayMarkDef(filled=True, size=45)).encode(
            x=x, y=y, color=colour,
            tooltip=[alt.Tooltip("trial_number:Q", format="d", title="trial number"), alt.Tooltip("trial_id:N"),
                     alt.Tooltip("sut_version:N"),
                     alt.Tooltip("started_at:N", title="started"),
                     alt.Tooltip("configuration:N"),
                     alt.Tooltip("value:Q", format=",.4~f")])
        layers: list[alt.Chart] = []
        floors = noise_floor.filter(pl.col("metric") == metric).to_dicts() \
            if noise_floor is not None and noise_floor.height else []
        bands = noise_bands(floors, last, started)
        if bands:
            layers.append(alt.Chart(inline_values(bands)).mark_rect(opacity=0.15).encode(
                x=alt.X("start:T", scale=trials), x2="end:T", y=alt.Y("low:Q"), y2="high:Q",
                color=alt.Color("configuration:N", scale=alt.Scale(domain=configurations, range=colours),
                                legend=None),
                tooltip=[alt.Tooltip("configuration:N"), alt.Tooltip("noise:N", title="noise floor"),
                         alt.Tooltip("trials:Q", title="trials", format="d"),
                         alt.Tooltip("since_trial_number:Q", title="since trial number", format="d"),
                         alt.Tooltip("level:Q", format=",.4~f")]))
        if changes:
            direction = alt.Color("direction:N", scale=alt.Scale(domain=list(DIRECTION_COLOURS),
                                                               range=list(DIRECTION_COLOURS.values())),
                                  legend=alt.Legend(title="change point", orient="right") if number == 0 else None)
            layers.append(alt.Chart(inline_values(changes)).mark_rule(strokeWidth=2, opacity=0.8).encode(
                x=x, color=direction,
                tooltip=[alt.Tooltip("configuration:N"), alt.Tooltip("trial_number:Q", format="d",
                                                                     title="trial number"),
                         alt.Tooltip("trial_id:N"), alt.Tooltip("sut_version:N"), alt.Tooltip("direction:N"),
                         alt.Tooltip("mean_before:Q", format=",.4~f"), alt.Tooltip("mean_after:Q", format=",.4~f"),
                         alt.Tooltip("change_pct:Q", format="+.1f"), alt.Tooltip("p_value:Q", format=".2g")]))
            segments = _mean_segments(changes, first, last, started)
            if segments:
                layers.append(alt.Chart(inline_values(segments)).mark_rule(
                    color=MEAN_COLOUR, strokeDash=[5, 3], strokeWidth=2).encode(
                    x=alt.X("start:T", scale=trials), x2="end:T", y=alt.Y("mean:Q"),
                    tooltip=[alt.Tooltip("side:N", title="mean"), alt.Tooltip("mean:Q", format=",.4~f")]))
        notes = [f"{better} is better" if better else "",
                 f"{undated} trial(s) without a start time not drawn" if undated else ""]
        panel_title = alt.TitleParams(value_title, subtitle="; ".join(note for note in notes if note), fontSize=12)
        # Each chart made whole by its constructor (CHARTS_WHOLE).
        panels.append(alt.LayerChart(layer=[*layers, series], width=WIDTH, height=PANEL_HEIGHT, title=panel_title,
                                     resolve=INDEPENDENT_COLOURS))
    return alt.VConcatChart(vconcat=panels, spacing=18, title=title, resolve=INDEPENDENT_COLOURS, config=STYLE)


def svg(chart: alt.TopLevelMixin) -> str:
    """The chart as an SVG document, rendered without a browser; its data are inline, and it fetches nothing."""
    return _rendered(json.dumps(chart.to_dict(validate=False), allow_nan=False))


@functools.lru_cache(maxsize=16)
def _rendered(spec: str) -> str:
    # Kept by spec: a load run draws a suite's history for Dagster (as a PNG) and again for the site (0.3 s each).
    return _RENDERER.svg(spec)


def forget_renderings() -> None:
    """Forget the charts rendered so far: a benchmark's every build starts as a new load run's would."""
    _rendered.cache_clear()


def png(chart: alt.TopLevelMixin, scale: float = 2.0) -> bytes:
    """The chart as a PNG at ``scale`` times its size (2: sharp on a high-density screen): its SVG, rasterized (the
    same pixels vl-convert's own PNG gives)."""
    return vl_convert.svg_to_png(svg(chart), scale=scale)


def start_renderer() -> None:
    """Start the renderer's process (vl-convert's JavaScript engine, ~0.7 s to start), which then starts while this
    process goes on, so that a later drawing pays only for itself."""
    _RENDERER.start()


def markdown_image(chart: alt.TopLevelMixin, alt: str) -> str:
    """The chart as a markdown image whose source is a base64 PNG data URI: what a Dagster ``MetadataValue.md``
    shows, with nothing to fetch. At the chart's own size: Dagster draws a markdown image at its natural width in a
    dialog at most 80 % of the window wide, and a chart drawn twice as large for a sharp screen was cut off there."""
    text = alt.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]").replace("\n", " ")
    return f"![{text}](data:image/png;base64,{base64.b64encode(png(chart, scale=1.0)).decode('ascii')})"
