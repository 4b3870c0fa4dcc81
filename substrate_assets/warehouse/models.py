"""A small dbt-like runner: each ``dbt_like_sql/**/*.sql`` file is one model, one table, one asset.

A model's upstream tables are the tables its SQL reads, found by parsing it
with sqlglot (DuckDB dialect): every table reference that is not one of the
query's own CTEs. Building a model replaces its table in one transaction. The
leading ``--`` comment lines of a file are its description.

A model that schema.yml configures ``config: {materialized: incremental, unique_key: trial_id}`` is *per trial*:
each of its rows depends only on rows of the same trial_id in the tables it reads. Such a model is updated for the
trials loaded since it was last built (:func:`update`): their rows are deleted and its SQL is run again with
every table it reads narrowed to those trials (CTEs of the same names around its SQL, which DuckDB resolves before
the warehouse's own tables), so an update costs the new trials, not the history. :func:`per_trial_mismatches`
checks the claim on a warehouse (the model over every trial against the union of it over each one). With
``partition_by: [columns]`` in its config, a row depends on the rows of the trials of its partition (those
columns of the model's rows, as capacity_history numbers a trial among its configuration's): an update rewrites
every trial of the partitions the new trials join or leave, and records the other trials as a load of the model's
own, so what reads it (and change_points) takes them up as new rows. Any other model is rebuilt whole when a trial
it may read changed. ``changes.marks`` (:mod:`changes`) says how far each model is built.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import tempfile
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Any

import duckdb

from substrate_assets.cache import cache_directory
from substrate_assets.project import project_root
from substrate_assets.warehouse import changes
from substrate_assets.warehouse.change_points import (
    CHANGE_POINTS,
    METRIC_HISTORY,
    replace_change_points,
    replace_series_change_points,
)
from substrate_assets.warehouse.checks import TestOutcome, load_tests, read_yaml, run_test_groups, run_tests
from substrate_assets.warehouse.connection import transaction
from substrate_assets.warehouse.noise_floor import NOISE_FLOOR, replace_noise_floor


class ModelError(ValueError):
    """A model file that cannot be used; the message names the file."""


@dataclass(frozen=True)
class Model:
    name: str
    path: Path
    sql: str
    upstream: tuple[str, ...]
    description: str
    # Each row depends only on rows of its own trial_id: updated trial by trial (schema.yml's config).
    per_trial: bool = False
    # Or on the rows of the trials of its partition (config partition_by: these columns of the model's own rows):
    # updated for the trials of the partitions the new trials join or leave.
    partition_by: tuple[str, ...] = ()

    @property
    def fingerprint(self) -> str:
        """What the model's table was built by: a changed SQL file means a whole build."""
        return hashlib.sha256(f"{self.per_trial}\n{self.partition_by}\n{self.sql}".encode()).hexdigest()


@dataclass(frozen=True)
class BuiltTable:
    name: str
    rows: int
    columns: list[tuple[str, str]]
    preview: list[dict[str, Any]]
    # The trials whose rows this build replaced; None when it built the whole table.
    updated: tuple[str, ...] | None = None


def models_directory() -> Path:
    return project_root() / "dbt_like_sql"


def referenced_tables(sql: str, path: Path) -> tuple[str, ...]:
    # Imported here: sqlglot takes ~0.15 s to import, and a process whose models are in the cache never parses.
    import sqlglot
    from sqlglot import exp

    try:
        statements = sqlglot.parse(sql, read="duckdb")
    except sqlglot.errors.ParseError as error:
        raise ModelError(f"{path}: cannot parse SQL: {error}") from None
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise ModelError(f"{path}: a model is exactly one SELECT statement")
    query = statements[0]
    ctes = {cte.alias_or_name for cte in query.find_all(exp.CTE)}
    references = [table for table in query.find_all(exp.Table) if table.name and table.name not in ctes]
    qualified = sorted({".".join(part for part in (table.catalog, table.db, table.name) if part)
                        for table in references if table.db or table.catalog})
    if qualified:
        # An update narrows each table a model reads to the trials it updates, by the table's name alone.
        raise ModelError(f"{path}: reads {', '.join(qualified)}: a model names the tables it reads without a "
                         "schema or database")
    return tuple(sorted({table.name for table in references}))


def _description(sql: str) -> str:
    lines = []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        lines.append(line[2:].strip())
    return " ".join(lines).strip()


