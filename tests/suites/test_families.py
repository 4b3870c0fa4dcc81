"""The workload families are declared once (FamilySpec): the Family literal the suites validate against names the
same families, every one is asked of an imported run's rows, and the suite rules read knob defaults from the knobs."""

from typing import get_args

from substrate_assets.families import (
    FAMILIES,
    KNOBS_BY_NAME,
    ONE_USER_FAMILIES,
    RECOGNITION_ORDER,
    USER_CLASSES,
    Family,
    Knobs,
)
from substrate_assets.suites.suite import Suite


def test_the_literal_and_the_declared_families_agree():
    assert tuple(FAMILIES) == get_args(Family)
    assert sorted(RECOGNITION_ORDER) == sorted(FAMILIES)
    assert {name: spec.user_class for name, spec in FAMILIES.items()} == USER_CLASSES
    assert ONE_USER_FAMILIES == ("spawn", "burst")


def test_a_knob_left_unset_reads_upstreams_default_and_a_set_one_its_value():
    assert Knobs().value("total_actors") == KNOBS_BY_NAME["total_actors"].default == 100
    assert Knobs(total_actors=7).value("total_actors") == 7
    cohort = Suite(name="c", family="spawn", users=1, duration="10s")
    assert cohort.actors_per_user == KNOBS_BY_NAME["total_actors"].default
    glutton = Suite(name="g", family="glutton", users=2, duration="10s", knobs=Knobs(actors_per_user=3))
    assert glutton.actors_per_user == 3


def test_a_user_drives_as_many_actors_as_its_family_reads_from_the_knobs(monkeypatch):
    """Whatever family reads the actors_per_user knob drives that many actors a user, not glutton alone: a family
    added later (here durdir, made to read it) records its actors right."""
    from substrate_assets import families
    from substrate_assets.suites import suite as suite_module

    knobs = {**families.FAMILY_KNOBS, "durdir": (*families.FAMILY_KNOBS["durdir"], "actors_per_user")}
    for module in (families, suite_module):
        monkeypatch.setattr(module, "FAMILY_KNOBS", knobs)
    durdir = Suite(name="d", family="durdir", users=2, duration="10s", knobs=Knobs(actors_per_user=3))
    assert durdir.actors_per_user == 3
