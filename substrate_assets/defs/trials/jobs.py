"""The ``run_trial`` job: one trial, and — where the warehouse lives — the raw tables that load it."""

import dagster as dg

from substrate_assets.defs.trials.assets import trial_run
from substrate_assets.defs.trials.checks import NO_REGRESSION

# What depends directly on trial_run is what loads it: the raw tables on a workstation, nothing in a cluster. The
# comparison with the previous trial reads the marts, which follow this job; it runs where they do.
run_trial_job = dg.define_asset_job("run_trial", selection=dg.AssetSelection.assets(trial_run).downstream(depth=1)
                                    - dg.AssetSelection.checks(dg.AssetCheckKey(trial_run.key, NO_REGRESSION)),
                                    description="Run one trial and, on a workstation, load its files into the "
                                    "warehouse.")
