"""suites.yaml: the schema, and errors that name the file, line and suite."""

from pathlib import Path

import pytest

from substrate_assets.suites import SuiteError, get_suite, load_suites, parse_run_time

ROOT = Path(__file__).resolve().parents[2]


def test_the_project_suites_load():
    suites = load_suites(ROOT / "suites.yaml")
    assert {"quick-smoke", "coding-session-baseline"} <= set(suites)
    smoke = suites["quick-smoke"]
    assert (smoke.script, smoke.users, smoke.duration_s, smoke.think_scale) == ("quick-session", 4, 30, 0.2)
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
    ("  - name: a\n    script: s\n    users: 1\n    colour: red\n", "suite 'a': colour: unknown field (a misspelling?)", 5),
    ("  - name: a\n    script: s\n    users: 1\n    duration: soon\n", "'soon' is not a run time: it must look like 60s", 5),
    ("  - name: a\n    script: s\n    users: 1\n    actor_memory: lots\n", "is not a positive whole byte count", 5),
    ("  - name: a\n    script: s\n    users: 1\n    lifecycle_mode: freeze\n", "lifecycle_mode", 5),
    ("  - name: Bad Name\n    script: s\n    users: 1\n", "must be a slug", 2),
    ("  - name: a\n    users: 1\n", "script: required for an agentsession suite", 2),
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


# Ladders and SLOs. The scripts directory beside each suites file holds one small script of 3 s of think per lap.
LAP_SCRIPT = """\
name: lap
min_actor_memory: 64Mi
steps:
  - name: 01_one
    agent: Thinks a second
    think: 1s
    ops:
      - ping: {}
  - name: 02_two
    agent: Thinks two seconds
    think: 2s
    ops:
      - ping: {}
"""


def ladder_file(tmp_path, body: str) -> Path:
    (tmp_path / "scripts").mkdir(exist_ok=True)
    (tmp_path / "scripts" / "lap.yaml").write_text(LAP_SCRIPT)
    return write(tmp_path, "suites:\n  - name: l\n    script: lap\n" + body)


def only_error(path: Path) -> str:
    with pytest.raises(SuiteError) as caught:
        load_suites(path)
    return str(caught.value)


def test_a_ladder_by_start_step_and_max(tmp_path):
    suite = get_suite("l", ladder_file(tmp_path, "    ladder: {start: 2, step: 2, max: 12, hold: 45s}\n"))
    assert suite.ladder is not None and suite.ladder.steps == (2, 4, 6, 8, 10, 12)
    assert (suite.ladder.hold_s, suite.ladder.duration_s, suite.duration_s) == (45, 270, 270)
    assert (suite.users, suite.duration, suite.peak_users) == (None, None, 12)
    assert suite.ladder.locust_spec() == "2:45s,4:45s,6:45s,8:45s,10:45s,12:45s"
    assert get_suite("l", ladder_file(tmp_path, "    ladder: {start: 3, step: 5, max: 3, hold: 1m}\n")).ladder \
        .locust_spec() == "3:60s"


def test_a_hold_in_whole_seconds(tmp_path):
    suite = get_suite("l", ladder_file(tmp_path, "    ladder: {users: [2, 4], hold: 60}\n"))
    assert suite.ladder is not None and (suite.ladder.hold, suite.ladder.hold_s) == ("60s", 60)


def test_a_ladder_by_users(tmp_path):
    suite = get_suite("l", ladder_file(tmp_path, "    ladder: {users: [2, 4, 8, 12], hold: 2m}\n"))
    assert suite.ladder is not None and suite.ladder.steps == (2, 4, 8, 12)
    assert (suite.ladder.hold_s, suite.duration_s, suite.peak_users) == (120, 480, 12)
    assert suite.ladder.locust_spec() == "2:120s,4:120s,8:120s,12:120s"


