"""sql's guard, on a real warehouse file: only queries run, and no spelling of the postgres extension's functions,
query() or query_table() gets past it (DuckDB's own parser takes the spelling apart, comments and all)."""

from pathlib import Path

import duckdb
import pytest

from substrate_assets.warehouse.query import query, refusal


@pytest.fixture
def warehouse(tmp_path: Path) -> Path:
    path = tmp_path / "warehouse.duckdb"
    with duckdb.connect(str(path)) as connection:
        connection.execute("CREATE TABLE trials AS SELECT 't1' AS trial_id")
    return path


SCAN = "('host=127.0.0.1 port=1 dbname=x', 'public', 't')"
SPELLINGS = [
    f"select * from postgres_scan/**/{SCAN}",  # the comment the token check missed
    f"select * from postgres_scan /* ( */ {SCAN}",
    f"select * from postgres_scan--x\n{SCAN}",
    f'select * from "postgres_scan"{SCAN}',
    f'select * from "POSTGRES_SCAN"  \n\t {SCAN}',
    "select * from Postgres_Query('host=x', 'select 1')",
    "select * from trials where trial_id in (select * from postgres_query('host=x', 'select 1'))",
    "select * from query/**/('select 1')",
    "select ('select 1').query()",
    "select * from QUERY_TABLE('trials')",
    'select * from "query_table"/* x */(\'trials\')',
    "with q as (select * from query('select 1')) select * from q",
    "select 1; select * from query('select 1')",
]


@pytest.mark.parametrize("sql", SPELLINGS)
def test_every_spelling_of_a_refused_function_is_refused(warehouse: Path, sql: str) -> None:
    assert refusal(sql) is not None and "reaches beyond the warehouse" in refusal(sql)
    with pytest.raises(duckdb.PermissionException, match="reaches beyond the warehouse"):
        query(warehouse, sql)


@pytest.mark.parametrize(("sql", "kind"), [
    ("COPY trials TO '{out}'", "COPY"),
    ("COPY (select * from trials) TO '{out}' (FORMAT parquet)", "COPY"),
    ("EXPORT DATABASE '{out}'", "EXPORT"),
    ("select 1; COPY trials TO '{out}'", "COPY"),
    ("ATTACH '{out}' AS other", "ATTACH"),
    ("CALL postgres_execute('x', 'select 1')", "CALL"),
    ("EXPLAIN ANALYZE select 1", "EXPLAIN"),
    ("SET threads = 1", "SET"),
])
def test_statements_other_than_queries_are_refused_by_their_type(warehouse: Path, tmp_path: Path, sql: str,
                                                                   kind: str) -> None:
    out = tmp_path / "out"
    with pytest.raises(duckdb.PermissionException, match=f"{kind} statements are refused"):
        query(warehouse, sql.format(out=out))
    assert not out.exists()


def test_a_pragma_that_reads_runs_and_one_that_sets_is_refused(warehouse: Path) -> None:
    assert query(warehouse, "PRAGMA version").rows
    assert query(warehouse, "PRAGMA table_info('trials')").rows
    with pytest.raises(duckdb.PermissionException, match="PRAGMA statements are refused"):
        query(warehouse, "PRAGMA enable_profiling")
    with pytest.raises(duckdb.PermissionException, match="SET statements are refused"):
        query(warehouse, "PRAGMA threads = 1")


@pytest.mark.parametrize("sql", ["select trial_id from trials", "SHOW TABLES", "DESCRIBE trials",
                                 "select 'query(' as text, 1 /* postgres_scan( */ as n",
                                 "select q.trial_id as query from trials q"])
def test_queries_run(warehouse: Path, sql: str) -> None:
    assert refusal(sql) is None
    assert query(warehouse, sql).rows


def test_parameters_still_bind(warehouse: Path) -> None:
    assert query(warehouse, "select count(*) from trials where trial_id = ?", ["t1"]).rows == [(1,)]