# change_points' fingerprint in changes.marks: it is built in Python, not from a SQL file.
CHANGE_POINTS_BUILT_BY = "change_points (Python)"
PER_TRIAL_CONFIG = {"materialized": "incremental", "unique_key": "trial_id"}


def _per_trial_models(directory: Path) -> dict[str, tuple[str, ...]]:
    """The models schema.yml configures per trial, with the columns they are partitioned by (none: each trial its
    own partition); any other ``config`` is refused, naming the file and model."""
    path = directory / "schema.yml"
    if not path.is_file():
        return {}
    per_trial = {}
    for entry in read_yaml(path).get("models") or []:
        config = entry.get("config")
        if config is None or config == {"materialized": "table"}:
            continue
        partition_by = config.get("partition_by", []) if isinstance(config, dict) else None
        if {key: value for key, value in config.items() if key != "partition_by"} != PER_TRIAL_CONFIG or \
                not isinstance(partition_by, list) or not all(isinstance(column, str) for column in partition_by):
            raise ModelError(f"{path}: model {entry.get('name')!r}: config {config!r} is neither "
                             f"{PER_TRIAL_CONFIG!r} (with, optionally, partition_by: [columns]) nor "
                             "{'materialized': 'table'}")
        per_trial[entry["name"]] = tuple(partition_by)
    return per_trial


# Per directory, the models last discovered there and the files (path, mtime, size) they came from: parsing the SQL
# with sqlglot costs ~25 ms a model, paid again only when a file changed.
_DISCOVERED: dict[Path, tuple[tuple[tuple[str, int, int], ...], dict[str, Model]]] = {}


def discover(directory: Path | None = None) -> dict[str, Model]:
    """Every model under ``directory``, by name (the file stem, unique across folders)."""
    directory = directory or models_directory()
    files = sorted(directory.rglob("*.sql")) + [path for path in [directory / "schema.yml"] if path.is_file()]
    version = tuple((str(path), stat.st_mtime_ns, stat.st_size) for path in files for stat in [path.stat()])
    known = _DISCOVERED.get(directory)
    if known is not None and known[0] == version:
        return dict(known[1])
    models = _discover(directory)
    for model in models.values():
        # Its update reads the new trials' rows of the models it reads: those must be updated trial by trial too.
        whole = [name for name in model.upstream if name in models and not models[name].per_trial]
        if model.per_trial and whole:
            raise ModelError(f"{model.path}: a per-trial model (schema.yml config {PER_TRIAL_CONFIG}) reads "
                             f"{', '.join(whole)}, which is not per trial")
    _DISCOVERED[directory] = (version, models)
    return dict(models)


def _discover(directory: Path) -> dict[str, Model]:
    per_trial = _per_trial_models(directory)
    known = _read_tables_cache()
    parsed: dict[str, list[str]] = {}
    models: dict[str, Model] = {}
    for path in sorted(directory.rglob("*.sql")):
        name = path.stem
        if name in models:
            raise ModelError(f"{path}: model {name!r} is also defined in {models[name].path}")
        sql = path.read_text()
        digest = hashlib.sha256(sql.encode()).hexdigest()
        if digest not in known:
            parsed[digest] = list(referenced_tables(sql, path))
        upstream = tuple(parsed[digest] if digest in parsed else known[digest])
        models[name] = Model(name, path, sql.strip().rstrip(";"), upstream, _description(sql), name in per_trial,
                             per_trial.get(name, ()))
    if parsed:
        _write_tables_cache({**known, **parsed})
    return models


def _tables_cache() -> Path:
    """The tables each model SQL reads (the file's sha256 -> table names), kept across processes: parsing ten models
    with sqlglot costs ~0.2 s, paid by every command and Dagster process that discovers them. Keyed by sqlglot's
    version too; only SQL that parsed into a model is kept, so a cached file is one that passed every check."""
    from importlib.metadata import version

    return cache_directory("models") / f"referenced-tables-sqlglot-{version('sqlglot')}.json"


def _read_tables_cache() -> dict[str, list[str]]:
    try:
        known = json.loads(_tables_cache().read_text())
    except (OSError, ValueError):
        return {}
    valid = isinstance(known, dict) and all(isinstance(tables, list) and all(isinstance(t, str) for t in tables)
                                            for tables in known.values())
    return known if valid else {}


def _write_tables_cache(known: dict[str, list[str]]) -> None:
    """Written whole to a temporary file renamed over the cache: a reader sees the old cache or the new one. A
    cache that cannot be written is left as it is (the models still parse)."""
    path = _tables_cache()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(prefix=".writing-", dir=path.parent)
    except OSError:
        return
    try:
        with os.fdopen(handle, "w") as file:
            json.dump(known, file, sort_keys=True)
        os.replace(temporary, path)
    except OSError:
        Path(temporary).unlink(missing_ok=True)