@pytest.mark.parametrize(("ladder", "where", "message"), [
    ("    ladder: {start: 2, step: 2, max: 12, users: [2, 4], hold: 45s}\n", "4:13", "ladder: a ladder takes start, "
     "step and max, or users, not both"),
    ("    ladder: {hold: 45s}\n", "4:13", "ladder: a ladder needs start, step and max, or users"),
    ("    ladder: {start: 2, max: 12, hold: 45s}\n", "4:13", "ladder.step: a ladder of start, step and max needs all "
     "three"),
    ("    ladder: {start: 0, step: 2, max: 12, hold: 45s}\n", "4:21", "ladder.start: Input should be greater than or "
     "equal to 1"),
    ("    ladder: {start: 2, step: 0, max: 12, hold: 45s}\n", "4:30", "ladder.step: Input should be greater than or "
     "equal to 1"),
    ("    ladder: {start: 4, step: 2, max: 2, hold: 45s}\n", "4:38", "ladder.max: max 2 is below start 4"),
    ("    ladder: {start: 2, step: 2, max: 11, hold: 45s}\n", "4:38", "ladder.max: max 11 is not start 2 plus a whole "
     "number of steps of 2"),
    ("    ladder: {start: 1, step: 1, max: 101, hold: 45s}\n", "4:38", "ladder.max: a ladder of 101 steps is too "
     "long: at most 100"),
    ("    ladder: {users: [], hold: 45s}\n", "4:21", "ladder.users: a ladder needs at least one step"),
    (f"    ladder: {{users: {list(range(1, 102))}, hold: 45s}}\n", "4:21", "ladder.users: a ladder of 101 steps is "
     "too long: at most 100"),
    ("    ladder: {users: [2, 4], hold: soon}\n", "4:35", "ladder.hold: 'soon' is not a run time: it must look like "
     "60s, 2m or 1h30m"),
    ("    ladder: {users: [2, 4], hold: 0s}\n", "4:35", "ladder.hold: run time '0s' must be positive"),
    ("    ladder: {users: [2, 4]}\n", "4:13", "ladder.hold: Field required"),
    ("    ladder: {users: [2, 4], hold: 45s, ramp: 1}\n", "4:46", "ladder.ramp: unknown field (a misspelling?)"),
    # spawn_rate 1: the second step adds 50 users, 50 s of ramp in a 45 s hold.
    ("    ladder: {users: [2, 52], hold: 45s}\n", "4:36", "ladder.hold: 45s is no longer than step 2's ramp (50s at "
     "spawn_rate 1): the step would end before all its users started"),
])
def test_ladder_errors_are_at_their_line(tmp_path, ladder, where, message):
    path = ladder_file(tmp_path, ladder)
    assert only_error(path) == f"{path}:{where}: suite 'l': {message}"


def test_each_ladder_entry_that_is_wrong_is_at_its_own_line(tmp_path):
    path = ladder_file(tmp_path, "    ladder:\n      hold: 45s\n      users:\n        - 2\n        - 6\n        - 4\n"
                                 "        - 4\n        - 8\n")
    assert only_error(path) == (
        f"{path}:9:11: suite 'l': ladder.users[2]: 4 is not above the step before it (6): a ladder's steps must "
        "increase\n"
        f"{path}:10:11: suite 'l': ladder.users[3]: 4 is not above the step before it (4): a ladder's steps must "
        "increase")
    path = ladder_file(tmp_path, "    ladder:\n      hold: 45s\n      users:\n        - 2\n        - 0\n")
    assert only_error(path) == f"{path}:8:11: suite 'l': ladder.users[1]: Input should be greater than or equal to 1"


@pytest.mark.parametrize(("body", "where", "message"), [
    ("    users: 4\n    ladder: {users: [2, 4], hold: 45s}\n", "4:12", "users: a ladder suite takes its users from "
     "ladder; remove users"),
    ("    duration: 2m\n    ladder: {users: [2, 4], hold: 45s}\n", "4:15", "duration: a ladder suite runs for its "
     "ladder's steps × hold (90 s); remove duration"),
    ("    spawn_rate: 2\n", "2:5", "users: required for a suite without a ladder"),
])
def test_users_and_duration_go_with_the_kind_of_load(tmp_path, body, where, message):
    path = ladder_file(tmp_path, body)
    assert only_error(path) == f"{path}:{where}: suite 'l': {message}"


