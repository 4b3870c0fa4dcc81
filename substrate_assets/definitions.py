"""Assembles the Dagster Definitions of substrate-bench from its domains; nothing else lives here."""

import dagster as dg

from substrate_assets.defs.resources import shared_resources
from substrate_assets.defs.runs.definitions import runs_defs
from substrate_assets.defs.runs.executor import owned_in_process_executor
from substrate_assets.defs.scripts import definitions as scripts
from substrate_assets.defs.trials import definitions as trials
from substrate_assets.defs.trials.unlanded import settle_unlanded_trials
from substrate_assets.project import Deployment, shares_warehouse

deployment = Deployment.current()
domains = [scripts.defs, trials.defs]
# A workstation holds its warehouse; a cluster defines the whole graph when the warehouse is a shared DuckLake (its
# run pods cannot share a file), and trials only otherwise.
if deployment.holds_warehouse or shares_warehouse():
    from substrate_assets.defs.warehouse import definitions as warehouse

    domains.append(warehouse.defs)
# A workstation's run workers are processes of this host, which the daemon's sensor can check; a cluster's are pods,
# which Dagster's run monitoring checks through the Kubernetes run launcher. After the sweep, the trials dead runs
# never recorded are settled, so that the warehouse's automation does not wait for them.
if deployment.holds_warehouse:
    domains.append(runs_defs([settle_unlanded_trials]))
# Every run executes its steps in its own process, one after another: the pools admit one trial and one DuckDB
# writer at a time anyway, and a process per step (the default) costs seconds each, minutes for the marts. That
# process records itself as the run's owner first, whoever launched the run (defs/runs/).
defs = dg.Definitions.merge(*domains, dg.Definitions(resources=shared_resources(deployment),
                                                     executor=owned_in_process_executor))
