"""Import upstream run directories into the run store, unchanged.

Upstream's runner uploads each run to
``<dest>/runs/<name>/run_date=YYYY-MM-DD/run_ts=<unix>/run_tag=<tag>/``; ``ROOT`` is
that ``<dest>``: a local directory or any fsspec URL (``gs://``, ``s3://``,
``memory://``). Each run is copied file by file into a staging directory of the
run store and renamed into place, so the store only ever holds whole runs; a
run already in the store is left as it is.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import fsspec

from substrate_assets.results.layout import RunStore, TrialKey

RUN_GLOB = "runs/*/run_date=*/run_ts=*/run_tag=*"


@dataclass(frozen=True)
class ImportedRun:
    key: TrialKey
    source: str
    trial_dir: Path
    copied: bool

    @property
    def trial_id(self) -> str:
        return self.key.trial_id


def find_runs(root: str) -> tuple[fsspec.AbstractFileSystem, list[str]]:
    """The filesystem of ``root`` and every run directory under it, oldest first."""
    filesystem, base = fsspec.core.url_to_fs(root)
    base = base.rstrip("/")
    found = [path for path in filesystem.glob(f"{base}/{RUN_GLOB}") if filesystem.isdir(path)]
    return filesystem, sorted(found, key=lambda path: (TrialKey.parse(path).run_ts, path))


def import_runs(root: str, store: RunStore) -> list[ImportedRun]:
    filesystem, runs = find_runs(root)
    imported = []
    for source in runs:
        key = TrialKey.parse(source)
        target = store.trial_dir(key)
        if target.exists():
            imported.append(ImportedRun(key, source, target, copied=False))
            continue
        staging = store.staging_dir(key)
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        try:
            for path in filesystem.ls(source, detail=False):
                if filesystem.isfile(path):
                    filesystem.get_file(path, str(staging / Path(path).name))
            target.parent.mkdir(parents=True, exist_ok=True)
            os.rename(staging, target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        imported.append(ImportedRun(key, source, target, copied=True))
    return imported
