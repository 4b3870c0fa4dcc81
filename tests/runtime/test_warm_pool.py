"""The warm pool: a host that fails to start is said and kept in the event log, not swallowed."""

import asyncio
import logging

from substrate_assets.runtime.events import EventLog
from substrate_assets.runtime.hosts import HostFailure, WarmPool


class RefusingPool(WarmPool):
    """Every host start fails, as when the machine cannot start a Python process in time."""

    async def _spawn(self):
        raise HostFailure("host 123 exited with 1 before it was ready")


def test_a_failed_refill_is_logged_and_recorded(tmp_path, caplog):
    events = EventLog()
    pool = RefusingPool(2, tmp_path, ready_timeout=1.0, events=events)

    async def refill_and_close() -> None:
        pool.start()
        await pool.close()  # waits for both refill attempts to end

    with caplog.at_level(logging.WARNING, logger="substrate_assets.runtime.hosts"):
        asyncio.run(refill_and_close())
    failed = [event for event in events.events() if event.kind == "host_start_failed"]
    assert len(failed) == 2 and failed[0].detail == "HostFailure: host 123 exited with 1 before it was ready"
    assert sum("warm pool: a host failed to start" in message for message in caplog.messages) == 2
    assert pool.idle == []
