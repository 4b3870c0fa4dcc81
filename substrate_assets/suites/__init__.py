"""Suites: named, repeatable trial configurations read from ``suites.yaml``, with errors that point at lines.

The package's face: a suite's model (``suite``), the sections that are models of their own (``sections``), the
reading of the file (``loading``) and what is wrong, said in its words (``errors``)."""

from substrate_assets.results.load_steps import MAX_LADDER_STEPS
from substrate_assets.suites.errors import SuiteError
from substrate_assets.suites.loading import compare_thresholds, get_suite, hold_problem, load_suites
from substrate_assets.suites.sections import KubernetesSettings, Ladder, Slo, parse_run_time
from substrate_assets.suites.suite import (
    DEFAULT_REPEAT,
    KUBERNETES_SECTION_MISSING,
    MAX_REPEAT,
    SLUG,
    Suite,
)

__all__ = [
    "DEFAULT_REPEAT", "KUBERNETES_SECTION_MISSING", "MAX_LADDER_STEPS", "MAX_REPEAT", "SLUG", "KubernetesSettings",
    "Ladder", "Slo", "Suite", "SuiteError", "compare_thresholds", "get_suite", "hold_problem", "load_suites",
    "parse_run_time",
]
