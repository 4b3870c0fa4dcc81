"""Assembles the Dagster Definitions of substrate-bench from its domains; nothing else lives here."""

import dagster as dg

from substrate_assets.defs.resources import shared_resources
from substrate_assets.defs.scripts import definitions as scripts
from substrate_assets.defs.trials import definitions as trials
from substrate_assets.project import Deployment, shares_warehouse

deployment = Deployment.current()
domains = [scripts.defs, trials.defs]
# A workstation holds its warehouse; a cluster defines the whole graph when the warehouse is a shared DuckLake (its
# run pods cannot share a file), and trials only otherwise.
if deployment.holds_warehouse or shares_warehouse():
    from substrate_assets.defs.warehouse import definitions as warehouse

    domains.append(warehouse.defs)
# Every run executes its steps in its own process, one after another: the pools admit one trial and one DuckDB
# writer at a time anyway, and a process per step (the default) costs seconds each, minutes for the marts.
defs = dg.Definitions.merge(*domains, dg.Definitions(resources=shared_resources(deployment),
                                                     executor=dg.in_process_executor))
