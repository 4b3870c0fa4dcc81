"""A warehouse filled by hand for the reports: the raw tables through ensure_schema, the models' tables with their
columns (metric_history and change_points too), rows written here. The figures look like real trials: wake latencies
are lognormal (seeded), a ladder's p99 climbs with load past its SLO, a suite's history has a regression and an
improvement. The models' figures are computed from the same samples, by the platform's own floor-index rule.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import polars as pl

from substrate_assets.analysis.statistics import floor_index
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.raw_tables import RAW_TABLES, ensure_schema
from substrate_assets.warehouse.trial_writes import replace_rows

SUITE = "coding-session-ladder"
HISTORY_SUITE = "coding-session-baseline"
LADDER_TRIAL = "coding-session-ladder-20260312t101500z"
BASELINE_TRIAL = "coding-session-baseline-20260310t090000z"
CANDIDATE_TRIAL = "coding-session-baseline-20260311t090000z"
SLO_WAKE_P99_MS = 250.0
NODES, VCPUS, RAM_GB, ACTORS_PER_USER = 4, 32.0, 128.0, 2
STEPS = ("01_load_context", "02_clone_repo", "03_run_tests", "04_edit_files", "05_build")

MODEL_DDL = {
    "trials": """CREATE TABLE trials (trial_id VARCHAR, suite VARCHAR, script VARCHAR, script_sha256 VARCHAR,
        backend VARCHAR, tag VARCHAR, sut_version VARCHAR, started_at TIMESTAMPTZ, ended_at TIMESTAMPTZ,
        status VARCHAR, failure VARCHAR, failed_requests BIGINT, sessions_started BIGINT, locust_exit_code BIGINT,
        stats_generated BOOLEAN, users BIGINT, duration_s BIGINT, think_scale DOUBLE, lifecycle_mode VARCHAR,
        resume_mode VARCHAR)""",
    "wake_latency_distribution": """CREATE TABLE wake_latency_distribution (trial_id VARCHAR, n_wakes BIGINT,
        n_failed BIGINT, min_ms DOUBLE, p50_ms DOUBLE, p90_ms DOUBLE, p95_ms DOUBLE, p99_ms DOUBLE, p99_9_ms DOUBLE,
        max_ms DOUBLE, mean_ms DOUBLE, ok_n BIGINT, ok_min_ms DOUBLE, ok_p50_ms DOUBLE, ok_p90_ms DOUBLE,
        ok_p95_ms DOUBLE, ok_p99_ms DOUBLE, ok_p99_9_ms DOUBLE, ok_max_ms DOUBLE, ok_mean_ms DOUBLE)""",
    "density_frontiers": """CREATE TABLE density_frontiers (trial_id VARCHAR, peak_users DOUBLE,
        actors_per_node DOUBLE, actors_per_vcpu DOUBLE, actors_per_gb_ram DOUBLE, actors_per_pod_p50 DOUBLE,
        actors_per_pod_p90 DOUBLE, actors_per_pod_p99 DOUBLE, aggregate_failure_ratio DOUBLE, figures_from VARCHAR,
        recomputed_actors_per_node DOUBLE, recomputed_actors_per_vcpu DOUBLE, recomputed_actors_per_gb_ram DOUBLE,
        recomputed_actors_per_pod_p50 DOUBLE, recomputed_actors_per_pod_p90 DOUBLE,
        recomputed_actors_per_pod_p99 DOUBLE, recomputed_aggregate_failure_ratio DOUBLE, frontier_mismatch BOOLEAN)""",
    "step_latency": """CREATE TABLE step_latency (trial_id VARCHAR, step VARCHAR, n_ok_steps BIGINT, failures BIGINT,
        p50_ms DOUBLE, p95_ms DOUBLE, p99_ms DOUBLE)""",
    "load_points": """CREATE TABLE load_points (trial_id VARCHAR, step INTEGER, points BIGINT, target_users BIGINT,
        hold_s BIGINT, complete BOOLEAN, recorded BOOLEAN, users DOUBLE, actors DOUBLE, actors_per_node DOUBLE,
        actors_per_vcpu DOUBLE, actors_per_gb_ram DOUBLE, window_start_ts BIGINT, window_end_ts BIGINT,
        wake_n BIGINT, wake_failed BIGINT, wake_p50_ms DOUBLE, wake_p90_ms DOUBLE, wake_p99_ms DOUBLE,
        wake_max_ms DOUBLE, requests BIGINT, failed_requests BIGINT, failure_ratio DOUBLE)""",
    "slo_capacity": """CREATE TABLE slo_capacity (trial_id VARCHAR, suite VARCHAR, slo_wake_p99_ms DOUBLE,
        slo_failure_ratio DOUBLE, points BIGINT, planned_steps BIGINT, complete_points BIGINT, capacity_step INTEGER,
        capacity_target_users BIGINT, capacity_users DOUBLE, capacity_actors DOUBLE, capacity_actors_per_node DOUBLE,
        capacity_actors_per_vcpu DOUBLE, capacity_actors_per_gb_ram DOUBLE, capacity_wake_p99_ms DOUBLE,
        capacity_failure_ratio DOUBLE, capacity_null_because VARCHAR, knee_step INTEGER, knee_target_users BIGINT,
        knee_users DOUBLE, knee_actors DOUBLE, knee_actors_per_node DOUBLE, knee_wake_p99_ms DOUBLE,
        knee_failure_ratio DOUBLE, broken_by VARCHAR, knee_null_because VARCHAR, met_above_knee BIGINT,
        highest_meeting_step INTEGER, highest_meeting_users DOUBLE)""",
    "metric_history": """CREATE TABLE metric_history (suite VARCHAR, configuration VARCHAR, trial_id VARCHAR,
        started_at TIMESTAMPTZ, trial_number BIGINT, sut_version VARCHAR, metric VARCHAR, value DOUBLE, unit VARCHAR,
        better VARCHAR)""",
    "change_points": """CREATE TABLE change_points (suite VARCHAR, configuration VARCHAR, metric VARCHAR,
        trial_id VARCHAR, trial_number BIGINT, started_at TIMESTAMPTZ, sut_version VARCHAR,
        previous_trial_id VARCHAR, mean_before DOUBLE, mean_after DOUBLE, change_pct DOUBLE, p_value DOUBLE,
        direction VARCHAR, unit VARCHAR)""",
}


def _percentile(ordered: np.ndarray, permille: int) -> float | None:
    value = floor_index(ordered, permille)
    return None if value is None else float(value)


def _insert(connection, table: str, rows: list[dict]) -> None:
    columns = list(rows[0])
    connection.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({', '.join('?' * len(columns))})",
                           [[row.get(column) for column in columns] for row in rows])


def _raw(connection, table: str, rows: list[dict] | pl.DataFrame) -> None:
    spec = RAW_TABLES[table]
    if isinstance(rows, pl.DataFrame):
        frame = rows.with_columns(*(pl.lit(None, dtype).alias(name) for name, dtype in spec.columns.items()
                                    if name not in rows.columns)).select(
            [pl.col(name).cast(dtype) for name, dtype in spec.columns.items()])
    else:
        frame = pl.DataFrame([{**dict.fromkeys(spec.columns), **row} for row in rows], schema=spec.columns,
                             orient="row")
    replace_rows(connection, spec, set(frame["trial_id"].to_list()), frame)


class Trial:
    """One trial's wakes and steps, lognormal, and the models' rows computed from them."""

    def __init__(self, trial_id: str, suite: str, started_at: datetime, sut_version: str,
                 wakes: np.ndarray, steps: dict[str, np.ndarray], users: int) -> None:
        self.trial_id, self.suite, self.started_at, self.sut_version = trial_id, suite, started_at, sut_version
        self.wakes, self.steps, self.users = wakes, steps, users

    def manifest(self) -> dict:
        return {"trial_id": self.trial_id, "suite": self.suite, "script": "coding-session", "backend": "kubernetes",
                "script_sha256": "9f2c" * 16, "started_at": self.started_at,
                "ended_at": self.started_at + timedelta(minutes=40), "completed": True, "sessions_started": self.users,
                "users": self.users, "actors_per_user": ACTORS_PER_USER, "sut_version": self.sut_version,
                "slo_wake_p99_ms": SLO_WAKE_P99_MS, "planned_steps": 1}

    def trial_row(self) -> dict:
        return {"trial_id": self.trial_id, "suite": self.suite, "script": "coding-session", "script_sha256": "9f2c" * 16,
                "backend": "kubernetes", "tag": None, "sut_version": self.sut_version, "started_at": self.started_at,
                "ended_at": self.started_at + timedelta(minutes=40), "status": "completed", "failure": None,
                "failed_requests": 3, "sessions_started": self.users, "locust_exit_code": 1, "stats_generated": True,
                "users": self.users, "duration_s": 2400, "think_scale": 1.0, "lifecycle_mode": "suspend",
                "resume_mode": "snapshot"}

    def request_frame(self) -> pl.DataFrame:
        names = ["WakeFirstTouch"] * len(self.wakes)
        latencies = [self.wakes]
        for step, values in self.steps.items():
            names += [f"Step_{step}"] * len(values)
            latencies.append(values)
        latency = np.concatenate(latencies)
        start = self.started_at.timestamp()
        return pl.DataFrame({
            "trial_id": [self.trial_id] * len(latency), "name": names, "latency_ms": latency,
            "ts": start + np.linspace(0, 2400, len(latency)), "request_type": ["grpc"] * len(latency),
            "success": [True] * len(latency), "locust_counted": [True] * len(latency), "phase": ["steady"] * len(latency),
        })

    def distribution(self) -> dict:
        ordered = np.sort(self.wakes)
        figures = {"min_ms": float(ordered[0]), **{f"p{name}_ms": _percentile(ordered, permille) for name, permille in
                                                   (("50", 500), ("90", 900), ("95", 950), ("99", 990),
                                                    ("99_9", 999))},
                   "max_ms": float(ordered[-1]), "mean_ms": float(ordered.mean())}
        return {"trial_id": self.trial_id, "n_wakes": len(ordered), "n_failed": 0, **figures, "ok_n": len(ordered),
                **{f"ok_{key}": value for key, value in figures.items()}}

    def frontier(self) -> dict:
        actors = self.users * ACTORS_PER_USER
        return {"trial_id": self.trial_id, "peak_users": float(self.users),
                "actors_per_node": round(actors / NODES, 2), "actors_per_vcpu": round(actors / VCPUS, 2),
                "actors_per_gb_ram": round(actors / RAM_GB, 2), "actors_per_pod_p50": 3.0, "actors_per_pod_p90": 4.0,
                "actors_per_pod_p99": 4.0, "aggregate_failure_ratio": 0.0004, "figures_from": "recomputed",
                "frontier_mismatch": None}

    def step_rows(self) -> list[dict]:
        rows = []
        for step, values in self.steps.items():
            ordered = np.sort(values)
            rows.append({"trial_id": self.trial_id, "step": step, "n_ok_steps": len(ordered), "failures": 0,
                         "p50_ms": _percentile(ordered, 500), "p95_ms": _percentile(ordered, 950),
                         "p99_ms": _percentile(ordered, 990)})
        return rows


def lognormal(rng: np.random.Generator, median_ms: float, sigma: float, n: int) -> np.ndarray:
    return np.round(rng.lognormal(np.log(median_ms), sigma, n), 3)


def _steps(rng: np.random.Generator, scale: float, n: int) -> dict[str, np.ndarray]:
    medians = (4.0, 180.0, 950.0, 22.0, 420.0)
    return {step: lognormal(rng, median * scale, 0.35, n) for step, median in zip(STEPS, medians, strict=True)}


def ladder_points(trial: Trial, rng: np.random.Generator, per_step: int) -> tuple[list[dict], np.ndarray]:
    """Six ladder steps of 20 users more each; the wake p99 climbs with load and breaks the SLO at step 5; the last
    step was cut short. Their rows and all their wakes."""
    points, wakes = [], []
    for step in range(1, 7):
        users = 20 * step
        load = (step / 6) ** 3
        sample = lognormal(rng, 38 * (1 + 2.2 * load), 0.42 + 0.25 * load, per_step)
        ordered = np.sort(sample)
        wakes.append(sample)
        actors = users * ACTORS_PER_USER
        requests = per_step * 12
        failed = int(requests * 0.0002 * step ** 2)
        points.append({"trial_id": trial.trial_id, "step": step, "points": 6, "target_users": users, "hold_s": 300,
                       "complete": step < 6, "recorded": True, "users": float(users), "actors": float(actors),
                       "actors_per_node": round(actors / NODES, 2), "actors_per_vcpu": round(actors / VCPUS, 2),
                       "actors_per_gb_ram": round(actors / RAM_GB, 2), "window_start_ts": 1_773_310_500 + 330 * step,
                       "window_end_ts": 1_773_310_800 + 330 * step, "wake_n": per_step, "wake_failed": 0,
                       "wake_p50_ms": _percentile(ordered, 500), "wake_p90_ms": _percentile(ordered, 900),
                       "wake_p99_ms": _percentile(ordered, 990), "wake_max_ms": float(ordered[-1]),
                       "requests": requests, "failed_requests": failed, "failure_ratio": failed / requests})
    return points, np.concatenate(wakes)


def capacity_row(trial: Trial, points: list[dict]) -> dict:
    """slo_capacity's rule: the knee is the lowest complete step over the SLO, the capacity the highest complete step
    within it below the knee."""
    complete = [p for p in points if p["complete"]]
    knee = next((p for p in complete if p["wake_p99_ms"] > SLO_WAKE_P99_MS), None)
    meeting = [p for p in complete if p["wake_p99_ms"] <= SLO_WAKE_P99_MS and (knee is None or p["step"] < knee["step"])]
    capacity = meeting[-1] if meeting else None
    return {"trial_id": trial.trial_id, "suite": trial.suite, "slo_wake_p99_ms": SLO_WAKE_P99_MS,
            "slo_failure_ratio": None, "points": len(points), "planned_steps": len(points),
            "complete_points": len(complete), "capacity_step": capacity and capacity["step"],
            "capacity_target_users": capacity and capacity["target_users"],
            "capacity_users": capacity and capacity["users"], "capacity_actors": capacity and capacity["actors"],
            "capacity_actors_per_node": capacity and capacity["actors_per_node"],
            "capacity_actors_per_vcpu": capacity and capacity["actors_per_vcpu"],
            "capacity_actors_per_gb_ram": capacity and capacity["actors_per_gb_ram"],
            "capacity_wake_p99_ms": capacity and capacity["wake_p99_ms"],
            "capacity_failure_ratio": capacity and capacity["failure_ratio"],
            "capacity_null_because": None if capacity else "the SLO is broken at the lowest measured load point",
            "knee_step": knee and knee["step"], "knee_target_users": knee and knee["target_users"],
            "knee_users": knee and knee["users"], "knee_actors": knee and knee["actors"],
            "knee_actors_per_node": knee and knee["actors_per_node"], "knee_wake_p99_ms": knee and knee["wake_p99_ms"],
            "knee_failure_ratio": knee and knee["failure_ratio"], "broken_by": "wake_p99_ms" if knee else None,
            "knee_null_because": None if knee else "the SLO is not broken within the ladder",
            "met_above_knee": 0 if knee else None, "highest_meeting_step": capacity and capacity["step"],
            "highest_meeting_users": capacity and capacity["users"]}


def history_rows(rng: np.random.Generator) -> tuple[list[dict], list[dict]]:
    """Two configurations of the suite, 24 trials each: the first's wake p99 regresses by about a fifth at trial 15;
    the second's capacity improves at trial 10. (metric_history rows, change_points rows.)"""
    metrics = (("wake_p99_ms", "ms", "lower"), ("wake_p50_ms", "ms", "lower"),
               ("capacity_users", "users", "higher"), ("actors_per_node", "actors/node", "higher"))
    history, changes = [], []
    for configuration, offset in (("3f1c9a0b7d2e", 0.0), ("a84e52c61f09", 1.0)):
        for number in range(1, 25):
            started = datetime(2026, 2, 1, 9, tzinfo=UTC) + timedelta(days=number, hours=offset)
            trial_id = f"{HISTORY_SUITE}-{started:%Y%m%dt%H%M%S}z"
            regressed = offset == 0 and number >= 15
            improved = offset == 1 and number >= 10
            capacity = round(rng.normal(80 + (16 if improved else 0) - 6 * offset, 2.5))
            figures = {"wake_p99_ms": rng.normal(182 * (1.22 if regressed else 1.0) + 8 * offset, 5.5),
                       "wake_p50_ms": rng.normal(41 * (1.08 if regressed else 1.0) + 2 * offset, 1.2),
                       "capacity_users": float(capacity), "actors_per_node": capacity * ACTORS_PER_USER / NODES}
            for metric, unit, better in metrics:
                history.append({"suite": HISTORY_SUITE, "configuration": configuration, "trial_id": trial_id,
                                "started_at": started, "trial_number": number, "sut_version": f"v0.{7 + number // 6}.{number % 6}",
                                "metric": metric, "value": float(figures[metric]), "unit": unit, "better": better})
    frame = pl.DataFrame(history)
    for configuration, metric, at, direction in (("3f1c9a0b7d2e", "wake_p99_ms", 15, "regressed"),
                                                 ("a84e52c61f09", "capacity_users", 10, "improved")):
        series = frame.filter((pl.col("configuration") == configuration) & (pl.col("metric") == metric))
        before = series.filter(pl.col("trial_number") < at)["value"].mean()
        after = series.filter(pl.col("trial_number") >= at)["value"].mean()
        row = series.filter(pl.col("trial_number") == at).row(0, named=True)
        previous = series.filter(pl.col("trial_number") == at - 1).row(0, named=True)
        changes.append({"suite": HISTORY_SUITE, "configuration": configuration, "metric": metric,
                        "trial_id": row["trial_id"], "trial_number": at, "started_at": row["started_at"],
                        "sut_version": row["sut_version"], "previous_trial_id": previous["trial_id"],
                        "mean_before": before, "mean_after": after, "change_pct": 100 * (after - before) / before,
                        "p_value": 0.00031 if direction == "regressed" else 0.0042, "direction": direction,
                        "unit": row["unit"]})
    return history, changes


