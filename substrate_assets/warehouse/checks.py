"""Column tests from ``dbt_like_sql/schema.yml``: not_null, unique, accepted_values, expression.

    models:
      - name: density_frontiers
        columns:
          - name: trial_id
            tests: [not_null, unique]
          - name: actors_per_node
            tests:
              - expression: "actors_per_node IS NULL OR actors_per_node >= 0"
          - name: status
            tests:
              - accepted_values: {values: [completed, incomplete]}

A test passes when no row violates it; its result carries the count and a few
of the offending rows.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import yaml

TEST_KINDS = ("not_null", "unique", "accepted_values", "expression")
# Tests of a model's rows as a whole, listed under the model's own ``tests:`` (dbt_utils' name and argument):
#   - unique_combination_of_columns: {combination_of_columns: [trial_id, metric]}
MODEL_TEST_KINDS = ("unique_combination_of_columns",)
# A null key or a duplicate row makes every figure built on the table wrong; the other tests flag a surprising value.
BLOCKING_KINDS = ("not_null", "unique", "unique_combination_of_columns")
# The tests that compare rows with one another (the others test each row on its own).
_ACROSS_ROWS = ("unique", "unique_combination_of_columns")


@dataclass(frozen=True)
class ColumnTest:
    model: str
    # A model-level test's columns, joined by "__" (unique_combination_of_columns: trial_id__metric).
    column: str
    kind: str
    argument: Any = None
    # The second and later tests of one kind on one column (two expressions) are numbered: a check's name is unique.
    ordinal: int = 1

    @property
    def blocking(self) -> bool:
        """Whether a failure of this test stops what is built on its table."""
        return self.kind in BLOCKING_KINDS

    @property
    def name(self) -> str:
        return f"{self.column}_{self.kind}" + (f"_{self.ordinal}" if self.ordinal > 1 else "")

    def description(self) -> str:
        if self.kind == "unique_combination_of_columns":
            return f"no two rows hold the same {', '.join(self.argument)}"
        if self.kind == "accepted_values":
            return f"{self.column} is one of {', '.join(map(str, self.argument))} (or null)"
        if self.kind == "expression":
            return f"every row satisfies: {self.argument}"
        return f"{self.column} is {'never null' if self.kind == 'not_null' else 'unique'}"

    def violations_sql(self, trial_ids: Sequence[str] | None = None, rows: str | None = None) -> tuple[str, list[Any]]:
        """The offending rows; with ``trial_ids``, only those a load of these trials can have made: their own rows,
        and for ``unique`` every copy of a value one of their rows holds (a new row can copy an old one's).
        ``rows``: a relation holding exactly the model's rows of ``trial_ids``, read instead of picking them out."""
        column = f'"{self.column}"'
        held = trial_ids is not None and rows is not None
        source, scope, scoped = self.model, "", []
        if held:
            source = f'{rows} AS "{self.model}"'  # an expression may name the table
        elif trial_ids is not None:
            scope, scoped = " AND list_contains(?, trial_id)", [list(trial_ids)]
        if self.kind == "not_null":
            return f"SELECT * FROM {source} WHERE {column} IS NULL{scope}", scoped
        if self.kind == "unique_combination_of_columns":
            # As dbt_utils counts them: rows grouped by the columns, nulls a value like any other. A copy of a new
            # row's combination holds its trial_id when trial_id is one of the columns: the trials' rows hold it.
            columns = ", ".join(f'"{name}"' for name in self.argument)
            if trial_ids is not None and "trial_id" not in self.argument:
                source, scope, scoped = self.model, "", []
            return (f"SELECT {columns}, count(*) AS copies FROM {source} WHERE true{scope} GROUP BY ALL "
                    "HAVING count(*) > 1"), scoped
        if self.kind == "unique":
            if held and self.column != "trial_id":
                # A copy of a new row's value may be any trial's row: the table, narrowed to the new rows' values.
                source, scope = self.model, f" AND {column} IN (SELECT {column} FROM {rows})"
            elif trial_ids is not None and not held:
                scope = f" AND {column} IN (SELECT {column} FROM {self.model} WHERE true{scope})"
            return (f"SELECT {column}, count(*) AS copies FROM {source} WHERE {column} IS NOT NULL{scope} "
                    f"GROUP BY {column} HAVING count(*) > 1"), scoped
        if self.kind == "accepted_values":
            return (f"SELECT * FROM {source} WHERE {column} IS NOT NULL "
                    f"AND CAST({column} AS VARCHAR) NOT IN (SELECT unnest(?::VARCHAR[])){scope}"), \
                [[str(value) for value in self.argument], *scoped]
        return f"SELECT * FROM {source} WHERE NOT ({self.argument}){scope}", scoped

    def row_violation(self) -> tuple[str, list[Any]]:
        """For a test of each row on its own (not ``unique`` nor a model's): the condition a row violates it by."""
        column = f'"{self.column}"'
        if self.kind == "not_null":
            return f"{column} IS NULL", []
        if self.kind == "accepted_values":
            return f"{column} IS NOT NULL AND NOT list_contains(?::VARCHAR[], CAST({column} AS VARCHAR))", \
                [[str(value) for value in self.argument]]
        assert self.kind == "expression", self.kind
        return f"NOT ({self.argument})", []


@dataclass(frozen=True)
class TestOutcome:
    test: ColumnTest
    violations: int
    sample: list[dict[str, Any]]

    @property
    def passed(self) -> bool:
        return self.violations == 0


class SchemaError(ValueError):
    """schema.yml cannot be used; the message names the file and the entry."""


# libyaml's parser where PyYAML has it: schema.yml takes ~0.4 s to parse in pure Python, ~0.05 s in C.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=16)
def _parsed(path: str, _mtime_ns: int, _size: int) -> Any:
    return yaml.load(Path(path).read_text(), Loader=_LOADER) or {}


def read_yaml(path: Path) -> Any:
    """The YAML document at ``path``, parsed once per version of the file (its mtime and size): every load of a
    trial reads schema.yml. Shared: not to be modified."""
    stat = path.stat()
    return _parsed(str(path), stat.st_mtime_ns, stat.st_size)


def load_tests(path: Path, models: set[str]) -> dict[str, list[ColumnTest]]:
    """Column tests by model name. ``models``: the names of the project's models, SQL and Python
    (:func:`~substrate_assets.warehouse.models.python_models.every_model`)."""
    if not path.is_file():
        return {}
    document = read_yaml(path)
    tests: dict[str, list[ColumnTest]] = {}
    for entry in document.get("models", []):
        model = entry.get("name")
        if model not in models:
            raise SchemaError(f"{path}: model {model!r} is neither a SQL file nor a Python model (have "
                              f"{', '.join(sorted(models))})")
        for column in entry.get("columns", []):
            for test in column.get("tests", []):
                argument: Any
                kind, argument = (test, None) if isinstance(test, str) else next(iter(test.items()))
                if kind not in TEST_KINDS:
                    raise SchemaError(f"{path}: {model}.{column['name']}: unknown test {kind!r} "
                                      f"(known: {', '.join(TEST_KINDS)})")
                if kind == "accepted_values":
                    argument = argument["values"]
                same = [known for known in tests.get(model, []) if (known.column, known.kind) == (column["name"], kind)]
                tests.setdefault(model, []).append(ColumnTest(model, column["name"], kind, argument, len(same) + 1))
        tests.setdefault(model, []).extend(_model_tests(path, model, entry.get("tests") or [], tests.get(model, [])))
        if not tests[model]:
            del tests[model]
    return tests


def _model_tests(path: Path, model: str, listed: list[Any], known: list[ColumnTest]) -> list[ColumnTest]:
    """The tests listed under a model's own ``tests:`` (MODEL_TEST_KINDS), refused with the file and model named
    when they are not one of those, with their argument."""
    found: list[ColumnTest] = []
    for test in listed:
        kind, argument = next(iter(test.items())) if isinstance(test, dict) and len(test) == 1 else (test, None)
        columns = argument.get("combination_of_columns") if isinstance(argument, dict) else None
        if kind not in MODEL_TEST_KINDS or not isinstance(columns, list) or len(columns) < 2 or \
                not all(isinstance(column, str) for column in columns):
            raise SchemaError(f"{path}: {model}: model test {test!r} is not one of "
                              f"{', '.join(MODEL_TEST_KINDS)} with combination_of_columns: [two or more columns]")
        name = "__".join(columns)
        same = [other for other in [*known, *found] if (other.column, other.kind) == (name, kind)]
        found.append(ColumnTest(model, name, kind, tuple(columns), len(same) + 1))
    return found


def run_test(connection: duckdb.DuckDBPyConnection, test: ColumnTest, sample_rows: int = 5,
             trial_ids: Sequence[str] | None = None, rows: str | None = None) -> TestOutcome:
    """``test`` over every row of its table, or over the rows of ``trial_ids`` (a per-trial model's update: the
    rows of other trials were tested when they were written), which ``rows`` holds when given."""
    sql, parameters = test.violations_sql(trial_ids, rows)
    cursor = connection.execute(f"{sql} LIMIT {sample_rows}", parameters)
    names = [d[0] for d in cursor.description]
    sample = [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
    # A sample short of its size holds every offending row: no second query to count them (a load runs a test of
    # each key, and almost always finds none).
    if len(sample) < sample_rows:
        return TestOutcome(test, len(sample), sample)
    counted = connection.execute(f"SELECT count(*) FROM ({sql})", parameters).fetchone()
    assert counted is not None  # a count is one row
    return TestOutcome(test, counted[0], sample)


def run_tests(connection: duckdb.DuckDBPyConnection, tests: Sequence[ColumnTest], sample_rows: int = 5,
              trial_ids: Sequence[str] | None = None, rows: Mapping[str, str] | None = None) -> list[TestOutcome]:
    """Every one of ``tests`` as :func:`run_test` runs it, in their order, but counted together
    (:func:`run_test_groups`)."""
    return run_test_groups(connection, [(tests, trial_ids)], sample_rows, rows)[0]


def run_test_groups(connection: duckdb.DuckDBPyConnection,
                    groups: Sequence[tuple[Sequence[ColumnTest], Sequence[str] | None]],
                    sample_rows: int = 5, rows: Mapping[str, str] | None = None) -> list[list[TestOutcome]]:
    """Each group's tests as :func:`run_test` runs them over its trials (None: every row), in their order, but every
    violation of every group counted in one query (a query costs milliseconds, and a load runs some seventy tests
    over ten tables): the tests of single rows of one table in one scan of it, a ``unique`` test in a part of its
    own, the parts a UNION ALL (as scalar subqueries of one SELECT, DuckDB would plan them as a join of some thirty
    relations, and ordering it costs more than the tests). Only a test that finds violations is run again, on its
    own, for its sample. ``rows``: per model, a relation holding exactly its rows of the trials its group is
    narrowed to (an update's new rows), read instead of picking them out of its table."""
    rows = rows or {}
    parts: list[str] = []
    parameters: list[Any] = []
    counted: list[tuple[int, list[int]]] = []  # (group, its tests) per part, in the order of the parts
    for number, (tests, trial_ids) in enumerate(groups):
        scope, scoped = ("", []) if trial_ids is None else (" AND list_contains(?, trial_id)", [list(trial_ids)])
        by_model: dict[str, list[int]] = {}
        for index, test in enumerate(tests):
            if test.kind in _ACROSS_ROWS:
                sql, violations = test.violations_sql(trial_ids, rows.get(test.model))
                parts.append(f"SELECT {len(parts)} AS part, [count(*)] AS found FROM ({sql})")
                parameters += violations
                counted.append((number, [index]))
            else:
                by_model.setdefault(test.model, []).append(index)
        for model, indexes in by_model.items():
            conditions = [tests[index].row_violation() for index in indexes]
            source, narrowing, narrowed = (f'{rows[model]} AS "{model}"', "", []) \
                if trial_ids is not None and model in rows else (model, scope, scoped)
            filtered = ", ".join(f"count(*) FILTER (WHERE {condition})" for condition, _ in conditions)
            parts.append(f"SELECT {len(parts)} AS part, [{filtered}] AS found FROM {source} WHERE true{narrowing}")
            parameters += [parameter for _, values in conditions for parameter in values] + narrowed
            counted.append((number, indexes))
    outcomes: list[dict[int, TestOutcome]] = [{} for _ in groups]
    found_by_part = dict(connection.execute(" UNION ALL ".join(parts), parameters).fetchall()) if parts else {}
    for part, (number, indexes) in enumerate(counted):
        tests, trial_ids = groups[number]
        for index, count in zip(indexes, found_by_part[part], strict=True):
            outcomes[number][index] = run_test(connection, tests[index], sample_rows, trial_ids,
                                               rows.get(tests[index].model)) if count \
                else TestOutcome(tests[index], 0, [])
    return [[outcome[index] for index in range(len(tests))] for outcome, (tests, _) in zip(outcomes, groups,
                                                                                            strict=True)]
