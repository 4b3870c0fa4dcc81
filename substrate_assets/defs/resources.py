"""Resources: where scripts (and later the run store and warehouse) live."""

from pathlib import Path

import dagster as dg
from pydantic import Field

from substrate_assets.project import scripts_directory
from substrate_assets.workload import ScriptLibrary


class ScriptLibraryResource(dg.ConfigurableResource):
    """The directory of workload scripts, ``scripts/<name>.yaml``."""

    directory: str = Field(default_factory=lambda: str(scripts_directory()),
                           description="Directory holding one YAML file per script.")

    def library(self) -> ScriptLibrary:
        return ScriptLibrary(Path(self.directory))
