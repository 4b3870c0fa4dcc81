"""The agent-session state machine against a real embedded runtime, row by row."""

import contextlib
import os
import signal
from collections.abc import Iterator

import grpc
import pytest

from substrate_assets.driver.clients import ControlClient
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.driver.users.session import CRASHED_MESSAGE, TemplateCheck
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig, TemplateConfig
from tests.driver.conftest import Rows, make_vu, write_script
from tests.support.faults import FailingRouter
from tests.support.waiting import wait_until

SIMPLE = """\
name: test-session
min_actor_memory: 64Mi
steps:
  - name: 01_fill
    agent: fills
    think: 10s
    ops:
      - fill_ram: {key: ctx, size: 1Mi}
      - ingest: {key: repo, size: 256Ki}
  - name: 02_read
    agent: reads
    think: 1s
    ops:
      - read_disk_digest: {key: repo}
      - walk_ram: {key: ctx}
      - churn_ram: {key: ctx, size: 64Ki}
      - read_disk_data: {key: repo}
      - write_disk: {key: out, size: 64Ki}
      - burn_cpu: {millis: 20, parallel: 2}
      - ping: {}
"""


def wakes_followed_wake_ups(rows: Rows, runtime: EmbeddedRuntime, actor: str, kinds=("restore",)) -> None:
    """Every successful WakeFirstTouch came after a restore/unpause of its actor that began after the last park."""
    events = [e for e in runtime.event_log() if e.actor == actor and e.kind in kinds and e.detail != "boot"]
    parked_at = 0.0
    for row in rows.rows:
        if row.context.get("session_id") != actor:
            continue
        if row.name in ("SuspendActor", "PauseActor") and row.ok:
            parked_at = row.started + row.elapsed_s
        if row.name == "WakeFirstTouch" and row.ok:
            end = row.started + row.elapsed_s
            assert any(parked_at - 0.001 <= e.start_ts <= end for e in events), (row, parked_at)


def test_think_time_is_scaled_and_jittered(tmp_path, runtime, rows):
    scripts = write_script(tmp_path, SIMPLE)
    step = scripts.load().script.steps[0]  # think 10s
    half = make_vu(runtime, scripts, rows, think_scale=0.5)
    assert all(4.0 <= half.think_seconds(step) <= 6.0 for _ in range(500))
    unset = make_vu(runtime, scripts, rows, think_scale=0)
    samples = [unset.think_seconds(step) for _ in range(500)]
    assert all(8.0 <= s <= 12.0 for s in samples) and max(samples) - min(samples) > 3
    with pytest.raises(ValueError):
        WorkerKnobs(think_scale=-1)


def test_a_session_books_the_reference_rows(tmp_path, runtime, rows):
    vu = make_vu(runtime, write_script(tmp_path, SIMPLE), rows)
    vu.iterate()
    assert rows.names() == ["CreateAtespace", "CreateActor", "SuspendActor", "WakeFirstTouch", "Step_01_fill",
                            "SuspendActor"]
    assert [row.request_type for row in rows.rows] == ["grpc", "grpc", "grpc", "http", "http", "grpc"]
    assert all(row.ok for row in rows.rows)
    actor = vu.session.actor
    assert actor.startswith("agent-") and len(actor) == len("agent-") + 36
    vu.iterate()
    assert rows.names()[-3:] == ["WakeFirstTouch", "Step_02_read", "SuspendActor"]
    assert (vu.session.step_index, vu.session.lap, vu.session.steps_completed) == (0, 1, 2)
    step_row = rows.rows[-2]
    assert step_row.context == {"session_id": actor, "step": "02_read", "step_index": 1, "lap": 0, "wake": False}
    assert [row.context["wake"] for row in rows.rows[-3:]] == [True, False, False]  # WakeFirstTouch is the wake
    wakes_followed_wake_ups(rows, runtime, actor)
    vu.stop()
    assert rows.names()[-1] == "DeleteActor" and rows.rows[-1].ok
    assert vu.session is None
    control = ControlClient(runtime.control_address)
    with pytest.raises(grpc.RpcError) as caught:
        control.get_actor("benchmark", actor)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


def test_explicit_resume_books_resume_actor(tmp_path, runtime, rows):
    vu = make_vu(runtime, write_script(tmp_path, SIMPLE), rows, resume_mode="explicit")
    vu.iterate()
    vu.iterate()
    assert rows.names()[2:] == ["SuspendActor", "ResumeActor", "WakeFirstTouch", "Step_01_fill", "SuspendActor",
                                "ResumeActor", "WakeFirstTouch", "Step_02_read", "SuspendActor"]
    wakes_followed_wake_ups(rows, runtime, vu.session.actor)
    vu.stop()


