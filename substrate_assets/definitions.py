"""Assembles the Dagster Definitions of substrate-bench; nothing else lives here."""

import dagster as dg

from substrate_assets.defs.resources import ScriptLibraryResource
from substrate_assets.defs.scripts import workload_script

defs = dg.Definitions(
    assets=[workload_script],
    resources={"script_library": ScriptLibraryResource()},
)