def build_order(models: dict[str, Model]) -> list[Model]:
    graph = {name: {u for u in model.upstream if u in models} for name, model in models.items()}
    try:
        return [models[name] for name in TopologicalSorter(graph).static_order()]
    except CycleError as error:
        raise ModelError(f"models depend on each other in a cycle: {' -> '.join(error.args[1])}") from None


def describe_table(connection: duckdb.DuckDBPyConnection, name: str, preview_rows: int = 10,
                   updated: Sequence[str] | None = None, books: changes.Books | None = None) -> BuiltTable:
    """``name``'s columns (as ``books`` knows them, when given), row count and first rows."""
    return describe_tables(connection, [(name, updated)], preview_rows, books)[0]


def describe_tables(connection: duckdb.DuckDBPyConnection, tables: Sequence[tuple[str, Sequence[str] | None]],
                    preview_rows: int = 10, books: changes.Books | None = None) -> list[BuiltTable]:
    """:func:`describe_table` of each (table, the trials its build updated) of ``tables``: a query per table for its
    count and first rows, or, without a preview, one for every count (a UNION ALL: as scalar subqueries of one
    SELECT, DuckDB would plan a join of a dozen relations, and ordering it costs tens of milliseconds)."""
    if not tables:
        return []
    limit = int(preview_rows)
    if limit > 0:
        found = []
        for name, _ in tables:
            cursor = connection.execute(f"SELECT (SELECT count(*) FROM {name}) AS count_rows, * FROM {name} "
                                        f"LIMIT {limit}")
            names = [d[0] for d in cursor.description][1:]
            preview = cursor.fetchall()
            # An empty preview is an empty table (the count rides on each preview row).
            found.append((preview[0][0] if preview else 0,
                          [dict(zip(names, values[1:], strict=True)) for values in preview]))
    else:
        counts = dict(connection.execute(" UNION ALL ".join(
            f"SELECT {index} AS part, count(*) FROM {name}" for index, (name, _) in enumerate(tables))).fetchall())
        found = [(counts[index], []) for index in range(len(tables))]
    return [BuiltTable(name, rows, _table_columns(connection, name, books), preview,
                       None if updated is None else tuple(updated))
            for (name, updated), (rows, preview) in zip(tables, found, strict=True)]


# The parameter a narrowed query (:func:`narrowed_query`) takes the trials' ids in.
NARROWED_IDS = "narrowed_ids"


def updated_rows(name: str) -> str:
    """The temporary table an update computes a per-trial model's new rows into before they replace the old ones,
    and leaves them in until the refresh ends (:func:`drop_updated_rows`): the models that read it, and its tests,
    read the updated trials' rows there instead of picking them out of its whole table."""
    return f'temp.main."{name}__updated_rows"'


def held_rows(books: changes.Books | None) -> dict[str, str]:
    """Per model updated trial by trial in this refresh, its :func:`updated_rows` table: the ``rows`` its column
    tests read (:func:`run_test_groups`)."""
    return {name: updated_rows(name) for name in books.updated} if books is not None else {}


def drop_updated_rows(connection: duckdb.DuckDBPyConnection, books: changes.Books) -> None:
    """Drop every model's :func:`updated_rows` table of this refresh (in one round trip)."""
    if books.updated:
        connection.execute(";\n".join(f"DROP TABLE IF EXISTS {updated_rows(name)}" for name in sorted(books.updated)))
        books.updated.clear()


def _narrowed_source(name: str, trial_ids: Collection[str], books: changes.Books | None, database: str) -> str:
    """Where a narrowed query reads ``name``'s rows of ``trial_ids``: the rows a model's update left in this refresh,
    the copy :mod:`changes` keeps of a raw table's recent load, or the table itself."""
    if books is not None and name in books.updated and set(trial_ids) <= set(books.updated[name]):
        return updated_rows(name)
    schema = changes.SCHEMA if books is not None and books.copied(name, trial_ids) else "main"
    return f'"{database}".{schema}."{name}"'