def test_pause_mode_parks_with_pause_actor_and_wakes_by_unpause(tmp_path, runtime, rows):
    vu = make_vu(runtime, write_script(tmp_path, SIMPLE), rows, lifecycle_mode="pause")
    vu.iterate()
    vu.iterate()
    assert rows.names()[2:] == ["PauseActor", "WakeFirstTouch", "Step_01_fill", "PauseActor", "WakeFirstTouch",
                                "Step_02_read", "PauseActor"]
    actor = vu.session.actor
    wakes_followed_wake_ups(rows, runtime, actor, kinds=("unpause",))
    assert not [e for e in runtime.event_log() if e.actor == actor and e.kind == "checkpoint"]
    vu.stop()  # teardown always suspends, then deletes
    assert [e.kind for e in runtime.event_log() if e.actor == actor][-1] == "checkpoint"


def test_404_replaces_the_session_at_once(tmp_path, runtime, rows):
    vu = make_vu(runtime, write_script(tmp_path, SIMPLE), rows)
    vu.iterate()
    first = vu.session.actor
    ControlClient(runtime.control_address).delete("benchmark", first, any_state=True)
    rows.clear()
    vu.iterate()
    wake = rows.rows[0]
    assert (wake.name, wake.ok, getattr(wake.error, "status", None)) == ("WakeFirstTouch", False, 404)
    assert vu.session is None  # broken after one failure and torn down
    assert rows.names()[-1] == "DeleteActor" and not rows.rows[-1].ok
    vu.iterate()
    assert "CreateActor" in rows.names() and vu.session.actor != first
    vu.stop()


def test_503_keeps_the_session(tmp_path):
    with EmbeddedRuntime(RuntimeConfig(workers=1, actors_per_worker=1, warm_hosts=1)) as runtime:
        rows = Rows()
        vu = make_vu(runtime, write_script(tmp_path, SIMPLE), rows)
        vu.iterate()
        control = ControlClient(runtime.control_address)
        control.create_actor("benchmark", "occupant")
        control.resume("benchmark", "occupant")  # the only worker slot is taken
        rows.clear()
        vu.iterate()
        wake = rows.rows[0]
        assert (wake.name, wake.ok, wake.error.status) == ("WakeFirstTouch", False, 503)
        assert rows.names() == ["WakeFirstTouch", "SuspendActor"]
        assert vu.session is not None and not vu.session.broken and vu.session.consecutive_failures == 0
        assert vu.session.step_index == 1  # the failed step is retried
        control.suspend("benchmark", "occupant")
        vu.iterate()
        assert rows.names()[-3:] == ["WakeFirstTouch", "Step_02_read", "SuspendActor"] and rows.rows[-2].ok
        vu.stop()


def test_three_persistent_failures_in_a_row_replace_the_session(tmp_path, runtime, rows):
    vu = make_vu(runtime, write_script(tmp_path, SIMPLE), rows)
    # Step 1's first op (fill_ram) times out on every attempt: a transport failure, which may persist. Every
    # other call, the wake probe's ping included, reaches the actor.
    vu.router = FailingRouter(vu.router, ["/writeram"])
    vu.iterate()  # start, then step 1 fails
    first = vu.session.actor
    assert vu.session.consecutive_failures == 1 and not vu.session.broken
    vu.iterate()
    assert vu.session.consecutive_failures == 2 and vu.session.actor == first
    vu.iterate()
    assert vu.session is None
    step_rows = [row for row in rows.rows if row.name == "Step_01_fill"]
    assert len(step_rows) == 3 and all(isinstance(row.error, TimeoutError) for row in step_rows)
    assert vu.router.failed == ["/writeram"] * 3
    assert all(row.ok for row in rows.rows if row.name == "WakeFirstTouch")  # wakes alone never reset the count
    assert rows.names()[-1] == "DeleteActor"


def test_a_whole_step_resets_the_count(tmp_path, runtime, rows):
    vu = make_vu(runtime, write_script(tmp_path, SIMPLE), rows)
    vu.iterate()
    vu.session.consecutive_failures = 2
    vu.iterate()
    assert vu.session.consecutive_failures == 0
    vu.stop()


