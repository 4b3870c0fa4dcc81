"""The glutton virtual user against a real embedded runtime: its cycles, its rows, its crashes and replacements."""

import random

import grpc
import pytest

from substrate_assets.driver.clients import ControlClient, RouterClient
from substrate_assets.driver.users.glutton import MAX_PING_GAP_S, MIN_PING_GAP_S, GluttonVU
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.driver.users.session import CRASHED_MESSAGE
from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import glutton_pb2 as g
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
from tests.driver.conftest import Rows
from tests.support.driver_doubles import FakeTime, Status, assert_gone
from tests.support.waiting import wait_until

MiB = 1 << 20
CYCLE = ["ResumeActor", "GluttonReadRAM", "GluttonChurnRAM"]


@pytest.fixture(scope="module")
def runtime():
    with EmbeddedRuntime(RuntimeConfig(workers=2, actors_per_worker=2, warm_hosts=1, actor_memory="64Mi")) as rt:
        yield rt


class FaultyControl:
    """The real control client, except that the listed calls of one method fail with the given statuses first."""

    def __init__(self, runtime, method: str, failures: dict[int, grpc.StatusCode]) -> None:
        self.inner = ControlClient(runtime.control_address)
        self.method, self.failures, self.calls = method, failures, 0
        setattr(self, method, self._faulty)

    def _faulty(self, *args, **kwargs):
        self.calls += 1
        code = self.failures.get(self.calls)
        if code is not None:
            raise Status(code, f"injected {code.name} on {self.method} call {self.calls}")
        return getattr(self.inner, self.method)(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


def make_glutton(runtime, rows, *, control=None, time=None, sleep=None, **knobs) -> GluttonVU:
    extra = {"clock": time.clock} if time else {}
    return GluttonVU(control or ControlClient(runtime.control_address), RouterClient(runtime.router_url),
                     WorkerKnobs(**knobs), rows, sleep=sleep or (time.sleep if time else (lambda s: None)),
                     rng=random.Random(5), **extra)


def state(runtime, actor: str) -> str:
    return pb.ActorState.Name(ControlClient(runtime.control_address).get_actor("benchmark", actor).status.state)


def wakes(rows: Rows) -> list[list]:
    """The rows of each cycle, from its resume to its hibernate."""
    cycles: list[list] = []
    for row in rows.rows:
        if row.name.startswith("ResumeActor"):
            cycles.append([])
        if cycles:
            cycles[-1].append(row)
    return cycles


def test_two_actors_round_robin_with_every_load(runtime):
    rows, fake = Rows(), FakeTime()
    iterations = 6
    vu = make_glutton(runtime, rows, time=fake, actors_per_user=2, mem_target="8Mi", mem_read="all",
                      mem_churn="1Mi", cpu_cores=1, cpu_duty_cycle=0.05, max_pings_per_wake=3, min_live_time=1.5,
                      max_live_time=1.5, min_wait_time=0.1, max_wait_time=0.3)
    waits_at: list[int] = []
    for _ in range(iterations):
        vu.iterate()
        waits_at.append(len(fake.sleeps))
    assert all(row.ok for row in rows.rows), [(row.name, row.error) for row in rows.rows if not row.ok]
    assert all(set(row.context) == {"session_id", "wake", "response_length", "lap"} for row in rows.rows)
    first, second = (actor.name for actor in vu.actors)
    assert first.startswith("sb-") and len(first) == len("sb-") + 36 and first != second
    names = rows.names()
    assert names[:3] == ["CreateAtespace", "CreateActor", "CreateActor"]
    assert rows.rows[0].context["session_id"] is None
    assert [row.context["session_id"] for row in rows.rows[1:3]] == [first, second]

    count = names.count
    assert count("ResumeActorFirstResume") == 2 and count("ResumeActor") == iterations - 2
    assert count("SuspendActor") == iterations and count("PauseActor") == 0
    assert count("GluttonReadRAM") == count("GluttonChurnRAM") == iterations
    fills = [row.context["session_id"] for row in rows.rows if row.name == "GluttonFillRAM"]
    cpus = [row.context["session_id"] for row in rows.rows if row.name == "GluttonUseCPU"]
    assert fills == cpus == [first, second]  # once per actor, on its first cycle

    cycles = wakes(rows)
    assert len(cycles) == iterations
    for index, cycle in enumerate(cycles):
        actor = first if index % 2 == 0 else second
        assert {row.context["session_id"] for row in cycle} == {actor}, index  # round robin
        assert {row.context["lap"] for row in cycle} == {index // 2 + 1}, index
        pings = [row for row in cycle if row.name == "GluttonPing"]
        loads = (["GluttonFillRAM", "GluttonUseCPU"] if index < 2 else [])
        resume = "ResumeActorFirstResume" if index < 2 else "ResumeActor"
        assert [row.name for row in cycle] == [resume, *loads, *CYCLE[1:], *["GluttonPing"] * len(pings),
                                               "SuspendActor"], index
        assert 1 <= len(pings) <= 3, index
        assert [row.context["wake"] for row in pings] == [True] + [False] * (len(pings) - 1)
        assert all(36 < row.context["response_length"] < 60 for row in pings)
    assert [row.context["wake"] for row in rows.rows].count(True) == iterations  # one wake per resume
    assert {row.context["response_length"] for row in rows.rows if row.name == "GluttonReadRAM"} == {8 * MiB}
    assert {row.context["response_length"] for row in rows.rows
            if row.name not in ("GluttonPing", "GluttonReadRAM")} == {0}
    assert max(len([r for r in cycle if r.name == "GluttonPing"]) for cycle in cycles) > 1

    # Each iteration: the gaps between its pings, the rest of its 1.5 s window, then one wait in U[0.1, 0.3].
    start = 0
    for cycle, end in zip(cycles, waits_at, strict=True):
        sleeps = fake.sleeps[start:end]
        gaps, rest, wait = sleeps[:-2], sleeps[-2], sleeps[-1]
        pings = sum(row.name == "GluttonPing" for row in cycle)
        assert len(gaps) == pings - 1 and all(MIN_PING_GAP_S <= gap < MAX_PING_GAP_S for gap in gaps)
        assert sum(gaps) + rest == pytest.approx(1.5, abs=1e-5) and rest >= 0
        assert 0.1 <= wait <= 0.3
        start = end
    assert state(runtime, first) == state(runtime, second) == "ACTOR_STATE_SUSPENDED"

    rows.clear()
    vu.stop()
    assert rows.names() == ["DeleteActor", "DeleteActor"] and all(row.ok for row in rows.rows)
    assert [row.context["session_id"] for row in rows.rows] == [first, second]
    assert_gone(runtime, first)
    assert_gone(runtime, second)


def test_pause_mode_parks_with_pause_actor(runtime):
    rows = Rows()
    vu = make_glutton(runtime, rows, lifecycle_mode="pause", max_pings_per_wake=0)
    for _ in range(3):
        vu.iterate()
    assert rows.names() == ["CreateAtespace", "CreateActor", "ResumeActorFirstResume", "GluttonPing", "PauseActor",
                            "ResumeActor", "GluttonPing", "PauseActor", "ResumeActor", "GluttonPing", "PauseActor"]
    assert all(row.ok for row in rows.rows), [(row.name, row.error) for row in rows.rows if not row.ok]
    actor = vu.actors[0].name
    assert state(runtime, actor) == "ACTOR_STATE_PAUSED"
    rows.clear()
    vu.stop()
    assert rows.names() == ["DeleteActor"] and rows.rows[0].ok
    assert_gone(runtime, actor)


class Interrupted(BaseException):
    """What Locust's kill of a user's greenlet is to the iteration it interrupts."""


def test_stop_parks_an_actor_left_running_then_deletes_it(runtime):
    rows, fake = Rows(), FakeTime()

    def sleep(seconds: float) -> None:
        fake.sleep(seconds)
        raise Interrupted

    vu = make_glutton(runtime, rows, time=fake, sleep=sleep, min_live_time=2.0, max_live_time=2.0)
    with pytest.raises(Interrupted):
        vu.iterate()
    assert rows.names() == ["CreateAtespace", "CreateActor", "ResumeActorFirstResume", "GluttonPing"]
    assert fake.sleeps == [2.0]  # interrupted in its live window: no wait after it
    actor = vu.actors[0].name
    assert state(runtime, actor) == "ACTOR_STATE_RUNNING"
    rows.clear()
    vu.stop()
    assert rows.names() == ["SuspendActor", "DeleteActor"] and all(row.ok for row in rows.rows)
    assert_gone(runtime, actor)


def test_a_crash_between_wakes_is_counted_and_the_actor_replaced(runtime):
    rows = Rows()
    vu = make_glutton(runtime, rows)
    vu.iterate()
    crashed = vu.actors[0].name
    assert rows.names() == ["CreateAtespace", "CreateActor", "ResumeActorFirstResume", "GluttonPing",
                            "SuspendActor"]
    # RAM above the actor's 64 MiB limit, sent to the parked actor (the router wakes it): the kernel's answer.
    with pytest.raises(Exception):  # noqa: B017 - the router's error for a host that died mid-request
        RouterClient(runtime.router_url).post(f"benchmark/{crashed}", "/writeram", g.WriteRAMRequest(
            key="balloon", size="96Mi", write_mode=g.WRITE_MODE_TRUNCATE).SerializeToString())
    wait_until(lambda: state(runtime, crashed) == "ACTOR_STATE_CRASHED", f"{crashed} to be CRASHED")

    rows.clear()
    vu.iterate()
    assert rows.names() == ["ResumeActor", "CrashCount", "DeleteActor", "CreateActor"]
    resume, crash, delete, create = rows.rows
    assert resume.error.code() == grpc.StatusCode.ABORTED and "crashed" in resume.error.details()
    assert (crash.request_type, crash.elapsed_s, str(crash.error)) == ("actor", 0.0, CRASHED_MESSAGE)
    assert delete.ok and create.ok
    assert {row.context["session_id"] for row in (resume, crash, delete)} == {crashed}
    replacement = vu.actors[0].name
    assert create.context["session_id"] == replacement != crashed and len(vu.actors) == 1
    assert_gone(runtime, crashed)

    rows.clear()
    vu.iterate()  # the new actor in the same slot starts its own life
    assert rows.names() == ["ResumeActorFirstResume", "GluttonPing", "SuspendActor"]
    assert all(row.ok and row.context["session_id"] == replacement for row in rows.rows)
    vu.stop()
    assert_gone(runtime, replacement)


def test_a_fill_above_the_limit_crashes_the_actor_and_its_hibernate_replaces_it(runtime):
    """Upstream's order: the fill kills the actor, the wake ping fails, the hibernate finds it crashed (replace
    now). No resume saw the crash, so no CrashCount."""
    rows, fake = Rows(), FakeTime()

    def sleep(seconds: float) -> None:
        fake.sleep(seconds)
        if len(fake.sleeps) == 1:  # the live window outlasts the runtime's notice of the host's death
            filled = vu.actors[0].name
            wait_until(lambda: state(runtime, filled) == "ACTOR_STATE_CRASHED", f"{filled} to crash")

    vu = make_glutton(runtime, rows, time=fake, sleep=sleep, mem_target="96Mi", mem_read="all", mem_churn="1Mi",
                      min_live_time=0.5, max_live_time=0.5)
    vu.iterate()
    assert fake.sleeps[0] == 0.5
    names = rows.names()
    assert names == ["CreateAtespace", "CreateActor", "ResumeActorFirstResume", "GluttonFillRAM", "GluttonPing",
                     "SuspendActor", "DeleteActor", "CreateActor"]
    by_name = dict(zip(names, rows.rows, strict=False))
    assert "WriteRAM memload (96Mi)" in str(by_name["GluttonFillRAM"].error)
    assert not by_name["GluttonPing"].ok and by_name["GluttonPing"].context["wake"]
    suspend = by_name["SuspendActor"].error
    assert suspend.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "crashed" in suspend.details()
    crashed = rows.rows[1].context["session_id"]
    assert rows.rows[6].ok and rows.rows[6].context["session_id"] == crashed
    assert rows.rows[7].ok and rows.rows[7].context["session_id"] == vu.actors[0].name != crashed
    assert_gone(runtime, crashed)
    vu.stop()


def test_hibernate_failures_pend_and_three_persistent_ones_replace_the_actor(runtime):
    rows = Rows()
    control = FaultyControl(runtime, "suspend", {1: grpc.StatusCode.UNAVAILABLE, 2: grpc.StatusCode.INTERNAL,
                                                 3: grpc.StatusCode.INTERNAL, 4: grpc.StatusCode.INTERNAL})
    vu = make_glutton(runtime, rows, control=control)
    vu.iterate()
    stuck = vu.actors[0].name
    assert rows.names()[2:] == ["ResumeActorFirstResume", "GluttonPing", "SuspendActor"]
    assert not rows.rows[-1].ok and vu.actors[0].hibernate_pending
    assert vu.actors[0].consecutive_failures == 0  # UNAVAILABLE: retry later, not counted
    rows.clear()
    vu.iterate()
    vu.iterate()
    assert rows.names() == ["SuspendActor", "SuspendActor"]  # only the hibernate, again
    assert vu.actors[0].consecutive_failures == 2 and vu.actors[0].name == stuck
    rows.clear()
    vu.iterate()
    assert rows.names() == ["SuspendActor", "DeleteActor", "CreateActor"]
    assert [row.ok for row in rows.rows] == [False, True, True]
    assert rows.rows[1].context["session_id"] == stuck  # deleted in any state: it was still RUNNING
    assert_gone(runtime, stuck)
    rows.clear()
    vu.iterate()
    assert rows.names() == ["ResumeActorFirstResume", "GluttonPing", "SuspendActor"]
    assert all(row.ok for row in rows.rows)
    vu.stop()


def test_a_start_keeps_the_actors_it_could_create(runtime):
    rows = Rows()
    control = FaultyControl(runtime, "create_actor", {1: grpc.StatusCode.RESOURCE_EXHAUSTED,
                                                      3: grpc.StatusCode.RESOURCE_EXHAUSTED})
    vu = make_glutton(runtime, rows, control=control, actors_per_user=2)
    vu.iterate()  # no actor at all: the next iteration starts over
    assert rows.names() == ["CreateAtespace", "CreateActor"] and not rows.rows[1].ok and vu.actors is None
    rows.clear()
    vu.iterate()  # the second actor fails: the VU goes on with one
    assert rows.names() == ["CreateAtespace", "CreateActor", "CreateActor", "ResumeActorFirstResume",
                            "GluttonPing", "SuspendActor"]
    assert [row.ok for row in rows.rows] == [True, True, False, True, True, True]  # AlreadyExists is success
    assert len(vu.actors) == 1
    rows.clear()
    vu.iterate()
    assert rows.names() == ["ResumeActor", "GluttonPing", "SuspendActor"]
    vu.stop()
