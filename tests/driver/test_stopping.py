"""How a trial takes stop signals, driven by signals this process sends itself (delivered before its next
bytecode), so no timing is involved."""

import os
import signal

import pytest

from substrate_assets.driver.stopping import signals_stop_the_trial
from substrate_assets.processes.parent_death import PARENT_DIED


def test_the_parent_death_signal_stops_once_however_often_it_comes():
    """The kernel repeats it once per thread of the dying parent: only the first is a stop."""
    landed = False
    with signals_stop_the_trial() as request:
        try:
            os.kill(os.getpid(), PARENT_DIED)
            pytest.fail("the first SIGHUP did not stop the trial")
        except KeyboardInterrupt:
            for _ in range(3):  # while landing
                os.kill(os.getpid(), PARENT_DIED)
            landed = True
    assert landed and request.signal_name == "SIGHUP" and request.exit_code == 129


@pytest.mark.parametrize("second", [signal.SIGINT, signal.SIGTERM])
def test_a_second_stop_request_gives_up_the_landing(second):
    with signals_stop_the_trial() as request, pytest.raises(KeyboardInterrupt, match=second.name):
        try:
            os.kill(os.getpid(), PARENT_DIED)
        except KeyboardInterrupt:
            os.kill(os.getpid(), second)
    assert request.signal_name == "SIGHUP"


def test_the_handlers_are_put_back():
    before = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM, PARENT_DIED)}
    with signals_stop_the_trial():
        pass
    assert {signum: signal.getsignal(signum) for signum in before} == before
