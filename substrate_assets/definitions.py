"""Assembles the Dagster Definitions of substrate-bench from its domains; nothing else lives here."""

import dagster as dg

from substrate_assets.defs.resources import shared_resources
from substrate_assets.defs.scripts import definitions as scripts
from substrate_assets.defs.trials import definitions as trials
from substrate_assets.defs.warehouse import definitions as warehouse
from substrate_assets.project import Deployment

deployment = Deployment.current()
# In a cluster deployment the code location runs trials only; the warehouse is built where its file lives.
defs = dg.Definitions.merge(scripts.defs, trials.defs, *((warehouse.defs,) if deployment.holds_warehouse else ()),
                            dg.Definitions(resources=shared_resources(deployment)))