def narrowed_query(connection: duckdb.DuckDBPyConnection, select: str, tables: Collection[str],
                   trial_ids: Sequence[str], books: changes.Books | None = None) -> str:
    """``select`` with each of ``tables`` holding only the rows of the trials given in the parameter
    ``$narrowed_ids`` (:data:`NARROWED_IDS`): a CTE of each table's name around it, which its table references
    resolve to before the warehouse's tables (within nested queries and CTEs too), so it costs no statement of its
    own. A raw table reads the copy :mod:`changes` keeps of a recent load when it has one for every trial, and a
    model updated earlier in the refresh the rows its update left (:func:`updated_rows`): picking a trial out of a
    whole table reads all its trial_ids. ``books``: the bookkeeping, when already read (none for a warehouse without
    it)."""
    database = books.database if books is not None else changes.database(connection)
    ctes = [f'"{name}" AS (SELECT * FROM {_narrowed_source(name, trial_ids, books, database)} '
            f"WHERE list_contains(${NARROWED_IDS}::VARCHAR[], trial_id))" for name in sorted(tables)]
    return f"WITH {', '.join(ctes)}\nSELECT * FROM (\n{select}\n)" if ctes else select


def _table_columns(connection: duckdb.DuckDBPyConnection, name: str,
                   books: changes.Books | None = None) -> list[tuple[str, str]]:
    """``name``'s columns and their types, in order: from ``books`` when it knows them (read with the bookkeeping,
    for every table at once), else asked (and kept there)."""
    if books is not None and name in books.columns:
        return books.columns[name]
    columns = [(row[0], row[1]) for row in connection.execute(f"DESCRIBE {name}").fetchall()]
    if books is not None:
        books.columns[name] = columns
    return columns


def _target(books: changes.Books, upstream_models: Collection[str]) -> int:
    """The seq a model can be built through now: the latest load, or less when a model it reads is behind (its rows
    of later trials are not there yet, so they are taken up when that model catches up)."""
    return min([books.latest, *(books.mark(name) or 0 for name in upstream_models)])


def _upstream_models(model: Model, models: dict[str, Model]) -> list[str]:
    return [name for name in model.upstream if name in models]


def _read_by(name: str, models: dict[str, Model]) -> set[str]:
    """The models ``name`` reads, directly or not."""
    found: set[str] = set()
    waiting = [name]
    while waiting:
        current = waiting.pop()
        for upstream in models[current].upstream if current in models else ():
            if upstream in models and upstream not in found:
                found.add(upstream)
                waiting.append(upstream)
    return found


def _changed_trials(connection: duckdb.DuckDBPyConnection, name: str, models: dict[str, Model], after: int,
                    through: int, books: changes.Books) -> list[str]:
    """The trials whose rows of what ``name`` reads changed after seq ``after`` up to ``through``: loaded, or
    rewritten by a partitioned model it reads (directly or not) as another trial of a new trial's partition."""
    return changes.changed_trials(connection, after, through, set(models), _read_by(name, models), books)


def _past_a_load_of(connection: duckdb.DuckDBPyConnection, books: changes.Books, name: str,
                    models: dict[str, Model], caught_up: int, seq: int) -> None:
    """Every model built through ``caught_up`` that does not read ``name`` is built through ``seq`` too: the load
    ``name`` recorded at ``seq`` changed nothing it reads, and a model that reads it would wait for it otherwise."""
    for other, mark in list(books.marks.items()):
        reads = {METRIC_HISTORY, *_read_by(METRIC_HISTORY, models)} if other == CHANGE_POINTS \
            else _read_by(other, models)
        if mark.seq == caught_up and other != name and name not in reads:
            books.marks[other] = dataclasses.replace(mark, seq=seq)
            _write_mark(connection, books, other, marked=True)


def _partition_trials(connection: duckdb.DuckDBPyConnection, model: Model, trial_ids: Sequence[str],
                      books: changes.Books) -> list[str]:
    """``trial_ids`` and every trial of the partitions they join (the model's SQL over them) or leave (their rows
    in its table): the trials whose rows a partitioned model rewrites."""
    table = f'"{books.database}".main.{model.name}'
    keys = ", ".join(f'"{column}"' for column in model.partition_by)
    match = " AND ".join(f't."{column}" IS NOT DISTINCT FROM k."{column}"' for column in model.partition_by)
    keys_of = narrowed_query(connection, f"SELECT DISTINCT {keys} FROM (\n{model.sql}\n)", model.upstream,
                             trial_ids, books)
    related = connection.execute(
        f"WITH k AS (SELECT * FROM ({keys_of}) UNION "
        f"SELECT DISTINCT {keys} FROM {table} WHERE list_contains(${NARROWED_IDS}::VARCHAR[], trial_id)) "
        f"SELECT DISTINCT t.trial_id FROM {table} AS t JOIN k ON {match}", {NARROWED_IDS: list(trial_ids)}).fetchall()
    return sorted(set(trial_ids) | {row[0] for row in related})