def test_a_flat_suite_runs_a_minute_unless_told(tmp_path):
    suite = get_suite("l", ladder_file(tmp_path, "    users: 3\n"))
    assert (suite.duration, suite.duration_s, suite.peak_users, suite.ladder) == (None, 60, 3, None)
    assert suite.with_overrides(duration="2m").duration_s == 120


def test_a_step_holds_at_least_one_think_cycle(tmp_path):
    path = ladder_file(tmp_path, "    think_scale: 0.5\n    ladder:\n      users: [2, 4]\n      hold: 1s\n    spawn_rate: 10\n")
    assert only_error(path) == (
        f"{path}:7:13: suite 'l': ladder.hold: 1s is shorter than one think cycle of script lap (3s of think per lap "
        "× think scale 0.5 = 1.5s); each step must hold every session through its whole script")
    # Exactly one cycle is enough; think scale 0 reads as 1.
    assert get_suite("l", ladder_file(tmp_path, "    think_scale: 0.5\n    ladder: {users: [2], hold: 2s}\n    spawn_rate: 10\n"))
    assert get_suite("l", ladder_file(tmp_path, "    think_scale: 0\n    ladder: {users: [2], hold: 3s}\n    spawn_rate: 10\n"))
    path = ladder_file(tmp_path, "    think_scale: 0\n    ladder: {users: [2], hold: 2s}\n    spawn_rate: 10\n")
    assert "(3s of think per lap × think scale 1 = 3s)" in only_error(path)


def test_the_hold_check_reads_the_scripts_it_is_given(tmp_path):
    path = ladder_file(tmp_path, "    ladder: {users: [2], hold: 1s}\n    spawn_rate: 10\n")
    assert "shorter than one think cycle" in only_error(path)
    # A script that cannot be loaded is not this file's problem: script validation reports it.
    assert load_suites(path, scripts=tmp_path / "elsewhere")["l"].ladder is not None
    (tmp_path / "scripts" / "lap.yaml").write_text("name: lap\nsteps: nonsense\n")
    assert load_suites(path)["l"].ladder is not None


@pytest.mark.parametrize(("slo", "where", "message"), [
    ("{}", "5:10", "slo: an slo needs at least one threshold: wake_p99_ms, failure_ratio"),
    ("{wake_p99_ms: 0}", "5:24", "slo.wake_p99_ms: Input should be greater than 0"),
    ("{wake_p99_ms: .inf}", "5:24", "slo.wake_p99_ms: Input should be a finite number"),
    ("{failure_ratio: 1.5}", "5:26", "slo.failure_ratio: Input should be less than or equal to 1"),
    ("{failure_ratio: -0.1}", "5:26", "slo.failure_ratio: Input should be greater than or equal to 0"),
    ("{wake_p99_ms: 1500, p50: 3}", "5:35", "slo.p50: unknown field (a misspelling?)"),
])
def test_slo_errors(tmp_path, slo, where, message):
    path = ladder_file(tmp_path, f"    ladder: {{users: [2], hold: 45s}}\n    slo: {slo}\n")
    assert only_error(path) == f"{path}:{where}: suite 'l': {message}"


def test_an_slo_needs_one_threshold_only(tmp_path):
    suite = get_suite("l", ladder_file(tmp_path, "    users: 2\n    slo: {failure_ratio: 0}\n"))
    assert suite.slo is not None and (suite.slo.wake_p99_ms, suite.slo.failure_ratio) == (None, 0.0)


def test_overrides_of_a_ladder_suite(tmp_path):
    suite = get_suite("l", ladder_file(tmp_path, "    ladder: {start: 2, step: 2, max: 6, hold: 45s}\n"
                                                 "    slo: {wake_p99_ms: 1500, failure_ratio: 0.01}\n"))
    again = suite.with_overrides(think_scale=0.5)
    assert (again.ladder, again.slo, again.think_scale) == (suite.ladder, suite.slo, 0.5)
    assert suite.with_overrides(users=None, duration=None) == suite
    with pytest.raises(SuiteError) as caught:
        suite.with_overrides(users=5)
    assert str(caught.value) == "suite 'l': users: a ladder suite takes its users from ladder; remove users"
    with pytest.raises(SuiteError) as caught:
        suite.with_overrides(duration="2m")
    assert str(caught.value) == ("suite 'l': duration: a ladder suite runs for its ladder's steps × hold (135 s); "
                                 "remove duration")


