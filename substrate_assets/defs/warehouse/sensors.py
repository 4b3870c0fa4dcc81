"""``warehouse_refresh``: the cross-run models follow every trial that lands."""

import dagster as dg

from substrate_assets.defs.warehouse.models import mart_assets

warehouse_refresh = dg.AutomationConditionSensorDefinition(
    "warehouse_refresh",
    target=dg.AssetSelection.assets(*mart_assets),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=30,
    description="Rebuilds the cross-run models when a trial's raw tables land (eager).",
)
