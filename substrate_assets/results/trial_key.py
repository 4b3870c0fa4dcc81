"""What identifies a trial: suite, start second and tag; its id (``<suite>-<yyyymmddthhmmssz>``) and its
Hive path in a run store (``runs/<suite>/run_date=…/run_ts=…/run_tag=…``)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

_STAMP = "%Y%m%dt%H%M%Sz"
# The times a real run can have: from 2000 to 2100, UTC (Unix seconds).
EARLIEST_TS = int(datetime(2000, 1, 1, tzinfo=UTC).timestamp())
LATEST_TS = int(datetime(2100, 1, 1, tzinfo=UTC).timestamp())
_TRIAL_ID = re.compile(r"(?P<suite>[a-z0-9][a-z0-9_-]*)-(?P<stamp>\d{8}t\d{6}z)")
# A backslash is a character of a name here, never a separator: the suite and the tag are slugs.
_TRIAL_DIR = re.compile(r"runs/(?P<suite>[a-z0-9][a-z0-9_-]*)/run_date=(?P<date>\d{4}-\d{2}-\d{2})/run_ts=(?P<ts>\d+)"
                        r"/run_tag=(?P<tag>[A-Za-z0-9][A-Za-z0-9._-]*)/?$")


def group_id(suite: str, started: datetime, role: str, trials: int) -> str:
    """The id of a group of repeated trials: ``<suite>-<yyyymmddthhmmssz>-<role><trials>``, ``role`` ``x`` for a
    suite's repeats (``run --repeat``), ``a`` or ``b`` for a side of an A/B comparison (``ab``)."""
    return f"{suite}-{started.astimezone(UTC).strftime(_STAMP)}-{role}{trials}"


@dataclass(frozen=True)
class TrialKey:
    """What identifies a trial directory: suite, start second (UTC) and tag."""

    suite: str
    run_ts: int
    tag: str

    @property
    def started(self) -> datetime:
        return datetime.fromtimestamp(self.run_ts, UTC)

    @property
    def run_date(self) -> str:
        return self.started.strftime("%Y-%m-%d")

    @property
    def trial_id(self) -> str:
        return f"{self.suite}-{self.started.strftime(_STAMP)}"

    @property
    def relative_path(self) -> str:
        return f"runs/{self.suite}/run_date={self.run_date}/run_ts={self.run_ts}/run_tag={self.tag}"

    @staticmethod
    def _parts(trial_id: str) -> re.Match[str]:
        match = _TRIAL_ID.fullmatch(trial_id)
        if match is None:
            raise ValueError(f"{trial_id!r} is not a trial id (<suite>-<yyyymmddthhmmssz>)")
        return match

    @classmethod
    def from_trial_id(cls, trial_id: str, tag: str) -> TrialKey:
        """The key a trial id names: ``<suite>-<yyyymmddthhmmssz>`` and the suite's tag."""
        parts = cls._parts(trial_id)
        started = datetime.strptime(parts["stamp"], _STAMP).replace(tzinfo=UTC)
        return cls(parts["suite"], int(started.timestamp()), tag)

    @classmethod
    def suite_of(cls, trial_id: str) -> str:
        return cls._parts(trial_id)["suite"]

    @classmethod
    def parse(cls, relative: str) -> TrialKey:
        match = _TRIAL_DIR.search(relative)
        if match is None:
            raise ValueError(f"{relative!r} is not a trial directory (runs/<suite>/run_date=…/run_ts=…/run_tag=…)")
        return cls(match["suite"], int(match["ts"]), match["tag"])
