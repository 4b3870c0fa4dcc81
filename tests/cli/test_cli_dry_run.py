"""`substrate-bench trial SUITE --backend kubernetes --dry-run`: the objects a kubernetes trial would submit, as
schema-valid YAML, and nothing run or written."""

import shutil
from pathlib import Path

import kubernetes_validate
import pytest
import yaml
from click.testing import CliRunner

from substrate_assets.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def project(tmp_path, monkeypatch):
    for name in ("scripts", "suites.yaml"):
        (shutil.copytree if (ROOT / name).is_dir() else shutil.copy)(ROOT / name, tmp_path / name)
    cluster = (ROOT / "deploy" / "suites.cluster.yaml").read_text().split("suites:\n", 1)[1]
    with (tmp_path / "suites.yaml").open("a") as suites:
        suites.write("\n" + cluster)
    monkeypatch.setenv("SUBSTRATE_BENCH_ROOT", str(tmp_path))
    monkeypatch.delenv("SUBSTRATE_BENCH_STORE", raising=False)
    return tmp_path


def trial(*args: str):
    return CliRunner().invoke(main, ["trial", *args])


def test_a_cluster_suite_prints_its_manifests(project):
    result = trial("coding-session-cluster", "--dry-run")
    assert result.exit_code == 0, result.output
    manifests = [document for document in yaml.safe_load_all(result.output) if document]
    assert [manifest["kind"] for manifest in manifests] == ["ConfigMap", "Service", *["Pod"] * 4, "Pod"]
    for manifest in manifests:
        kubernetes_validate.validate(manifest, "1.33", strict=True)
    assert manifests[0]["data"]["script.yaml"] == (project / "scripts" / "coding-session.yaml").read_text()
    assert result.output.startswith("# trial coding-session-cluster-")
    assert "script.yaml: |" in result.output  # the script reads as itself
    assert not (project / "store").exists()  # nothing ran, nothing was claimed


def test_a_cluster_ladder_runs_for_its_steps(project):
    result = trial("coding-session-cluster-ladder", "--dry-run")
    assert result.exit_code == 0, result.output
    pods = [document for document in yaml.safe_load_all(result.output) if document and document["kind"] == "Pod"]
    # 8 steps of 5 minutes, plus the half hour upstream's Job timeout allows.
    assert {pod["spec"]["activeDeadlineSeconds"] for pod in pods} == {8 * 300 + 1800}
    refused = trial("coding-session-cluster-ladder", "--users", "10", "--dry-run")
    assert refused.exit_code == 2
    assert "users: a ladder suite takes its users from ladder; remove users" in refused.output


def test_a_local_suite_on_the_kubernetes_backend(project):
    result = trial("quick-smoke", "--backend", "kubernetes", "--image", "registry.example/substrate-bench:1",
                   "--object-store", "s3://bucket/runs", "--locust-workers", "0", "--users", "40", "--dry-run")
    assert result.exit_code == 0, result.output
    manifests = [document for document in yaml.safe_load_all(result.output) if document]
    assert [manifest["kind"] for manifest in manifests] == ["ConfigMap", "Pod"]
    [container] = manifests[1]["spec"]["containers"]
    assert container["image"] == "registry.example/substrate-bench:1"


@pytest.mark.parametrize(("args", "message"), [
    (["quick-smoke", "--backend", "kubernetes", "--dry-run"],
     "needs a kubernetes: section (image, store, …); add one to the suite in suites.yaml or pass --image and "
     "--object-store"),
    (["coding-session-cluster"], "use `substrate-bench run coding-session-cluster` or the UI"),
    (["quick-smoke", "--dry-run"], "--dry-run prints a kubernetes trial's pods; add --backend kubernetes"),
    (["coding-session-cluster", "--namespace", "Not_A_Label", "--dry-run"], "must be an RFC 1123 label"),
])
def test_what_cannot_be_printed_is_a_usage_error(project, args, message):
    result = trial(*args)
    assert result.exit_code == 2
    assert message in " ".join(result.output.split())