def test_knobs_of_a_ladder_suite_and_of_a_flat_one(tmp_path):
    suite = get_suite("l", ladder_file(tmp_path, "    ladder: {users: [2, 4, 8], hold: 45s}\n"
                                                 "    slo: {wake_p99_ms: 1500}\n"))
    knobs = suite.recorded_knobs()
    assert (knobs["users"], knobs["duration_s"], knobs["ladder"], knobs["hold_s"]) == (8, 135, [2, 4, 8], 45)
    assert knobs["slo"] == {"wake_p99_ms": 1500.0, "failure_ratio": None}
    flat = get_suite("l", ladder_file(tmp_path, "    users: 3\n    duration: 2m\n")).recorded_knobs()
    assert (flat["users"], flat["duration_s"], flat["ladder"], flat["hold_s"], flat["slo"]) == (3, 120, None, None,
                                                                                                 None)
    assert set(knobs) == set(flat) >= {"users", "spawn_rate", "duration_s", "think_scale", "lifecycle_mode",
                                       "resume_mode", "actor_memory", "workers", "actors_per_worker"}


def test_without_scripts_beside_it_a_suites_file_is_checked_against_the_projects(tmp_path, monkeypatch):
    ladder_file(tmp_path, "    users: 1\n")  # the project: scripts/lap.yaml, 3 s of think per lap
    monkeypatch.setenv("SUBSTRATE_BENCH_ROOT", str(tmp_path))
    (tmp_path / "deploy").mkdir()
    path = write(tmp_path / "deploy", "suites:\n  - name: l\n    script: lap\n    ladder: {users: [2], hold: 2s}\n"
                 "    spawn_rate: 10\n")
    assert only_error(path) == (
        f"{path}:4:32: suite 'l': ladder.hold: 2s is shorter than one think cycle of script lap (3s of think per lap "
        "× think scale 1 = 3s); each step must hold every session through its whole script")


def test_the_version_under_test_is_one_word(tmp_path):
    suite = get_suite("l", ladder_file(tmp_path, "    users: 1\n    sut_version: sha256:9f86d081884c7d65\n"))
    assert suite.sut_version == "sha256:9f86d081884c7d65"
    path = ladder_file(tmp_path, "    users: 1\n    sut_version: main with my fix\n")
    assert only_error(path).startswith(f"{path}:5:18: suite 'l': sut_version: String should match pattern")


FAMILY_SUITE = "suites:\n  - name: g\n    family: {family}\n    users: {users}\n{extra}"


@pytest.mark.parametrize(("family", "users", "extra", "fragment", "line"), [
    ("glutton", 1, "    script: quick-session\n", "script: family glutton runs no script; remove script", 5),
    ("glutton", 1, "    knobs: {durdir_read_mode: digest}\n", "knobs.durdir_read_mode: family glutton does not read "
     "durdir_read_mode; it reads min_wait_time", 5),
    ("glutton", 1, "    knobs:\n      min_wait_time: 2\n      max_wait_time: 1\n",
     "knobs.max_wait_time: 1 is below min_wait_time 2", 7),
    ("glutton", 1, "    knobs: {mem_target: 1.5Gi}\n", "knobs.mem_target: String should match pattern", 5),
    ("glutton", 1, "    knobs: {cpu_duty_cycle: 2}\n", "knobs.cpu_duty_cycle: Input should be less than or equal", 5),
    ("sweperf", 1, "    lifecycle_mode: pause\n", "lifecycle_mode: family sweperf does not read lifecycle_mode", 5),
    ("durdir", 1, "    think_scale: 0.5\n", "think_scale: only agent sessions think", 5),
    ("spawn", 4, "", "users: a spawn suite runs one batch from one user: users: 1, no ladder", 4),
    ("burst", 2, "", "users: a burst suite runs one batch from one user", 4),
    ("juggle", 1, "", "family: Input should be 'agentsession'", 3),
])
def test_family_errors_name_the_line(tmp_path, family, users, extra, fragment, line):
    path = write(tmp_path, FAMILY_SUITE.format(family=family, users=users, extra=extra))
    with pytest.raises(SuiteError) as caught:
        load_suites(path)
    assert fragment in str(caught.value)
    assert str(caught.value).startswith(f"{path}:{line}:")


