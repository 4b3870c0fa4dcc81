"""What an upstream run's log says about how it was run: the users it was started with and the actors each
user drove.

Upstream's runner tees its own lines into the run's log and prefixes every line of its subprocesses
(``[locust] ``, ``[boomer] ``). Its own lines record the run: a ``==== Run config ====`` block
(``  users:          10``, the extra flags), and every command it started (``Running: … -m locust --headless -f …
-t 1m -u 10 --csv …``, ``Running: /app/boomer-worker …``). Locust's own output says how many users it ramped to
(``Ramping to 10 users at a rate of 1.00 per second``; a master: ``Sending spawn jobs of 10 users at …``), which
is ``-u`` unless a load shape drives the run (``Shape test starting``), when it is the shape's step.

Actors per user is the ``--actors-per-user`` value on any of the runner's lines. A run whose commands are logged
without it ran one actor per user: neither the runner (``--actors-per-user or 1``) nor the boomer worker (its flag
defaults to 1) gives a user more. A log that records no command says nothing, and neither figure is guessed.

A ladder run (upstream's ladder shape) passes ``--ladder 10:60s,20:60s`` among the extra flags: the planned steps,
as the runner logged them.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

SUBPROCESS_PREFIXES = ("[locust] ", "[boomer] ")
COMMAND = "Running: "
_CONFIG_USERS = re.compile(r"^\s+users:\s+(\d+)\s*$")
_USERS_FLAG = re.compile(r"(?:^|\s)(?:-u\s*|--users(?:=|\s+))(\d+)(?=\s|$)")
_ACTORS_PER_USER_FLAG = re.compile(r"(?:^|\s)--actors-per-user(?:=|\s+)(\d+)(?=\s|$)")
_RAMP = re.compile(r"(?:Ramping to|Sending spawn jobs of) (\d+) users")
_LADDER_FLAG = re.compile(r"(?:^|\s)--ladder(?:=|\s+)(\S+)(?=\s|$)")
_SHAPE = "Shape test starting"


@dataclass(frozen=True)
class RunLog:
    """The users (``-u``) and actors per user a run's log records; None where it does not say."""

    users: int | None = None
    actors_per_user: int | None = None
    ladder: str | None = None  # the --ladder spec on the runner's lines; None: not a ladder, or not logged


def _first(pattern: re.Pattern[str], lines: list[str]) -> int | None:
    for line in lines:
        match = pattern.search(line)
        if match:
            return int(match.group(1))
    return None


def read_run_log(text: str) -> RunLog:
    lines = text.splitlines()
    runner = [line for line in lines if not line.startswith(SUBPROCESS_PREFIXES)]
    commands = [line for line in runner if line.startswith(COMMAND)]
    locust = [line.removeprefix(SUBPROCESS_PREFIXES[0]) for line in lines if line.startswith(SUBPROCESS_PREFIXES[0])]
    users = _first(_CONFIG_USERS, runner)
    if users is None:
        users = _first(_USERS_FLAG, [line for line in commands if " locust " in f"{line} "])
    if users is None and not any(_SHAPE in line for line in locust):
        users = _first(_RAMP, locust)
    actors_per_user = _first(_ACTORS_PER_USER_FLAG, runner)
    if actors_per_user is None and commands:
        actors_per_user = 1
    ladder = next((match.group(1) for line in runner if (match := _LADDER_FLAG.search(line))), None)
    return RunLog(users=users, actors_per_user=actors_per_user, ladder=ladder)
