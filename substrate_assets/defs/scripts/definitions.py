"""The scripts domain's Dagster objects."""

import dagster as dg

from substrate_assets.defs.scripts.assets import workload_script
from substrate_assets.defs.scripts.jobs import validate_script_job

defs = dg.Definitions(assets=[workload_script], jobs=[validate_script_job])
