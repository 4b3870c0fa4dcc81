"""Readers (polars) for every file a trial directory holds, from this platform, upstream's runner or
other Locust versions.

Locust CSVs are read as text and typed here: ``N/A`` percentiles become null,
an empty ``Type``, ``Method`` or ``Name`` stays an empty string, and columns a Locust version does not
write (``failures.csv``'s ``First Seen``/``Last Seen`` before 2.44) are added
as nulls, so every reader returns the same schema whatever wrote the file.
Column names are the stats.jsonl keys (``request_count``, ``p50``, ``requests_per_s``).

A CSV cut short (Locust stopped while rewriting it, a full disk) or not text at all raises
:class:`DamagedCsv`, naming the file and line, rather than reading as rows of nulls.
"""

from __future__ import annotations

import codecs
import csv
import io
import json
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from substrate_assets.results.keys import measurement_key
from substrate_assets.runtime.events import EVENT_SCHEMA

PERCENTILE_KEYS = ("p50", "p66", "p75", "p80", "p90", "p95", "p98", "p99", "p99_9", "p99_99", "p100")

STATS_SCHEMA: dict[str, pl.DataType] = {
    "type": pl.Utf8(), "name": pl.Utf8(), "request_count": pl.Int64(), "failure_count": pl.Int64(),
    "median_response_time": pl.Float64(), "average_response_time": pl.Float64(),
    "min_response_time": pl.Float64(), "max_response_time": pl.Float64(), "average_content_size": pl.Float64(),
    "requests_per_s": pl.Float64(), "failures_per_s": pl.Float64(),
    **{key: pl.Float64() for key in PERCENTILE_KEYS},
}
STATS_HISTORY_SCHEMA: dict[str, pl.DataType] = {
    "timestamp": pl.Int64(), "user_count": pl.Float64(), "type": pl.Utf8(), "name": pl.Utf8(),
    "requests_per_s": pl.Float64(), "failures_per_s": pl.Float64(),
    **{key: pl.Float64() for key in PERCENTILE_KEYS},
    "total_request_count": pl.Int64(), "total_failure_count": pl.Int64(),
    "total_median_response_time": pl.Float64(), "total_average_response_time": pl.Float64(),
    "total_min_response_time": pl.Float64(), "total_max_response_time": pl.Float64(),
    "total_average_content_size": pl.Float64(),
}
FAILURES_SCHEMA: dict[str, pl.DataType] = {
    "method": pl.Utf8(), "name": pl.Utf8(), "error": pl.Utf8(), "occurrences": pl.Int64(),
    "first_seen": pl.Datetime("us", "UTC"), "last_seen": pl.Datetime("us", "UTC"),
}
EXCEPTIONS_SCHEMA: dict[str, pl.DataType] = {
    "count": pl.Int64(), "message": pl.Utf8(), "traceback": pl.Utf8(), "nodes": pl.Utf8(),
}
# The embedded runtime's event log, as it writes it.
RUNTIME_EVENTS_SCHEMA: dict[str, pl.DataType] = {name: dtype() for name, dtype in EVENT_SCHEMA.items()}
REQUESTS_SCHEMA: dict[str, pl.DataType] = {
    "ts": pl.Float64(), "request_type": pl.Utf8(), "name": pl.Utf8(), "latency_ms": pl.Float64(),
    "response_time_ms": pl.Int64(), "response_length": pl.Int64(), "success": pl.Boolean(), "error": pl.Utf8(),
    "session_id": pl.Utf8(), "step": pl.Utf8(), "step_index": pl.Int32(), "lap": pl.Int32(),
    "phase": pl.Utf8(), "locust_seq": pl.Int64(), "locust_counted": pl.Boolean(), "wake": pl.Boolean(),
}


