"""The server-telemetry harvest from Prometheus, as upstream's runner computes it (the 45-key version).

- Window: the steady-state window of the trial's stats_history.csv
  (:mod:`window`); packing and PSI are range queries over the whole run (step
  10 s), summarised over their samples inside the window.
- Packing reads the one pool by its exact name, un-aggregated
  (``ate_workerpool_workers{ate_workerpool_name="benchmark-ateom"}``), and at
  each step takes the state map of one ateapi process (:func:`packing_points`).
- Snapshots: instant queries at the window's end, both edges read
  ``lag_s // 2`` late because the atelet exports on an interval. Counts and sums
  are window deltas, ``sum(S) - (sum(S @ start) or vector(0))``; quantiles come
  from bucket growth between the edges (no ``rate()``). A negative delta is a
  counter reset: null. ``checkpoint_mb_s`` is all files' bytes over
  checkpointing seconds.
- Every request has a timeout (5 s instant, 8 s range); an unreachable or
  malformed Prometheus gives nulls, never an error.
"""

from __future__ import annotations

import json
import logging
import time
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

from substrate_assets.analysis.statistics import measured, percentile_stats
from substrate_assets.results.server_summary import PSI_RESOURCES, summary_metadata
from substrate_assets.telemetry.packing import packing_block

log = logging.getLogger(__name__)

USER_AGENT = "Substrate-Locust-Runner"
INSTANT_TIMEOUT_S = 5.0
RANGE_TIMEOUT_S = 8.0
STEP = "10s"
MiB = 1024 * 1024
# The reference reads raw series of this one pool: a regex would add other pools' workers, and a ``sum by`` would
# add series that the reference lets overwrite each other (see packing_points).
PACKING_QUERY = 'ate_workerpool_workers{ate_workerpool_name="benchmark-ateom"}'
# Each worker pod's whole cgroup (systemd or cgroupfs layout); the pause container is left out.
POD_SELECTOR = 'pod=~"benchmark-ateom.*", container="", id=~".*[/-]pod[^/]+(\\\\.slice)?"'
MEMORY_IMAGE = 'atelet_snapshot_size_bytes{suffix}{{file_name=~"pages.img|memory-ranges"}}'


class Prometheus:
    """The two HTTP API calls the harvest makes; failures are logged and read as "no data"."""

    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")

    def _get(self, path: str, params: dict[str, str], timeout: float) -> list[dict[str, Any]]:
        request = urllib.request.Request(f"{self.url}{path}?{urllib.parse.urlencode(params)}",
                                         headers={"User-Agent": USER_AGENT})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:
                body = json.loads(response.read().decode("utf-8"))
        except Exception as error:  # unreachable, timed out, not JSON: this field is not measured
            log.warning("Prometheus query failed (%s): %s", params.get("query"), error)
            return []
        if not isinstance(body, dict) or body.get("status") != "success":
            log.warning("Prometheus query did not succeed (%s): %s", params.get("query"), str(body)[:200])
            return []
        result = (body.get("data") or {}).get("result")
        return result if isinstance(result, list) else []

    def instant(self, query: str, at: float | None = None) -> list[dict[str, Any]]:
        params = {"query": query} if at is None else {"query": query, "time": str(at)}
        return self._get("/api/v1/query", params, INSTANT_TIMEOUT_S)

    def range(self, query: str, start: int, end: int, step: str = STEP) -> list[dict[str, Any]]:
        end = max(end, start + 1)  # Prometheus refuses end <= start
        return self._get("/api/v1/query_range", {"query": query, "start": str(start), "end": str(end),
                                                 "step": step}, RANGE_TIMEOUT_S)


def instant_value(result: list[dict[str, Any]]) -> float | None:
    """The first sample's value at 4 dp; a missing or malformed value is null."""
    try:
        value = measured(result[0]["value"][1])
    except (IndexError, KeyError, TypeError):
        return None
    return None if value is None else round(value, 4)


def _ratio(numerator: float | None, denominator: float | None, scale: float = 1.0) -> float | None:
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator / scale, 4)


