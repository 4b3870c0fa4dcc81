"""Where trials live in the run store, Hive-partitioned exactly as upstream's runner uploads them.

``<store>/runs/<suite>/run_date=YYYY-MM-DD/run_ts=<unix>/run_tag=<tag>/``

A trial's id is ``<suite>-<yyyymmddthhmmssz>`` (a slug, usable as a Dagster
partition key). Trials are assembled in ``<store>/.staging/<trial id>/`` and
renamed into place when complete, so ``runs/`` only ever holds whole trials.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

STAGING = ".staging"
_TRIAL_ID = re.compile(r"(?P<suite>[a-z0-9][a-z0-9_-]*)-(?P<stamp>\d{8}t\d{6}z)")
_TRIAL_DIR = re.compile(r"runs/(?P<suite>[^/]+)/run_date=(?P<date>\d{4}-\d{2}-\d{2})/run_ts=(?P<ts>\d+)"
                        r"/run_tag=(?P<tag>[^/]+)/?$")

# Basenames of the files a trial directory holds.
STATS_CSV = "stats.csv"
STATS_HISTORY_CSV = "stats_history.csv"
FAILURES_CSV = "failures.csv"
EXCEPTIONS_CSV = "exceptions.csv"
LOCUST_CSVS = {"stats": STATS_CSV, "stats_history": STATS_HISTORY_CSV, "failures": FAILURES_CSV,
               "exceptions": EXCEPTIONS_CSV}
STATS_JSONL = "stats.jsonl"
STATUS_JSON = "status.json"
SERVER_SUMMARY_JSON = "server_summary.json"
TRIAL_JSON = "trial.json"
REQUESTS_PARQUET = "requests.parquet"
RUNTIME_EVENTS_PARQUET = "runtime_events.parquet"
LOGS_TXT = "logs.txt"


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
        return f"{self.suite}-{self.started.strftime('%Y%m%dt%H%M%Sz')}"

    @property
    def relative_path(self) -> str:
        return f"runs/{self.suite}/run_date={self.run_date}/run_ts={self.run_ts}/run_tag={self.tag}"

    @classmethod
    def from_trial_id(cls, trial_id: str, tag: str) -> TrialKey:
        """The key a trial id names: ``<suite>-<yyyymmddthhmmssz>`` and the suite's tag."""
        match = _TRIAL_ID.fullmatch(trial_id)
        if match is None:
            raise ValueError(f"{trial_id!r} is not a trial id (<suite>-<yyyymmddthhmmssz>)")
        started = datetime.strptime(match["stamp"], "%Y%m%dt%H%M%Sz").replace(tzinfo=UTC)
        return cls(match["suite"], int(started.timestamp()), tag)

    @staticmethod
    def suite_of(trial_id: str) -> str:
        match = _TRIAL_ID.fullmatch(trial_id)
        if match is None:
            raise ValueError(f"{trial_id!r} is not a trial id (<suite>-<yyyymmddthhmmssz>)")
        return match["suite"]

    @classmethod
    def parse(cls, relative: str) -> TrialKey:
        match = _TRIAL_DIR.search(relative.replace("\\", "/"))
        if match is None:
            raise ValueError(f"{relative!r} is not a trial directory (runs/<suite>/run_date=…/run_ts=…/run_tag=…)")
        return cls(match["suite"], int(match["ts"]), match["tag"])


@dataclass(frozen=True)
class RunStore:
    """A local run store directory."""

    root: Path

    def trial_dir(self, key: TrialKey) -> Path:
        return self.root / key.relative_path

    def staging_dir(self, key: TrialKey) -> Path:
        return self.root / STAGING / key.trial_id

    def trial_dirs(self) -> list[Path]:
        """Every complete trial directory in the store, oldest first."""
        runs = self.root / "runs"
        if not runs.is_dir():
            return []
        found = [p for p in runs.glob("*/run_date=*/run_ts=*/run_tag=*") if p.is_dir()]
        return sorted(found, key=lambda p: (TrialKey.parse(p.relative_to(self.root).as_posix()).run_ts, str(p)))

    def find(self, trial_id: str) -> Path:
        for path in self.trial_dirs():
            if TrialKey.parse(path.relative_to(self.root).as_posix()).trial_id == trial_id:
                return path
        raise FileNotFoundError(f"no trial {trial_id!r} in {self.root / 'runs'}")
