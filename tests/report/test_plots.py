"""The charts as Vega-Lite specs (what they encode, from which exact values) and their renderings by vl-convert."""

import base64
import io
import re
from datetime import UTC, datetime

import numpy as np
import polars as pl
import pytest
from PIL import Image

from substrate_assets.analysis.statistics import floor_index
from substrate_assets.report import plots


def datasets(spec: dict) -> list[list[dict]]:
    """Every dataset of a spec: Altair's consolidated ``datasets`` and any inline ``data.values``."""
    found = list(spec.get("datasets", {}).values())

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("data"), dict) and "values" in node["data"]:
                found.append(node["data"]["values"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk({key: value for key, value in spec.items() if key != "datasets"})
    return found


def marks(spec: dict) -> list[tuple[dict, dict, list[dict]]]:
    """(mark, encoding, data values) of every layer, wherever it is nested."""
    named = spec.get("datasets", {})
    found = []

    def walk(node):
        if isinstance(node, dict):
            if "mark" in node:
                data = node.get("data", {})
                values = data.get("values") if "values" in data else named.get(data.get("name"), [])
                mark = node["mark"] if isinstance(node["mark"], dict) else {"type": node["mark"]}
                found.append((mark, node.get("encoding", {}), values))
            for key, value in node.items():
                if key != "datasets":
                    walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(spec)
    return found


@pytest.fixture(scope="module")
def wakes():
    rng = np.random.default_rng(11)
    return {"baseline": np.round(rng.lognormal(np.log(40), 0.45, 150_000), 3),
            "candidate": np.round(rng.lognormal(np.log(46), 0.5, 120_000), 3)}


def test_cdf_thinning_keeps_exact_samples_min_and_max(wakes):
    samples = wakes["baseline"]
    values, fractions = plots.cdf_points(samples)
    assert 900 <= len(values) <= plots.CDF_RANKS
    assert set(values.tolist()) <= set(samples.tolist())  # exact samples, nothing interpolated
    assert values[0] == samples.min() and values[-1] == samples.max()
    assert fractions[-1] == 1.0 and np.all(np.diff(fractions) > 0) and np.all(np.diff(values) >= 0)
    ordered = np.sort(samples)
    ranks = np.rint(fractions * len(samples)).astype(int) - 1
    assert np.array_equal(ordered[ranks], values)  # each point is the sample at its rank


def test_cdf_of_few_samples_keeps_every_one_and_skips_non_finite():
    values, fractions = plots.cdf_points(np.array([3.0, np.nan, 1.0, np.inf, 2.0]))
    assert values.tolist() == [1.0, 2.0, 3.0] and fractions.tolist() == [1 / 3, 2 / 3, 1.0]
    empty, none = plots.cdf_points(np.array([]))
    assert empty.size == 0 and none.size == 0


def test_latency_cdf_spec_has_a_log_x_scale_series_and_percentile_marks(wakes):
    spec = plots.latency_cdf(wakes, "wake latency").to_dict()
    layers = marks(spec)
    lines = [(encoding, values) for mark, encoding, values in layers if mark["type"] == "line"]
    assert len(lines) == 1
    encoding, values = lines[0]
    assert encoding["x"]["field"] == "latency_ms" and encoding["x"]["scale"]["type"] == "log"
    assert encoding["y"]["scale"]["domain"] == [0, 1]
    assert encoding["color"]["scale"]["domain"] == ["baseline", "candidate"]
    assert encoding["color"]["scale"]["range"][0] != encoding["color"]["scale"]["range"][1]
    for label, samples in wakes.items():
        drawn = [row["latency_ms"] for row in values if row["series"] == label]
        assert len(drawn) <= plots.CDF_RANKS
        assert min(drawn) == samples.min() and max(drawn) == samples.max()
    points = next(values for mark, _, values in layers if mark["type"] == "point")
    ordered = {label: np.sort(samples) for label, samples in wakes.items()}
    assert {(row["series"], row["percentile"]): row["latency_ms"] for row in points} == {
        (label, name): floor_index(ordered[label], permille) for label in wakes
        for name, permille in (("p50", 500), ("p99", 990))}
    assert spec["title"]["subtitle"] == "baseline: n = 150,000; candidate: n = 120,000"


def test_latency_cdf_without_samples_says_so():
    spec = plots.latency_cdf({"t": np.array([])}, "wake latency").to_dict()
    texts = [values for mark, _, values in marks(spec) if mark["type"] == "text"]
    assert texts == [[{"text": "no wake latencies measured"}]]


POINTS = pl.DataFrame({
    "step": [1, 2, 3, 4, 5], "users": [20.0, 40.0, 60.0, 80.0, 100.0],
    "actors_per_node": [10.0, 20.0, 30.0, 40.0, 50.0], "wake_p99_ms": [110.0, 130.0, 190.0, 320.0, 610.0],
    "failure_ratio": [0.0, 0.0, 0.001, 0.004, 0.02], "complete": [True, True, True, True, False],
})


def test_load_points_chart_draws_the_slo_line_knee_and_capacity():
    spec = plots.load_points_chart(POINTS, 250.0, knee_users=80.0, capacity_users=60.0).to_dict()
    layers = marks(spec)
    horizontal = [values for mark, encoding, values in layers
                  if mark["type"] == "rule" and "y" in encoding and "x" not in encoding]
    assert horizontal == [[{"wake_p99_ms": 250.0, "label": "SLO: wake p99 ≤ 250.0 ms"}]]
    vertical = {values[0]["label"]: values[0]["x"] for mark, encoding, values in layers
                if mark["type"] == "rule" and "x" in encoding and "y" not in encoding}
    assert vertical == {"knee: 80 users, 40.00 actors/node": 40.0, "capacity: 60 users, 30.00 actors/node": 30.0}
    dots = next(values for mark, encoding, values in layers if mark["type"] == "point" and "fill" in encoding)
    assert [row["point"] for row in dots] == ["complete"] * 4 + ["cut short"]
    x = next(encoding["x"] for mark, encoding, _ in layers if mark["type"] == "line")
    assert x["title"] == "actors per node"


def test_load_points_chart_falls_back_to_users_without_density():
    points = POINTS.with_columns(pl.lit(None, pl.Float64).alias("actors_per_node"))
    spec = plots.load_points_chart(points, None, knee_users=None, capacity_users=None).to_dict()
    layers = marks(spec)
    line = next((encoding, values) for mark, encoding, values in layers if mark["type"] == "line")
    assert line[0]["x"]["title"].startswith("users") and [row["x"] for row in line[1]] == [20.0, 40.0, 60.0, 80.0]
    assert not [mark for mark, _, _ in layers if mark["type"] == "rule"]  # no SLO, no knee, no capacity


def history_frames():
    rows = []
    for configuration, shift in (("cfg-a", 0.0), ("cfg-b", 10.0)):
        for number in range(1, 9):
            for metric, unit, better, value in (("wake_p99_ms", "ms", "lower", 180 + shift + (40 if number >= 5 else 0)),
                                                ("capacity_users", "users", "higher", 80 - shift)):
                rows.append({"suite": "s", "configuration": configuration, "trial_id": f"{configuration}-{number}",
                             "started_at": datetime(2026, 1, number, tzinfo=UTC), "trial_number": number,
                             "sut_version": f"v{number}", "metric": metric, "value": value, "unit": unit,
                             "better": better})
    changes = pl.DataFrame([{"suite": "s", "configuration": "cfg-a", "metric": "wake_p99_ms", "trial_id": "cfg-a-5",
                             "trial_number": 5, "started_at": datetime(2026, 1, 5, tzinfo=UTC), "sut_version": "v5",
                             "previous_trial_id": "cfg-a-4", "mean_before": 180.0, "mean_after": 220.0,
                             "change_pct": 22.2, "p_value": 0.001, "direction": "regressed", "unit": "ms"}])
    return pl.DataFrame(rows), changes


def test_history_chart_one_panel_per_metric_with_change_point_rules_and_means():
    history, changes = history_frames()
    spec = plots.history_chart(history, changes, title="s").to_dict()
    assert [panel["title"]["text"] for panel in spec["vconcat"]] == ["wake_p99_ms (ms)", "capacity_users (users)"]
    assert spec["vconcat"][0]["title"]["subtitle"] == "lower is better"
    first = marks(spec["vconcat"][0] | {"datasets": spec.get("datasets", {})})
    rules = [(encoding, values) for mark, encoding, values in first if mark["type"] == "rule" and "x2" not in encoding]
    assert len(rules) == 1
    encoding, values = rules[0]
    assert (encoding["x"]["field"], encoding["x"]["type"]) == ("started_at", "temporal")
    assert [row["trial_id"] for row in values] == ["cfg-a-5"]
    assert encoding["color"]["field"] == "direction"
    assert dict(zip(encoding["color"]["scale"]["domain"], encoding["color"]["scale"]["range"], strict=True)) == \
        plots.DIRECTION_COLOURS
    segments = next(values for mark, encoding, values in first if mark["type"] == "rule" and "x2" in encoding)
    # From the first trial's start to the change point's, and from it to the last trial's.
    assert {(row["side"], row["start"][:10], row["end"][:10], row["mean"]) for row in segments} == {
        ("before", "2026-01-01", "2026-01-05", 180.0), ("after", "2026-01-05", "2026-01-08", 220.0)}
    second = marks(spec["vconcat"][1] | {"datasets": spec.get("datasets", {})})
    assert not [mark for mark, _, _ in second if mark["type"] == "rule"]
    series = next(encoding for mark, encoding, _ in second if mark["type"] == "line")
    assert (series["x"]["field"], series["x"]["type"], series["x"]["scale"]["type"]) == ("started_at", "temporal", "utc")
    assert series["color"]["scale"]["domain"] == ["cfg-a", "cfg-b"]
    assert {tip["field"] for tip in series["tooltip"]} >= {"trial_number", "trial_id", "sut_version", "started_at"}


def test_a_month_without_trials_is_a_month_wide():
    """Trials 1-3 in January, 4 in March: on a time axis trial 4 stands about two months right of trial 3, four
    times as far as 1 from 3; on a trial-number axis it would stand one step away."""
    rows = [{"suite": "s", "configuration": "c", "trial_id": f"t{n}", "started_at": day, "trial_number": n,
             "sut_version": "v", "metric": "wake_p99_ms", "value": 100.0 + n, "unit": "ms", "better": "lower"}
            for n, day in enumerate((datetime(2026, 1, 1, tzinfo=UTC), datetime(2026, 1, 8, tzinfo=UTC),
                                     datetime(2026, 1, 15, tzinfo=UTC), datetime(2026, 3, 15, tzinfo=UTC)), start=1)]
    rows.append({**rows[-1], "trial_id": "t5", "trial_number": 5, "started_at": None, "value": 110.0})
    chart = plots.history_chart(pl.DataFrame(rows), pl.DataFrame())
    spec = chart.to_dict()
    assert spec["vconcat"][0]["title"]["subtitle"] == "lower is better; 1 trial(s) without a start time not drawn"
    svg = plots.svg(chart)
    points = [float(x) for x in re.findall(r'<path aria-label="[^"]*trial number: \d[^"]*" [^>]*aria-roledescription="point" '
                                           r'transform="translate\(([\d.]+),', svg)]
    assert len(points) == 4, svg[:2000]
    assert points == sorted(points)
    assert points[3] - points[2] > 3 * (points[2] - points[0])


def test_history_chart_without_change_points():
    history, _ = history_frames()
    spec = plots.history_chart(history, pl.DataFrame()).to_dict()
    assert len(spec["vconcat"]) == 2
    assert not [mark for mark, _, _ in marks(spec) if mark["type"] == "rule"]


def test_rendering_to_svg_png_and_a_markdown_image(wakes):
    chart = plots.latency_cdf(wakes, "wake latency")
    svg = plots.svg(chart)
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert "wake latency (ms, log scale)" in svg and "p99" in svg
    assert len(svg) < 400_000  # a thousand points a series, not 270,000
    image = plots.png(chart, scale=1.0)
    assert image[:8] == b"\x89PNG\r\n\x1a\n"
    decoded = Image.open(io.BytesIO(image))
    assert decoded.width > 500 and decoded.height > 300
    markdown = plots.markdown_image(chart, "wake [latency]")
    assert markdown.startswith("![wake \\[latency\\]](data:image/png;base64,") and markdown.endswith(")")
    assert base64.b64decode(markdown.split(",", 1)[1][:-1])[:4] == b"\x89PNG"


def test_every_chart_renders():
    history, changes = history_frames()
    for chart in (plots.load_points_chart(POINTS, 250.0, 80.0, 60.0), plots.history_chart(history, changes)):
        assert plots.svg(chart).startswith("<svg")
        assert Image.open(io.BytesIO(plots.png(chart))).width > 500


def test_a_constant_history_is_drawn_at_its_value():
    """A one-value domain would be widened by the renderer around a round tick: 0.17 actors/GiB read as 0."""
    rows = [{"suite": "s", "configuration": "c", "trial_id": f"t{n}", "started_at": datetime(2026, 1, n, tzinfo=UTC),
             "trial_number": n, "sut_version": "v", "metric": "actors_per_gb_ram", "value": 0.17,
             "unit": "actors/GiB", "better": "higher"} for n in range(1, 5)]
    chart = plots.history_chart(pl.DataFrame(rows), pl.DataFrame())
    [domain] = [m[1]["y"]["scale"]["domain"] for m in marks(chart.to_dict()) if "y" in m[1] and "scale" in m[1]["y"]]
    assert domain == pytest.approx([0.1615, 0.1785])
    assert ">0.17<" in plots.svg(chart)
