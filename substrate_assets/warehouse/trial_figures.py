"""One trial's headline density figures, straight after its raw tables load and before any model is rebuilt: the
``density_frontiers`` model's own SQL, asked for that trial alone."""

import duckdb

from substrate_assets.warehouse.models import discover

DENSITY_MODEL = "density_frontiers"
DENSITY_FIGURES = ("actors_per_node", "actors_per_vcpu", "actors_per_gb_ram", "aggregate_failure_ratio")


def trial_densities(connection: duckdb.DuckDBPyConnection, trial_id: str) -> dict[str, float | None]:
    """The trial's actors per node, vCPU and GiB and its failure ratio as density_frontiers computes them; every
    figure null when the trial has no frontier (no session started)."""
    sql = discover()[DENSITY_MODEL].sql.rstrip().rstrip(";")
    row = connection.execute(f"SELECT {', '.join(DENSITY_FIGURES)} FROM ({sql}) WHERE trial_id = ?",
                             [trial_id]).fetchone()
    return dict(zip(DENSITY_FIGURES, row if row else (None,) * len(DENSITY_FIGURES), strict=True))
