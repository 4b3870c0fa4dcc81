"""The ``validate_script`` job: one script's ``workload_script`` partition."""

import dagster as dg

from substrate_assets.defs.scripts.assets import workload_script

validate_script_job = dg.define_asset_job("validate_script", selection=[workload_script],
                                          description="Materialize one script's workload_script partition.")
