"""The trials domain's Dagster objects, with the two Pipes clients a trial runs through."""

import warnings

import dagster as dg

from substrate_assets.defs.trials.assets import trial_run
from substrate_assets.defs.trials.jobs import run_trial_job
from substrate_assets.defs.trials.kubernetes_client import KubernetesPipesClient
from substrate_assets.defs.trials.sensors import script_change_sensor
from substrate_assets.project import project_root

# Binding the shared resources to run_trial (a job of ops that needs them) rebuilds script_change_sensor, which
# targets it, and Dagster's own rebuild passes the sensor's beta ``owners`` parameter (sensor_definition.py); the
# warning is about Dagster's call, not ours, and would be printed by every command.
warnings.filterwarnings("ignore", message=r"Parameter `owners` of initializer `SensorDefinition\.__init__`",
                        category=dg.BetaWarning)

defs = dg.Definitions(
    assets=[trial_run],
    jobs=[run_trial_job],
    sensors=[script_change_sensor],
    resources={"pipes_subprocess_client": dg.PipesSubprocessClient(cwd=str(project_root())),
               "pipes_k8s_client": KubernetesPipesClient()},
)
