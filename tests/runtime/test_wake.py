"""Park and wake through the router, state that survives, crashes, capacity, and clean stops."""

import asyncio
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import aiohttp
import grpc
import polars as pl
import psutil
import pytest
import requests

from substrate_assets.protos import glutton_pb2 as g
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
from tests.runtime.conftest import ATESPACE, Control, Router, rpc_error
from tests.support.waiting import GENEROUS_S, wait_until

MI = 1 << 20


def restores_of(runtime, name):
    return [e for e in runtime.event_log() if e.kind == "restore" and e.actor == name]


def test_ten_concurrent_first_requests_cause_one_restore(control, router, runtime):
    name = control.new_actor()
    with ThreadPoolExecutor(10) as pool:
        results = list(pool.map(lambda i: router.post(name, "/ping", g.PingRequest(message=str(i))), range(10)))
    assert [status for status, _ in results] == [200] * 10
    assert sorted(g.PingResponse.FromString(body).message for _, body in results) == sorted(map(str, range(10)))
    assert len(restores_of(runtime, name)) == 1
    control.suspend(name)
    with ThreadPoolExecutor(10) as pool:
        statuses = list(pool.map(lambda i: router.post(name, "/ping", g.PingRequest())[0], range(10)))
    assert statuses == [200] * 10
    assert len(restores_of(runtime, name)) == 2
    control.delete(name, any_state=True)


def _checksums(router, name):
    return {key: g.ReadRAMResponse.FromString(router.post(name, "/readram", g.ReadRAMRequest(key=key))[1]).checksum
            for key in ("a", "b", "c")}


def test_ram_files_and_rotate_cursors_survive_suspend_and_pause(control, router, runtime):
    name = control.new_actor()
    for key in ("a", "b", "c"):
        assert router.post(name, "/writeram", g.WriteRAMRequest(key=key, size="256Ki"))[0] == 200
        assert router.post(name, "/writeram", g.WriteRAMRequest(
            key=key, size="128Ki", write_mode=g.WRITE_MODE_OVERWRITE_ROTATE))[0] == 200
    written = g.WriteDiskResponse.FromString(router.post(name, "/writedisk", g.WriteDiskRequest(key="f", size=MI))[1])
    before = _checksums(router, name)

    control.suspend(name)
    manifest = (runtime.snapshot_path(ATESPACE, name) / "manifest.json").read_text()
    assert '"cursor": 131072' in manifest
    assert _checksums(router, name) == before  # woken by the first request
    digest = g.ReadDiskResponse.FromString(router.post(name, "/readdisk", g.ReadDiskRequest(
        key="f", read_mode=g.READ_MODE_DIGEST_ONLY))[1])
    assert (digest.size, digest.sha256) == (written.size, written.sha256)

    control.pause(name)
    assert _checksums(router, name) == before
    assert any(e.kind == "unpause" and e.actor == name for e in runtime.event_log())

    # The cursor survived: a second half-turn rotates the back half and leaves the front half as it was.
    front = {key: g.ReadRAMResponse.FromString(router.post(name, "/readram", g.ReadRAMRequest(
        key=key, size="128Ki"))[1]).checksum for key in ("a", "b", "c")}
    control.suspend(name)
    for key in ("a", "b", "c"):
        router.post(name, "/writeram", g.WriteRAMRequest(key=key, size="128Ki",
                                                         write_mode=g.WRITE_MODE_OVERWRITE_ROTATE))
    after_front = {key: g.ReadRAMResponse.FromString(router.post(name, "/readram", g.ReadRAMRequest(
        key=key, size="128Ki"))[1]).checksum for key in ("a", "b", "c")}
    assert after_front == front
    control.delete(name, any_state=True)


def test_router_refuses_what_it_cannot_route(control, router):
    assert router.post(None, "/ping", g.PingRequest())[0] == 404
    assert router.post("no-such-actor", "/ping", g.PingRequest())[0] == 404
    status, body = router.post(None, "/ping", g.PingRequest(), headers={"ate-target-actor": "not a ref"})
    assert status == 404 and b"malformed" in body
    name = control.new_actor()
    assert router.post(name, "/nope", g.PingRequest())[0] == 404  # the actor's own 404, after a wake
    assert router.post(name, "/readdisk", g.ReadDiskRequest(key="missing"))[0] == 404
    control.delete(name, any_state=True)


