"""Where trials live in the run store, Hive-partitioned exactly as upstream's runner uploads them.

``<store>/runs/<suite>/run_date=YYYY-MM-DD/run_ts=<unix>/run_tag=<tag>/``

A trial's id is ``<suite>-<yyyymmddthhmmssz>`` (a slug, usable as a Dagster
partition key), so two trials of a suite never share a second, whatever their
tags. Trials are assembled in ``<store>/.staging/<trial id>/`` and renamed into
place when complete, so ``runs/`` only ever holds whole trials. Ids are minted
here, for every caller (a trial run, the main job, the script-change sensor).

A claimed staging directory records its owner process (in its scratch area, which the rename leaves behind);
:meth:`RunStore.sweep_dead_staging` removes those whose owner died before landing, and never one whose owner lives.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

from substrate_assets.processes.leftovers import dead_owned, mark, remove
from substrate_assets.results.trial_directory import WORK
from substrate_assets.results.trial_key import TrialKey

__all__ = ["STAGING", "RunStore", "TrialExists", "TrialKey"]

STAGING = ".staging"
class TrialExists(FileExistsError):
    """A trial's results are never rewritten."""


@dataclass(frozen=True)
class RunStore:
    """A local run store directory."""

    root: Path

    def trial_dir(self, key: TrialKey) -> Path:
        return self.root / key.relative_path

    def staging_dir(self, key: TrialKey) -> Path:
        return self.root / STAGING / key.trial_id

    def _second(self, key: TrialKey) -> Path:
        """Where every trial with ``key``'s id lives, whatever its tag."""
        return self.trial_dir(key).parent

    def holds(self, key: TrialKey) -> bool:
        """Whether a trial with ``key``'s id exists here, whole (any tag) or being assembled."""
        return self._second(key).is_dir() or self.staging_dir(key).exists()

    def propose_key(self, suite: str, tag: str, taken: Collection[str] = (), now: float | None = None) -> TrialKey:
        """A key for a trial of ``suite`` starting now (or at ``now``): the first second from then whose trial id
        is neither in the store nor among ``taken`` (ids already handed out, e.g. Dagster partitions)."""
        run_ts = int(time.time() if now is None else now)
        while True:
            key = TrialKey(suite, run_ts, tag)
            if key.trial_id not in taken and not self.holds(key):
                return key
            run_ts += 1

    def _being_assembled(self, key: TrialKey) -> TrialExists:
        return TrialExists(f"trial {key.trial_id} is being assembled in {self.staging_dir(key)} by another run "
                           "(or was interrupted there)")

    def refuse_existing(self, key: TrialKey) -> None:
        """Raise TrialExists if a trial with ``key``'s id is already here, whole or being assembled."""
        if self._second(key).is_dir():
            raise TrialExists(f"trial {key.trial_id} already ran ({self._second(key)}); results are never "
                              "rewritten")
        if self.staging_dir(key).exists():
            raise self._being_assembled(key)

    def claim(self, key: TrialKey) -> Path:
        """Create ``key``'s staging directory, owned by this process, or raise TrialExists."""
        self.refuse_existing(key)
        try:
            self.staging_dir(key).mkdir(parents=True)
        except FileExistsError:  # claimed by another run between the check and here
            raise self._being_assembled(key) from None
        work = self.staging_dir(key) / WORK
        work.mkdir()
        mark(work)
        return self.staging_dir(key)

    def land(self, key: TrialKey) -> Path:
        """Rename ``key``'s claimed staging directory, once its trial is whole, into runs/ (its scratch area, and the
        owner record in it, removed first); the trial's directory."""
        staging = self.staging_dir(key)
        shutil.rmtree(staging / WORK)
        final = self.trial_dir(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.rename(staging, final)
        return final

    def sweep_dead_staging(self) -> list[str]:
        """Remove the staging directories of trials whose process died before landing (kill -9, the OOM killer);
        one line each.

        What such a trial measured is dropped, not kept aside: it has no manifest or status (a killed trial never
        wrote them) so no reader takes it, and while it stays its trial id cannot run again. A directory whose
        owner lives, or that records no owner (an import being assembled), is left alone.
        """

        staging = self.root / STAGING
        if not staging.is_dir():
            return []
        return remove(dead_owned(staging.iterdir(), WORK), "trial")

    def claim_new(self, suite: str, tag: str) -> TrialKey:
        """Mint and claim a key for a trial of ``suite`` starting now; a racing claim moves on to the next second."""
        while True:
            key = self.propose_key(suite, tag)
            try:
                self.claim(key)
                return key
            except TrialExists:
                continue

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
