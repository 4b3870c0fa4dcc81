"""The warehouse domain's Dagster objects (a workstation deployment only: nothing on a cluster opens DuckDB)."""

import dagster as dg

from substrate_assets.defs.warehouse.models import mart_assets
from substrate_assets.defs.warehouse.raw import raw_assets
from substrate_assets.defs.warehouse.regression_check import no_regression_against_history
from substrate_assets.defs.warehouse.resources import WarehouseResource
from substrate_assets.defs.warehouse.sensors import warehouse_refresh
from substrate_assets.defs.warehouse.site import SiteResource, site_assets

defs = dg.Definitions(assets=[*raw_assets, *mart_assets, *site_assets], asset_checks=[no_regression_against_history],
                      sensors=[warehouse_refresh],
                      resources={"warehouse": WarehouseResource(), "site": SiteResource()})
