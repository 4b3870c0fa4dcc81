"""What an upstream run's log records of how it was run: users and actors per user, or nothing."""

import pytest

from substrate_assets.results.run_log import RunLog, read_run_log

CONFIG = """==== Run config ====
  name:           glutton_baseline_10_users
  users:          10
  extra flags:
    --min-wait-time 1.0
====================
"""
LOCUST = ("Running: /usr/local/bin/python3 -m locust --headless -f /app/tests/glutton.py -t 1m -u 12 "
          "--csv /tmp/x/glutton --master --expect-workers 1")
BOOMER = "Running: /app/boomer-worker --user-class glutton --master-web-port 5560"


@pytest.mark.parametrize(("log", "expected"), [
    (CONFIG + LOCUST + "\n" + BOOMER + "\n", RunLog(10, 1)),  # the config block first; no flag: one per user
    (LOCUST + "\n", RunLog(12, 1)),  # the command line
    (LOCUST.replace("-u 12", "--users=7") + "\n", RunLog(7, 1)),
    (BOOMER.replace("glutton", "glutton --actors-per-user 3", 1) + "\n" + LOCUST + "\n", RunLog(12, 3)),
    (LOCUST + " --actors-per-user=4\n", RunLog(12, 4)),
    (CONFIG.replace("--min-wait-time 1.0", "--actors-per-user 2") + BOOMER + "\n", RunLog(10, 2)),
    # Only Locust's own lines: it ramped to -u, and the runner's commands are not there to say more.
    ("[locust] [2026-11-20 00:00:01,020] runner/INFO/locust.runners: Ramping to 5 users at a rate of 1.00 per "
     "second\n", RunLog(5, None)),
    ("[locust] [t] runner/INFO/locust.runners: Sending spawn jobs of 25 users at 1.00 spawn rate to 1 ready "
     "workers\n", RunLog(25, None)),
    # Under a load shape Locust ramps to the shape's steps, not to -u.
    ("[locust] [t] runner/INFO/locust.runners: Shape test starting.\n"
     "[locust] [t] runner/INFO/locust.runners: Ramping to 5 users at a rate of 5.00 per second\n", RunLog()),
    # A subprocess naming the flag is not the runner's command.
    ('[boomer] {"level":"ERROR","msg":"fatal: --actors-per-user must be >= 1","actors_per_user":0}\n', RunLog()),
    ("", RunLog()),
])
def test_what_a_log_records(log, expected):
    assert read_run_log(log) == expected


def test_a_ladder_longer_than_a_piece_of_line_is_counted_to_its_end():
    steps = ",".join(f"{users}:1s" for users in range(1, 200_001))
    run_log = read_run_log(f"  extra flags:\n    --ladder {steps} --actors-per-user 2\nRunning: x\n")
    assert run_log.ladder_steps == 200_000
    assert not run_log.ladder_whole
    assert steps.startswith(run_log.ladder or "-") and len(run_log.ladder or "") < 64 * 1024


def test_a_ladder_cut_by_the_end_of_a_piece_is_not_whole():
    # The spec is short, but the line it sits on is longer than a piece: the piece kept holds only its start.
    padding = "x" * (64 * 1024 - len(" --ladder 10:60s,20:6"))
    run_log = read_run_log(f"{padding} --ladder 10:60s,20:60s,30:60s\n")
    assert (run_log.ladder, run_log.ladder_steps, run_log.ladder_whole) == ("10:60s,20:6", 3, False)


def test_a_ladder_on_a_line_of_its_own_is_whole():
    run_log = read_run_log("    --ladder 10:60s,20:60s\nmore\n")
    assert (run_log.ladder, run_log.ladder_steps, run_log.ladder_whole) == ("10:60s,20:60s", 2, True)
