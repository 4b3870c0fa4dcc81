"""The chart renderer's child renders what vl-convert renders in this process, says what vl-convert refuses and goes
on, is started again when it was killed, and ends when the process that drew ends."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
import vl_convert

from substrate_assets.report import plots
from substrate_assets.report.renderer import Renderer, RenderFailed


@pytest.fixture()
def renderer():
    made = Renderer(plots.VEGA_LITE_VERSION)
    yield made
    if made._child is not None:
        made._child.end()


def _spec() -> str:
    samples = np.random.default_rng(3).lognormal(3.0, 0.5, 500)
    return json.dumps(plots.latency_cdf({"trial": samples}, "wakes").to_dict(validate=False))


def test_the_child_renders_what_vl_convert_renders_here(renderer):
    spec = _spec()
    assert renderer.svg(spec) == vl_convert.vegalite_to_svg(spec, vl_version=plots.VEGA_LITE_VERSION,
                                                             allowed_base_urls=[])


def test_a_spec_vl_convert_refuses_is_its_error_and_the_child_goes_on(renderer):
    with pytest.raises(RenderFailed, match="Vega-Lite to SVG conversion failed"):
        renderer.svg('{"mark": 5}')
    assert renderer.svg(_spec()).startswith("<svg")


def test_a_killed_child_is_started_again_for_the_next_chart(renderer):
    renderer.svg(_spec())
    first = renderer._child.process
    os.kill(first.pid, signal.SIGKILL)
    first.wait()
    assert renderer.svg(_spec()).startswith("<svg")
    assert renderer._child.process.pid != first.pid


def test_the_child_ends_with_the_process_that_drew():
    parent = subprocess.run([sys.executable, "-c", f"""
import os
from substrate_assets.report.renderer import Renderer
renderer = Renderer({plots.VEGA_LITE_VERSION!r})
renderer.start()
print(renderer._child.process.pid, flush=True)
os.kill(os.getpid(), 9)
"""], capture_output=True, text=True, timeout=60)
    assert parent.returncode == -9
    child = int(parent.stdout.split()[0])
    # Its stdin closed with its parent: it ends once its engine has started and it reads the end (a generous wait).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if psutil.Process(child).status() == psutil.STATUS_ZOMBIE:
                return  # ended, not yet reaped by the process it was handed to
        except psutil.NoSuchProcess:
            return
        time.sleep(0.1)
    pytest.fail(f"the renderer's child {child} outlived the process that drew")


def test_a_forked_process_draws_through_a_child_of_its_own():
    """A fork of a process that drew (as an executor forking its steps) never writes to its parent's child."""
    forked = subprocess.run([sys.executable, "-c", f"""
import os
from substrate_assets.report.renderer import Renderer
spec = '{{"mark": "point"}}'
renderer = Renderer({plots.VEGA_LITE_VERSION!r})
renderer.svg(spec)
parents = renderer._child.process.pid
pid = os.fork()
if pid == 0:
    ok = renderer.svg(spec).startswith("<svg") and renderer._child.process.pid != parents
    os._exit(0 if ok else 1)
_, status = os.waitpid(pid, 0)
assert os.waitstatus_to_exitcode(status) == 0, "the fork did not draw through a child of its own"
assert renderer.svg(spec).startswith("<svg") and renderer._child.process.pid == parents
print("drawn")
"""], capture_output=True, text=True, timeout=120)
    assert forked.returncode == 0 and forked.stdout.strip() == "drawn", forked.stderr[-2000:]


def test_a_chart_interrupted_before_its_answer_never_answers_the_next(renderer, monkeypatch):
    """A signal between a spec sent and its SVG read (KeyboardInterrupt) leaves that SVG unread: the next chart must
    get its own, not that one."""
    from substrate_assets.report import renderer as module

    first, second = '{"mark": "point"}', _spec()
    reads = module._read_exactly

    def interrupted(stream, size):
        monkeypatch.setattr(module, "_read_exactly", reads)
        raise KeyboardInterrupt

    renderer.start()
    monkeypatch.setattr(module, "_read_exactly", interrupted)
    with pytest.raises(KeyboardInterrupt):
        renderer.svg(first)
    assert renderer.svg(second) == vl_convert.vegalite_to_svg(second, vl_version=plots.VEGA_LITE_VERSION,
                                                               allowed_base_urls=[])