def test_router_holds_200_parked_requests(control, runtime):
    name = control.new_actor()
    hold = asyncio.Event()

    async def hold_actor() -> None:
        record = runtime.lifecycle.actor(ATESPACE, name)
        async with record.lock:  # stands in for a slow restore: every request must park
            await hold.wait()

    holder = asyncio.run_coroutine_threadsafe(hold_actor(), runtime._loop)

    async def burst() -> list[int]:
        headers = {"ate-target-actor": f"{ATESPACE}/{name}", "Content-Type": "application/x-protobuf"}
        body = g.PingRequest(message="x").SerializeToString()
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as session:
            async def one() -> int:
                async with session.post(f"{runtime.router_url}/ping", data=body, headers=headers) as response:
                    await response.read()
                    return response.status

            tasks = [asyncio.create_task(one()) for _ in range(220)]
            # Every request parked before the actor is let go, however long they take to arrive; within the
            # router's own deadline (30 s), which would otherwise answer the first ones 504.
            deadline = time.monotonic() + 20
            while (parked := runtime.snapshot_state()["parked"]) < 220 and time.monotonic() < deadline:
                await asyncio.sleep(0.02)
            runtime._loop.call_soon_threadsafe(hold.set)
            return parked, await asyncio.gather(*tasks)

    parked, statuses = asyncio.run(burst())
    holder.result(GENEROUS_S)
    assert parked == 220
    assert statuses == [200] * 220
    assert runtime.snapshot_state()["parked_peak"] >= 200
    assert len(restores_of(runtime, name)) == 1
    control.delete(name, any_state=True)


def test_router_deadline_is_504():
    with EmbeddedRuntime(RuntimeConfig(workers=1, actors_per_worker=1, warm_hosts=0, router_timeout_s=0.5)) as rt:
        control, router = Control(rt), Router(rt)
        name = control.new_actor()
        # Woken through the control API, which the router's deadline does not cover: a cold start can take
        # longer than 0.5 s on a busy machine. The burn cannot answer before its 1.5 s are up.
        assert control.resume(name).resumed
        status, body = router.post(name, "/burncpu", g.BurnCPURequest(duration_ms=1500))
        assert status == 504 and b"deadline" in body and b"answered" in body


def test_capacity_exhaustion_is_503_and_resource_exhausted():
    with EmbeddedRuntime(RuntimeConfig(workers=1, actors_per_worker=1, warm_hosts=1)) as rt:
        control, router = Control(rt), Router(rt)
        first, second = control.new_actor(), control.new_actor()
        assert router.post(first, "/ping", g.PingRequest())[0] == 200
        status, body = router.post(second, "/ping", g.PingRequest())
        assert (status, body) == (503, b"no free workers available")
        error = rpc_error(lambda: control.resume(second))
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED and "no free workers available" in error.details()
        assert rt.snapshot_state()["workers"] == {"idle": 0, "partial": 0, "at_capacity": 1}
        control.suspend(first)
        assert router.post(second, "/ping", g.PingRequest())[0] == 200


def test_memory_limit_crash_stays_crashed_until_deleted():
    with EmbeddedRuntime(RuntimeConfig(workers=2, actors_per_worker=1, warm_hosts=1, actor_memory="8Mi")) as rt:
        control, router = Control(rt), Router(rt)
        name = control.new_actor()
        assert router.post(name, "/writeram", g.WriteRAMRequest(key="a", size="4Mi"))[0] == 200
        status, _ = router.post(name, "/writedisk", g.WriteDiskRequest(key="f", size=5 * MI))
        assert status == 502
        wait_until(lambda: control.state(name) == "ACTOR_STATE_CRASHED", f"{name} to be CRASHED")
        [crash] = [e for e in rt.event_log() if e.kind == "crash"]
        assert "memory limit" in crash.detail and str(9 * MI) in crash.detail
        error = rpc_error(lambda: control.resume(name))
        assert error.code() == grpc.StatusCode.ABORTED and "crashed" in error.details()
        assert router.post(name, "/ping", g.PingRequest())[0] == 502
        assert rpc_error(lambda: control.pause(name)).code() == grpc.StatusCode.FAILED_PRECONDITION
        assert rpc_error(lambda: control.suspend(name)).code() == grpc.StatusCode.FAILED_PRECONDITION
        assert control.state(name) == "ACTOR_STATE_CRASHED"
        assert rt.snapshot_state()["running_actors"] == 0  # the crash freed its worker
        control.delete(name)  # a CRASHED actor is deletable without any_state
        assert rpc_error(lambda: control.state(name)).code() == grpc.StatusCode.NOT_FOUND


def test_kill_9_marks_one_actor_crashed_while_others_serve(control, router, runtime):
    victim, survivor = control.new_actor(), control.new_actor()
    for name in (victim, survivor):
        assert router.post(name, "/ping", g.PingRequest())[0] == 200

    async def pid() -> int:
        return runtime.lifecycle.actor(ATESPACE, victim).host.pid

    os.kill(runtime.call(pid()), signal.SIGKILL)
    wait_until(lambda: control.state(victim) == "ACTOR_STATE_CRASHED", f"{victim} to be CRASHED")
    assert [e.detail for e in runtime.event_log() if e.kind == "crash" and e.actor == victim] == ["killed by SIGKILL"]
    assert router.post(survivor, "/ping", g.PingRequest())[0] == 200
    assert control.state(survivor) == "ACTOR_STATE_RUNNING"
    control.delete(victim)
    control.delete(survivor, any_state=True)


