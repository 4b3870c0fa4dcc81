"""When a trial ran on a machine too busy with other work to be a sample of its configuration.

A trial measures the system under test and the machine it shares. When other work took the machine's CPU (another
checkout's tests, a build, a noisy neighbour on the hypervisor), the trial's latencies carry that work's queueing:
it is **disturbed**. A disturbed trial is marked wherever people look, left out of noise estimates and verdicts
(unless asked), and ``run --repeat`` runs another in its place. A suite's ``disturbance:`` limits say when
(``telemetry.machine_load`` measures the figures): a trial is disturbed when any measured figure is above its limit;
a figure not measured (a cluster measures node pressure only) is not judged, and a trial with none measured is not
known to be disturbed (null).
"""

from __future__ import annotations

from collections.abc import Mapping

from pydantic import BaseModel, ConfigDict, Field

DESCRIPTIONS = {
    "foreign_cpu_share": "CPU taken by other processes",
    "steal_share": "CPU stolen by the hypervisor",
    "cpu_pressure": "CPU pressure (PSI some)",
}


class DisturbanceLimits(BaseModel):
    """A suite's ``disturbance:``: the most of each figure a trial may see and still count as a sample of its
    configuration (null: not judged). docs/verdicts.md measures them on this machine: quiet quick-smoke trials see
    0.7–1.7 % foreign CPU; under ``stress-ng --cpu 1``, about a third."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    foreign_cpu_share: float | None = Field(default=0.05, ge=0, le=1, allow_inf_nan=False, description="Share of the "
                                            "machine's CPU time over the steady window spent by processes that are "
                                            "not the trial's.")
    steal_share: float | None = Field(default=0.05, ge=0, le=1, allow_inf_nan=False, description="Share of the "
                                      "machine's CPU time over the steady window the hypervisor gave to other "
                                      "guests.")
    cpu_pressure: float | None = Field(default=None, ge=0, le=1, allow_inf_nan=False, description="Share of the steady "
                                       "window in which some runnable task waited for a CPU (PSI some). Off by "
                                       "default on the local backend: a trial's own actors keep its cores busy "
                                       "(quiet quick-smoke: 0.7); a cluster suite may set it for its nodes.")


def disturbed_because(measured: Mapping[str, float | None], limits: DisturbanceLimits) -> list[str]:
    """One line for each measured figure above its limit."""
    reasons = []
    for name, limit in limits.model_dump().items():
        value = measured.get(name)
        if limit is not None and value is not None and value > limit:
            reasons.append(f"{DESCRIPTIONS[name]} {value * 100:.1f} % over the steady window, above the suite's "
                           f"limit of {limit * 100:.1f} %")
    return reasons


def is_disturbed(measured: Mapping[str, float | None], limits: DisturbanceLimits) -> bool | None:
    """True when a figure is above its limit; None when no limited figure was measured; else False."""
    if disturbed_because(measured, limits):
        return True
    judged = [name for name, limit in limits.model_dump().items()
              if limit is not None and measured.get(name) is not None]
    return False if judged else None
