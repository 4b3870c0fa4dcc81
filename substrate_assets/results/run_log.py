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
as the runner logged them. A log is read in pieces of at most 64 KiB; a ``--ladder`` longer than a piece is counted
step by step across the pieces it runs on (a hundred steps fit in two), so its length is known without holding it.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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
    # How many steps that spec lists, counted to its end even where the spec outgrew the piece of line kept in
    # ``ladder``; None with ``ladder``.
    ladder_steps: int | None = None
    ladder_whole: bool = True  # False: the spec ran past the piece kept in ``ladder``, which holds its start only


# A line of a log read at most this long (the rest of it is read as further lines): a log of one endless line must
# not be held whole to find the runner's flags, which fit in far less.
MAX_LINE_CHARS = 64 * 1024


def log_lines(path: Path) -> Iterator[str]:
    """The lines of the log at ``path``, one at a time, none longer than :data:`MAX_LINE_CHARS`."""
    with path.open(errors="replace") as handle:
        yield from _pieces(handle)


def _pieces(handle: io.TextIOBase) -> Iterator[str]:
    while line := handle.readline(MAX_LINE_CHARS):
        yield line.rstrip("\r\n")


def _cut(line: str, end: int) -> bool:
    """Whether a value ending at ``end`` of this piece may go on in the next: the piece is as long as a piece may be
    (so it may have been cut from a longer line) and the value runs to its end."""
    return end == len(line) == MAX_LINE_CHARS


_VALUE = re.compile(r"\S*")


def read_run_log(source: str | Iterator[str]) -> RunLog:
    """What a run's log (its text, or its pieces from :func:`log_lines`: one pass, holding none of them) records."""
    lines = _pieces(io.StringIO(source)) if isinstance(source, str) else source
    config_users = flag_users = ramp_users = actors_per_user = None
    ladder: str | None = None
    ladder_steps: int | None = None
    ladder_whole: bool = True  # False: the spec ran past the piece kept in ``ladder``, which holds its start only
    ladder_goes_on = shaped = commanded = False
    ladder_whole = True
    for line in lines:
        if ladder_goes_on and ladder_steps is not None:
            rest = _VALUE.match(line)
            assert rest is not None  # \S* matches every string
            ladder_steps += rest.group().count(",")
            ladder_goes_on = _cut(line, rest.end())
            continue
        if line.startswith(SUBPROCESS_PREFIXES[0]):
            said = line.removeprefix(SUBPROCESS_PREFIXES[0])
            shaped = shaped or _SHAPE in said
            if ramp_users is None and (match := _RAMP.search(said)):
                ramp_users = int(match.group(1))
            continue
        if line.startswith(SUBPROCESS_PREFIXES):
            continue
        if config_users is None and (match := _CONFIG_USERS.search(line)):
            config_users = int(match.group(1))
        if actors_per_user is None and (match := _ACTORS_PER_USER_FLAG.search(line)):
            actors_per_user = int(match.group(1))
        if ladder is None and (match := _LADDER_FLAG.search(line)):
            ladder = match.group(1)
            ladder_steps = ladder.count(",") + 1
            ladder_goes_on = _cut(line, match.end(1))
            ladder_whole = not ladder_goes_on
        if line.startswith(COMMAND):
            commanded = True
            if flag_users is None and " locust " in f"{line} " and (match := _USERS_FLAG.search(line)):
                flag_users = int(match.group(1))
    users = config_users if config_users is not None else flag_users
    if users is None and not shaped:
        users = ramp_users
    if actors_per_user is None and commanded:
        actors_per_user = 1
    return RunLog(users=users, actors_per_user=actors_per_user, ladder=ladder, ladder_steps=ladder_steps,
                  ladder_whole=ladder_whole)