def _rewritten_partitions(connection: duckdb.DuckDBPyConnection, model: Model, models: dict[str, Model],
                          books: changes.Books, changed: Sequence[str], others: Sequence[str]) -> tuple[list[str], int]:
    """Of the ``others`` trials of the partitions a partitioned model's update rewrites, those whose rows its new
    rows (in :func:`updated_rows`) change: a trial that joins a partition at its end leaves the rows of the trials
    before it as they were, and those are neither rewritten nor taken up again by what reads the model. The moved
    ones are recorded as a load of the model's own, so the models that read it (and change_points) take them up as
    they take up a loaded trial. The trials to rewrite (the others' rows dropped from the updated rows) and the seq
    the model is now built through."""
    rows, table = updated_rows(model.name), f'"{books.database}".main.{model.name}'
    columns = comparable(connection, model.name, books)
    of_others = "WHERE list_contains($others::VARCHAR[], trial_id)"
    # Each side read once (materialized): planning the two EXCEPTs over them is most of the statement's cost.
    moved = sorted(row[0] for row in connection.execute(
        f"WITH new AS MATERIALIZED (SELECT {columns} FROM {rows} {of_others}), "
        f"old AS MATERIALIZED (SELECT {columns} FROM {table} {of_others}) "
        "SELECT DISTINCT trial_id FROM ((FROM new EXCEPT FROM old) UNION ALL (FROM old EXCEPT FROM new))",
        {"others": list(others)}).fetchall())
    unmoved = sorted(set(others) - set(moved))
    if unmoved:
        connection.execute(f"DELETE FROM {rows} WHERE list_contains(?, trial_id)", [unmoved])
    target = books.latest
    if moved:
        caught_up, target = books.latest, books.latest + 1
        books.latest = target
        changes.book_load(connection, books, target, model.name, moved)
        _past_a_load_of(connection, books, model.name, models, caught_up, target)
    return sorted({*changed, *moved}), target


def _held_trials(connection: duckdb.DuckDBPyConnection, books: changes.Books, trial_ids: Sequence[str], built: int,
                 models: Collection[str]) -> list[str]:
    """Those of ``trial_ids`` a model built through seq ``built`` may hold rows of: every trial first loaded by then
    (a trial new since has none: its delete, which reads the table's every trial_id, is skipped)."""
    first = changes.first_loads(connection, books, trial_ids, models)
    return [trial_id for trial_id in trial_ids if first.get(trial_id, 0) <= built]


def _set_mark(connection: duckdb.DuckDBPyConnection, books: changes.Books, name: str, seq: int, built_by: str,
              upstream_models: Collection[str], *, whole: bool) -> None:
    """``name`` built through ``seq``: a whole build is the warehouse's newest generation; an update keeps its own.
    Either way it has taken up the newest whole build of the models it reads."""
    generation = books.generation(books.marks) + 1 if whole or name not in books.marks \
        else books.marks[name].generation
    mark = changes.Mark(seq, built_by, generation, books.generation(upstream_models))
    marked = name in books.marks
    books.marks[name] = mark
    _write_mark(connection, books, name, marked=marked)
    books.tables.add(name)


def _write_mark(connection: duckdb.DuckDBPyConnection, books: changes.Books, name: str, *, marked: bool) -> None:
    """``books``' mark of ``name`` written now, or with every other one at the end of a refresh that saves them
    together (:func:`changes.save_marks`)."""
    if books.unsaved is not None:
        books.unsaved.add(name)
    else:
        changes.set_mark(connection, name, books.marks[name], marked=marked)


def _behind_a_whole_build(books: changes.Books, name: str, upstream_models: Collection[str]) -> bool:
    """Whether a model ``name`` reads was built whole since ``name`` was brought up to date: any of its rows may
    have changed, so ``name`` is built whole too."""
    return books.generation(upstream_models) > books.marks[name].upstream_generation


def build(connection: duckdb.DuckDBPyConnection, model: Model, models: dict[str, Model] | None = None,
          preview_rows: int = 10, books: changes.Books | None = None, *, routine: bool = False) -> BuiltTable:
    """Replace ``model``'s table with the result of its SQL, in one transaction (and mark it built through the loads
    it read, where the warehouse keeps that bookkeeping). ``routine``: a model that is not per trial, rebuilt for
    new loads under the SQL it was built with (its rows change as its SQL says they may: no new generation)."""
    books = books if books is not None else changes.read_books(connection)
    _build(connection, model, models, books, routine=routine)
    return describe_table(connection, model.name, preview_rows)


