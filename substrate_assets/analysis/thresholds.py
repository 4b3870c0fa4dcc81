"""When a compared figure counts as changed: a suite's ``compare:`` thresholds (light: suites import it)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Thresholds(BaseModel):
    """When a compared figure counts as changed (a suite's ``compare:``). The defaults follow the tools this
    field already trusts: asv's factor of 1.1 for latency, Conbench's pairwise 5 % for densities and capacity; and
    a comparison of identical configurations raises a false alarm in at most 5 % of comparisons."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    latency_change_pct: float = Field(10.0, gt=0, allow_inf_nan=False, description="A latency percentile has "
                                      "changed when it moved by at least this many percent, beyond the trials' "
                                      "noise, and its bootstrap interval excludes no change.")
    density_change_pct: float = Field(5.0, gt=0, allow_inf_nan=False, description="Densities (actors per node, "
                                      "vCPU, GiB) and capacity have changed when they moved by at least this "
                                      "many percent, beyond the trials' noise.")
    failure_ratio_change: float = Field(0.01, gt=0, le=1, allow_inf_nan=False, description="The failure ratio "
                                        "has changed when it moved by at least this much (0.01 = one "
                                        "percentage point), beyond the trials' noise.")
    false_alarm_rate: float = Field(0.05, gt=0, lt=1, allow_inf_nan=False, description="The chance that a "
                                    "comparison of two identical configurations calls any figure changed: each "
                                    "figure's test is held to this over the number of figures judged.")
