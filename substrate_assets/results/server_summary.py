"""``server_summary.json``: the server-telemetry document of a trial, its metadata block, and the 45 flat keys of
its ``server_summary`` row in stats.jsonl (values as strings, null when not measured). Whoever measured the
figures (a Prometheus harvest, the embedded runtime's events, nothing at all) writes this same structure."""

from __future__ import annotations

import math
from typing import Any

from substrate_assets.analysis.statistics import percentile_stats

# How late the atelet's metrics reach Prometheus, as upstream's runner assumes unless told: the harvest waits
# until the run's end plus this, and reads snapshot figures half of it late (metadata.atelet_lag_s).
DEFAULT_ATELET_LAG_S = 70
PSI_RESOURCES = (("cpu", "cpu"), ("mem", "memory"), ("io", "io"))  # (key, /proc/pressure file)
SNAPSHOT_KEYS = ("size_p50_mb", "size_p90_mb", "size_p95_mb", "size_p99_mb", "size_avg_mb", "checkpoints_in_window",
                 "checkpoints_cumulative", "restore_p50_s", "restore_p90_s", "restore_p95_s", "restore_p99_s",
                 "restore_mean_s", "checkpoint_p50_s", "checkpoint_p90_s", "checkpoint_p95_s", "checkpoint_p99_s",
                 "checkpoint_mean_s", "checkpoint_mb_s")


def _flat_keys() -> tuple[str, ...]:
    keys = [f"cluster_packing_{p}" for p in ("p50", "p90", "p95", "p99")]
    for key, _ in PSI_RESOURCES:
        for p in ("p50", "p90", "p95", "p99"):
            keys += [f"psi_{key}_stall_{p}", f"pod_psi_{key}_stall_{p}"]
    keys += [f"snapshot_size_{p}_mb" for p in ("p50", "p90", "p95", "p99", "avg")]
    keys += ["checkpoints_in_window"]
    keys += [f"restore_{p}_s" for p in ("p50", "p90", "p95", "p99", "mean")]
    keys += [f"checkpoint_{p}_s" for p in ("p50", "p90", "p95", "p99", "mean")]
    keys += ["checkpoint_mb_s"]
    return tuple(keys)


FLAT_KEYS = _flat_keys()


def flat_key_block(key: str) -> str:
    """The server_summary.json block a flat key is read from (``psi_*`` is node PSI, ``pod_psi_*`` pod PSI)."""
    if key.startswith("cluster_packing_"):
        return "cluster_packing"
    if key.startswith("pod_psi_"):
        return "pod_psi"
    if key.startswith("psi_"):
        return "node_psi"
    return "snapshots"


def _text(value: Any) -> str | None:
    """Row values are strings, or null when unmeasured."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return None
    return str(value)


def kind_of_value(value: Any) -> str:
    """What a JSON value is, in the words an error names it by."""
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    names: dict[type, str] = {dict: "an object", list: "a list", str: "a string"}
    return names.get(type(value), type(value).__name__)


def _block(parent: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    """``parent[key]``, an object of the document (absent or null: not measured, empty); ValueError naming the key
    when it is anything else."""
    value = parent.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValueError(f"{where}{key} is {kind_of_value(value)}, where an object goes")
    return value


def _number(block: dict[str, Any], key: str, where: str) -> str | None:
    """``block[key]`` as a row value: a number (or a numeric string), null when absent; ValueError naming the key
    when it is anything else."""
    value = block.get(key)
    if isinstance(value, str):
        try:
            float(value)
        except ValueError:
            raise ValueError(f"{where}{key} is {value[:40]!r}, where a number goes") from None
    elif value is not None and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise ValueError(f"{where}{key} is {kind_of_value(value)}, where a number goes")
    return _text(value)


def flatten(summary: dict[str, Any]) -> dict[str, str | None]:
    """The 45 keys of the ``server_summary`` stats.jsonl row, in the reference's order. ValueError naming the key
    (``node_psi.cpu_stall_pct``) where the document holds something else than its structure does."""
    if not isinstance(summary, dict):
        raise ValueError(f"the document is {kind_of_value(summary)}, where an object goes")
    packing = _block(_block(summary, "cluster_packing", ""), "summary", "cluster_packing.")
    node = _block(summary, "node_psi", "")
    pod = _block(summary, "pod_psi", "")
    snapshots = _block(summary, "snapshots", "")
    row: dict[str, str | None] = {}
    for p in ("p50", "p90", "p95", "p99"):
        row[f"cluster_packing_{p}"] = _number(packing, p, "cluster_packing.summary.")
    for key, _ in PSI_RESOURCES:
        stalls = {name: _block(block, f"{key}_stall_pct", f"{name}.") for name, block in
                  (("node_psi", node), ("pod_psi", pod))}
        for p in ("p50", "p90", "p95", "p99"):
            row[f"psi_{key}_stall_{p}"] = _number(stalls["node_psi"], p, f"node_psi.{key}_stall_pct.")
            row[f"pod_psi_{key}_stall_{p}"] = _number(stalls["pod_psi"], p, f"pod_psi.{key}_stall_pct.")
    for p in ("p50", "p90", "p95", "p99", "avg"):
        row[f"snapshot_size_{p}_mb"] = _number(snapshots, f"size_{p}_mb", "snapshots.")
    row["checkpoints_in_window"] = _number(snapshots, "checkpoints_in_window", "snapshots.")
    for kind in ("restore", "checkpoint"):
        for p in ("p50", "p90", "p95", "p99", "mean"):
            row[f"{kind}_{p}_s"] = _number(snapshots, f"{kind}_{p}_s", "snapshots.")
    row["checkpoint_mb_s"] = _number(snapshots, "checkpoint_mb_s", "snapshots.")
    assert tuple(row) == FLAT_KEYS
    return {key: row[key] for key in FLAT_KEYS}


def summary_metadata(*, test_name: str, tag: str, data_timestamp: str, start_ts: int, end_ts: int,
                     steady: tuple[int, int], prom_url: str | None, atelet_lag_s: int | None,
                     **extra: Any) -> dict[str, Any]:
    """The ``metadata`` block, in the reference's key order (``extra`` keys last)."""
    return {"test_name": test_name, "tag": tag, "data_timestamp": data_timestamp, "prom_url": prom_url,
            "start_ts": start_ts, "end_ts": end_ts, "steady_start_ts": steady[0], "steady_end_ts": steady[1],
            "atelet_lag_s": atelet_lag_s, **extra}


def unmeasured_psi(counted: str) -> dict[str, Any]:
    """A PSI block (``node_psi`` counts ``nodes``, ``pod_psi`` ``pods``) with nothing measured: no count either."""
    return {**{f"{key}_stall_pct": percentile_stats([]) for key, _ in PSI_RESOURCES}, counted: None}


def unmeasured_server_summary(*, start_ts: int, end_ts: int, steady: tuple[int, int], test_name: str, tag: str,
                              data_timestamp: str) -> dict[str, Any]:
    """The server_summary structure with nothing measured: every figure null, no samples."""
    return {
        "metadata": summary_metadata(test_name=test_name, tag=tag, data_timestamp=data_timestamp, start_ts=start_ts,
                                     end_ts=end_ts, steady=steady, prom_url=None, atelet_lag_s=None),
        "cluster_packing": {"summary": percentile_stats([]), "timeseries": []},
        "node_psi": unmeasured_psi("nodes"),
        "pod_psi": unmeasured_psi("pods"),
        "snapshots": dict.fromkeys(SNAPSHOT_KEYS),
    }
