"""The scripts shipped in scripts/: valid, canonical round trip, and the figures the reference derives."""

from pathlib import Path

import pytest

from substrate_assets.workload import (
    ScriptError,
    ScriptLibrary,
    budgets,
    decode,
    encode,
    load_script_file,
    summarize,
)
from substrate_assets.workload.budget import disk_by_key, ram_by_key

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"
LIBRARY = ScriptLibrary(SCRIPTS)
MI = 1024 * 1024


@pytest.mark.parametrize("name", LIBRARY.names())
def test_every_script_loads_and_round_trips(name):
    loaded = LIBRARY.load(name)
    assert loaded.script.name == name
    canonical = encode(loaded.script)
    assert decode(canonical) == loaded.script
    assert encode(decode(canonical)) == canonical


def test_library_has_the_two_scripts():
    assert {"coding-session", "quick-session"} <= set(LIBRARY.names())


def test_coding_session_shape_and_budget():
    script = LIBRARY.load("coding-session").script
    summary = summarize(script)
    assert (summary.steps, summary.ops, summary.think_per_lap_ns) == (20, 44, 69_000_000_000)
    assert summary.ops_by_kind == {"burn_cpu": 14, "write_disk": 8, "read_disk_digest": 6, "ingest": 5,
                                   "churn_ram": 3, "fill_ram": 2, "walk_ram": 2, "read_disk_data": 2, "ping": 2}
    assert budgets(script.steps).ram == 96 * MI
    assert budgets(script.steps).disk == int(98.5 * MI)
    assert (summary.declared_ram, summary.declared_disk, summary.floor) == ("96Mi", "98.5Mi", "1Gi")
    assert ram_by_key(script.steps) == {"agent_context": 32 * MI, "compiler_ws": 64 * MI}
    assert disk_by_key(script.steps) == {"repo_tarball": 16 * MI, "deps_cache": 32 * MI, "build_artifacts": 24 * MI,
                                         "patch": 512 * 1024, "test_fixtures": 2 * MI, "release_package": 24 * MI}
    burn = [op for op in script.ops if op.kind.value == "burn_cpu"]
    assert sum(op.millis for op in burn) == 22_700
    assert sum(op.millis * op.parallel for op in burn) == 40_400
    assert sum(op.size for op in script.ops if op.kind.value == "ingest") == int(48.6875 * MI)
    assert sum(op.size for op in script.ops if op.kind.value == "write_disk") == int(84.25 * MI)
    assert [s.row_name for s in script.steps][5] == "Step_06_first_build"


def test_quick_session_is_small():
    script = LIBRARY.load("quick-session").script
    assert len(script.steps) <= 5
    assert budgets(script.steps).total <= 32 * MI
    assert all(step.think_ns <= 1_000_000_000 for step in script.steps)


def test_library_requires_name_to_match_file(tmp_path):
    (tmp_path / "other.yaml").write_text((SCRIPTS / "quick-session.yaml").read_text())
    with pytest.raises(ScriptError, match='must equal its file name "other"') as caught:
        ScriptLibrary(tmp_path).load("other")
    assert caught.value.line == 3
    assert load_script_file(tmp_path / "other.yaml").script.name == "quick-session"


def test_unknown_script_names_the_ones_there_are(tmp_path):
    with pytest.raises(FileNotFoundError, match="have coding-session, quick-session"):
        LIBRARY.path_of("nope")


def test_unreadable_file_is_a_script_error(tmp_path):
    with pytest.raises(ScriptError, match="cannot read"):
        load_script_file(tmp_path / "missing.yaml")


def test_canonical_form_of_an_unusual_script():
    text = ("name: odd\nmin_actor_memory: 1.5Gi\nsteps:\n- name: '007'\n  agent: 'yes: \"quoted\" # not a comment'\n"
            "  think: 90s\n  ops:\n  - fill_ram: {key: a, size: 1536}\n  - burn_cpu: {millis: 10}\n")
    script = decode(text)
    canonical = encode(script)
    assert "min_actor_memory: 1536Mi" in canonical
    assert "think: 1m30s" in canonical
    assert "burn_cpu: {millis: 10, parallel: 1}" in canonical
    assert decode(canonical) == script
