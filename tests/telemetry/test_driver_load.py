"""The driver's load over the steady window, from cumulative per-second counters."""

import subprocess
import sys
import time

import polars as pl
import psutil
import pytest

from substrate_assets.driver.samples import machine_cpu_s, process_tree_cpu_s
from substrate_assets.results.runtime_samples import SAMPLES_SCHEMA
from substrate_assets.telemetry.driver_load import DRIVER_CORE_SHARE_LIMIT, driver_load
from substrate_assets.telemetry.machine_load import machine_load


def _samples(rows: list[tuple[float, float | None, float | None, float | None]]) -> pl.DataFrame:
    return pl.DataFrame([{**dict.fromkeys(SAMPLES_SCHEMA), "ts": ts, "driver_cpu_s": driver,
                          "machine_busy_cpu_s": busy, "machine_cpu_s": total} for ts, driver, busy, total in rows],
                        schema=SAMPLES_SCHEMA, orient="row")


def test_the_window_is_bounded_by_its_first_and_last_sample():
    # Samples at 99.5 and 111 fall outside [100, 110]; 100.2 and 109.7 bound the window.
    samples = _samples([(99.5, 0.0, 0.0, 0.0), (100.2, 1.0, 10.0, 20.0), (105.0, 2.0, 14.0, 30.0),
                        (109.7, 3.0, 18.0, 39.4), (111.0, 9.0, 90.0, 99.0)])
    load = driver_load(samples, (100, 110), cores=2)
    assert load is not None
    assert (load.window_start_ts, load.window_end_ts) == (100.2, 109.7)
    assert load.driver_cpu_s == pytest.approx(2.0)
    assert load.driver_core_share == pytest.approx(2.0 / (9.5 * 2))
    assert load.machine_cpu_saturation == pytest.approx(8.0 / 19.4)
    assert load.as_json() == {"window_start_ts": 100.2, "window_end_ts": 109.7, "cores": 2,
                              "driver_cpu_s": pytest.approx(2.0), "driver_core_share": pytest.approx(2.0 / 19),
                              "machine_cpu_saturation": pytest.approx(8.0 / 19.4)}
    assert load.warning() is None  # 10.5 % of the cores


def test_a_driver_over_its_share_is_warned_about():
    samples = _samples([(100.0, 0.0, 0.0, 20.0), (110.0, 6.0, 19.0, 40.0)])
    load = driver_load(samples, (100, 110), cores=2)
    assert load is not None and load.driver_core_share == pytest.approx(0.3)
    assert load.driver_core_share > DRIVER_CORE_SHARE_LIMIT
    warning = load.warning()
    assert warning is not None
    assert "used 30 % of this machine's 2 cores" in warning and "6.0 CPU s in 10 s" in warning
    assert "machine 95 % busy" in warning
    assert load.warning(limit=0.3) is None


def test_not_measured_is_null_not_zero():
    # The driver's counter was not read at the window's start (Locust not yet started): its CPU is not measured.
    load = driver_load(_samples([(100.0, None, 1.0, 2.0), (110.0, 4.0, 3.0, 22.0)]), (100, 110), cores=2)
    assert load is not None
    assert load.driver_cpu_s is None and load.driver_core_share is None and load.warning() is None
    assert load.machine_cpu_saturation == pytest.approx(0.1)
    assert driver_load(_samples([(100.0, 0.0, 0.0, 0.0)]), (100, 110), cores=2) is None
    assert driver_load(_samples([]), (100, 110), cores=2) is None
    # A measured zero stays zero: an idle driver.
    idle = driver_load(_samples([(100.0, 5.0, 1.0, 2.0), (110.0, 5.0, 3.0, 22.0)]), (100, 110), cores=2)
    assert idle is not None and idle.driver_cpu_s == 0 and idle.driver_core_share == 0


BURN = """
import subprocess, sys, time
if sys.argv[1] == "child":
    start = time.process_time()
    while time.process_time() - start < 0.3:
        pass
    print("burnt", flush=True)
    sys.stdin.read()
else:
    child = subprocess.Popen([sys.executable, "-c", sys.argv[2], "child", sys.argv[2]], stdin=sys.stdin)
    child.wait()
"""


def test_a_process_tree_counts_its_live_children():
    """A parent that spends nothing, with a child that has spent 0.3 s of its own CPU: the tree has spent at least
    that (CPU time, not wall time: it holds on a loaded machine)."""
    parent = subprocess.Popen([sys.executable, "-c", BURN, "parent", BURN], stdin=subprocess.PIPE)
    try:
        process = psutil.Process(parent.pid)
        child = None
        while child is None or child.cpu_times().user + child.cpu_times().system < 0.3:
            children = process.children()
            child = children[0] if children else None
            time.sleep(0.02)  # polling, not timing: leave the cores to the child
        spent = process_tree_cpu_s(process)
        assert spent is not None and spent >= 0.3
    finally:
        parent.stdin.close()
        parent.wait(timeout=30)
    assert process_tree_cpu_s(process) is None  # gone: not measured


def test_the_machine_counters_are_cumulative():
    busy, total, steal = machine_cpu_s()
    later_busy, later_total, later_steal = machine_cpu_s()
    assert 0 <= busy <= total and later_busy >= busy and later_total >= total
    assert steal is not None and 0 <= steal <= busy and later_steal >= steal


def test_a_window_with_no_idle_tick_is_exactly_saturated():
    """The counters are whole ticks summed as floats: busy and all CPU that grew by the same ticks give a share of
    exactly 1 (a stress run saw 1.0000000000004428), and the foreign share the same way stays inside [0, 1]."""
    # As machine_cpu_s reads them (all CPU less idle): no idle tick in the window, yet unrounded the busy share is
    # (8194.07 - 8167.13) / (9702.619999999999 - 9675.68) = 1.0000000000000338.
    samples = _samples([(100.0, 0.0, 8167.13, 9675.68), (110.0, 1.0, 8194.07, 9702.619999999999)])
    load = driver_load(samples, (100, 110), cores=2)
    assert load is not None and load.machine_cpu_saturation == 1.0
    machine = machine_load(pl.DataFrame([{**dict.fromkeys(SAMPLES_SCHEMA), "ts": ts, "machine_busy_cpu_s": busy,
                                          "machine_cpu_s": total, "machine_steal_cpu_s": 0.0, "trial_cpu_s": trial}
                                         for ts, busy, total, trial in ((100.0, 8167.13, 9675.68, 0.0),
                                                                        (110.0, 8194.07, 9702.619999999999, 0.0))],
                                        schema=SAMPLES_SCHEMA), (100, 110))
    assert machine is not None and machine.foreign_cpu_share == 1.0
