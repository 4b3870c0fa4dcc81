"""The figures printed at the end of a trial, computed from exact request samples: the wakes Locust counted,
failed or not, as ``wake_latency_distribution``'s main figures."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from substrate_assets.analysis.statistics import summarize
from substrate_assets.results.readers import read_requests


@dataclass(frozen=True)
class RequestSummary:
    requests: int
    failures: int
    wake_n: int
    wake_failed: int
    wake_p50_ms: float | None
    wake_p95_ms: float | None
    wake_p99_ms: float | None
    steps_completed: int
    sessions: int

    @classmethod
    def of(cls, requests: pl.DataFrame) -> RequestSummary:
        counted = requests.filter((pl.col("name") == "WakeFirstTouch") & pl.col("locust_counted").ne_missing(False))
        wakes = counted["latency_ms"].drop_nulls().to_list()
        figures = summarize(wakes, ("p50", "p95", "p99"))
        steps = requests.filter(pl.col("name").str.starts_with("Step_"))
        return cls(
            requests=requests.height,
            failures=requests.filter(~pl.col("success")).height,
            wake_n=len(wakes), wake_failed=counted.filter(~pl.col("success")).height,
            wake_p50_ms=figures["p50"], wake_p95_ms=figures["p95"], wake_p99_ms=figures["p99"],
            steps_completed=steps.filter(pl.col("success")).height,
            sessions=requests.filter((pl.col("name") == "CreateActor") & pl.col("success")).height,
        )

    @property
    def failure_ratio(self) -> float | None:
        """Failed requests over requests, to 4 dp; null without requests."""
        return round(self.failures / self.requests, 4) if self.requests else None

    def wake_figures(self) -> str:
        """``n=… failed … p50 … ms p95 … ms p99 … ms``, to 0.1 ms; null where there were no wakes."""

        def ms(value: float | None) -> str:
            return "null" if value is None else f"{value:.1f} ms"

        return (f"n={self.wake_n}  failed {self.wake_failed}  p50 {ms(self.wake_p50_ms)}  "
                f"p95 {ms(self.wake_p95_ms)}  p99 {ms(self.wake_p99_ms)}")

    @classmethod
    def of_file(cls, path: Path) -> RequestSummary:
        return cls.of(read_requests(path))