@contextlib.contextmanager
def request_in_flight(runtime: EmbeddedRuntime, actor: str) -> Iterator[None]:
    """Another client's request that the router is forwarding to ``actor``, in flight until the block ends.

    A suspend waits for in-flight requests for at most the runtime's drain timeout, so while this is held a
    suspend of ``actor`` is refused however fast or slow the machine is.
    """
    async def begin():
        record = runtime.lifecycle.actor("benchmark", actor)
        record.begin_request()
        return record

    record = runtime.call(begin())

    async def end() -> None:
        record.end_request()

    try:
        yield
    finally:
        runtime.call(end())


def test_hibernate_pending_redrives_only_the_hibernate(tmp_path):
    with EmbeddedRuntime(RuntimeConfig(workers=2, actors_per_worker=2, warm_hosts=1, drain_timeout_s=0.3)) as rt:
        rows = Rows()
        vu = make_vu(rt, write_script(tmp_path, SIMPLE), rows)
        vu.iterate()
        actor = vu.session.actor
        ControlClient(rt.control_address).resume("benchmark", actor)  # awake, as another client's request finds it
        with request_in_flight(rt, actor):
            rows.clear()
            vu.iterate()  # the step succeeds; parking it times out on the other request
            assert rows.names() == ["WakeFirstTouch", "Step_02_read", "SuspendActor"]
            assert rows.rows[1].ok and not rows.rows[2].ok
            assert rows.rows[2].error.code() == grpc.StatusCode.ABORTED
            assert "requests in flight" in rows.rows[2].error.details()
            # A later hibernate failure does not undo the step's success: the session advanced (and lapped).
            assert vu.session.hibernate_pending and (vu.session.step_index, vu.session.lap) == (0, 1)
        rows.clear()
        vu.iterate()
        assert rows.names() == ["SuspendActor"] and rows.rows[0].ok  # no wake probe on an awake actor
        assert not vu.session.hibernate_pending and vu.session.step_index == 0
        vu.stop()


def test_a_crashed_actor_books_crash_count_in_explicit_mode(tmp_path, runtime, rows):
    vu = make_vu(runtime, write_script(tmp_path, SIMPLE), rows, resume_mode="explicit")
    vu.iterate()
    actor = vu.session.actor
    control = ControlClient(runtime.control_address)
    control.resume("benchmark", actor)

    async def host_pid() -> int:
        return runtime.lifecycle.actor("benchmark", actor).host.pid

    os.kill(runtime.call(host_pid()), signal.SIGKILL)
    wait_until(lambda: control.get_actor("benchmark", actor).status.state == 7, f"{actor} to be CRASHED")
    rows.clear()
    vu.iterate()
    assert rows.names() == ["ResumeActor", "CrashCount", "DeleteActor"]
    crash = rows.rows[1]
    assert (crash.request_type, crash.elapsed_s, str(crash.error)) == ("actor", 0.0, CRASHED_MESSAGE)
    assert "crashed" in rows.rows[0].error.details()
    assert vu.session is None and rows.rows[2].ok


def test_template_memory_check(tmp_path):
    with EmbeddedRuntime(RuntimeConfig(workers=1, actors_per_worker=1, warm_hosts=0, actor_memory="32Mi")) as rt:
        rows = Rows()
        now = [1000.0]
        scripts = write_script(tmp_path, SIMPLE)
        check = TemplateCheck(ControlClient(rt.control_address), clock=lambda: now[0])
        vu = make_vu(rt, scripts, rows, template_check=check)
        vu.iterate()
        assert rows.rows == [] and vu.session is None
        loaded = scripts.load()
        expiry, message = check.refused[loaded.sha256]
        assert expiry == 1030.0
        assert "memory limit 32Mi is below script test-session's min_actor_memory 64Mi" in message
        assert "redeploy the workloads with --actor-memory 64Mi" in message
        now[0] = 1031.0
        check.refused[loaded.sha256] = (1030.0, "stale")
        with pytest.raises(Exception, match="redeploy"):
            check.ensure(loaded)  # asked the template again after 30 s


def test_a_template_without_a_memory_limit_is_allowed(tmp_path):
    config = RuntimeConfig(workers=1, actors_per_worker=1, warm_hosts=0, templates=(TemplateConfig(memory_limit=None),))
    with EmbeddedRuntime(config) as rt:
        rows = Rows()
        vu = make_vu(rt, write_script(tmp_path, SIMPLE), rows)
        vu.iterate()
        assert vu.session is not None and rows.names()[:2] == ["CreateAtespace", "CreateActor"]
        vu.stop()


def test_an_invalid_script_starts_nothing(tmp_path, runtime, rows):
    vu = make_vu(runtime, write_script(tmp_path, SIMPLE.replace("think: 1s", "think: 1d")), rows)
    vu.iterate()
    assert rows.rows == [] and vu.session is None
