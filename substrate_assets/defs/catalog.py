"""What every asset says of itself in the catalog, beyond its own definition."""

from typing import TYPE_CHECKING, Any

import dagster as dg

# Who answers for the assets (Dagster takes a team or an email address).
OWNERS = ["team:substrate-bench"]

if TYPE_CHECKING:
    # What an asset function returns. MaterializeResult is generic in the value it carries (none here), but Dagster
    # reads the return annotation and does not take a subscripted one for a result where the asset also has checks
    # (its definition fails to load): only the checker sees the parameter.
    Materialized = dg.MaterializeResult[Any]
else:
    Materialized = dg.MaterializeResult
