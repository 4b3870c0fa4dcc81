"""``workload_script[script]``: a script file, its figures, and the blocking check ``script_is_valid``."""

import hashlib
from pathlib import Path

import dagster as dg

from substrate_assets.cache import files_digest
from substrate_assets.defs.catalog import OWNERS, Materialized
from substrate_assets.defs.partitions import script_partitions
from substrate_assets.defs.resources import ScriptLibraryResource
from substrate_assets.workload import ScriptError, ScriptLibrary, step_table_markdown, summarize
from substrate_assets.workload.library import display_path, parse_script_file

SCRIPT_IS_VALID = "script_is_valid"
# Dagster tags a materialization with its asset's code version under this name.
CODE_VERSION_TAG = "dagster/code_version"


def _validator_version() -> str:
    """A digest of the code that decodes, checks and summarizes a script: the workload package and this module."""
    here = Path(__file__).resolve()
    package = here.parents[2]
    return files_digest([*(package / "workload").glob("*.py"), here], package)[:16]


# The asset's code version: a script validated by other code is stale in the UI, and validated again by a job.
VALIDATOR_VERSION = _validator_version()


@dg.asset(
    partitions_def=script_partitions,
    group_name="workloads",
    owners=OWNERS,
    kinds={"yaml"},
    code_version=VALIDATOR_VERSION,
    check_specs=[dg.AssetCheckSpec(SCRIPT_IS_VALID, asset="workload_script", blocking=True,
                                   description="The script decodes strictly and passes every script rule; "
                                   "runs of trials that use it stop here when it does not.")],
    description="One agent-session workload script (`scripts/<name>.yaml`): its step table, declared "
    "memory and content hash. An invalid script still materializes, with its problems, and fails "
    "the blocking check.",
)
def workload_script(context: dg.AssetExecutionContext,
                    script_library: ScriptLibraryResource) -> Materialized:
    name = context.partition_key
    library = script_library.library()
    try:
        path = library.path_of(name)
    except FileNotFoundError as error:
        raise dg.Failure(str(error)) from None
    data = path.read_bytes()
    sha256 = hashlib.sha256(data).hexdigest()
    common: dict[str, dg.MetadataValue | str] = {"path": dg.MetadataValue.path(display_path(path)), "sha256": sha256}
    try:
        loaded = parse_script_file(path, data, expected_name=name)
    except ScriptError as error:
        problems = [str(problem) for problem in error.problems]
        context.log.error("script %s is invalid:\n%s", name, "\n".join(problems))
        listed = dg.MetadataValue.md("\n".join(f"- `{problem}`" for problem in problems))
        return dg.MaterializeResult(
            metadata={**common, "valid": False, "problems": listed},
            data_version=dg.DataVersion(sha256),
            check_results=[dg.AssetCheckResult(
                check_name=SCRIPT_IS_VALID, passed=False, severity=dg.AssetCheckSeverity.ERROR,
                metadata={"problems": listed, "first_problem": problems[0]})],
        )
    summary = summarize(loaded.script, loaded.sha256)
    return dg.MaterializeResult(
        metadata={
            **common,
            "valid": True,
            "steps": summary.steps,
            "ops": summary.ops,
            "think_per_lap_s": summary.think_per_lap_ns / 1e9,
            "declared_ram": summary.declared_ram,
            "declared_ram_bytes": summary.budget.ram,
            "declared_disk": summary.declared_disk,
            "declared_disk_bytes": summary.budget.disk,
            "floor": summary.floor,
            "min_actor_memory_bytes": summary.min_actor_memory,
            "step_table": dg.MetadataValue.md(step_table_markdown(loaded.script)),
        },
        data_version=dg.DataVersion(sha256),
        check_results=[dg.AssetCheckResult(check_name=SCRIPT_IS_VALID, passed=True,
                                           metadata={"sha256": sha256})],
    )


def validated_before(instance: dg.DagsterInstance, library: ScriptLibrary, name: str) -> str | None:
    """The run that found script ``name`` valid as its file is now, with the code that validates it now (its latest
    materialization's sha256 is the file's, its code version the asset's); None when there is none, or the file is
    not there (a run then says why)."""
    try:
        data = library.path_of(name).read_bytes()
    except OSError:
        return None
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=workload_script.key, asset_partitions=[name]), limit=1).records
    if not records or records[0].asset_materialization is None:
        return None
    materialization = records[0].asset_materialization
    sha256, valid = materialization.metadata.get("sha256"), materialization.metadata.get("valid")
    if (sha256 is None or sha256.value != hashlib.sha256(data).hexdigest() or valid is None or valid.value is not True
            or (materialization.tags or {}).get(CODE_VERSION_TAG) != VALIDATOR_VERSION):
        return None
    return records[0].run_id
