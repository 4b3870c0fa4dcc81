"""The models: each ``dbt_like_sql/**/*.sql`` file read into a :class:`Model` (its SQL, the tables it reads, its
description, and schema.yml's config of it), and the order they build in."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from graphlib import CycleError, TopologicalSorter
from pathlib import Path
from typing import Protocol, TypeVar

from substrate_assets.cache import cache_directory, read_cached, write_cached
from substrate_assets.project import project_root
from substrate_assets.warehouse.checks import read_yaml


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
        write_cached(_tables_cache(), {**known, **parsed})
    return models


def _tables_cache() -> Path:
    """The tables each model SQL reads (the file's sha256 -> table names), kept across processes: parsing ten models
    with sqlglot costs ~0.2 s, paid by every command and Dagster process that discovers them. Keyed by sqlglot's
    version too; only SQL that parsed into a model is kept, so a cached file is one that passed every check."""
    from importlib.metadata import version

    return cache_directory("models") / f"referenced-tables-sqlglot-{version('sqlglot')}.json"


def _read_tables_cache() -> dict[str, list[str]]:
    known = read_cached(_tables_cache())
    valid = isinstance(known, dict) and all(isinstance(tables, list) and all(isinstance(t, str) for t in tables)
                                            for tables in known.values())
    return known if valid and isinstance(known, dict) else {}


class ModelNode(Protocol):
    """A model as the build order and the bookkeeping see it, whether built from SQL or in Python."""

    @property
    def name(self) -> str: ...

    @property
    def upstream(self) -> tuple[str, ...]: ...

    @property
    def per_trial(self) -> bool: ...


Node = TypeVar("Node", bound=ModelNode)


def build_order(models: Mapping[str, Node]) -> list[Node]:
    """The models in an order each comes after every model it reads (SQL and Python models alike)."""
    graph = {name: {u for u in model.upstream if u in models} for name, model in models.items()}
    try:
        return [models[name] for name in TopologicalSorter(graph).static_order()]
    except CycleError as error:
        raise ModelError(f"models depend on each other in a cycle: {' -> '.join(error.args[1])}") from None
