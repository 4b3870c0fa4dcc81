"""Assembles the Dagster Definitions of substrate-bench; nothing else lives here."""

import dagster as dg
from dagster_k8s import PipesK8sClient

from substrate_assets.defs.models import mart_assets, warehouse_refresh
from substrate_assets.defs.raw import raw_assets
from substrate_assets.defs.resources import (
    RunStoreResource,
    ScriptLibraryResource,
    SuitesResource,
    WarehouseResource,
)
from substrate_assets.defs.scripts import workload_script
from substrate_assets.defs.sensors import run_trial_job, script_change_sensor, validate_script_job
from substrate_assets.defs.trials import trial_run
from substrate_assets.project import project_root, warehouse_enabled

# In a cluster deployment the code location runs trials only; the warehouse is built where its file lives.
ASSETS = [workload_script, trial_run, *((*raw_assets, *mart_assets) if warehouse_enabled() else ())]

defs = dg.Definitions(
    assets=ASSETS,
    jobs=[validate_script_job, run_trial_job],
    sensors=[script_change_sensor, *((warehouse_refresh,) if warehouse_enabled() else ())],
    resources={
        "script_library": ScriptLibraryResource(),
        "suites": SuitesResource(),
        "run_store": RunStoreResource(),
        "warehouse": WarehouseResource(),
        "pipes_subprocess_client": dg.PipesSubprocessClient(cwd=str(project_root())),
        "pipes_k8s_client": PipesK8sClient(),
    },
)
