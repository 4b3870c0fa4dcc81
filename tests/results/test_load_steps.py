"""The ladder log and load_steps.json: when each step ran, whether it ran to its end, and what does not read."""

import json

import pytest

from substrate_assets.results.load_steps import (
    END_EVENT,
    STEP_EVENT,
    LoadStep,
    StepSpan,
    ladder_log_line,
    read_ladder_spans,
    read_load_steps,
    write_load_steps,
)

HOLDS = [(2, 60), (4, 60), (6, 60)]


def log(tmp_path, *lines: str):
    path = tmp_path / "ladder.jsonl"
    path.write_text("".join(lines))
    return path


def test_each_step_ends_where_the_next_began_and_the_last_at_the_ladders_end(tmp_path):
    path = log(tmp_path, ladder_log_line(STEP_EVENT, 100.5, 1, 2), ladder_log_line(STEP_EVENT, 160.4, 2, 4),
               ladder_log_line(STEP_EVENT, 220.9, 3, 6), ladder_log_line(END_EVENT, 280.6))
    assert read_ladder_spans(path, HOLDS, trial_end=290.0) == [
        StepSpan(1, 2, 60, 100.5, 160.4, True), StepSpan(2, 4, 60, 160.4, 220.9, True),
        StepSpan(3, 6, 60, 220.9, 280.6, True)]


def test_a_stopped_trial_cuts_its_last_step_short(tmp_path):
    path = log(tmp_path, ladder_log_line(STEP_EVENT, 100.0, 1, 2), ladder_log_line(STEP_EVENT, 160.0, 2, 4))
    assert read_ladder_spans(path, HOLDS, trial_end=171.5) == [
        StepSpan(1, 2, 60, 100.0, 160.0, True), StepSpan(2, 4, 60, 160.0, 171.5, False)]


def test_a_step_missing_from_the_log_never_stretches_the_one_before_over_it(tmp_path):
    path = log(tmp_path, ladder_log_line(STEP_EVENT, 100.0, 1, 2), ladder_log_line(STEP_EVENT, 220.0, 3, 6),
               ladder_log_line(END_EVENT, 280.0))
    spans = read_ladder_spans(path, HOLDS, trial_end=290.0)
    assert [(span.step, span.started_at, span.ended_at) for span in spans] == [(1, 100.0, 220.0), (3, 220.0, 280.0)]


def test_a_torn_line_steps_out_of_the_plan_and_no_log_are_skipped(tmp_path):
    path = log(tmp_path, ladder_log_line(STEP_EVENT, 100.0, 1, 2), ladder_log_line(STEP_EVENT, 130.0, 9, 99),
               ladder_log_line(STEP_EVENT, 160.0, 1, 2), '{"event": "step", "step": 2, "us')
    assert read_ladder_spans(path, HOLDS, trial_end=170.0) == [StepSpan(1, 2, 60, 100.0, 170.0, False)]
    assert read_ladder_spans(tmp_path / "absent.jsonl", HOLDS, trial_end=170.0) == []


def test_load_steps_round_trip_and_refuse_what_does_not_read(tmp_path):
    step = LoadStep(1, 2, 60, 100.0, 160.0, 101, 159, None, {"metadata": {}}, True)
    write_load_steps(tmp_path / "load_steps.json", "2:60s", 2.0, [step])
    assert read_load_steps(tmp_path / "load_steps.json") == [step]
    document = json.loads((tmp_path / "load_steps.json").read_text())
    document["steps"][0]["window"]["end"] = "soon"
    (tmp_path / "load_steps.json").write_text(json.dumps(document))
    with pytest.raises(ValueError, match=r"load_steps.json: steps\[0\].window.end: a whole number expected"):
        read_load_steps(tmp_path / "load_steps.json")
