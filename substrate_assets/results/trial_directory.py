"""The trial directory: the contract between whatever writes a trial and whatever reads it.

This module names every file a trial directory holds, says once when a trial counts as *completed*, and
reads any trial directory — written by this platform, by upstream's runner of any age, or by another Locust
version — into one shape, so that no reader above it ever sees an upstream format.

| file | holds |
|---|---|
| ``stats.csv``, ``stats_history.csv``, ``failures.csv``, ``exceptions.csv`` | Locust's own CSVs |
| ``stats.jsonl`` | one row per stats.csv entry (upstream's envelope), then ``trial_summary``, ``server_summary`` |
| ``status.json`` | ``{locust_exit_code, stats_generated}``, as upstream CI reads it |
| ``server_summary.json`` | server telemetry inside the steady-state window |
| ``trial.json`` | our manifest: suite, script, knobs, cluster facts, versions (absent from upstream runs) |
| ``requests.parquet`` | every request with its exact latency (ours) |
| ``runtime_events.parquet``, ``runtime_samples.parquet`` | the embedded runtime's events and per-second samples |
| ``logs.txt`` | the runner's notes and Locust's output (upstream's: also how the run was started) |
| ``load_steps.json`` | a ladder trial's steps: when each ran, its steady window, server telemetry over it (ours) |
| ``import.json`` | beside an imported upstream run: the SLO it was imported with (``--slo-*``; absent without one) |

Upstream's runner, run locally, prefixes its files with the test name (``<test>_stats.csv``); readers accept
both forms.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from datetime import UTC, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import polars as pl

from substrate_assets.analysis.statistics import measured
from substrate_assets.families import family_of_rows
from substrate_assets.results.load_steps import (
    MAX_LADDER_STEPS,
    LoadStep,
    ladder_spec,
    parse_ladder,
    read_load_steps,
)
from substrate_assets.results.readers import (
    REQUESTS_SCHEMA,
    RUNTIME_EVENTS_SCHEMA,
    STATS_HISTORY_SCHEMA,
    STATS_SCHEMA,
    last_rows_by_metric,
    read_requests,
    read_runtime_events,
    read_stats,
    read_stats_history,
)
from substrate_assets.results.run_log import MAX_LINE_CHARS, RunLog, log_lines, read_run_log
from substrate_assets.results.server_summary import FLAT_KEYS, flat_key_block, flatten, kind_of_value
from substrate_assets.results.stats_jsonl import FACT_KEYS, REPORTED_FIGURES, SERVER_SUMMARY, TRIAL_SUMMARY
from substrate_assets.results.trial_key import EARLIEST_TS, LATEST_TS, TrialKey

STATS_CSV = "stats.csv"
STATS_HISTORY_CSV = "stats_history.csv"
FAILURES_CSV = "failures.csv"
EXCEPTIONS_CSV = "exceptions.csv"
STATS_JSONL = "stats.jsonl"
STATUS_JSON = "status.json"
SERVER_SUMMARY_JSON = "server_summary.json"
TRIAL_JSON = "trial.json"
REQUESTS_PARQUET = "requests.parquet"
RUNTIME_EVENTS_PARQUET = "runtime_events.parquet"
RUNTIME_SAMPLES_PARQUET = "runtime_samples.parquet"
LOGS_TXT = "logs.txt"
LOAD_STEPS_JSON = "load_steps.json"
# Beside an imported upstream run's own files, what the import was told about it: the SLO its load points are judged
# by (upstream's runs record none; its slo_knee takes the thresholds when it analyses).
IMPORT_JSON = "import.json"

# Locust writes ``<prefix>_<kind>.csv``; the trial keeps each under its own name.
LOCUST_CSVS = {"stats": STATS_CSV, "stats_history": STATS_HISTORY_CSV, "failures": FAILURES_CSV,
               "exceptions": EXCEPTIONS_CSV}

# Present in a trial directory of an object store while its upload is under way (object stores have no atomic
# rename): readers skip such a directory, and the upload puts trial.json last.
UPLOADING = ".uploading"

# The scratch area of a trial's staging directory while Locust runs; removed before the trial is renamed into
# runs/, so a finished trial never holds it.
WORK = ".work"
WORK_SCRIPT = "script.yaml"
LOCUST_LOG = "locust.log"
LOCUST_CSV_PREFIX = "locust"
REQUEST_LOG = "requests"
LADDER_LOG = "ladder.jsonl"

# The stats_history.csv rows that carry the run's totals (user count among them), by Locust version.
TOTAL_ROW_NAMES = ("", "Aggregated", "Total")


def locust_csv(work: Path, kind: str) -> Path:
    """Where Locust, run with ``--csv <work>/locust``, writes its CSV of ``kind`` (a key of LOCUST_CSVS)."""
    return work / f"{LOCUST_CSV_PREFIX}_{kind}.csv"


# Locust's exit codes when it shut down by itself at the end of its run time: 0, or 1 when it saw failed requests or
# errors in its users — a measurement, reported apart (trial.json's failed_requests, the trials mart's), not an end
# cut short. 2 is an unhandled error in Locust itself; a negative code, a signal that killed it.
LOCUST_RAN_TO_ITS_END = (0, 1)


def trial_completed(locust_exit_code: int | None, stats_generated: bool | None,
                    interrupted: bool = False, sessions_started: int | None = None) -> bool | None:
    """A trial *completed* when it ran to its end, whether or not requests failed: Locust exited by itself (0, or 1
    for failures) and wrote stats, nobody stopped it early, and a session started (``sessions_started`` 0: every
    session was refused, nothing was measured; null: not known, as for upstream runs). Null when Locust's exit is
    not known."""
    if locust_exit_code is None:
        return None
    return (locust_exit_code in LOCUST_RAN_TO_ITS_END and bool(stats_generated) and not interrupted
            and sessions_started != 0)


def _whole(value: Any) -> int | None:
    figure = measured(value)
    return None if figure is None else int(figure)


def _time(value: Any, where: str) -> int | None:
    """A time in Unix seconds a file states, whole; a ValueError naming ``where`` when it is none a run can have."""
    figure = measured(value)
    if figure is None:
        return None
    if not EARLIEST_TS <= figure < LATEST_TS:
        raise ValueError(f"{where} is {value!r}: not a time from 2000 to 2100 (Unix seconds)")
    return int(figure)


def _as_text(value: Any) -> str | None:
    return None if value is None else str(value)


def parse_moment(text: str | None) -> datetime | None:
    """A moment trial.json records (ISO 8601, ``Z`` for UTC); None when it records none."""
    return datetime.fromisoformat(text.replace("Z", "+00:00")) if text else None


def _from_unix(value: Any) -> datetime | None:
    seconds = measured(value)
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def telemetry_figures(flat: dict[str, Any]) -> dict[str, float | int | None]:
    """The 45 flat server_summary keys as numbers (null where nothing was measured)."""
    values = {key: measured(flat.get(key)) for key in FLAT_KEYS}
    values["checkpoints_in_window"] = _whole(values["checkpoints_in_window"])
    return values


def _object_of(row: dict[str, Any], key: str, metric: str) -> dict[str, Any]:
    """``row[key]``, an object of a stats.jsonl row (absent or null: empty); ValueError naming it otherwise."""
    value = row.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{STATS_JSONL}: the last {metric} row's {key} is {kind_of_value(value)}, where an object "
                         "goes")
    return value


class TrialDirectory:
    """One trial directory, read into the same shape whatever wrote it."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._held: dict[str, pl.DataFrame] | None = None

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """Within it, each of the trial's tables of rows (its CSVs, its parquet files) is read once however many
        tables are built from it, and let go at its end: a large stats_history.csv is not held twice."""
        self._held = {}
        try:
            yield
        finally:
            self._held = None

    def _json(self, name: str) -> Any:
        found = self.file(name)
        return json.loads(found.read_text()) if found is not None else None

    @cached_property
    def key(self) -> TrialKey | None:
        """The key the directory's run-store path names (None outside a run store)."""
        try:
            return TrialKey.parse(self.path.as_posix())
        except ValueError:
            return None

    @cached_property
    def manifest(self) -> dict[str, Any]:
        """trial.json; empty for an upstream run, which has none."""
        return self._json(TRIAL_JSON) or {}

    @property
    def suite(self) -> str | None:
        """The suite it ran: trial.json's, else its run-store path's; None when neither says."""
        return self.manifest.get("suite") or (self.key.suite if self.key else None)

    @cached_property
    def status(self) -> dict[str, Any]:
        """status.json: Locust's exit code (a whole number) and whether it wrote its stats (true or false), each null
        when not recorded; ValueError naming the key when the file holds anything else."""
        status = self._json(STATUS_JSON)
        if status is None:
            return {}
        if not isinstance(status, dict):
            raise ValueError(f"{STATUS_JSON} is {kind_of_value(status)}, where an object goes")
        code, generated = status.get("locust_exit_code"), status.get("stats_generated")
        if code is not None and (isinstance(code, bool) or not isinstance(code, int)):
            raise ValueError(f"{STATUS_JSON}: locust_exit_code is {kind_of_value(code)}, where a whole number goes")
        if generated is not None and not isinstance(generated, bool):
            raise ValueError(f"{STATUS_JSON}: stats_generated is {kind_of_value(generated)}, where true or false "
                             "goes")
        return status

    @property
    def trial_id(self) -> str:
        if self.manifest.get("trial_id"):
            named: str = self.manifest["trial_id"]
            return named
        if self.key is None:
            raise ValueError(f"{self.path} has no trial.json and is not a run-store trial directory")
        return self.key.trial_id

    def file(self, name: str) -> Path | None:
        """``name`` in the directory, or for a Locust CSV upstream's local form ``<test name>_<name>``; None if
        neither exists. Only Locust writes that form: a ``zz_trial.json`` is nobody's trial.json."""
        path = self.path / name
        if path.is_file():
            return path
        if name not in LOCUST_CSVS.values():
            return None
        prefixed = sorted(self.path.glob(f"*_{name}"))
        return prefixed[0] if prefixed else None

    @cached_property
    def _last_rows(self) -> dict[str, dict[str, Any]]:
        path = self.file(STATS_JSONL)
        return last_rows_by_metric(path) if path is not None else {}

    def _last_row(self, metric: str) -> dict[str, Any] | None:
        return self._last_rows.get(metric)

    def jsonl_measurements(self, metric: str) -> dict[str, Any] | None:
        """The measurements of the last stats.jsonl row of ``metric`` (``trial_summary``, ``server_summary``).

        The oldest runners nest a trial_summary's facts, as native numbers, under ``raw_configuration``."""
        row = self._last_row(metric)
        if row is None:
            return None
        return _object_of(row, "measurements", metric) or _object_of(row, "raw_configuration", metric) or {}

    @cached_property
    def run_log(self) -> RunLog:
        """What logs.txt records of how the run was started (users, actors per user); nothing without one."""
        path = self.file(LOGS_TXT)
        return read_run_log(log_lines(path)) if path is not None else RunLog()

    def reported_figures(self) -> dict[str, Any]:
        """The density figures the trial's own trial_summary row reported, as ``reported_<figure>`` numbers, and
        ``has_trial_summary``; all null when it wrote no such row. The newest and intermediate rows keep them in
        ``measurements``; the oldest under ``frontiers``, naming actors per pod the A/P ratio (``ap_ratio_p50``)."""
        row = self._last_row(TRIAL_SUMMARY)
        figures = _object_of(row, "measurements", TRIAL_SUMMARY) if row is not None else {}
        if row is not None and not figures and isinstance(row.get("frontiers"), dict):
            figures = {key.replace("ap_ratio_", "actors_per_pod_"): value for key, value in row["frontiers"].items()}
        return {"has_trial_summary": row is not None,
                **{f"reported_{key}": measured(figures.get(key)) for key in REPORTED_FIGURES}}

    def _summary_metadata(self) -> dict[str, Any]:
        """The ``--metadata`` entries a trial_summary row carries as ``metadata_<key>``, as it stores them."""
        measurements = self.jsonl_measurements(TRIAL_SUMMARY) or {}
        return {key.removeprefix("metadata_"): value for key, value in measurements.items()
                if key.startswith("metadata_")}

    @property
    def completed(self) -> bool | None:
        exit_code = self.status.get("locust_exit_code", self.manifest.get("locust_exit_code"))
        return trial_completed(exit_code, self.status.get("stats_generated"), bool(self.manifest.get("interrupted")),
                             self.manifest.get("sessions_started"))

    def manifest_fields(self) -> dict[str, Any]:
        """What ran and how it ended: identity, knobs, times, outcome. Upstream runs take suite, tag and start from
        their path, their run window and metadata from the trial_summary row, users and actors per user from their
        log (null when it does not say); their backend is ``import``."""
        manifest, key = self.manifest, self.key
        # A trial of a family other than agent sessions ran no script: trial.json's script is null.
        knobs, script = manifest.get("knobs", {}), manifest.get("script") or {}
        slo = ((manifest.get("suite_config") or {}).get("slo") if manifest
               else (self._json(IMPORT_JSON) or {}).get("slo")) or {}
        window = {} if manifest else (self.jsonl_measurements(TRIAL_SUMMARY) or {})
        driver_load = manifest.get("driver_load") or {}
        machine_load = manifest.get("machine_load") or {}
        # A native agent session (one Locust user) drives one actor, so trial.json need not say.
        users = knobs.get("users") if manifest else self.run_log.users
        actors_per_user = knobs.get("actors_per_user", 1) if manifest else self.run_log.actors_per_user
        return {
            "suite": self.suite,
            # trial.json says since families existed (before, every native trial was an agent session); an
            # upstream run says by its rows.
            "family": (knobs.get("family", "agentsession") if manifest
                       else family_of_rows(self.stats()["name"].to_list())),
            "script": script.get("name"), "script_sha256": script.get("sha256"),
            "backend": manifest.get("backend", "import"), "tag": manifest.get("tag") or (key.tag if key else None),
            "run_ts": manifest.get("run_ts") or (key.run_ts if key else None),
            "started_at": parse_moment(manifest.get("started_at")) or _from_unix(window.get("run_start")),
            "ended_at": parse_moment(manifest.get("ended_at")) or _from_unix(window.get("run_end")),
            "completed": self.completed,
            "locust_exit_code": self.status.get("locust_exit_code", manifest.get("locust_exit_code")),
            "stats_generated": self.status.get("stats_generated"),
            "sessions_started": manifest.get("sessions_started"), "failure": manifest.get("failure"),
            "users": users, "spawn_rate": knobs.get("spawn_rate"), "duration_s": knobs.get("duration_s"),
            "think_scale": knobs.get("think_scale"), "lifecycle_mode": knobs.get("lifecycle_mode"),
            "resume_mode": knobs.get("resume_mode"), "actors_per_user": actors_per_user,
            "actor_memory": knobs.get("actor_memory"),
            # users:hold of each step, as Locust's --ladder reads it (an upstream run: as its log says); null for
            # a flat load.
            "ladder": (ladder_spec(knobs["ladder"], knobs["hold_s"]) if knobs.get("ladder")
                       else None if manifest else self.run_log.ladder),
            "planned_steps": (len(knobs["ladder"]) if knobs.get("ladder")
                              else 1 if manifest or (planned := self.planned_ladder()) is None else len(planned)),
            # An upstream run's tag is the commit it measured.
            "sut_version": manifest.get("sut_version") if manifest else (key.tag if key else None),
            "slo_wake_p99_ms": measured(slo.get("wake_p99_ms")),
            "slo_failure_ratio": measured(slo.get("failure_ratio")),
            "trial_dir": str(self.path),
            "metadata": json.dumps(manifest.get("metadata", {}) if manifest else self._summary_metadata(),
                                   sort_keys=True),
            **{key: driver_load.get(key) for key in ("driver_cpu_s", "driver_core_share", "machine_cpu_saturation")},
            **{key: measured(machine_load.get(key)) for key in ("foreign_cpu_share", "steal_share", "cpu_pressure")},
            "disturbed": machine_load.get("disturbed") if isinstance(machine_load.get("disturbed"), bool) else None,
            "disturbed_because": "; ".join(str(line) for line in machine_load.get("disturbed_because") or []) or None,
            "group_id": manifest.get("group"), "inject_wake_delay_ms": knobs.get("inject_wake_delay_ms"),
            "machine_wait_s": measured(manifest.get("machine_wait_s")),
        }

    def cluster_facts(self) -> dict[str, Any]:
        """The nine facts and the run window, typed: trial.json's ``cluster_facts``, else the trial_summary row."""
        facts = self.manifest.get("cluster_facts")
        if facts is not None:
            values = {**facts, "run_start": self.manifest.get("run_start"), "run_end": self.manifest.get("run_end")}
        else:
            measurements = self.jsonl_measurements(TRIAL_SUMMARY) or {}
            values = {key: measurements.get(key) for key in (*FACT_KEYS, "run_start", "run_end")}
        source = TRIAL_JSON if facts is not None else f"{STATS_JSONL}: trial_summary"
        return {
            "machine_type": values.get("machine_type"), "node_count": _whole(values.get("node_count")),
            "allocatable_cores": measured(values.get("allocatable_cores")),
            "allocatable_ram_gb": measured(values.get("allocatable_ram_gb")),
            "worker_pod_count": _whole(values.get("worker_pod_count")), "gke_version": values.get("gke_version"),
            "worker_actor_capacity": _as_text(values.get("worker_actor_capacity")),
            "worker_memory_limit_gb": _as_text(values.get("worker_memory_limit_gb")),
            "sandbox_class": values.get("sandbox_class"),
            "run_start": _time(values.get("run_start"), f"{source}: run_start"),
            "run_end": _time(values.get("run_end"), f"{source}: run_end"),
        }

    def server_telemetry(self) -> dict[str, float | int | None]:
        """The 45 flat server_summary keys as numbers: from server_summary.json's blocks, else — for a block the
        document lacks, or no document — from the stats.jsonl server_summary row; null where nothing was
        measured."""
        document = self._json(SERVER_SUMMARY_JSON)
        document = document if isinstance(document, dict) else {}
        from_document = flatten(document)
        row = self.jsonl_measurements(SERVER_SUMMARY) or {}
        flat = {key: from_document[key] if flat_key_block(key) in document else row.get(key) for key in FLAT_KEYS}
        return telemetry_figures(flat)

    def planned_ladder(self) -> list[tuple[int, int]] | None:
        """An upstream run's planned ladder, (users, hold_s) per step, as its log's ``--ladder`` says; None when it
        does not say. A ValueError naming the log when the spec does not read."""
        if self.run_log.ladder is None:
            return None
        if self.run_log.ladder_steps is not None and self.run_log.ladder_steps > MAX_LADDER_STEPS:
            raise ValueError(f"{self.trial_id}: {LOGS_TXT}: --ladder: a ladder of {self.run_log.ladder_steps:,} "
                             f"steps is too long: at most {MAX_LADDER_STEPS}")
        if not self.run_log.ladder_whole:
            raise ValueError(f"{self.trial_id}: {LOGS_TXT}: --ladder: its line runs past {MAX_LINE_CHARS:,} "
                             "characters, longer than any line a runner logs")
        try:
            return parse_ladder(self.run_log.ladder)
        except ValueError as error:
            raise ValueError(f"{self.trial_id}: {LOGS_TXT}: --ladder {self.run_log.ladder}: {error}") from None

    def recorded_load_steps(self) -> list[LoadStep] | None:
        """A ladder trial's load steps (``load_steps.json``); None for a trial that recorded none (a flat one)."""
        path = self.file(LOAD_STEPS_JSON)
        return read_load_steps(path) if path is not None else None

    def steady_window(self) -> tuple[int, int] | None:
        """The steady window server_summary.json was measured over, where it says."""
        document = self._json(SERVER_SUMMARY_JSON)
        metadata = document.get("metadata") if isinstance(document, dict) else None
        if not isinstance(metadata, dict):
            return None
        start = _time(metadata.get("steady_start_ts"), f"{SERVER_SUMMARY_JSON}: metadata.steady_start_ts")
        end = _time(metadata.get("steady_end_ts"), f"{SERVER_SUMMARY_JSON}: metadata.steady_end_ts")
        return None if start is None or end is None else (start, end)

    def _frame(self, name: str, read: Any, schema: dict[str, pl.DataType]) -> pl.DataFrame:
        if self._held is not None and name in self._held:
            return self._held[name]
        path = self.file(name)
        frame = read(path) if path is not None else pl.DataFrame(schema=schema)
        if self._held is not None:
            self._held[name] = frame
        return frame

    def stats(self) -> pl.DataFrame:
        """stats.csv, typed (empty when Locust wrote none)."""
        return self._frame(STATS_CSV, read_stats, STATS_SCHEMA)

    def stats_history(self) -> pl.DataFrame:
        return self._frame(STATS_HISTORY_CSV, read_stats_history, STATS_HISTORY_SCHEMA)

    def requests(self) -> pl.DataFrame:
        """The request log (empty for upstream runs, which keep none)."""
        return self._frame(REQUESTS_PARQUET, read_requests, REQUESTS_SCHEMA)

    def runtime_events(self) -> pl.DataFrame:
        """The embedded runtime's event log (empty for a trial that kept none: a cluster's, an upstream run); an
        event log older than ``host_start`` has it null."""
        return self._frame(RUNTIME_EVENTS_PARQUET, read_runtime_events, RUNTIME_EVENTS_SCHEMA)

