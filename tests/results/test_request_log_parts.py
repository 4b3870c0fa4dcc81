"""A request-log part is the table polars would write for the same rows: every column, type, null and text."""

from __future__ import annotations

import io

import polars as pl

from substrate_assets.results.request_log import PART_SCHEMA, RequestRecord, part_bytes


def records() -> list[RequestRecord]:
    rows = []
    for n in range(300):
        session = n % 4 != 0  # teardown and start-up rows carry no session
        rows.append(RequestRecord(
            ts=None if n == 7 else 1.7e9 + n / 7, request_type=("http", "grpc", "actor")[n % 3],
            name=f"Step_{n % 20:02d}_work" if n % 3 == 0 else "WakeFirstTouch", latency_ms=n * 1.234567,
            response_time_ms=int(n * 1.234567), response_length=n << 20, success=n % 5 != 0,
            error=None if n % 5 else f"RouterError: POST /ingest: HTTP 503: parked lot full — é {n}",
            session_id=f"agent-{n:08d}" if session else None, step=f"{n % 20:02d}_work" if session else None,
            step_index=n % 20 if session else None, lap=n // 20 if session else None,
            phase=("ramp_up", "steady", "stopping")[n % 3], locust_seq=n // 3 + 1, wake=(None, True, False)[n % 3]))
    return rows


def test_a_part_reads_back_as_the_frame_polars_builds_from_the_same_rows():
    rows = records()
    expected = pl.DataFrame([row.__dict__ for row in rows], schema=PART_SCHEMA, orient="row")
    written = pl.read_parquet(io.BytesIO(part_bytes(rows)))
    assert written.schema == expected.schema
    assert written.equals(expected)