def packing_points(results: list[dict[str, Any]]) -> list[tuple[int, float, float]]:
    """(timestamp, busy, total) per step of a range result of :data:`PACKING_QUERY`, as the reference reads it.

    Series are keyed by ateapi process (``exported_instance``, else ``instance``) and state; every other label
    (pod, job, a pool's namespace, ...) is ignored, so when one process has several series for one state the
    value of the later series in the result wins at that step. Prometheus sorts a range result by label set, so
    the labels, not chance, decide which series that is."""
    by_process: dict[str, dict[int, dict[str, float]]] = {}
    for series in results:
        labels = series.get("metric") or {}
        process = labels.get("exported_instance") or labels.get("instance", "")
        state = labels.get("ate_worker_state", "unknown")
        samples = by_process.setdefault(process, {})
        for point in series.get("values") or []:
            try:
                at, value = int(float(point[0])), measured(point[1])
            except (TypeError, ValueError, IndexError):
                continue
            if value is not None:
                samples.setdefault(at, {})[state] = value
    # An exited ateapi's series is re-exported until it expires: at each step, trust the process
    # whose series runs latest.
    last_seen = {process: max(samples) for process, samples in by_process.items() if samples}
    points = []
    for at in sorted({at for samples in by_process.values() for at in samples}):
        live = max((p for p in last_seen if at in by_process[p]), key=lambda p: (last_seen[p], p))
        states = by_process[live][at]
        points.append((at, states.get("partial", 0.0) + states.get("at_capacity", 0.0), sum(states.values())))
    return points