def test_a_family_suite_runs_its_user_class_with_its_knobs(tmp_path):
    path = write(tmp_path, FAMILY_SUITE.format(family="glutton", users=3, extra=(
        "    lifecycle_mode: pause\n    knobs: {mem_target: 96Mi, mem_read: all, actors_per_user: 2, "
        "max_wait_time: 1.5}\n")))
    suite = load_suites(path)["g"]
    assert (suite.script, suite.user_class, suite.template) == (None, "GluttonUser", ("benchmark-workloads", "glutton"))
    assert suite.knobs.locust_options() == ["--max-wait-time", "1.5", "--mem-target", "96Mi", "--mem-read", "all",
                                            "--actors-per-user", "2"]
    assert suite.actors_per_user == 2
    recorded = suite.recorded_knobs()
    assert recorded["family"] == "glutton" and recorded["actors_per_user"] == 2
    assert recorded["family_knobs"] == {"max_wait_time": 1.5, "mem_target": "96Mi", "mem_read": "all",
                                        "actors_per_user": 2}


def test_each_family_names_its_template_and_user(tmp_path):
    suites = load_suites(ROOT / "suites.yaml")
    families = {suite.family for suite in suites.values()}
    assert families == {"agentsession", "glutton", "durdir", "spawn", "burst", "sweperf"}
    assert suites["durdir-size-32mb"].template == ("benchmark-workloads", "glutton-durdir-data")
    assert suites["sweperf"].template == ("benchmark-workloads", "swebench-astropy-7336")
    assert suites["spawn-smoke-10-actors"].actors_per_user == 10
    assert suites["quick-smoke"].recorded_knobs()["family_knobs"] is None


def test_repeat_and_an_injected_wake_delay(tmp_path):
    """``repeat`` is how many trials `run` groups; ``inject_wake_delay_ms`` reaches the embedded runtime and the
    recorded knobs, 0 reads as none, and a kubernetes suite cannot have one (the cluster's runtime is not ours)."""
    from substrate_assets.driver.trial import runtime_config
    from substrate_assets.suites import DEFAULT_REPEAT

    path = write(tmp_path, "suites:\n  - {name: a, script: s, users: 1}\n"
                           "  - {name: b, script: s, users: 1, repeat: 5, inject_wake_delay_ms: 40}\n")
    plain, delayed = get_suite("a", path), get_suite("b", path)
    assert (plain.repeat, plain.inject_wake_delay_ms, plain.recorded_knobs()["inject_wake_delay_ms"]) == \
        (DEFAULT_REPEAT, None, None)
    assert (delayed.repeat, delayed.recorded_knobs()["inject_wake_delay_ms"]) == (5, 40)
    assert runtime_config(delayed).inject_wake_delay_ms == 40 and runtime_config(plain).inject_wake_delay_ms == 0
    assert delayed.with_overrides(inject_wake_delay_ms=0).inject_wake_delay_ms is None
    assert plain.with_overrides(inject_wake_delay_ms=25).inject_wake_delay_ms == 25
    with pytest.raises(SuiteError, match="repeat: Input should be greater than or equal to 1"):
        plain.with_overrides(repeat=0)
    cluster = ("  - {name: k, script: s, users: 1, backend: kubernetes, inject_wake_delay_ms: 5, "
               "kubernetes: {image: i, store: gs://b/p}}\n")
    with pytest.raises(SuiteError) as caught:
        load_suites(write(tmp_path, "suites:\n" + cluster))
    assert "suites.yaml:2:" in str(caught.value)
    assert "inject_wake_delay_ms: only the embedded runtime (backend local) can delay its wakes" in str(caught.value)
