"""A model's schema.yml column tests as two Dagster asset checks: ``key_tests`` (not_null and unique, blocking: a null
key or a duplicate row makes every figure built on the table wrong) and ``value_tests`` (accepted values and
expressions, a warning). Each check's metadata gives every one of its tests with its violations and first offending
rows.

Two checks per model rather than one per test: Dagster stores three events for every check a run plans (planned,
output, evaluation), each a SQLite write, and the marts' seventy-odd tests made those events most of the time between
a trial's last request and its rows in every mart."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import dagster as dg

from substrate_assets.warehouse.checks import ColumnTest, TestOutcome

KEY_TESTS = "key_tests"
VALUE_TESTS = "value_tests"
SAMPLE_SHOWN = 3


@dataclass(frozen=True)
class ColumnCheck:
    """One of a model's two checks and the column tests it runs."""

    model: str
    name: str
    tests: tuple[ColumnTest, ...]

    @property
    def blocking(self) -> bool:
        return self.name == KEY_TESTS

    @property
    def severity(self) -> dg.AssetCheckSeverity:
        return dg.AssetCheckSeverity.ERROR if self.blocking else dg.AssetCheckSeverity.WARN

    def spec(self) -> dg.AssetCheckSpec:
        what = "blocking: what reads the table waits for it" if self.blocking else "a failure warns"
        return dg.AssetCheckSpec(self.name, asset=self.model, blocking=self.blocking,
                                 description=f"{'; '.join(test.description() for test in self.tests)} ({what})")


def column_checks(model: str, tests: Iterable[ColumnTest]) -> list[ColumnCheck]:
    """The model's checks that have tests: key_tests, then value_tests."""
    tests = list(tests)
    grouped = [(KEY_TESTS, [test for test in tests if test.blocking]),
               (VALUE_TESTS, [test for test in tests if not test.blocking])]
    return [ColumnCheck(model, name, tuple(chosen)) for name, chosen in grouped if chosen]


def _cell(value: object) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def _table(outcomes: Sequence[TestOutcome]) -> str:
    lines = ["| test | holds when | violations | first offending rows |", "|---|---|---|---|"]
    for outcome in outcomes:
        rows = "; ".join(_cell({key: str(value) for key, value in row.items()}) for row in
                         outcome.sample[:SAMPLE_SHOWN])
        lines.append(f"| {outcome.test.name} | {_cell(outcome.test.description())} | {outcome.violations} | "
                     f"{rows} |")
    return "\n".join(lines)


def _verdict(outcomes: Sequence[TestOutcome]) -> tuple[bool, dict[str, dg.MetadataValue]]:
    failed = [outcome.test.name for outcome in outcomes if not outcome.passed]
    return not failed, {
        "violations": dg.MetadataValue.int(sum(outcome.violations for outcome in outcomes)),
        "failed_tests": dg.MetadataValue.text(", ".join(failed) if failed else "none"),
        "tests": dg.MetadataValue.md(_table(outcomes)),
    }


def check_results(model: str, outcomes: Sequence[TestOutcome]) -> list[dg.AssetCheckResult]:
    """The results of the model's checks, from the outcomes of its column tests."""
    results = []
    for check in column_checks(model, [outcome.test for outcome in outcomes]):
        mine = [outcome for outcome in outcomes if outcome.test in check.tests]
        passed, metadata = _verdict(mine)
        results.append(dg.AssetCheckResult(asset_key=model, check_name=check.name, passed=passed,
                                           severity=check.severity, metadata=metadata))
    return results


def as_evaluation(result: dg.AssetCheckResult, asset_key: dg.AssetKey, check_name: str,
                  partition: str | None = None) -> dg.AssetCheckEvaluation:
    """A check's result as a runless evaluation of ``asset_key`` (of its ``partition``): what a load outside a run
    records for a check a run would have evaluated."""
    return dg.AssetCheckEvaluation(asset_key=asset_key, check_name=check_name, passed=result.passed,
                                   severity=result.severity, metadata=result.metadata or {},
                                   description=result.description, partition=partition)


def check_evaluations(outcomes: Sequence[TestOutcome]) -> list[dg.AssetCheckEvaluation]:
    """The same results as runless evaluations (an import or a rebuild records them outside a run), per model."""
    evaluations = []
    for model in dict.fromkeys(outcome.test.model for outcome in outcomes):
        for result in check_results(model, [outcome for outcome in outcomes if outcome.test.model == model]):
            assert result.check_name is not None  # check_results names every check
            evaluations.append(as_evaluation(result, dg.AssetKey(model), result.check_name))
    return evaluations