class DamagedCsv(pl.exceptions.ComputeError, ValueError):
    """A CSV cut short or not text. Also a polars ComputeError, as polars' own error for an unreadable CSV is, so a
    caller that already copes with an unreadable file copes with a damaged one."""

    def __init__(self, path: Path, line: int | None, reason: str) -> None:
        self.path, self.line, self.reason = path, line, reason
        super().__init__(f"{path}:{line}: {reason}" if line is not None else f"{path}: {reason}")


_CHUNK = 1 << 20
Frame = TypeVar("Frame", pl.DataFrame, pl.LazyFrame)


def csv_damage(path: Path, data: bytes | None = None) -> DamagedCsv | None:
    """Why the CSV at ``path`` (whose bytes are ``data``, when already read) cannot be trusted row by row, or None.

    polars pads a row with missing fields with nulls and reads a value cut mid-number as the shorter number, so
    both are looked for here first: a record whose field count differs from the header's, and a last record
    without its line end (every CSV writer ends each row with one). A file is read in pieces, never held whole."""
    with (path.open("rb") if data is None else io.BytesIO(data)) as stream:
        return _binary_damage(path, stream) or _record_damage(path, stream)


def _binary_damage(path: Path, stream: io.BufferedReader | io.BytesIO) -> DamagedCsv | None:
    """A NUL byte or bytes that are not UTF-8, with the line and byte where they are."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = lines = 0
    while chunk := stream.read(_CHUNK):
        if b"\0" in chunk:
            at = chunk.index(b"\0")
            return DamagedCsv(path, lines + chunk.count(b"\n", 0, at) + 1,
                              f"binary data (a NUL byte at byte {offset + at}), not CSV text")
        try:
            decoder.decode(chunk)
        except UnicodeDecodeError as error:
            held = len(error.object) - len(chunk)  # the bytes of a character the previous piece began
            return DamagedCsv(path, lines + error.object.count(b"\n", 0, error.start) + 1,
                              f"not UTF-8 text ({error.reason} at byte {offset - held + error.start}): binary data, "
                              "not CSV text")
        offset += len(chunk)
        lines += chunk.count(b"\n")
    try:
        decoder.decode(b"", final=True)
    except UnicodeDecodeError as error:
        at = offset - len(error.object) + error.start
        return DamagedCsv(path, lines + 1, f"not UTF-8 text ({error.reason} at byte {at}): binary data, not CSV text")
    return None


def _record_damage(path: Path, stream: io.BufferedReader | io.BytesIO) -> DamagedCsv | None:
    """A record whose field count is not its header's, text that is not CSV, or a last record cut short."""
    if stream.seek(0, io.SEEK_END) == 0:
        return None
    stream.seek(-1, io.SEEK_END)
    ended = stream.read(1) in (b"\n", b"\r")
    stream.seek(0)
    text = io.TextIOWrapper(stream, encoding="utf-8", newline="")
    try:
        reader = csv.reader(text)
        try:
            header = next(reader)
            for record in reader:
                if len(record) != len(header) and record:
                    return DamagedCsv(path, reader.line_num, f"{len(record)} fields where the header has "
                                      f"{len(header)}: the row is cut short or the file is not Locust's")
        except csv.Error as error:
            return DamagedCsv(path, reader.line_num, f"not CSV: {error}")
        if not ended:
            return DamagedCsv(path, reader.line_num, "the last row has no line end: the file was cut short while "
                              "being written")
        return None
    finally:
        text.detach()  # the caller's stream is the caller's to close


