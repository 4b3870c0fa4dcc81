"""suites.yaml: the schema, and errors that name the file, line and suite."""

from pathlib import Path

import pytest

from substrate_assets.suites import SuiteError, get_suite, load_suites, parse_run_time

ROOT = Path(__file__).resolve().parents[1]


def test_the_project_suites_load():
    suites = load_suites(ROOT / "suites.yaml")
    assert {"quick-smoke", "coding-session-baseline"} <= set(suites)
    smoke = suites["quick-smoke"]
    assert (smoke.script, smoke.users, smoke.duration_s, smoke.think_scale) == ("quick-session", 4, 60, 0.2)
    assert smoke.backend == "local" and smoke.actor_memory_bytes == 1 << 30


@pytest.mark.parametrize(("text", "seconds"), [("60s", 60), ("90", 90), ("2m", 120), ("1h30m", 5400),
                                               ("1m30s", 90)])
def test_run_time(text, seconds):
    assert parse_run_time(text) == seconds


@pytest.mark.parametrize("text", ["", "0s", "soon", "1d", "-5s"])
def test_bad_run_time(text):
    with pytest.raises(ValueError):
        parse_run_time(text)


def write(tmp_path, body: str) -> Path:
    path = tmp_path / "suites.yaml"
    path.write_text(body)
    return path


@pytest.mark.parametrize(("entry", "fragment", "line"), [
    ("  - name: a\n    script: s\n    users: 0\n", "suite 'a': users: Input should be greater than or equal to 1", 4),
    ("  - name: a\n    script: s\n    users: 1\n    colour: red\n", "suite 'a': colour: Extra inputs", 5),
    ("  - name: a\n    script: s\n    users: 1\n    duration: soon\n", "'soon' is not a run time: it must look like 60s", 5),
    ("  - name: a\n    script: s\n    users: 1\n    actor_memory: lots\n", "is not a positive whole byte count", 5),
    ("  - name: a\n    script: s\n    users: 1\n    lifecycle_mode: freeze\n", "lifecycle_mode", 5),
    ("  - name: Bad Name\n    script: s\n    users: 1\n", "must be a slug", 2),
    ("  - name: a\n    users: 1\n", "script: Field required", 2),
    ("  - name: a\n    script: s\n    users: 1\n  - name: a\n    script: s\n    users: 2\n", "defined twice", 5),
])
def test_errors_name_file_line_and_suite(tmp_path, entry, fragment, line):
    path = write(tmp_path, "suites:\n" + entry)
    with pytest.raises(SuiteError) as caught:
        load_suites(path)
    message = str(caught.value)
    assert fragment in message
    assert message.startswith(f"{path}:{line}:")


def test_shape_errors(tmp_path):
    with pytest.raises(SuiteError, match="expected a mapping with a 'suites' list"):
        load_suites(write(tmp_path, "- just a list\n"))
    with pytest.raises(SuiteError, match="unknown top-level"):
        load_suites(write(tmp_path, "suites: []\nextra: 1\n"))
    with pytest.raises(SuiteError, match="invalid YAML"):
        load_suites(write(tmp_path, "suites: [\n"))
    with pytest.raises(SuiteError, match=r"no suite 'x'.*have a"):
        get_suite("x", write(tmp_path, "suites:\n  - {name: a, script: s, users: 1}\n"))


def test_overrides_are_validated(tmp_path):
    suite = get_suite("a", write(tmp_path, "suites:\n  - {name: a, script: s, users: 1}\n"))
    assert suite.with_overrides(users=5, duration=None).users == 5
    with pytest.raises(ValueError):
        suite.with_overrides(users=0)
