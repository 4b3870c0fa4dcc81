"""Every family knob, declared once in ``families.KNOBS``, reaches each place a knob is used: the suite's
validation, the Locust flag with upstream's worker default, the values the family's users read, and the Dagster
launch form. A knob missing from any of them fails here, by name."""

import dagster as dg
import pytest

from substrate_assets.defs.resources import SuitesResource
from substrate_assets.defs.trials.jobs import KnobsConfig, TrialConfig, run_config, run_trial_job
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
