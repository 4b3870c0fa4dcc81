"""The workload_script asset and its blocking check, materialized on a temporary Dagster instance."""

import shutil
from pathlib import Path

import dagster as dg
import pytest

from substrate_assets.defs.resources import ScriptLibraryResource
from substrate_assets.defs.scripts import assets
from substrate_assets.defs.scripts.assets import SCRIPT_IS_VALID, validated_before, workload_script
from substrate_assets.workload import ScriptLibrary

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


@pytest.fixture
def library(tmp_path):
    shutil.copy(SCRIPTS / "quick-session.yaml", tmp_path / "quick-session.yaml")
    broken = (SCRIPTS / "quick-session.yaml").read_text().replace("name: quick-session", "name: broken")
    broken = broken.replace("walk_ram: {key: agent_context}", "walk_ram: {key: nothing_filled}")
    (tmp_path / "broken.yaml").write_text(broken)
    return tmp_path


def materialize(library: Path, name: str, instance: dg.DagsterInstance | None = None) -> dg.ExecuteInProcessResult:
    instance = instance or dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("script", [name])
    return dg.materialize([workload_script], partition_key=name, instance=instance, raise_on_error=False,
                          resources={"script_library": ScriptLibraryResource(directory=str(library))})


def test_valid_script_materializes_with_figures_and_passing_check(library):
    result = materialize(library, "quick-session")
    assert result.success
    [materialization] = result.asset_materializations_for_node("workload_script")
    metadata = materialization.metadata
    assert metadata["valid"].value is True
    assert metadata["steps"].value == 5 and metadata["ops"].value == 12
    assert metadata["declared_ram"].value == "16Mi" and metadata["declared_disk"].value == "8.25Mi"
    assert metadata["declared_ram_bytes"].value == 16 * 1024 * 1024
    assert metadata["floor"].value == "256Mi"
    assert len(metadata["sha256"].value) == 64
    assert "| 3 | `03_build` | 700ms |" in metadata["step_table"].value
    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.check_name == SCRIPT_IS_VALID and evaluation.passed


def test_invalid_script_materializes_its_problems_and_fails_the_blocking_check(library):
    result = materialize(library, "broken")
    [materialization] = result.asset_materializations_for_node("workload_script")
    assert materialization.metadata["valid"].value is False
    assert 'walk of RAM array "nothing_filled" before any fill_ram' in materialization.metadata["problems"].value
    [evaluation] = result.get_asset_check_evaluations()
    assert evaluation.check_name == SCRIPT_IS_VALID
    assert not evaluation.passed
    assert evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert "broken.yaml:" in evaluation.metadata["first_problem"].value
    assert not result.success  # a failed blocking check fails the run


def test_missing_script_fails_the_step_with_its_name(library):
    result = materialize(library, "gone")
    assert not result.success
    failure = next(e for e in result.all_events if e.event_type_value == "STEP_FAILURE")
    assert 'no script "gone"' in str(failure.event_specific_data.error)


def test_definitions_load():
    from substrate_assets.definitions import defs

    assert defs.resolve_assets_def("workload_script").check_keys


def test_a_script_is_known_valid_while_its_file_and_the_code_that_validated_it_are_the_same(library, monkeypatch):
    instance = dg.DagsterInstance.ephemeral()
    scripts = ScriptLibrary(library)
    assert validated_before(instance, scripts, "quick-session") is None  # never validated
    result = materialize(library, "quick-session", instance)
    assert validated_before(instance, scripts, "quick-session") == result.run_id
    # Validated by other code (a new rule may refuse it): not known valid.
    monkeypatch.setattr(assets, "VALIDATOR_VERSION", "other-code")
    assert validated_before(instance, scripts, "quick-session") is None
    monkeypatch.undo()
    # A changed file is not the file that was validated.
    script = library / "quick-session.yaml"
    script.write_text(script.read_text() + "\n# a comment changes the file\n")
    assert validated_before(instance, scripts, "quick-session") is None
    again = materialize(library, "quick-session", instance)
    assert validated_before(instance, scripts, "quick-session") == again.run_id
    # An invalid script is never known valid, nor is one whose file is gone.
    materialize(library, "broken", instance)
    assert validated_before(instance, scripts, "broken") is None
    script.unlink()
    assert validated_before(instance, scripts, "quick-session") is None
