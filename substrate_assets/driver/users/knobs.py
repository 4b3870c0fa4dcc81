"""The knob values a run's virtual users read: every knob of :data:`substrate_assets.families.KNOBS`, each at the
value the Locust flag carried (upstream's worker default when the suite left it unset), plus the atespace and
the suite's modes.

Nothing is declared here twice: the fields, their defaults and their bounds come from the knobs' one declaration,
so a knob added there reaches the users with no edit here. Sizes are glutton's own quantity strings (sent
verbatim: glutton parses them, and a bad one is a failed request, as upstream), and ``""`` means "off" where
upstream's does. A value out of bounds refuses the user at its start, naming the knob.
"""

from __future__ import annotations

import random
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model, model_validator

from substrate_assets.families import ATESPACE, KNOBS, LifecycleMode, ResumeMode, window_problems

DEFAULT_FILE_SIZE = 8 << 20


def uniform_wait(rng: random.Random, low: float, high: float) -> float:
    """U[low, high]; an empty or inverted range is ``low`` (upstream's uniformWait)."""
    return low if high <= low else low + rng.random() * (high - low)


class _WorkerValues(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    atespace: str = ATESPACE
    lifecycle_mode: LifecycleMode = ""
    resume_mode: ResumeMode = ""
    think_scale: float = Field(1.0, ge=0, description="Multiplies an agent session's think times; 0 reads as 1.")

    @model_validator(mode="after")
    def _windows_in_order(self) -> _WorkerValues:
        problems = window_problems(self)
        if problems:
            raise ValueError("; ".join(f"{name}: {why}" for name, why in problems))
        return self

    def wait_seconds(self, rng: random.Random) -> float:
        """One wait between iterations, U[min_wait, max_wait]."""
        return uniform_wait(rng, self.min_wait_time, self.max_wait_time)  # type: ignore[attr-defined]  # a knob's field, added by create_model

    def live_seconds(self, rng: random.Random) -> float:
        """One live window, U[min_live, max_live]."""
        return uniform_wait(rng, self.min_live_time, self.max_live_time)  # type: ignore[attr-defined]  # a knob's field, added by create_model

    @property
    def pause(self) -> bool:
        return self.lifecycle_mode == "pause"

    @property
    def think_multiplier(self) -> float:
        """Upstream reads a scale of zero as one."""
        return self.think_scale if self.think_scale > 0 else 1.0

    @property
    def pings_per_wake(self) -> int:
        """Upstream reads fewer than one as one."""
        return int(max(1, self.max_pings_per_wake))  # type: ignore[attr-defined]  # a knob's field, added by create_model

    @property
    def read_size(self) -> str:
        """The ReadRAM size: ``all`` walks the whole array (an empty size)."""
        return "" if self.mem_read == "all" else self.mem_read  # type: ignore[attr-defined]  # a knob's field, added by create_model

    @property
    def file_size(self) -> int:
        """Durdir's file size; upstream reads zero as its default, 8 MiB."""
        size: int = self.durdir_file_size_bytes  # type: ignore[attr-defined]  # a knob's field, added by create_model
        return size if size > 0 else DEFAULT_FILE_SIZE

    @property
    def digest_reads(self) -> bool:
        return bool(self.durdir_read_mode == "digest")  # type: ignore[attr-defined]  # a knob's field, added by create_model

    @property
    def spawn_workers(self) -> int:
        """Upstream runs min(concurrency, total) spawn workers, at least one."""
        return int(max(1, min(self.spawn_concurrency, self.total_actors)))  # type: ignore[attr-defined]  # a knob's field, added by create_model


# Each knob's (annotation, field), as create_model takes them.
_KNOB_FIELDS: dict[str, Any] = {
    knob.name: (knob.annotation, Field(knob.default, description=knob.description, **knob.constraints))
    for knob in KNOBS}
WorkerKnobs: Any = create_model(
    "WorkerKnobs", __base__=_WorkerValues,
    __doc__="Every knob a virtual user reads, at the run's value or upstream's worker default.", **_KNOB_FIELDS)
