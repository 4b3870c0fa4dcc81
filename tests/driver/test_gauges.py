"""The driver's own gauges, for a soak: the greenlets it holds and its open descriptors, a JSON line at a time."""

import json
import os

import gevent
from greenlet import greenlet

from substrate_assets.driver.gauges import GAUGES_ENV, gauge_line, gauges_requested, greenlet_count, start_gauges


def test_greenlets_held_are_counted_and_released_ones_are_not():
    greenlet.getcurrent()  # the thread's main greenlet, made on first use
    before = greenlet_count()
    held = [greenlet(lambda: None) for _ in range(25)]
    assert greenlet_count() == before + 25
    del held
    assert greenlet_count() == before


def test_a_gauge_line_is_written_at_once_and_again_after_the_interval(tmp_path):
    path = tmp_path / "gauges.jsonl"
    writer = start_gauges(path, interval_s=0.01)
    try:
        gevent.sleep(0)  # the writer's first turn: one line
        first = path.read_text().splitlines()
        assert len(first) == 1
        while len(path.read_text().splitlines()) < 3:  # later turns, whenever the hub gets to them
            gevent.sleep(0.01)
    finally:
        writer.kill()
    line = json.loads(first[0])
    assert line["pid"] == os.getpid() and line["greenlets"] >= 2 and line["open_fds"] > 0
    assert set(json.loads(gauge_line())) == {"ts", "pid", "greenlets", "open_fds", "gauge_cpu_s"}
    spent = [json.loads(text)["gauge_cpu_s"] for text in path.read_text().splitlines()]
    assert spent == sorted(spent) and spent[0] > 0


def test_gauges_are_off_unless_a_file_is_named(monkeypatch, tmp_path):
    monkeypatch.delenv(GAUGES_ENV, raising=False)
    assert gauges_requested() is None
    monkeypatch.setenv(GAUGES_ENV, str(tmp_path / "g.jsonl"))
    assert gauges_requested() == tmp_path / "g.jsonl"
