"""The packing arithmetic of the Prometheus harvest on hand-built range results, against the reference's rules."""

from typing import Any

from substrate_assets.telemetry.prometheus import PACKING_QUERY, STEP, Harvest, Prometheus, packing_points


def series(labels: dict[str, str], values: list[tuple[int, Any]]) -> dict[str, Any]:
    metric = {"__name__": "ate_workerpool_workers", "ate_workerpool_name": "benchmark-ateom", **labels}
    return {"metric": metric, "values": [[at, str(value)] for at, value in values]}


def process(name: str, states: dict[str, list[tuple[int, Any]]], **labels: str) -> list[dict[str, Any]]:
    return [series({"ate_worker_state": state, "exported_instance": name, "instance": "collector:8888", **labels},
                   values) for state, values in states.items()]


NEW_TIMES = (100, 110, 120, 130)
# An exited ateapi still re-exported by the collector: all idle, overlapping the live one at 100 and 110.
EXITED = process("ateapi-old", {"idle": [(90, 4), (100, 4), (110, 4)], "partial": [(90, 0), (100, 0), (110, 0)],
                                "at_capacity": [(90, 0), (100, 0), (110, 0)]})
# The live ateapi; at 120 its partial count is NaN (not a reading), at 130 the pool is empty.
LIVE = process("ateapi-new", {"idle": [(100, 2), (110, 2), (120, 2), (130, 0)],
                              "partial": [(100, 1), (110, 1), (120, "NaN"), (130, 0)],
                              "at_capacity": [(100, 1), (110, 1), (120, 1), (130, 0)]})
# A second idle series of the live process (another pool of the same name, in another namespace): the reference
# lets it overwrite the first at each step rather than adding it.
LIVE_AGAIN = series({"ate_worker_state": "idle", "exported_instance": "ateapi-new", "instance": "collector:8888",
                     "ate_workerpool_namespace": "other"}, [(at, 3 if at < 130 else 0) for at in NEW_TIMES])
# Scraped directly, without a collector: the process is its instance.
DIRECT = [series({"ate_worker_state": state, "instance": "10.0.0.5:9090"}, [(80, count)])
          for state, count in (("idle", 1), ("at_capacity", 1))]


def test_the_live_process_and_the_later_of_two_series_for_one_state():
    points = packing_points([*DIRECT, *EXITED, *LIVE, LIVE_AGAIN])
    assert points == [(80, 1.0, 2.0), (90, 0.0, 4.0), (100, 2.0, 5.0), (110, 2.0, 5.0), (120, 1.0, 4.0),
                      (130, 0.0, 0.0)]
    # Result order decides, not the larger value: with the duplicate first, the original's 2 idle stand.
    assert packing_points([LIVE_AGAIN, *LIVE])[0] == (100, 2.0, 4.0)


def test_a_tie_in_last_seen_goes_to_the_greater_process_key():
    results = [*process("ateapi-y", {"idle": [(10, 1)], "partial": [(10, 2)]}),
               *process("ateapi-x", {"idle": [(10, 5)]})]
    assert packing_points(results) == [(10, 2.0, 3.0)]


class Recorded(Prometheus):
    """Answers every range query with one hand-built result, and records the queries."""

    def __init__(self, result: list[dict[str, Any]]) -> None:
        super().__init__("http://127.0.0.1:9")
        self.result = result
        self.queries: list[str] = []

    def range(self, query: str, start: int, end: int, step: str = STEP) -> list[dict[str, Any]]:
        self.queries.append(query)
        return self.result


def test_the_block_reads_the_one_pool_and_summarises_the_steady_steps():
    prometheus = Recorded([*DIRECT, *EXITED, *LIVE, LIVE_AGAIN])
    block = Harvest(prometheus).packing(80, 130, (90, 120))
    assert prometheus.queries == ['ate_workerpool_workers{ate_workerpool_name="benchmark-ateom"}'] == [PACKING_QUERY]
    assert [point["packing_ratio"] for point in block["timeseries"]] == [0.5, 0.0, 0.4, 0.4, 0.25, None]
    assert block["timeseries"][-1] == {"timestamp": 130, "busy_workers": 0.0, "total_workers": 0.0,
                                       "packing_ratio": None}
    # Steady ratios 0.0, 0.4, 0.4, 0.25: floor-index percentiles, 4 dp.
    assert block["summary"] == {"min": 0.0, "p50": 0.4, "p90": 0.4, "p95": 0.4, "p99": 0.4, "max": 0.4,
                                "avg": 0.2625}


def test_ratios_round_to_four_places():
    harvest = Harvest(Recorded(process("a", {"idle": [(0, 1), (10, 2)], "partial": [(0, 2), (10, 1)]})))
    ratios = [point["packing_ratio"] for point in harvest.packing(0, 10, (0, 10))["timeseries"]]
    assert ratios == [0.6667, 0.3333]
