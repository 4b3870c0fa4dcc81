"""How a person names a figure of a request row: ``ResumeActor``, ``ResumeActor:p99`` (light: suites import it to
check a suite's ``compare.figures``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Statistic = Literal["gmean", "p50", "p99", "mean"]
STATISTICS: tuple[str, ...] = get_args(Statistic)


class NotAFigure(ValueError):
    """A ``--figure`` (or a suite's ``compare.figures``) that does not name a request row's statistic."""


@dataclass(frozen=True)
class RequestFigure:
    """One statistic of one request row."""

    row: str
    statistic: Statistic = "gmean"

    @property
    def figure(self) -> str:
        """Its name in a comparison: ``ResumeActor p50``."""
        return f"{self.row} {self.statistic}"

    @classmethod
    def parse(cls, spec: str) -> RequestFigure:
        """``NAME`` or ``NAME:STATISTIC``; NotAFigure saying what goes there."""
        row, _, statistic = spec.strip().rpartition(":") if ":" in spec else (spec.strip(), "", "gmean")
        row, statistic = row.strip(), statistic.strip()
        if not row:
            raise NotAFigure(f"{spec!r}: no request name: write NAME or NAME:STATISTIC (e.g. ResumeActor:p99)")
        if statistic not in STATISTICS:
            raise NotAFigure(f"{spec!r}: {statistic!r} is not a statistic of a request row: "
                             f"{', '.join(STATISTICS)}")
        return cls(row, statistic)  # type: ignore[arg-type]  # checked against STATISTICS just above