def typed_locust_csv(raw: Frame, schema: dict[str, pl.DataType]) -> Frame:
    """A Locust CSV read as text (``infer_schema=False``) with its columns named and typed as ``schema`` says: what
    :func:`read_stats` returns, for files parsed elsewhere (a rebuild parses many at once)."""
    frame = raw.rename({column: measurement_key(column) for column in raw.collect_schema().names()})
    present = set(frame.collect_schema().names())
    columns = []
    for name, dtype in schema.items():
        if name not in present:
            columns.append(pl.lit(None, dtype=dtype).alias(name))
            continue
        text = pl.col(name).str.strip_chars()
        if dtype == pl.Utf8():
            # A CSV has no null: an empty Type, Method or Name is Locust's own "" (its total rows' Type and
            # method, the Name of an aggregate row some versions write), which polars reads as null.
            columns.append(text.fill_null("") if name in ("type", "method", "name") else text)
        elif isinstance(dtype, pl.Datetime):
            columns.append(text.str.to_datetime("%Y-%m-%dT%H:%M:%SZ", time_zone="UTC", strict=False).cast(dtype))
        elif dtype == pl.Int64():
            columns.append(text.cast(pl.Float64, strict=False).cast(pl.Int64, strict=False))
        else:
            columns.append(text.cast(dtype, strict=False))
    return frame.select(columns)


def _read_csv(path: Path, schema: dict[str, pl.DataType]) -> pl.DataFrame:
    damage = csv_damage(path)
    if damage is not None:
        raise damage
    if path.stat().st_size == 0:
        raise pl.exceptions.NoDataError(f"{path}: empty CSV")
    # Typed as it is read, in batches: the file is never held as text (a cell as text costs more than its number).
    raw = pl.scan_csv(path, infer_schema=False)
    return typed_locust_csv(raw, schema).collect(engine="streaming")


def read_stats(path: Path) -> pl.DataFrame:
    """stats.csv: one row per (type, name) plus the ``Aggregated`` total (type ``""``)."""
    return _read_csv(path, STATS_SCHEMA)


def read_stats_history(path: Path) -> pl.DataFrame:
    """stats_history.csv: one row per second (Aggregated only, unless --csv-full-history)."""
    return _read_csv(path, STATS_HISTORY_SCHEMA)


def read_failures(path: Path) -> pl.DataFrame:
    """failures.csv, with or without ``First Seen``/``Last Seen`` (Locust ≥ 2.44 writes them)."""
    return _read_csv(path, FAILURES_SCHEMA)


def read_exceptions(path: Path) -> pl.DataFrame:
    return _read_csv(path, EXCEPTIONS_SCHEMA)


def read_runtime_events(path: Path) -> pl.DataFrame:
    """runtime_events.parquet, with every column of today's event log (an older log lacks ``host_start``: null)."""
    frame = pl.read_parquet(path)
    return frame.select([
        (pl.col(name).cast(dtype) if name in frame.columns else pl.lit(None, dtype=dtype)).alias(name)
        for name, dtype in RUNTIME_EVENTS_SCHEMA.items()
    ])


def read_requests(path: Path, n_rows: int | None = None) -> pl.DataFrame:
    """requests.parquet: every request with its exact latency (the first ``n_rows``, when given)."""
    frame = pl.read_parquet(path, n_rows=n_rows)
    return frame.select([
        (pl.col(name).cast(dtype) if name in frame.columns else pl.lit(None, dtype=dtype)).alias(name)
        for name, dtype in REQUESTS_SCHEMA.items()
    ])


def read_stats_jsonl(path: Path) -> list[dict[str, Any]]:
    """Every row of stats.jsonl, in file order."""
    rows = []
    with path.open() as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not JSON: {error}") from None
    return rows


def last_rows_by_metric(path: Path) -> dict[str, dict[str, Any]]:
    """The last stats.jsonl row of each metric (what a trial's figures are read from), in one pass holding one row
    at a time: a file of millions of rows costs its largest row, not its size. ValueError naming the line when one
    is not a JSON object."""
    last: dict[str, dict[str, Any]] = {}
    with path.open() as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as error:
                raise ValueError(f"{path}:{number}: not JSON: {error}") from None
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{number}: not a JSON object but {type(row).__name__}")
            metric = row.get("metric")
            if isinstance(metric, str):
                last[metric] = row
    return last


def read_json(path: Path) -> Any:
    return json.loads(path.read_text())
