"""When a compared figure counts as changed: a suite's ``compare:`` thresholds (light: suites import it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Thresholds(BaseModel):
    """When a compared figure counts as changed (a suite's ``compare:``). The defaults follow the tools this
    field already trusts: asv's ``compare`` (a factor of 1.1 and Mann–Whitney U p < 0.002) for latency, Conbench's
    pairwise 5 % for densities and capacity."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    latency_change_pct: float = Field(10.0, gt=0, allow_inf_nan=False, description="A latency percentile has "
                                      "changed when it moved by at least this many percent, its 95 % bootstrap "
                                      "interval excludes no difference and, for the p50, Mann–Whitney U agrees.")
    p_value: float = Field(0.002, gt=0, le=1, allow_inf_nan=False, description="The Mann–Whitney U p-value a "
                           "p50 change must be below.")
    density_change_pct: float = Field(5.0, gt=0, allow_inf_nan=False, description="Densities (actors per node, "
                                      "vCPU, GiB) and capacity have changed when they moved by at least this "
                                      "many percent.")
    failure_ratio_change: float = Field(0.01, gt=0, le=1, allow_inf_nan=False, description="The failure ratio "
                                        "has changed when it moved by at least this much (0.01 = one "
                                        "percentage point).")
