"""The figures printed at the end of a trial, computed from exact request samples: the wakes Locust counted,
failed or not, as ``wake_latency_distribution``'s main figures. A wake is the request the log marks ``wake``
(each family's wake row); a log written before that column existed marks none, and its wakes are its
``WakeFirstTouch`` rows (every trial then was an agent session)."""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from substrate_assets.analysis.statistics import summarize


def is_wake() -> pl.Expr:
    """Whether a request-log row is a wake (see the module's docstring)."""
    return pl.col("wake").fill_null(pl.col("name") == "WakeFirstTouch")


@dataclass(frozen=True)
class RowFigures:
    """One request name's exact figures: every request of it Locust counted, failed or not."""

    name: str
    n: int
    failed: int
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None

    def text(self) -> str:
        return _figures_text(self.n, self.failed, self.p50_ms, self.p95_ms, self.p99_ms)


def _figures_text(n: int, failed: int, p50: float | None, p95: float | None, p99: float | None) -> str:
    """``n=… failed … p50 … ms p95 … ms p99 … ms``, to 0.1 ms; null where there were none."""

    def ms(value: float | None) -> str:
        return "null" if value is None else f"{value:.1f} ms"

    return f"n={n}  failed {failed}  p50 {ms(p50)}  p95 {ms(p95)}  p99 {ms(p99)}"


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
    wake_row: str | None = None  # the name of the wake rows, e.g. WakeFirstTouch; None without any
    headline: tuple[RowFigures, ...] = ()  # the figures of the rows asked for that the trial booked

    @classmethod
    def of(cls, requests: pl.DataFrame, headline: tuple[str, ...] = ()) -> RequestSummary:
        counted = requests.filter(is_wake() & pl.col("locust_counted").ne_missing(False))
        wakes = counted["latency_ms"].drop_nulls().to_list()
        names = sorted(set(counted["name"].to_list()))
        figures = summarize(wakes, ("p50", "p95", "p99"))
        steps = requests.filter(pl.col("name").str.starts_with("Step_"))
        return cls(
            requests=requests.height,
            failures=requests.filter(~pl.col("success")).height,
            wake_n=len(wakes), wake_failed=counted.filter(~pl.col("success")).height,
            wake_p50_ms=figures["p50"], wake_p95_ms=figures["p95"], wake_p99_ms=figures["p99"],
            steps_completed=steps.filter(pl.col("success")).height,
            sessions=requests.filter((pl.col("name") == "CreateActor") & pl.col("success")).height,
            wake_row=", ".join(names) or None,
            headline=tuple(row for name in headline if (row := row_figures(requests, name)) is not None),
        )

    @property
    def failure_ratio(self) -> float | None:
        """Failed requests over requests, to 4 dp; null without requests."""
        return round(self.failures / self.requests, 4) if self.requests else None

    def wake_figures(self) -> str:
        """The wakes' ``n=… failed … p50 … ms p95 … ms p99 … ms``, to 0.1 ms; null where there were none."""
        return _figures_text(self.wake_n, self.wake_failed, self.wake_p50_ms, self.wake_p95_ms, self.wake_p99_ms)


def row_figures(requests: pl.DataFrame, name: str) -> RowFigures | None:
    """``name``'s figures from the request log; None when the trial booked no such request."""
    counted = requests.filter((pl.col("name") == name) & pl.col("locust_counted").ne_missing(False))
    if counted.is_empty():
        return None
    figures = summarize(counted["latency_ms"].drop_nulls().to_list(), ("p50", "p95", "p99"))
    return RowFigures(name, int(figures["n_samples"] or 0), counted.filter(~pl.col("success")).height, figures["p50"],
                      figures["p95"], figures["p99"])