def _build(connection: duckdb.DuckDBPyConnection, model: Model, models: dict[str, Model] | None,
           books: changes.Books | None, *, routine: bool = False) -> None:
    try:
        with transaction(connection):
            connection.execute(f"CREATE OR REPLACE TABLE {model.name} AS\n{model.sql}")
            if books is not None:
                books.columns.pop(model.name, None)  # its columns are its SQL's now
                books.updated.pop(model.name, None)
                upstream = _upstream_models(model, models or {model.name: model})
                _set_mark(connection, books, model.name, _target(books, upstream), model.fingerprint, upstream,
                          whole=not routine)
    except duckdb.Error as error:
        raise ModelError(f"{model.path}: {error}") from None


def update(connection: duckdb.DuckDBPyConnection, model: Model, models: dict[str, Model],
           preview_rows: int = 10, books: changes.Books | None = None) -> BuiltTable:
    """Bring ``model``'s table up to the loads since it was built: a per-trial model replaces the rows of the trials
    loaded since (``BuiltTable.updated``); another model is rebuilt whole when any trial was. Built whole when it
    never was, its SQL changed, its SQL no longer gives its table's columns (a raw table that gained a column a
    model selects with ``*``), or the warehouse has no bookkeeping. ``books``: the bookkeeping, when already read
    (kept up to date here; a per-trial update leaves its rows in :func:`updated_rows` for the rest of the refresh,
    which ends with :func:`drop_updated_rows`)."""
    books = books if books is not None else changes.read_books(connection)
    updated = _update(connection, model, models, books)
    return describe_table(connection, model.name, preview_rows, updated=updated, books=books)


def _update(connection: duckdb.DuckDBPyConnection, model: Model, models: dict[str, Model],
            books: changes.Books | None) -> tuple[str, ...] | None:
    """:func:`update` without the description: the trials whose rows it replaced, None when it built the table
    whole."""
    upstream = _upstream_models(model, models)
    if books is None or model.name not in books.tables or books.fingerprint(model.name) != model.fingerprint or \
            _behind_a_whole_build(books, model.name, upstream):
        _build(connection, model, models, books)
        return None
    built = books.mark(model.name) or 0
    target = _target(books, upstream)
    trial_ids = _changed_trials(connection, model.name, models, built, target, books)
    if not trial_ids:
        return ()
    if not model.per_trial:
        _build(connection, model, models, books, routine=True)
        return None
    if model.partition_by and target != books.latest:  # a model it reads is behind: no seq to record others at
        _build(connection, model, models, books)
        return None
    changed, others = trial_ids, []
    if model.partition_by:
        trial_ids = _partition_trials(connection, model, changed, books)
        others = sorted(set(trial_ids) - set(changed))
    rows = updated_rows(model.name)
    try:
        with transaction(connection):
            # The new rows computed once into a temporary table: its columns say whether they still fit the
            # model's table (no second binding of the SQL to ask), and the insert copies them.
            connection.execute(f"CREATE OR REPLACE TEMP TABLE {rows} AS\n"
                               f"{narrowed_query(connection, model.sql, model.upstream, trial_ids, books)}",
                               {NARROWED_IDS: list(trial_ids)})
            if _table_columns(connection, rows) != _table_columns(connection, model.name, books):
                connection.execute(f"DROP TABLE {rows}")
                _build(connection, model, models, books)
                return None
            if others:
                trial_ids, target = _rewritten_partitions(connection, model, models, books, changed, others)
            table = f'"{books.database}".main.{model.name}'
            held = _held_trials(connection, books, trial_ids, built, models)
            if held:
                connection.execute(f"DELETE FROM {table} WHERE list_contains(?, trial_id)", [held])
            connection.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {rows}")
            _set_mark(connection, books, model.name, target, model.fingerprint, upstream, whole=False)
            books.updated[model.name] = tuple(trial_ids)
    except duckdb.Error as error:
        raise ModelError(f"{model.path}: {error}") from None
    return tuple(trial_ids)