def test_metrics_under_upstream_names_and_events_as_parquet(control, router, runtime, tmp_path):
    name = control.new_actor()
    router.post(name, "/writeram", g.WriteRAMRequest(key="a", size="1Mi"))
    control.suspend(name)
    router.post(name, "/ping", g.PingRequest())
    text = requests.get(runtime.metrics_url, timeout=10).text
    for series in ('ate_workerpool_workers{ate_worker_state="idle",ate_workerpool_name="benchmark-ateom"}',
                   'atelet_snapshot_size_bytes_count{file_name="pages.img"}',
                   'rpc_server_call_duration_seconds_count{rpc_method="atelet.AteomHerder/Restore"}',
                   'rpc_server_call_duration_seconds_count{rpc_method="atelet.AteomHerder/Checkpoint"}',
                   'ate_actor_checkpoint_duration_seconds_bucket{ate_snapshot_phase="total",le="60.0"}',
                   'ate_actor_restore_duration_seconds_sum{ate_snapshot_phase="total"}'):
        assert series in text, series
    frame = runtime.events_frame()
    mine = frame.filter(pl.col("actor") == name)
    assert mine["kind"].to_list() == ["restore", "checkpoint", "restore"]
    assert mine["bytes"].to_list()[1] == MI and mine["detail"].to_list()[0] == "boot"
    assert frame.schema["start_ts"] == pl.Float64 and (mine["duration_s"] > 0).all()
    assert requests.get(runtime.metrics_url.replace("/metrics", "/state"), timeout=10).json()["workers"]
    control.delete(name, any_state=True)


def test_stopping_leaves_no_process_and_no_state(tmp_path):
    me = psutil.Process()
    before = {p.pid for p in me.children(recursive=True)}
    rt = EmbeddedRuntime(RuntimeConfig(workers=2, actors_per_worker=2, warm_hosts=2))
    rt.start()
    control, router = Control(rt), Router(rt)
    names = [control.new_actor() for _ in range(3)]
    for name in names:
        router.post(name, "/ping", g.PingRequest())
    control.pause(names[0])
    control.suspend(names[1])
    hosts = {p.pid for p in me.children(recursive=True)} - before
    assert len(hosts) >= 3
    state_dir, live_dir = rt.state_dir, rt.live_dir
    assert state_dir.exists() and live_dir.exists()
    rt.stop()
    assert not state_dir.exists() and not live_dir.exists()
    leftover = [pid for pid in hosts if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert leftover == []


def test_kept_state_survives_stop(tmp_path):
    with EmbeddedRuntime(RuntimeConfig(state_dir=tmp_path / "state", keep_state=True, warm_hosts=0)) as rt:
        control, router = Control(rt), Router(rt)
        name = control.new_actor()
        router.post(name, "/ping", g.PingRequest())
        control.suspend(name)
    assert list((tmp_path / "state" / "snapshots" / ATESPACE / name).glob("*/manifest.json"))


def test_runtime_command_runs_in_the_foreground_and_stops_on_sigterm(tmp_path):
    command = [str(os.path.join(os.path.dirname(sys.executable), "substrate-bench")), "runtime", "--workers", "2",
               "--state-dir", str(tmp_path / "state")]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        lines = [process.stdout.readline() for _ in range(4)]
        assert lines[0].startswith("control  127.0.0.1:")
        assert lines[1].startswith("router   http://127.0.0.1:")
        assert lines[2].startswith("metrics  http://127.0.0.1:")
        metrics_url = lines[2].split()[1]
        assert "ate_workerpool_workers" in requests.get(metrics_url, timeout=10).text
        children = psutil.Process(process.pid).children(recursive=True)
        assert children  # the warm hosts
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        _, alive = psutil.wait_procs(children, timeout=10)
        assert not alive
        assert not (tmp_path / "state").exists()
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.parametrize("flag", ["--actor-memory=lots", "--workers=0"])
def test_runtime_command_rejects_bad_options(flag):
    command = [str(os.path.join(os.path.dirname(sys.executable), "substrate-bench")), "runtime", flag]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2


def test_an_injected_wake_delay_holds_every_resume_that_long():
    """``inject_wake_delay_ms`` answers the first request after a restore or an unpause no sooner than the delay
    after it arrived (a lower bound: the sleep guarantees it whatever the machine does); a request to a running actor
    resumes nothing and waits for nothing injected."""
    delay_ms = 400
    with EmbeddedRuntime(RuntimeConfig(workers=1, actors_per_worker=1, warm_hosts=1,
                                       inject_wake_delay_ms=delay_ms)) as rt:
        control, router = Control(rt), Router(rt)
        name = control.new_actor()
        for park in (control.suspend, control.pause):
            assert router.post(name, "/ping", g.PingRequest())[0] == 200
            park(name)
            started = time.perf_counter()
            assert router.post(name, "/ping", g.PingRequest())[0] == 200
            assert time.perf_counter() - started >= delay_ms / 1000
        assert router.post(name, "/ping", g.PingRequest())[0] == 200  # already running: nothing to resume
        restores = [event for event in rt.event_log() if event.kind in ("restore", "unpause")]
        assert [event.kind for event in restores] == ["restore", "restore", "unpause"]
        control.delete(name, any_state=True)