class Harvest:
    def __init__(self, prometheus: Prometheus) -> None:
        self.prometheus = prometheus

    # -- window helpers ---------------------------------------------------

    def window_delta(self, selector: str, start: int, end: int) -> tuple[float | None, float | None]:
        """(growth of ``sum(selector)`` from ``start`` to ``end``, its value at ``end``); a reset is null."""
        now = f"sum({selector})"
        delta = instant_value(self.prometheus.instant(f"{now} - (sum({selector} @ {start}) or vector(0))", at=end))
        total = instant_value(self.prometheus.instant(now, at=end))
        return (None if delta is not None and delta < 0 else delta), total

    def window_quantile(self, quantile: float, buckets: str, start: int, end: int, scale: float = 1.0) -> float | None:
        now = f"sum by (le) ({buckets})"
        then = f"sum by (le) ({buckets} @ {start})"
        divisor = int(scale) if float(scale).is_integer() else scale
        query = f"histogram_quantile({quantile}, {now} - ({then} or {now} * 0)) / {divisor}"
        return instant_value(self.prometheus.instant(query, at=end))

    @staticmethod
    def steady_values(results: list[dict[str, Any]], steady: tuple[int, int]) -> list[float]:
        values = []
        for series in results:
            for point in series.get("values") or []:
                try:
                    if steady[0] <= int(float(point[0])) <= steady[1]:
                        values.append(float(point[1]))
                except (TypeError, ValueError, IndexError):
                    continue
        return values

    # -- the four blocks ---------------------------------------------------

    def packing(self, start: int, end: int, steady: tuple[int, int]) -> dict[str, Any]:
        return packing_block(packing_points(self.prometheus.range(PACKING_QUERY, start, end)), steady)

    @staticmethod
    def psi_query(resource: str, selector: str = 'container="node"', by: str = "instance") -> str:
        return f"sum by ({by}) (rate(container_pressure_{resource}_waiting_seconds_total{{{selector}}}[1m])) * 100"

    def node_psi(self, start: int, end: int, steady: tuple[int, int]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        nodes: set[str] = set()
        for key, resource in PSI_RESOURCES:
            # Only nodes that host a worker pod with a live PSI rate at that step.
            query = f"{self.psi_query(resource)} and on (instance) {self.psi_query(resource, POD_SELECTOR)}"
            results = self.prometheus.range(query, start, end)
            nodes.update((series.get("metric") or {}).get("instance", "") for series in results)
            out[f"{key}_stall_pct"] = percentile_stats(self.steady_values(results, steady))
        out["nodes"] = len(nodes - {""}) or None  # no PSI series: not measured, not "no nodes"
        return out

    def pod_psi(self, start: int, end: int, steady: tuple[int, int]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        pods: set[str] = set()
        for key, resource in PSI_RESOURCES:
            results = self.prometheus.range(self.psi_query(resource, POD_SELECTOR, "pod"), start, end)
            pods.update((series.get("metric") or {}).get("pod", "") for series in results)
            out[f"{key}_stall_pct"] = percentile_stats(self.steady_values(results, steady))
        out["pods"] = len(pods - {""}) or None
        return out

    def snapshots(self, steady: tuple[int, int], lag_s: int) -> dict[str, Any]:
        start, end = steady[0] + lag_s // 2, steady[1] + lag_s // 2

        def quantiles(buckets: str, scale: float = 1.0) -> list[float | None]:
            return [self.window_quantile(q, buckets, start, end, scale) for q in (0.50, 0.90, 0.95, 0.99)]

        def delta(selector: str) -> float | None:
            return self.window_delta(selector, start, end)[0]

        def rpc(method: str) -> tuple[list[float | None], float | None]:
            labels = f'{{rpc_method="atelet.AteomHerder/{method}"}}'
            mean = _ratio(delta(f"rpc_server_call_duration_seconds_sum{labels}"),
                          delta(f"rpc_server_call_duration_seconds_count{labels}"))
            return quantiles(f"rpc_server_call_duration_seconds_bucket{labels}"), mean

        sizes = quantiles(MEMORY_IMAGE.format(suffix="_bucket"), MiB)
        count, count_end = self.window_delta(MEMORY_IMAGE.format(suffix="_count"), start, end)
        restore, restore_mean = rpc("Restore")
        checkpoint, checkpoint_mean = rpc("Checkpoint")
        written = delta("atelet_snapshot_size_bytes_sum")
        spent = delta('ate_actor_checkpoint_duration_seconds_sum{ate_snapshot_phase="total"}')
        return {
            "size_p50_mb": sizes[0], "size_p90_mb": sizes[1], "size_p95_mb": sizes[2], "size_p99_mb": sizes[3],
            "size_avg_mb": _ratio(delta(MEMORY_IMAGE.format(suffix="_sum")), count, MiB),
            "checkpoints_in_window": None if count is None else round(count),
            "checkpoints_cumulative": None if count_end is None else round(count_end),
            "restore_p50_s": restore[0], "restore_p90_s": restore[1], "restore_p95_s": restore[2],
            "restore_p99_s": restore[3], "restore_mean_s": restore_mean,
            "checkpoint_p50_s": checkpoint[0], "checkpoint_p90_s": checkpoint[1], "checkpoint_p95_s": checkpoint[2],
            "checkpoint_p99_s": checkpoint[3], "checkpoint_mean_s": checkpoint_mean,
            "checkpoint_mb_s": _ratio(written, spent, MiB),
        }


def harvest_server_summary(url: str, *, start_ts: int, end_ts: int, steady: tuple[int, int], lag_s: int,
                           test_name: str, tag: str, data_timestamp: str,
                           wait: bool = True, sleep: Callable[[float], None] = time.sleep) -> dict[str, Any]:
    """The ``server_summary`` of one run; with ``wait``, first sleeps until ``end_ts + lag_s`` has passed."""
    if wait:
        delay = max(0.0, end_ts + lag_s - time.time())
        if delay:
            log.info("waiting %.0fs for the atelet's last export to be scraped", delay)
            sleep(delay)
    harvest = Harvest(Prometheus(url))
    return {
        "metadata": summary_metadata(test_name=test_name, tag=tag, data_timestamp=data_timestamp, start_ts=start_ts,
                                     end_ts=end_ts, steady=steady, prom_url=url, atelet_lag_s=lag_s),
        "cluster_packing": harvest.packing(start_ts, end_ts, steady),
        "node_psi": harvest.node_psi(start_ts, end_ts, steady),
        "pod_psi": harvest.pod_psi(start_ts, end_ts, steady),
        "snapshots": harvest.snapshots(steady, lag_s),
    }