def update_change_points(connection: duckdb.DuckDBPyConnection, books: changes.Books | None = None,
                         models: dict[str, Model] | None = None) -> BuiltTable:
    """change_points brought up to metric_history: only the series of trials loaded for the first time since it was
    built are analysed again (a new trial can move a change point of its own series only); the whole table when a
    trial was loaded again (it may have left a series), when it never was built, or without bookkeeping."""
    return describe_table(connection, CHANGE_POINTS, updated=_update_change_points(connection, books, models))


def _update_change_points(connection: duckdb.DuckDBPyConnection, books: changes.Books | None,
                          models: dict[str, Model] | None) -> tuple[str, ...] | None:
    """:func:`update_change_points` without the description: the trials whose series it analysed again, None when
    it built the table whole."""
    books = books if books is not None else changes.read_books(connection)
    if books is None:
        replace_change_points(connection)
        replace_noise_floor(connection)
        return None
    models = models if models is not None else discover()
    built = books.mark(CHANGE_POINTS)
    target = _target(books, [METRIC_HISTORY])
    trial_ids = [] if built is None else changes.changed_trials(
        connection, built, target, set(models), {METRIC_HISTORY, *_read_by(METRIC_HISTORY, models)}, books)
    if built is not None and CHANGE_POINTS in books.tables and \
            books.fingerprint(CHANGE_POINTS) == CHANGE_POINTS_BUILT_BY and \
            not _behind_a_whole_build(books, CHANGE_POINTS, [METRIC_HISTORY]) and \
            changes.first_loaded_after(connection, changes.changed_trials(connection, built, target, set(models),
                                                                          books=books), built, list(models)):
        if trial_ids:
            replace_series_change_points(connection, trial_ids)
        updated: tuple[str, ...] | None = tuple(trial_ids)
    else:
        replace_change_points(connection)
        books.columns.pop(CHANGE_POINTS, None)
        updated = None
    with transaction(connection):
        _set_mark(connection, books, CHANGE_POINTS, target, CHANGE_POINTS_BUILT_BY, [METRIC_HISTORY],
                  whole=updated is None)
        replace_noise_floor(connection)
    return updated


def comparable(connection: duckdb.DuckDBPyConnection, table: str, books: changes.Books | None = None) -> str:
    """``table``'s columns for comparing its rows with another's: a MAP's entries sorted by key (a map is a set of
    entries, but DuckDB compares them in the order they were built, which a ``list`` aggregate leaves open).
    ``books``: the bookkeeping, when it knows the table's columns."""
    columns = _table_columns(connection, table, books)
    return ", ".join(f'map_from_entries(list_sort(map_entries("{name}"))) AS "{name}"'
                     if kind.startswith("MAP(") else f'"{name}"' for name, kind in columns)


def rows_apart(connection: duckdb.DuckDBPyConnection, left: str, right: str) -> int:
    """The rows of ``left`` that ``right`` lacks plus those of ``right`` that ``left`` lacks, copies counted: 0 when
    the two tables hold the same rows (in any order)."""
    one = f"SELECT {comparable(connection, left)} FROM {left}"
    other = f"SELECT {comparable(connection, right)} FROM {right}"
    return connection.execute(f"SELECT (SELECT count(*) FROM ({one} EXCEPT ALL {other})) + "
                              f"(SELECT count(*) FROM ({other} EXCEPT ALL {one}))").fetchone()[0]


def per_trial_mismatches(connection: duckdb.DuckDBPyConnection, model: Model) -> int:
    """Rows in which ``model`` over every trial differs from ``model`` run over each trial alone (over each
    partition's trials alone, for a partitioned model), both ways: 0 when it is truly per trial (per partition) on
    this warehouse's rows. The tables it reads must be built."""
    trial_ids = sorted({row[0] for name in model.upstream for row in connection.execute(
        f"SELECT DISTINCT trial_id FROM {name} WHERE trial_id IS NOT NULL").fetchall()})
    connection.execute(f"CREATE OR REPLACE TEMP TABLE whole_run AS {model.sql}")
    connection.execute("CREATE OR REPLACE TEMP TABLE trial_runs AS SELECT * FROM whole_run LIMIT 0")
    if model.partition_by:
        keys = ", ".join(f'"{column}"' for column in model.partition_by)
        groups = [row[0] for row in connection.execute(
            f"SELECT list(trial_id) FROM temp.main.whole_run GROUP BY {keys}").fetchall()]
        # A trial with no row of the model is a partition of its own (its run gives no rows either).
        alone = set(trial_ids) - {trial_id for group in groups for trial_id in group}
        groups += [[trial_id] for trial_id in sorted(alone)]
    else:
        groups = [[trial_id] for trial_id in trial_ids]
    try:
        for group in groups:
            over_group = narrowed_query(connection, model.sql, model.upstream, group)
            connection.execute(f"INSERT INTO trial_runs BY NAME {over_group}", {NARROWED_IDS: group})
        return rows_apart(connection, "temp.main.whole_run", "temp.main.trial_runs")
    finally:
        connection.execute("DROP TABLE IF EXISTS temp.main.whole_run")
        connection.execute("DROP TABLE IF EXISTS temp.main.trial_runs")


