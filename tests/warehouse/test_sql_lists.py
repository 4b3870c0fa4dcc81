"""A list bound as JSON text comes back in SQL exactly as it went in: every character, nulls, order, big integers."""

import duckdb

from substrate_assets.warehouse.sql_lists import NUMBERS, TEXTS, numbers, texts

AWKWARD = ["plain", "it's", 'a "quoted" one', "back\\slash", "new\nline", "ünïcödé ✓", "", None, "tab\there",
           "'; DROP TABLE trials; --"]


def test_texts_come_back_exactly_in_order():
    with duckdb.connect() as connection:
        assert connection.execute(f"SELECT {TEXTS}", [texts(AWKWARD)]).fetchone()[0] == AWKWARD
        assert connection.execute(f"SELECT unnest({TEXTS})", [texts(AWKWARD)]).fetchall() == [(v,) for v in AWKWARD]
        assert connection.execute(f"SELECT {TEXTS}", [texts([])]).fetchone()[0] == []


def test_numbers_come_back_exactly():
    values = [0, -1, 2**62, None, 7]
    with duckdb.connect() as connection:
        assert connection.execute(f"SELECT {NUMBERS}", [numbers(values)]).fetchone()[0] == values


def test_a_thousand_trial_ids_filter_as_a_list_parameter_does():
    ids = [f"smoke-2026120{i % 10}t0000{i:04d}z" for i in range(1000)]
    with duckdb.connect() as connection:
        connection.execute("CREATE TABLE t AS SELECT 'smoke-2026120' || (i % 10) || 't0000' || lpad(i::VARCHAR, 4, '0') "
                           "|| 'z' AS trial_id FROM range(2000) AS r(i)")
        by_json = connection.execute(f"SELECT count(*) FROM t WHERE list_contains({TEXTS}, trial_id)",
                                     [texts(ids)]).fetchone()[0]
        by_list = connection.execute("SELECT count(*) FROM t WHERE list_contains(?::VARCHAR[], trial_id)",
                                     [ids]).fetchone()[0]
    assert by_json == by_list == 1000
