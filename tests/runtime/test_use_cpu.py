"""UseCPU: a pool of workers that keeps CPU busy, replaced by the next call, stopped by 0 cores, and carried
through a snapshot so that a resumed actor runs it again."""

import os
import time

import pytest

from substrate_assets.protos import glutton_pb2 as pb
from substrate_assets.runtime.glutton import Glutton, GluttonError
from substrate_assets.runtime.snapshot import restore_snapshot, write_snapshot
from tests.support.waiting import wait_until

CPUS = len(os.sched_getaffinity(0))


@pytest.fixture
def glutton(tmp_path):
    service = Glutton(tmp_path / "data")
    yield service
    service.cpu_load.stop()


@pytest.mark.parametrize("request_fields", [{"num_cores": -1}, {"num_cores": 1, "duty_cycle": 1.5},
                                            {"num_cores": 1, "duty_cycle": -0.1},
                                            {"num_cores": 1, "cycle_length_ms": -5}])
def test_bad_requests_are_invalid_arguments(glutton, request_fields):
    with pytest.raises(GluttonError) as caught:
        glutton.use_cpu(pb.UseCPURequest(**request_fields))
    assert caught.value.status == 400
    assert glutton.cpu_load.workers == 0


def test_the_pool_is_replaced_capped_and_stopped(glutton):
    assert glutton.use_cpu(pb.UseCPURequest(num_cores=1, duty_cycle=1.0)).num_cores == 1
    assert glutton.cpu_load.workers == 1
    # Unset cap_at_gomaxprocs reads as true: no more workers than usable CPUs.
    assert glutton.use_cpu(pb.UseCPURequest(num_cores=CPUS + 3, duty_cycle=0.1)).num_cores == CPUS
    assert glutton.cpu_load.workers == CPUS
    uncapped = glutton.use_cpu(pb.UseCPURequest(num_cores=CPUS + 1, duty_cycle=0.1, cap_at_gomaxprocs=False))
    assert uncapped.num_cores == CPUS + 1 and glutton.cpu_load.workers == CPUS + 1
    assert glutton.use_cpu(pb.UseCPURequest(num_cores=0)).num_cores == 0
    assert glutton.cpu_load.workers == 0 and glutton.cpu_load.settings is None


def test_the_workers_spend_cpu(glutton):
    before = time.process_time()
    glutton.use_cpu(pb.UseCPURequest(num_cores=1, duty_cycle=1.0, cycle_length_ms=20))
    # CPU time of this process, which the worker's thread adds to: it grows however busy the machine is.
    wait_until(lambda: time.process_time() - before > 0.2, "the UseCPU worker to spend 0.2 s of CPU")


def test_the_load_survives_a_snapshot(glutton, tmp_path):
    glutton.use_cpu(pb.UseCPURequest(num_cores=1, duty_cycle=0.25, cycle_length_ms=50))
    write_snapshot(glutton, tmp_path / "snapshot", fsync=False)
    restored = Glutton(tmp_path / "restored")
    try:
        restore_snapshot(tmp_path / "snapshot", restored)
        assert restored.cpu_load.settings == glutton.cpu_load.settings
        assert restored.cpu_load.workers == 1
    finally:
        restored.cpu_load.stop()


def test_no_load_no_workers_after_a_restore(glutton, tmp_path):
    write_snapshot(glutton, tmp_path / "snapshot", fsync=False)
    restored = Glutton(tmp_path / "restored")
    restore_snapshot(tmp_path / "snapshot", restored)
    assert restored.cpu_load.settings is None and restored.cpu_load.workers == 0
