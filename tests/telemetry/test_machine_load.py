"""How busy the machine was with other work over a trial's steady window: the figures from cumulative per-second
counters, the disturbance limits that judge them, and the counters themselves telling the trial's own CPU from other
processes' on this machine."""

import subprocess
import sys
import time

import polars as pl
import psutil
import pytest

from substrate_assets.analysis.disturbance import DisturbanceLimits, disturbed_because, is_disturbed
from substrate_assets.driver.samples import Sampler
from substrate_assets.results.runtime_samples import SAMPLES_SCHEMA
from substrate_assets.telemetry.machine_load import cluster_machine_load, machine_load

# Spins until the process has spent this much CPU (user + system), whatever else the machine runs: the work is
# fixed in CPU seconds, not in wall time.
BURN = "import os, sys\nwhile sum(os.times()[:2]) < float(sys.argv[1]): pass\n"


def _samples(rows):
    return pl.DataFrame([{**dict.fromkeys(SAMPLES_SCHEMA), "ts": ts, "machine_busy_cpu_s": busy, "machine_cpu_s": total,
                          "machine_steal_cpu_s": steal, "trial_cpu_s": trial, "psi_cpu_some_total_us": stalled}
                         for ts, busy, total, steal, trial, stalled in rows], schema=SAMPLES_SCHEMA, orient="row")


def test_the_figures_over_the_window_from_its_first_and_last_sample():
    samples = _samples([(99.0, 0.0, 0.0, 0.0, 0.0, 0), (100.0, 10.0, 20.0, 0.1, 8.0, 1_000_000),
                        (110.0, 28.0, 40.0, 0.5, 23.0, 8_000_000), (120.0, 99.0, 99.0, 9.0, 9.0, 99)])
    load = machine_load(samples, (100, 110))
    assert load is not None and (load.window_start_ts, load.window_end_ts) == (100.0, 110.0)
    # busy 18 of 20 CPU s: 15 the trial's, 0.4 stolen, 2.6 other processes'.
    assert load.foreign_cpu_share == pytest.approx(2.6 / 20)
    assert load.steal_share == pytest.approx(0.4 / 20)
    assert load.cpu_pressure == pytest.approx(0.7)


def test_not_measured_is_null_and_a_measured_zero_is_zero():
    quiet = machine_load(_samples([(100.0, 10.0, 20.0, 0.0, 10.0, 0), (110.0, 20.0, 40.0, 0.0, 20.0, 0)]),
                         (100, 110))
    assert quiet is not None and quiet.foreign_cpu_share == 0 and quiet.steal_share == 0 and quiet.cpu_pressure == 0
    unread = machine_load(_samples([(100.0, 10.0, 20.0, None, None, None), (110.0, 20.0, 40.0, None, 20.0, None)]),
                          (100, 110))
    assert unread is not None and unread.measured() == {"foreign_cpu_share": None, "steal_share": None,
                                                        "cpu_pressure": None}
    assert machine_load(_samples([(100.0, 1.0, 2.0, 0.0, 1.0, 0)]), (100, 110)) is None
    assert cluster_machine_load(None) is None
    assert cluster_machine_load(42.0).measured() == {"foreign_cpu_share": None, "steal_share": None,
                                                     "cpu_pressure": pytest.approx(0.42)}


def test_a_figure_over_its_limit_disturbs_the_trial_and_one_not_measured_is_not_judged():
    limits = DisturbanceLimits()
    assert is_disturbed({"foreign_cpu_share": 0.012, "steal_share": 0.001, "cpu_pressure": 0.7}, limits) is False
    measured = {"foreign_cpu_share": 0.24, "steal_share": 0.001, "cpu_pressure": 0.9}
    assert is_disturbed(measured, limits) is True
    assert disturbed_because(measured, limits) == [
        "CPU taken by other processes 24.0 % over the steady window, above the suite's limit of 5.0 %"]
    # A cluster measures its nodes' pressure only, which the default limits do not judge: not known.
    assert is_disturbed({"foreign_cpu_share": None, "steal_share": None, "cpu_pressure": 0.9}, limits) is None
    assert is_disturbed({"cpu_pressure": 0.9}, DisturbanceLimits(cpu_pressure=0.5)) is True


def ended(pid: int) -> None:
    """Wait for a process that is not this one's child: gone, or a zombie its new parent has not reaped yet."""
    process = psutil.Process(pid)
    while True:
        try:
            if process.status() in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD):
                return
        except psutil.NoSuchProcess:
            return
        time.sleep(0.05)  # polling, not timing: the burner's work is fixed in CPU seconds


def test_the_trial_s_own_children_are_its_cpu_and_another_user_s_process_is_foreign():
    """A child of the sampling process (an actor host, Locust) burning 0.4 CPU s counts as the trial's; a process
    started apart (its launcher gone, as another user's work) burning 0.4 CPU s is in the machine's busy time but
    not the trial's."""
    sampler = Sampler()
    sampler.take({}, None)
    child = subprocess.run([sys.executable, "-c", BURN, "0.4"], check=True)
    sampler.take({}, None)
    assert child.returncode == 0
    first, second = sampler.frame().sort("ts").rows(named=True)
    # Both counters are in clock ticks (hundredths of a second), and their difference is a float: 288.21 - 287.81
    # is 0.39999999999997726.
    assert second["trial_cpu_s"] - first["trial_cpu_s"] >= 0.4 - 0.01
    apart = subprocess.Popen(["sh", "-c", f"{sys.executable} -c '{BURN}' 0.4 & echo $!"], stdout=subprocess.PIPE,
                             text=True, start_new_session=True)
    pid = int(apart.stdout.readline())
    apart.wait()
    assert pid not in {process.pid for process in psutil.Process().children(recursive=True)}
    ended(pid)
    sampler.take({}, None)
    third = sampler.frame().sort("ts").rows(named=True)[-1]
    other = (third["machine_busy_cpu_s"] - second["machine_busy_cpu_s"]) - \
        (third["machine_steal_cpu_s"] - second["machine_steal_cpu_s"]) - (third["trial_cpu_s"] - second["trial_cpu_s"])
    assert other >= 0.35  # the kernel's tick accounting rounds what the process spent
    assert third["trial_cpu_s"] - second["trial_cpu_s"] < 0.2
