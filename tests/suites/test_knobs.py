"""Every family knob, declared once in ``families.KNOBS``, reaches each place a knob is used: the suite's
validation, the Locust flag with upstream's worker default, the values the family's users read, and the Dagster
launch form. A knob missing from any of them fails here, by name."""

import ast
import json
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from substrate_assets.defs.resources import SuitesResource
from substrate_assets.defs.trials.jobs import KnobsConfig, TrialConfig, run_config, run_trial_job
from substrate_assets.driver.users import knobs as users_knobs
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.families import FAMILY_KNOBS, KNOBS, Knobs
from substrate_assets.suites import SuiteError, load_suites

# A value each knob accepts that differs from its worker default, by kind.
SET = {float: 0.25, int: 3, str: None}


def set_value(knob):
    """A value the knob accepts; the ends of a window (min_/max_) keep clear of any suite's other end."""
    if knob.name.startswith("min_"):
        return knob.kind(0)
    if knob.name.startswith("max_"):
        return knob.kind(50)
    if knob.choices:
        return next(choice for choice in knob.choices if choice != knob.default)
    if knob.kind is str:
        return "7Mi" if "pattern" in knob.constraints and "Mi" in knob.constraints["pattern"] else "a-template"
    value = SET[knob.kind]
    return min(value, knob.constraints["le"]) if "le" in knob.constraints else value


@pytest.mark.parametrize("knob", KNOBS, ids=lambda knob: knob.name)
def test_a_knob_is_validated_for_the_families_that_read_it(knob):
    value = set_value(knob)
    knobs = Knobs(**{knob.name: value})
    assert knobs.given() == {knob.name: value}
    assert knobs.locust_options() == [knob.flag, f"{value:g}" if isinstance(value, float) else str(value)]
    assert knob.families, f"{knob.name} is read by no family"
    for family, names in FAMILY_KNOBS.items():
        assert (knob.name in names) == (family in knob.families)


@pytest.mark.parametrize("knob", KNOBS, ids=lambda knob: knob.name)
def test_a_knob_is_on_the_launch_form_and_reaches_the_suite(knob):
    """The form's field for the knob passes Dagster's config validation and is merged into a suite of a family that
    reads it; a suite of a family that does not read it refuses it, naming the knob."""
    value = set_value(knob)
    assert knob.name in KnobsConfig.model_fields
    config = TrialConfig(suite="placeholder", knobs={knob.name: value})
    assert dg.validate_run_config(run_trial_job, run_config(config))["ops"]["trial"]["config"]["knobs"][knob.name] \
        == value
    suites = SuitesResource()
    reader = next(suite for suite in load_suites().values() if suite.family == knob.families[0])
    chosen = TrialConfig(suite=reader.name, knobs={knob.name: value}).chosen_suite(suites)
    assert getattr(chosen.knobs, knob.name) == value
    assert chosen.knobs.given() == {**reader.knobs.given(), knob.name: value}
    stranger = next(suite for suite in load_suites().values() if suite.family not in knob.families)
    with pytest.raises(dg.Failure, match=rf"knobs\.{knob.name}: family {stranger.family} does not read {knob.name}"):
        TrialConfig(suite=stranger.name, knobs={knob.name: value}).chosen_suite(suites)


def test_a_value_outside_a_knobs_constraints_is_refused_on_the_form():
    with pytest.raises(dg.Failure, match=r"knobs\.cpu_duty_cycle"):
        TrialConfig(suite="glutton-baseline", knobs={"cpu_duty_cycle": 1.5}).chosen_suite(SuitesResource())


def test_the_suites_own_knobs_stay_under_a_forms_knob():
    suite = load_suites()["glutton-mem-1gi"]
    assert suite.knobs.given(), "glutton-mem-1gi sets knobs of its own"
    changed = suite.with_overrides(knobs={"cpu_cores": 1})
    assert changed.knobs.given() == {**suite.knobs.given(), "cpu_cores": 1}
    with pytest.raises(SuiteError, match=r"knobs\.sweperf_num_cycles: family glutton does not read"):
        suite.with_overrides(knobs={"sweperf_num_cycles": 2})


# Parses Locust's own command line with the locustfile's flags, in a process of its own (the locustfile makes
# gRPC cooperate with gevent on import): each knob's default, and what the users read from a suite's flags.
_PARSE = """
import json, sys
import substrate_assets.driver.locustfile as locustfile
from locust.argument_parser import parse_options
from substrate_assets.families import KNOBS
defaults = parse_options(["-f", locustfile.__file__])
given = parse_options(["-f", locustfile.__file__, *sys.argv[1:]])
print(json.dumps({"defaults": {knob.name: getattr(defaults, knob.name) for knob in KNOBS},
                  "read": locustfile.worker_knobs(given).model_dump()}))
"""


@pytest.fixture(scope="module")
def locust_parse():
    every = Knobs(**{knob.name: set_value(knob) for knob in KNOBS})
    done = subprocess.run([sys.executable, "-c", _PARSE, *every.locust_options()], capture_output=True, text=True,
                          check=True, timeout=120)
    return every.given(), json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("knob", KNOBS, ids=lambda knob: knob.name)
def test_a_knob_is_a_locust_flag_whose_value_the_users_read(knob, locust_parse):
    given, parsed = locust_parse
    assert parsed["defaults"][knob.name] == knob.default, f"{knob.flag} has another default than {knob.name}"
    assert parsed["read"][knob.name] == given[knob.name], f"{knob.flag} does not reach the users' {knob.name}"
    assert WorkerKnobs.model_fields[knob.name].default == knob.default


# The modules whose code reads each family's knobs: the family's own user, and what it is built on.
USER_MODULES = {"agentsession": ("session",), "glutton": ("glutton",), "durdir": ("durdir",), "spawn": ("spawn",),
                "burst": ("burst", "glutton"), "sweperf": ("sweperf",)}


def _knob_reads(tree: ast.AST) -> set[str]:
    """The attributes read off a ``knobs`` value (``self.knobs.x``, ``knobs.x``) or, in a knobs method, ``self``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            owner = node.value
            if (isinstance(owner, ast.Attribute) and owner.attr == "knobs") or \
                    (isinstance(owner, ast.Name) and owner.id == "knobs"):
                names.add(node.attr)
    return names


def _derived_reads() -> dict[str, set[str]]:
    """For each method and property of WorkerKnobs, the knobs it reads off ``self``."""
    tree = ast.parse(Path(users_knobs.__file__).read_text())
    reads = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            reads[node.name] = {child.attr for child in ast.walk(node) if isinstance(child, ast.Attribute)
                                and isinstance(child.value, ast.Name) and child.value.id == "self"}
    return reads


@pytest.mark.parametrize("family", sorted(FAMILY_KNOBS), ids=str)
def test_each_family_user_reads_every_knob_of_its_family(family):
    """A knob declared for a family that its virtual user never reads is a knob that does nothing."""
    package = Path(users_knobs.__file__).parent
    assert family in USER_MODULES, f"family {family}: name its user's modules in USER_MODULES above"
    read: set[str] = set()
    for module in (*USER_MODULES[family], "base"):
        read |= _knob_reads(ast.parse((package / f"{module}.py").read_text()))
    derived = _derived_reads()
    read |= {name for used in read & derived.keys() for name in derived[used]}
    missing = [name for name in FAMILY_KNOBS[family] if name not in read]
    assert not missing, f"family {family} declares {missing} but its user never reads them"