def build_all(connection: duckdb.DuckDBPyConnection, models: dict[str, Model]) -> list[BuiltTable]:
    return [build(connection, model, models) for model in build_order(models)]


def _tests(directory: Path, models: dict[str, Model]) -> list:
    return [test for group in load_tests(directory / "schema.yml", set(models)).values() for test in group]


def build_marts(connection: duckdb.DuckDBPyConnection,
                directory: Path | None = None) -> tuple[list[BuiltTable], list[TestOutcome]]:
    """Every model under ``directory`` built whole in order, then change_points from metric_history (when that is
    one of them), then every column test of its schema.yml run over every row."""
    directory = directory or models_directory()
    models = discover(directory)
    with transaction(connection):
        books = changes.read_books(connection)
        built = [build(connection, model, models, books=books) for model in build_order(models)]
        if METRIC_HISTORY in models:
            replace_change_points(connection)
            if books is not None:
                _set_mark(connection, books, CHANGE_POINTS, _target(books, [METRIC_HISTORY]), CHANGE_POINTS_BUILT_BY,
                          [METRIC_HISTORY], whole=True)
            built.append(describe_table(connection, CHANGE_POINTS))
            replace_noise_floor(connection)
            built.append(describe_table(connection, NOISE_FLOOR))
        prune_copies(connection, models)
    return built, run_tests(connection, _tests(directory, models))


def prune_copies(connection: duckdb.DuckDBPyConnection, models: dict[str, Model],
                 books: changes.Books | None = None) -> None:
    """Drop the copies of loads (:mod:`changes`) that every one of ``models`` (and change_points, built on
    metric_history) has taken up. ``books``: the bookkeeping the refresh kept up to date (none asked again)."""
    names = [*models, CHANGE_POINTS] if METRIC_HISTORY in models else list(models)
    if books is not None:
        with transaction(connection):
            changes.prune(connection, names, books)
    elif changes.has_bookkeeping(connection):
        with transaction(connection):
            changes.prune(connection, names)


def scope_of(table: BuiltTable, per_trial: bool) -> Sequence[str] | None:
    """The trials a column test of ``table`` need look at: those it just updated, for a per-trial table (the
    others were tested when they were loaded); None (every row) otherwise."""
    return table.updated if per_trial and table.updated is not None else None


def update_marts(connection: duckdb.DuckDBPyConnection, directory: Path | None = None, preview_rows: int = 10,
                 books: changes.Books | None = None) -> tuple[list[BuiltTable], list[TestOutcome]]:
    """Every model under ``directory`` brought up to the latest loads (:func:`update`), in order, then change_points;
    the column tests run over the rows each update wrote (a per-trial model's new trials; another model's whole
    table, when it was rebuilt). ``books``: the bookkeeping, when the caller has read it in this transaction."""
    directory = directory or models_directory()
    models = discover(directory)
    with transaction(connection):  # one commit for the whole refresh
        books = books if books is not None else changes.read_books(connection)
        if books is not None:
            # Every model's mark written at the end, in two statements for them all (a statement costs about a
            # millisecond; one per model, a dozen).
            books.unsaved = set()
        updated = [(model.name, _update(connection, model, models, books)) for model in build_order(models)]
        if METRIC_HISTORY in models:
            updated.append((CHANGE_POINTS, _update_change_points(connection, books, models)))
            updated.append((NOISE_FLOOR, None))
        if books is not None:
            changes.save_marks(connection, books)
        prune_copies(connection, models, books)
        built = describe_tables(connection, updated, preview_rows, books)
    tests = load_tests(directory / "schema.yml", set(models))
    groups = [(tests.get(table.name, []), scope_of(table, table.name in models and models[table.name].per_trial))
              for table in built if table.updated != ()]  # a table with nothing new was tested when it last changed
    outcomes = [outcome for group in run_test_groups(connection, groups, rows=held_rows(books)) for outcome in group]
    if books is not None:
        drop_updated_rows(connection, books)
    return built, outcomes
