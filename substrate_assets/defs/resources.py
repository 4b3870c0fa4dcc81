"""Resources every domain shares: where scripts, suites and the run store live, and which deployment this is."""

from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import Field

from substrate_assets.project import Deployment, project_root, scripts_directory, store_directory
from substrate_assets.results.layout import RunStore
from substrate_assets.suites import Suite, get_suite, load_suites
from substrate_assets.workload import ScriptLibrary

if TYPE_CHECKING:
    # Dagster's resource class is generic in the object it hands to user code (these hand themselves); subscripted
    # at run time it would be a new pydantic class, so only the checker sees the parameter.
    Resource = dg.ConfigurableResource[Any]
else:
    Resource = dg.ConfigurableResource


class ScriptLibraryResource(Resource):
    """The directory of workload scripts, ``scripts/<name>.yaml``."""

    directory: str = Field(default_factory=lambda: str(scripts_directory()),
                           description="Directory holding one YAML file per script.")

    def library(self) -> ScriptLibrary:
        return ScriptLibrary(Path(self.directory))


class SuitesResource(Resource):
    """``suites.yaml``: the named trial configurations."""

    path: str = Field(default_factory=lambda: str(project_root() / "suites.yaml"))

    def suite(self, name: str) -> Suite:
        return get_suite(name, Path(self.path))

    def all(self) -> dict[str, Suite]:
        return load_suites(Path(self.path))


class RunStoreResource(Resource):
    """The run store holding every trial directory (the source of truth)."""

    root: str = Field(default_factory=lambda: str(store_directory()))

    def store(self) -> RunStore:
        return RunStore(Path(self.root))


class DeploymentResource(Resource):
    """Where this code location runs (``workstation`` or ``cluster``); definitions.py sets it from the one switch."""

    name: str = Field(default_factory=lambda: Deployment.current().value)

    def deployment(self) -> Deployment:
        return Deployment(self.name)


def shared_resources(deployment: Deployment) -> dict[str, Resource]:
    return {"script_library": ScriptLibraryResource(), "suites": SuitesResource(), "run_store": RunStoreResource(),
            "deployment": DeploymentResource(name=deployment.value)}
