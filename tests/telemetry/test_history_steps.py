"""An upstream ladder's steps read off its user-count history: the plateaus, the spans and each step's steady window
by the native rule (step_window)."""

import pytest

from substrate_assets.telemetry.window import SETTLED_SAMPLES, history_load_steps, plateaus, step_window

T0 = 1000


def history(users: list[int]) -> list[tuple[int, float]]:
    return [(T0 + i, float(count)) for i, count in enumerate(users)]


# Three steps of 30 s, 4:30s,8:30s,12:30s at 2 users/s, then teardown.
THREE = [0] + [2, 4] + [4] * 28 + [6, 8] + [8] * 28 + [10, 12] + [12] * 28 + [0, 0]


def test_plateaus_are_counts_held_for_settled_rows():
    assert [(p.users, p.first - T0, p.last - T0) for p in plateaus(history(THREE))] == \
        [(4.0, 2, 30), (8.0, 32, 60), (12.0, 62, 90)]
    assert plateaus(history([3] * (SETTLED_SAMPLES - 1))) == []


def test_planned_steps_take_their_window_by_the_native_rule():
    samples = history(THREE)
    steps = history_load_steps(samples, [(4, 30), (8, 30), (12, 30)], source="h.csv", ran_to_end=True)
    assert [(s.step, s.target_users, s.started_at - T0, s.ended_at - T0) for s in steps] == \
        [(1, 4, 0, 31), (2, 8, 31, 61), (3, 12, 61, 91)]
    for step in steps:
        window = step_window(samples, step.started_at, step.ended_at)
        assert (step.window_start, step.window_end, step.whole_step_because) == (window.start, window.end, None)
    assert [(s.window_start - T0, s.window_end - T0) for s in steps] == [(2, 30), (32, 60), (62, 90)]


def test_an_unplanned_history_is_a_ladder_only_when_it_settles_at_two_counts():
    steps = history_load_steps(history(THREE), None, source="h.csv", ran_to_end=None)
    assert [(s.step, s.target_users, s.hold_s) for s in steps] == [(1, None, None), (2, None, None), (3, None, None)]
    assert [s.complete for s in steps] == [True, True, None]  # the last: whether the run ran to its end is unknown
    assert history_load_steps(history([0, 2, 4] + [5] * 40), None, source="h.csv", ran_to_end=True) is None


def test_a_planned_ladder_that_never_settles_names_its_file():
    with pytest.raises(ValueError, match=r"h\.csv: the user count never settles"):
        history_load_steps(history([4, 5] * 30), [(4, 30), (5, 30)], source="h.csv", ran_to_end=True)


def test_a_planned_step_never_settled_at_has_no_window():
    steps = history_load_steps(history([0] + [4] * 30 + [8, 8] + [12] * 30), [(4, 30), (8, 30), (12, 30)],
                               source="h.csv", ran_to_end=False)
    assert [(s.window_start is None, s.complete) for s in steps] == [(False, True), (True, None), (False, False)]
    assert "never held 8 users" in steps[1].whole_step_because
    assert steps[2].started_at == steps[0].ended_at  # the unsettled step's rows belong to the next one's ramp
