"""Any request row judged: the rows that answer a family's question (glutton: ResumeActor) in every comparison of its
trials, and `--figure NAME[:statistic]` for any row the trials recorded, each from every trial's exact samples."""

import json
import math

import numpy as np
import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from substrate_assets.analysis.figure_spec import NotAFigure, RequestFigure
from substrate_assets.analysis.statistics import floor_index
from substrate_assets.analysis.verdicts import Thresholds
from substrate_assets.cli import main
from substrate_assets.warehouse.compare_figures import FigureNotRecorded, measured_figures
from substrate_assets.warehouse.compare_trials import History, compare
from substrate_assets.warehouse.connection import connect
from substrate_assets.warehouse.sides import select_side
from tests.warehouse.test_compare_trials import loaded

SUSPEND, PAUSE = "s-20251201t000000z-x4", "s-20251201t010000z-x4"


def glutton(seed: int, resume_ms: float) -> dict:
    """A glutton trial's requests: pings after each wake (GluttonPing, its wake row) and the explicit resumes."""
    rng = np.random.default_rng(seed)
    level = math.exp(rng.normal(0, 0.03))
    return {"GluttonPing": rng.lognormal(np.log(5.0 * level), 0.3, 300),
            "ResumeActor": rng.lognormal(np.log(resume_ms * level), 0.5, 300)}


@pytest.fixture
def warehouse(tmp_path, monkeypatch):
    """Four glutton trials that suspend (ResumeActor ~40 ms), then four that pause (~3 ms), each a group."""
    trials = [(glutton(seed, 40.0), {"group": SUSPEND, "family": "glutton"}) for seed in range(4)]
    trials += [(glutton(10 + seed, 3.0), {"group": PAUSE, "family": "glutton"}) for seed in range(4)]
    path, ids = loaded(tmp_path, trials)
    monkeypatch.setenv("SUBSTRATE_BENCH_WAREHOUSE", str(path))
    return path, ids


def samples(connection, trial_id: str, name: str) -> np.ndarray:
    return np.sort(np.array([row[0] for row in connection.execute(
        "SELECT latency_ms FROM request_samples WHERE trial_id = ? AND name = ?", [trial_id, name]).fetchall()]))


def test_the_family_s_question_row_is_judged_as_primary_from_each_trial_s_samples(warehouse):
    path, ids = warehouse
    with connect(path, read_only=True) as connection:
        assert connection.execute("SELECT DISTINCT family FROM trial_manifests").fetchall() == [("glutton",)]
        resumes = {trial: samples(connection, trial, "ResumeActor") for trial in ids}
        result = compare(connection, select_side(connection, SUSPEND), select_side(connection, PAUSE), Thresholds())
    rows = {row.figure: row for row in result.figures}
    gmean = rows["ResumeActor gmean"]
    assert gmean.primary and rows["GluttonPing gmean"].primary
    assert not rows["ResumeActor p50"].primary and not rows["ResumeActor p99"].primary
    per_trial = [math.exp(np.mean(np.log(resumes[trial]))) for trial in ids[:4]]
    assert gmean.baseline == pytest.approx(math.exp(np.mean(np.log(per_trial))))
    p50s = [floor_index(resumes[trial], 500) for trial in ids[4:]]
    assert rows["ResumeActor p50"].candidate == pytest.approx(math.exp(np.mean(np.log(p50s))))
    # Pausing answers about 13x faster: found, with an interval that excludes no change.
    assert gmean.verdict == "improved" and gmean.change_pct < -80
    assert gmean.interval.high < 0 and gmean.level == pytest.approx(0.02)  # two primaries share 80 % of 5 %
    assert rows["ResumeActor p50"].verdict == "improved"
    assert rows["ResumeActor p99"].verdict is None  # 300 resumes a trial: a p99 verdict needs 901


def test_a_figure_asked_for_is_the_comparison_s_primary(warehouse):
    path, ids = warehouse
    result = CliRunner().invoke(main, ["compare", SUSPEND, PAUSE, "--figure", "GluttonPing:mean", "--format",
                                       "json"])
    assert result.exit_code in (0, 4), result.output
    figures = {row["figure"]: row for row in json.loads(result.output)["figures"]}
    assert [name for name, row in figures.items() if row["primary"]] == ["GluttonPing mean"]
    with connect(path, read_only=True) as connection:
        means = [float(np.mean(samples(connection, trial, "GluttonPing"))) for trial in ids[:4]]
    assert figures["GluttonPing mean"]["baseline"] == pytest.approx(math.exp(np.mean(np.log(means))))
    assert "ResumeActor gmean" in figures  # the family's own rows stay, judged as secondary


def test_a_row_no_trial_recorded_is_refused_naming_those_they_did(warehouse):
    result = CliRunner().invoke(main, ["compare", SUSPEND, PAUSE, "--figure", "UnpauseActor:p99"])
    assert result.exit_code == 2
    assert ("--figure UnpauseActor: no trial of either side recorded a successful request of that name; they "
            "recorded: GluttonPing, ResumeActor") in result.output
    path, _ids = warehouse
    with connect(path, read_only=True) as connection, pytest.raises(FigureNotRecorded):
        compare(connection, select_side(connection, SUSPEND), select_side(connection, PAUSE),
                Thresholds(figures=("UnpauseActor",)))


def test_the_history_s_values_come_from_its_own_trials_samples(tmp_path):
    trials = [(glutton(seed, 40.0), {"family": "glutton"}) for seed in range(3)]
    trials += [(glutton(10 + seed, 40.0), {"group": SUSPEND, "family": "glutton"}) for seed in range(2)]
    trials += [(glutton(20 + seed, 40.0), {"group": PAUSE, "family": "glutton"}) for seed in range(2)]
    path, ids = loaded(tmp_path, trials)
    with connect(path, read_only=True) as connection:
        baseline, candidate = select_side(connection, SUSPEND), select_side(connection, PAUSE)
        result = compare(connection, baseline, candidate, Thresholds(figures=("ResumeActor:mean",)),
                         History(tuple(ids[:3]), "the three trials before"))
        figures = measured_figures(connection, baseline, candidate, ids[:3], requests=(RequestFigure("ResumeActor",
                                                                                                  "mean"),))
        means = [float(np.mean(samples(connection, trial, "ResumeActor"))) for trial in ids[:3]]
    row = next(row for row in result.figures if row.figure == "ResumeActor mean")
    assert row.history_trials == 3 and not row.primary  # a suite's figures are primary only when it says so
    assert next(row for row in figures if row.figure == "ResumeActor mean").history == pytest.approx(means)


@pytest.mark.parametrize(("spec", "figure"), [
    ("ResumeActor", RequestFigure("ResumeActor", "gmean")), ("ResumeActor:p99", RequestFigure("ResumeActor", "p99")),
    (" TimeToAllReady : mean ", RequestFigure("TimeToAllReady", "mean")), ("a:b:p50", RequestFigure("a:b", "p50")),
])
def test_a_figure_is_a_row_and_a_statistic(spec, figure):
    assert RequestFigure.parse(spec) == figure


@pytest.mark.parametrize(("spec", "said"), [
    ("ResumeActor:p12", "'p12' is not a statistic of a request row: gmean, p50, p99, mean"),
    (":p50", "no request name"), ("", "no request name"),
])
def test_what_is_not_a_figure_says_what_goes_there(spec, said):
    with pytest.raises(NotAFigure, match=said):
        RequestFigure.parse(spec)
    with pytest.raises(ValidationError, match=said):
        Thresholds(figures=(spec,))
