"""Trials' headline density figures, straight after their raw tables load and before any model is rebuilt: the
``density_frontiers`` model's own SQL, asked for those trials alone."""

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import duckdb

from substrate_assets.warehouse import changes
from substrate_assets.warehouse.models.discovery import discover
from substrate_assets.warehouse.models.narrowing import NARROWED_IDS, narrowed_query
from substrate_assets.warehouse.models.tables import BuiltTable

DENSITY_MODEL = "density_frontiers"
DENSITY_FIGURES = ("actors_per_node", "actors_per_vcpu", "actors_per_gb_ram", "aggregate_failure_ratio")


def trial_densities(connection: duckdb.DuckDBPyConnection,
                    trial_ids: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """Each trial's actors per node, vCPU and GiB and its failure ratio as density_frontiers computes them, in one
    query; every figure null for a trial without a frontier (no session started)."""
    model = discover()[DENSITY_MODEL]
    # Over those trials' rows only (the copies of their load, where the warehouse keeps them): the cost of a load's
    # figures is the trials', not the history's.
    select = f"SELECT trial_id, {', '.join(DENSITY_FIGURES)} FROM (\n{model.sql}\n)"
    query = narrowed_query(connection, select, model.upstream, trial_ids, changes.read_books(connection))
    return _by_trial(connection.execute(query, {NARROWED_IDS: list(trial_ids)}).fetchall(), trial_ids)


def _by_trial(rows: list[tuple[Any, ...]], trial_ids: Sequence[str]) -> dict[str, dict[str, float | None]]:
    """Rows of (trial_id, *DENSITY_FIGURES) as figures by trial; every figure null for a trial without a row."""
    found = {row[0]: dict(zip(DENSITY_FIGURES, row[1:], strict=True)) for row in rows}
    return {trial_id: found.get(trial_id, dict.fromkeys(DENSITY_FIGURES)) for trial_id in trial_ids}


def updated_densities(connection: duckdb.DuckDBPyConnection, trial_ids: Sequence[str],
                      built: Sequence[BuiltTable], directory: Path) -> dict[str, dict[str, float | None]] | None:
    """:func:`trial_densities` of ``trial_ids`` read from density_frontiers' rows, when the refresh that ``built``
    describes has just updated them with the model's own SQL (a per-trial model's rows of a trial are its SQL over
    that trial's rows: the same figures, without running the SQL a second time); None otherwise."""
    model = discover(directory).get(DENSITY_MODEL)
    updated = next((table.updated for table in built if table.name == DENSITY_MODEL), None)
    if model is None or updated is None or not set(trial_ids) <= set(updated) or \
            model.fingerprint != discover()[DENSITY_MODEL].fingerprint:
        return None
    return _by_trial(connection.execute(f"SELECT trial_id, {', '.join(DENSITY_FIGURES)} FROM {DENSITY_MODEL} "
                                        "WHERE list_contains(?::VARCHAR[], trial_id)", [list(trial_ids)]).fetchall(),
                     trial_ids)
