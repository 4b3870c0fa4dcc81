"""The ``run_trial`` job: one trial, and — where the warehouse lives — the raw tables that load it."""

import dagster as dg

from substrate_assets.defs.trials.assets import trial_run

# What depends directly on trial_run is what loads it: the raw tables on a workstation, nothing in a cluster.
run_trial_job = dg.define_asset_job("run_trial", selection=dg.AssetSelection.assets(trial_run).downstream(depth=1),
                                    description="Run one trial and, on a workstation, load its files into the "
                                    "warehouse.")
