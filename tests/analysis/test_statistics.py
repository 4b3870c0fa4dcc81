"""The one statistics module: the reference's own vectors, Locust's own bucketing, and the warehouse's SQL twins of
each function held equal to the Python originals on random samples."""

import json
import random
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from substrate_assets.analysis.statistics import (
    floor_index,
    locust_bucket,
    percentile_stats,
    permille,
    reference_round,
    summarize,
)
from substrate_assets.warehouse.connection import prepare

MODELS = Path(__file__).resolve().parents[2] / "dbt_like_sql"
PYTHON_PERCENTILES = ("p50", "p90", "p95", "p99", "p99_9")


def permilles_in_models() -> set[int]:
    sql = "\n".join(path.read_text() for path in MODELS.rglob("*.sql"))
    return {int(value) for value in re.findall(r"floor_index(?:_of_sorted)?\([^;]*?,\s*(\d+)\)", sql)}


USED_PERMILLES = sorted(permilles_in_models() | {permille(name) for name in PYTHON_PERCENTILES})


@pytest.fixture(scope="module")
def sql():
    connection = prepare(duckdb.connect())
    yield connection
    connection.close()


def test_every_permille_the_models_use_is_found():
    assert permilles_in_models() >= {500, 900, 950, 990, 999}


def test_permille_names():
    assert [permille(name) for name in ("p0", "p50", "p99_9", "p100")] == [0, 500, 999, 1000]
    for bad in ("p99_95", "p101", "median"):
        with pytest.raises(ValueError):
            permille(bad)


def test_reference_percentile_vectors():
    users = [1, 50, 89, *range(100, 300)]
    per_pod = sorted(reference_round(u / 5, 4) for u in users)
    assert [reference_round(floor_index(per_pod, p), 2) for p in (500, 900, 990)] == [39.6, 55.8, 59.4]
    assert percentile_stats(range(1, 201)) == {"min": 1, "p50": 101, "p90": 181, "p95": 191, "p99": 199,
                                               "max": 200, "avg": 100.5}
    assert floor_index([], 500) is None
    figures = summarize([3.0, None, float("nan"), 1.0, 2.0, float("inf")], ("p50", "p99_9"))
    assert figures == {"min": 1.0, "p50": 2.0, "p99_9": 3.0, "max": 3.0, "mean": 2.0, "n_samples": 3}
    assert summarize([])["p50"] is None and summarize([])["n_samples"] == 0


def test_the_reference_rounds_as_python_does():
    assert reference_round(0.125, 2) == 0.12 and reference_round(2.675, 2) == 2.67 and reference_round(2.5, 0) == 2


def test_locust_bucket_reference_vectors():
    vectors = {2.5: 2, 3.5: 4, 145: 140, 155: 160, 147: 150, 995: 1000, 994: 990, 3450: 3400, 58500: 58000,
               59500: 60000}
    assert {value: locust_bucket(value) for value in vectors} == vectors


def test_locust_bucket_is_locusts_own():
    """Locust's module-level bucket_response_time, in a process of its own (importing Locust patches the
    interpreter with gevent)."""
    rng = random.Random(7)
    values = [rng.uniform(0, 20_000) for _ in range(3000)] + [i / 2 for i in range(0, 2400)] + \
        [float(i) for i in range(90, 120_000, 5)]
    program = ("import json, sys\nfrom locust.stats import bucket_response_time\n"
               "print(json.dumps([bucket_response_time(v) for v in json.load(sys.stdin)]))")
    done = subprocess.run([sys.executable, "-c", program], input=json.dumps(values), capture_output=True, text=True,
                          timeout=120, check=True)
    assert [locust_bucket(value) for value in values] == json.loads(done.stdout)


finite = st.floats(min_value=-1e9, max_value=1e9, allow_nan=False, allow_infinity=False)


def given_values(sql: duckdb.DuckDBPyConnection, values: list[float]) -> duckdb.DuckDBPyConnection:
    """``values`` as the table ``given(v)``: DuckDB's Python binding converts a list parameter element by element
    (~0.3 ms each), which made these tests a minute of binding; an Arrow column is read as it is, every bit kept."""
    sql.register("given", pa.table({"v": pa.array(values, pa.float64())}))
    return sql


@settings(max_examples=300, deadline=None)
@given(values=st.lists(finite, max_size=300))
def test_floor_index_in_sql_equals_python(sql, values):
    ordered = sorted(values)
    listed = "(SELECT coalesce(list(v), []::DOUBLE[]) AS vs FROM given)"
    columns = ", ".join(f"floor_index(vs, {p})" for p in USED_PERMILLES)
    row = given_values(sql, values).execute(f"SELECT {columns} FROM {listed}").fetchone()
    assert list(row) == [floor_index(ordered, p) for p in USED_PERMILLES]
    # The twin over a list already sorted, as the models sort a list once for all its percentiles.
    columns = ", ".join(f"floor_index_of_sorted(list_sort(vs), {p})" for p in USED_PERMILLES)
    row = sql.execute(f"SELECT {columns} FROM {listed}").fetchone()
    assert list(row) == [floor_index(ordered, p) for p in USED_PERMILLES]


response_times = st.one_of(
    st.floats(min_value=0, max_value=1e7, allow_nan=False),
    st.integers(min_value=0, max_value=2_000_000).map(lambda half: half / 2),  # ties at 1 ms
    st.integers(min_value=0, max_value=200_000).map(lambda five: five * 5.0),  # ties at 10, 100 and 1000 ms
)


@settings(max_examples=500, deadline=None)
@given(values=st.lists(response_times, min_size=1, max_size=50))
def test_locust_bucket_in_sql_equals_python(sql, values):
    rows = given_values(sql, values).execute("SELECT v, locust_bucket(v) FROM given").fetchall()
    assert [row[0] for row in rows] == values
    assert [row[1] for row in rows] == [locust_bucket(value) for value in values]


@settings(max_examples=200, deadline=None)
@given(value=finite, digits=st.integers(min_value=0, max_value=6))
def test_py_round_in_sql_equals_python(sql, value, digits):
    assert sql.execute("SELECT py_round(?, ?)", [value, digits]).fetchone()[0] == reference_round(value, digits)
