"""When a compared figure counts as changed: a suite's ``compare:`` thresholds (light: suites import it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from substrate_assets.analysis.figure_spec import RequestFigure

# The suite's false-alarm budget goes mostly to its primary figures (statistics.md §5: weighted Bonferroni).
PRIMARY_SHARE = 0.8


class Thresholds(BaseModel):
    """When a compared figure counts as changed (a suite's ``compare:``), and how often identical configurations may
    be told otherwise. docs/verdicts.md measures the defaults on this machine: at four trials a side a true +10 % of
    the wake's path geometric mean is found in most comparisons, and identical ones rarely get a verdict."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    latency_change_pct: float = Field(default=5.0, gt=0, allow_inf_nan=False, description="A latency (a "
                                      "geometric mean, a percentile) has changed when it moved by at least this many "
                                      "percent (symmetric on the log scale: +5 % mirrors −4.8 %) and its test is below "
                                      "the figure's level; it has not when its 90 % interval lies inside ±this.")
    density_change_pct: float = Field(default=5.0, gt=0, allow_inf_nan=False, description="Densities (actors per node, "
                                      "vCPU, GiB) and capacity have changed when they moved by at least this "
                                      "many percent, beyond the trials' noise.")
    failure_ratio_change: float = Field(default=0.01, gt=0, le=1, allow_inf_nan=False, description="The failure ratio "
                                        "has changed when it moved by at least this much (0.01 = one "
                                        "percentage point), beyond what the counts and their dispersion allow.")
    share_change: float = Field(default=0.05, gt=0, le=1, allow_inf_nan=False, description="A share of wakes (the slow "
                                "share) has changed when it moved by at least this much (0.05 = five percentage "
                                "points), beyond the trials' noise.")
    false_alarm_rate: float = Field(default=0.05, gt=0, lt=0.5, allow_inf_nan=False, description="The chance that a "
                                    "comparison of two identical configurations calls any figure regressed or "
                                    "improved; also the equivalence test's level (no change: the 1 − 2 × this "
                                    "interval inside ±threshold).")
    primary_share: float = Field(default=PRIMARY_SHARE, gt=0, lt=1, allow_inf_nan=False, description="The share of the "
                                 "false-alarm rate spent on the primary figures; the rest is shared by the others.")
    primary: tuple[str, ...] | None = Field(default=None, description="The figures the suite's question is about (as "
                                            "`compare` names them, e.g. 'ResumeActor p50'); by default the wake's "
                                            "path geometric mean where the runtime knows each wake's path, else its "
                                            "geometric mean.")
    figures: tuple[str, ...] = Field(default=(), description="Request rows judged beside the family's own, each "
                                     "NAME[:gmean|p50|p99|mean] (a row named alone is its geometric mean), e.g. "
                                     "'ResumeActor:p99': any request name the trials recorded in their request log.")

    @field_validator("figures")
    @classmethod
    def _figures_read(cls, figures: tuple[str, ...]) -> tuple[str, ...]:
        for spec in figures:
            RequestFigure.parse(spec)  # NotAFigure (a ValueError) says what goes there
        return figures

    def requested(self) -> tuple[RequestFigure, ...]:
        """The request rows' figures ``figures`` names."""
        return tuple(RequestFigure.parse(spec) for spec in self.figures)

    def judging(self, specs: tuple[str, ...]) -> Thresholds:
        """These thresholds, judging the figures ``specs`` name (``--figure``) as the comparison's primary ones: the
        question the person came with."""
        wanted = tuple(RequestFigure.parse(spec) for spec in specs)
        return self.model_copy(update={"figures": (*self.figures, *specs),
                                       "primary": tuple(dict.fromkeys(figure.figure for figure in wanted))})
