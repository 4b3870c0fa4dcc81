"""A step ladder as Locust's own ``LoadTestShape``: hold each step's users for its hold, then end the run.

Named after the locustfile (``-f locustfile.py,ladder_shape.py``) only for a ladder suite: Locust runs any shape
its files define. Options, as upstream's ladder shape names them:

- ``--ladder 2:45s,4:45s,6:45s`` — ``users:hold`` per step (hold in s, m or h);
- ``--ladder-spawn-rate`` — users per second at each step change (default 5, upstream's);
- ``--ladder-log PATH`` — where each step's start and the ladder's end are appended (``results/load_steps.py``),
  so the trial knows when each step really began (ticks come about once a second).

Locust ignores ``-u``, ``-r`` and ``-t`` when a shape runs: the ladder's holds are the run time.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from locust import LoadTestShape, events

from substrate_assets.results.load_steps import END_EVENT, STEP_EVENT, ladder_log_line, parse_ladder

log = logging.getLogger(__name__)


@events.init_command_line_parser.add_listener  # type: ignore[untyped-decorator]  # Locust's add_listener is unannotated
def _options(parser: Any) -> None:
    group = parser.add_argument_group("step ladder")
    group.add_argument("--ladder", default="", help="users:hold per step, comma-separated, e.g. 2:45s,4:45s.")
    group.add_argument("--ladder-spawn-rate", type=float, default=5.0,
                       help="Users per second at each step change.")
    group.add_argument("--ladder-log", default="", help="Append each step's start and the ladder's end here.")


@events.init.add_listener  # type: ignore[untyped-decorator]  # Locust's add_listener is unannotated
def _check(environment: Any, **_: Any) -> None:
    options = environment.parsed_options
    if options is None or getattr(options, "worker", False):
        return
    try:
        steps = parse_ladder(options.ladder)
    except ValueError as error:
        log.error("--ladder: %s", error)
        sys.exit(2)
    log.info("ladder: %d steps, %d s: %s", len(steps), sum(hold for _, hold in steps), options.ladder)


class LadderShape(LoadTestShape):
    """Each step's users for its hold, in turn; then None, which ends the run."""

    _steps: list[tuple[int, int]] | None = None
    _current = 0

    def _parsed_options(self) -> Any:
        # A shape ticks only under a runner, and Locust gives it one once it has parsed its command line.
        assert self.runner is not None and self.runner.environment.parsed_options is not None
        return self.runner.environment.parsed_options

    def _ladder(self) -> list[tuple[int, int]]:
        if self._steps is None:  # the options exist only once Locust has parsed its command line
            self._steps = parse_ladder(self._parsed_options().ladder)
        return self._steps

    def _record(self, event: str, step: int | None = None, users: int | None = None) -> None:
        path = self._parsed_options().ladder_log
        if not path:
            return
        try:
            with open(path, "a") as handle:
                handle.write(ladder_log_line(event, time.time(), step, users))
        except OSError as error:  # the load goes on; the trial then knows no span for this step
            log.error("ladder log %s: %s", path, error)

    def tick(self) -> tuple[int, float] | None:
        steps = self._ladder()
        elapsed, ends = self.get_run_time(), 0  # type: ignore[no-untyped-call]  # Locust's get_run_time is unannotated
        for index, (users, hold_s) in enumerate(steps, start=1):
            ends += hold_s
            if elapsed < ends:
                if index != self._current:
                    self._current = index
                    self._record(STEP_EVENT, index, users)
                    log.info("ladder step %d/%d: %d users for %d s", index, len(steps), users, hold_s)
                return users, self._parsed_options().ladder_spawn_rate
        if self._current != -1:
            self._current = -1
            self._record(END_EVENT)
            log.info("ladder complete after %.0f s", elapsed)
        return None