def fill(path: Path, *, per_step: int = 8_000, history: bool = True, seed: int = 20260312) -> Path:
    """The warehouse at ``path``: a six-step ladder trial, a baseline and a candidate trial of one flat suite, and
    (with ``history``) that suite's metric_history and change_points."""
    rng = np.random.default_rng(seed)
    ladder = Trial(LADDER_TRIAL, SUITE, datetime(2026, 3, 12, 10, 15, tzinfo=UTC), "v0.11.2", np.empty(0),
                   _steps(rng, 1.0, 3_000), users=120)
    points, ladder.wakes = ladder_points(ladder, rng, per_step)
    baseline = Trial(BASELINE_TRIAL, HISTORY_SUITE, datetime(2026, 3, 10, 9, tzinfo=UTC), "v0.11.1",
                     lognormal(rng, 40, 0.45, 6 * per_step), _steps(rng, 1.0, 2_000), users=80)
    candidate = Trial(CANDIDATE_TRIAL, HISTORY_SUITE, datetime(2026, 3, 11, 9, tzinfo=UTC), "v0.11.2",
                      lognormal(rng, 44, 0.52, 6 * per_step), _steps(rng, 1.1, 2_000), users=80)
    trials = (ladder, baseline, candidate)
    with connect(path) as connection:
        ensure_schema(connection)
        for table, ddl in MODEL_DDL.items():
            if history or table not in ("metric_history", "change_points"):
                connection.execute(ddl)
        _raw(connection, "trial_manifests", [trial.manifest() for trial in trials])
        _raw(connection, "request_samples", pl.concat([trial.request_frame() for trial in trials]))
        _insert(connection, "trials", [trial.trial_row() for trial in trials])
        _insert(connection, "wake_latency_distribution", [trial.distribution() for trial in trials])
        _insert(connection, "density_frontiers", [trial.frontier() for trial in trials])
        _insert(connection, "step_latency", [row for trial in trials for row in trial.step_rows()])
        _insert(connection, "load_points", points)
        flat = [{**points[0], "trial_id": trial.trial_id, "points": 1, "step": 1} for trial in (baseline, candidate)]
        _insert(connection, "load_points", flat)
        _insert(connection, "slo_capacity", [capacity_row(ladder, points),
                                             *(capacity_row(trial, [p]) for trial, p in zip((baseline, candidate), flat,
                                                                                            strict=True))])
        if history:
            history_table, change_table = history_rows(rng)
            _insert(connection, "metric_history", history_table)
            _insert(connection, "change_points", change_table)
    return path
