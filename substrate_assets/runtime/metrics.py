"""Prometheus metrics under the upstream names, so one harvest serves this runtime and a real cluster."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Gauge, Histogram

from substrate_assets.runtime.workers import WORKER_STATES, WorkerSlots

RESTORE_METHOD = "atelet.AteomHerder/Restore"
CHECKPOINT_METHOD = "atelet.AteomHerder/Checkpoint"
_SIZE_BUCKETS = tuple(float(1 << shift) for shift in range(10, 35))  # 1 KiB … 16 GiB
_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 0.75, 1.0, 1.5,
                    2.0, 3.0, 5.0, 7.5, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0)


class RuntimeMetrics:
    """One registry per runtime, so several runtimes in one process never share series."""

    def __init__(self, workerpool_name: str) -> None:
        self.registry = CollectorRegistry()
        self.workerpool_name = workerpool_name
        self.workers = Gauge("ate_workerpool_workers", "Workers of the pool by state.",
                             ["ate_workerpool_name", "ate_worker_state"], registry=self.registry)
        self.snapshot_size = Histogram("atelet_snapshot_size_bytes", "Size of each snapshot file written.",
                                       ["file_name"], buckets=_SIZE_BUCKETS, registry=self.registry)
        self.rpc_duration = Histogram("rpc_server_call_duration_seconds", "Duration of atelet herder calls.",
                                      ["rpc_method"], buckets=_SECONDS_BUCKETS, registry=self.registry)
        self.checkpoint_duration = Histogram("ate_actor_checkpoint_duration_seconds",
                                             "Actor checkpoint duration by phase.", ["ate_snapshot_phase"],
                                             buckets=_SECONDS_BUCKETS, registry=self.registry)
        self.restore_duration = Histogram("ate_actor_restore_duration_seconds", "Actor restore duration by phase.",
                                          ["ate_snapshot_phase"], buckets=_SECONDS_BUCKETS, registry=self.registry)
        self.sampled_actors = Gauge("ate_actor_stats_sampled_actors", "Running actors.", registry=self.registry)
        for state in WORKER_STATES:
            self.workers.labels(workerpool_name, state).set(0)

    def update_workers(self, slots: WorkerSlots) -> None:
        for state, count in slots.states().items():
            self.workers.labels(self.workerpool_name, state).set(count)
        self.sampled_actors.set(slots.running_actors)

    def observe_restore(self, seconds: float) -> None:
        self.rpc_duration.labels(RESTORE_METHOD).observe(seconds)
        self.restore_duration.labels("total").observe(seconds)

    def observe_checkpoint(self, seconds: float, sizes: dict[str, int]) -> None:
        self.rpc_duration.labels(CHECKPOINT_METHOD).observe(seconds)
        self.checkpoint_duration.labels("total").observe(seconds)
        for file_name, size in sizes.items():
            self.snapshot_size.labels(file_name).observe(size)
