"""Runs of the code location's own jobs executed in this process, recorded as a launch from the UI records them:
with the code location they came from, so the UI can re-execute them."""

import sys
from collections.abc import Mapping
from functools import cache
from pathlib import Path

import dagster as dg
import yaml
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.definitions.repository_definition.valid_definitions import SINGLETON_REPOSITORY_NAME
from dagster._core.execution.api import execute_run
from dagster._core.remote_origin import ManagedGrpcPythonEnvCodeLocationOrigin, RemoteJobOrigin, RemoteRepositoryOrigin
from dagster._core.types.loadable_target_origin import LoadableTargetOrigin

from substrate_assets.project import project_root

DEFINITIONS_MODULE = "substrate_assets.definitions"
# The checkout's own: a project elsewhere (SUBSTRATE_BENCH_ROOT) holds scripts, suites and state, not code.
WORKSPACE_FILE = Path(__file__).resolve().parents[2] / "workspace.yaml"


def ui_workspace() -> list[str]:
    """How ``dagster dev`` finds the code location: the checkout's workspace.yaml, or the module itself when the
    package runs from elsewhere."""
    return ["-w", str(WORKSPACE_FILE)] if WORKSPACE_FILE.is_file() else ["-m", DEFINITIONS_MODULE]


@cache
def location_name() -> str:
    """The name the UI gives the code location that loads the definitions (it finds a run's job by it): the one
    workspace.yaml gives it, else Dagster's default for a module, its name."""
    if not WORKSPACE_FILE.is_file():
        return DEFINITIONS_MODULE
    for entry in (yaml.safe_load(WORKSPACE_FILE.read_text()) or {}).get("load_from") or []:
        module = entry.get("python_module") or {}
        if module.get("module_name") == DEFINITIONS_MODULE:
            return module.get("location_name") or DEFINITIONS_MODULE
    raise ValueError(f"{WORKSPACE_FILE}: no python_module entry loads {DEFINITIONS_MODULE}")


def run_job(job_name: str, instance: dg.DagsterInstance, run_config: Mapping[str, object],
            tags: Mapping[str, str]) -> dg.JobExecutionResult:
    """Execute the code location's job ``job_name`` here, as a run that names its code location (as workspace.yaml
    loads it), so that the UI shows it under the job and can re-execute it."""
    working_directory = str(project_root())
    repository = ReconstructableRepository.for_module(DEFINITIONS_MODULE, "defs", working_directory=working_directory)
    job = repository.get_reconstructable_job(job_name)
    location = ManagedGrpcPythonEnvCodeLocationOrigin(
        LoadableTargetOrigin(executable_path=sys.executable, module_name=DEFINITIONS_MODULE,
                             working_directory=working_directory), location_name())
    origin = RemoteJobOrigin(RemoteRepositoryOrigin(location, SINGLETON_REPOSITORY_NAME), job_name)
    run = instance.create_run_for_job(job_def=job.get_definition(), run_config=run_config, tags=tags,
                                      remote_job_origin=origin, job_code_origin=job.get_python_origin())
    return execute_run(job, run, instance)
