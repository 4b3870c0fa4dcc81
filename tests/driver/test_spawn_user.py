"""The spawn virtual user against a real embedded runtime: one batch, its deciles, its stop gate, its teardown."""

import contextlib
import random

import grpc
import pytest

from substrate_assets.driver.clients import TEMPLATE, ControlClient
from substrate_assets.driver.failures import is_crashed
from substrate_assets.driver.users.cohort import BACKOFF_JITTER_S, IDLE_S, Cancelled, spawn_crashed, spawn_terminal
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.driver.users.session import CRASHED_MESSAGE
from substrate_assets.driver.users.spawn import NO_ACTOR_READY, SpawnVU, fired_deciles
from substrate_assets.protos import ateapi_pb2 as pb
from substrate_assets.protos import glutton_pb2 as g
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
from tests.driver.conftest import Rows
from tests.support.driver_doubles import FakeTime, PerThreadRouter, Sleeps, Status, assert_gone
from tests.support.faults import FailingRouter
from tests.support.waiting import wait_until

DECILE_ROWS = [f"TimeToReady_{k}pct" for k in range(10, 101, 10)]


@pytest.fixture(scope="module")
def runtime():
    with EmbeddedRuntime(RuntimeConfig(workers=2, actors_per_worker=4, warm_hosts=1, actor_memory="64Mi")) as rt:
        yield rt


def make_spawn(runtime, record, *, control=None, router=None, sleep=None, clock=None, stopped=None,
               **knobs) -> SpawnVU:
    extra = {"clock": clock} if clock else {}
    if stopped is not None:
        extra["stopped"] = stopped
    return SpawnVU(control or ControlClient(runtime.control_address), router or PerThreadRouter(runtime),
                   WorkerKnobs(**knobs), record, sleep=sleep if sleep is not None else (lambda s: None),
                   rng=random.Random(3), **extra)


def state(runtime, actor: str) -> str:
    return pb.ActorState.Name(ControlClient(runtime.control_address).get_actor("benchmark", actor).status.state)


def test_fired_deciles_fire_each_decile_once_per_batch():
    assert fired_deciles(1, 1) == list(range(10, 101, 10))
    assert fired_deciles(1, 7) == [10] and fired_deciles(3, 7) == [30, 40] and fired_deciles(7, 7) == [90, 100]
    assert fired_deciles(1, 2) == [10, 20, 30, 40, 50] and fired_deciles(2, 2) == [60, 70, 80, 90, 100]
    assert fired_deciles(0, 7) == [] and fired_deciles(8, 7) == [] and fired_deciles(1, 0) == []
    for total in (1, 2, 3, 7, 10, 11, 99, 100, 250):
        fired = [k for rank in range(1, total + 1) for k in fired_deciles(rank, total)]
        assert sorted(fired) == list(range(10, 101, 10)), total


def test_terminal_codes_and_case_insensitive_crashes():
    crashed = Status(grpc.StatusCode.ABORTED, "actor benchmark/a is CRASHED")
    assert spawn_crashed(crashed) and spawn_terminal(crashed) and not is_crashed(crashed)
    assert not spawn_terminal(Status(grpc.StatusCode.ABORTED, "concurrent update conflict, please retry"))
    for code in (grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.INTERNAL,
                 grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.UNKNOWN):
        assert not spawn_terminal(Status(code, "x")), code
    for code in (grpc.StatusCode.NOT_FOUND, grpc.StatusCode.DATA_LOSS, grpc.StatusCode.ALREADY_EXISTS,
                 grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.INVALID_ARGUMENT,
                 grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNIMPLEMENTED):
        assert spawn_terminal(Status(code, "x")), code
    assert not spawn_terminal(ValueError("not a status"))


def test_a_batch_of_seven_with_three_workers(runtime):
    rows = Rows()
    vu = make_spawn(runtime, rows, total_actors=7, spawn_concurrency=3)
    vu.iterate()
    names = rows.names()
    assert all(row.ok for row in rows.rows), [row.error for row in rows.rows if not row.ok]
    assert names.count("CreateAtespace") == 1 and rows.rows[0].name == "CreateAtespace"
    assert names.count("CreateActor") >= 7 and names.count("ResumeActor") >= 7 and names.count("GluttonPing") >= 7
    assert sorted(n for n in names if n.startswith("TimeToReady_")) == sorted(DECILE_ROWS)
    assert names.count("ActorTimeToReady") == 7 and names.count("TimeToAllReady") == 1 and names[-1] == "TimeToAllReady"
    assert "CrashCount" not in names and "DeleteActor" not in names
    assert len(rows.rows) == 1 + 7 * 3 + 10 + 7 + 1  # nothing failed, so nothing was retried

    actors = [f"spawn-{vu.cohort_id}-{n}" for n in range(1, 8)]
    assert len(vu.cohort_id) == 8 and sorted(vu.actor_names) == sorted(actors)
    by_actor = {actor: [row.name for row in rows.rows if row.context["session_id"] == actor] for actor in actors}
    assert all(seen == ["CreateActor", "ResumeActor", "GluttonPing", "ActorTimeToReady"] for seen in by_actor.values())
    types = {row.name: row.request_type for row in rows.rows}
    assert (types["CreateActor"], types["ResumeActor"], types["GluttonPing"]) == ("grpc", "grpc", "http")
    assert {types[n] for n in [*DECILE_ROWS, "ActorTimeToReady", "TimeToAllReady"]} == {"summary"}
    assert all(row.context["wake"] is False and set(row.context) == {"session_id", "wake", "response_length"}
               for row in rows.rows)
    pings = [row for row in rows.rows if row.name == "GluttonPing"]
    assert all(row.context["response_length"] == len(g.PingResponse(message="x" * 36).SerializeToString())
               for row in pings)  # the uuid echoed back
    assert all(row.context["session_id"] is None for row in rows.rows if row.name.startswith("TimeTo"))

    deciles = [row.elapsed_s for row in rows.rows if row.name.startswith("TimeToReady_")]
    all_ready = rows.rows[-1].elapsed_s
    assert all_ready == max(deciles) > 0  # every rank of 7 fires a decile, so the latest ready is among them
    assert max(row.elapsed_s for row in rows.rows if row.name == "ActorTimeToReady") <= all_ready
    assert all(state(runtime, actor) == "ACTOR_STATE_RUNNING" for actor in actors)
    template = ControlClient(runtime.control_address).get_actor("benchmark", actors[0]).actor_template
    assert (template.atespace, template.name) == TEMPLATE

    # Later iterations have nothing to do but wait.
    sleeps = Sleeps()
    vu.sleep = sleeps
    before = len(rows.rows)
    vu.iterate()
    assert sleeps == [IDLE_S] and len(rows.rows) == before
    # The teardown's DeleteActor calls come after the stop, so none is booked; every actor is gone.
    vu.stop()
    assert len(rows.rows) == before
    assert_gone(runtime, *actors)


def test_no_rows_once_stopped(runtime):
    rows = Rows()
    flipped = []

    def record(*row) -> None:
        rows(*row)
        if rows.names().count("ActorTimeToReady") == 2 and not flipped:
            flipped.append(len(rows.rows))

    vu = make_spawn(runtime, record, stopped=lambda: bool(flipped), total_actors=6, spawn_concurrency=2)
    vu.iterate()
    # The row that flipped the switch is the last: the other worker's rows, and the batch's end, were dropped.
    assert flipped == [len(rows.rows)] and rows.rows[-1].name == "ActorTimeToReady"
    assert "TimeToAllReady" not in rows.names()
    names = list(vu.actor_names)
    assert 2 <= len(names) <= 4  # no worker took an actor after the stop
    vu.stop()
    assert len(rows.rows) == flipped[0]
    assert_gone(runtime, *names)


class CrashingControl(ControlClient):
    """The real control API; right after it creates actor ``-1`` it runs it and makes it write more RAM than its
    template allows, so the runtime kills it for real and the batch's own ResumeActor finds it CRASHED."""

    def __init__(self, runtime) -> None:
        super().__init__(runtime.control_address)
        self.router = PerThreadRouter(runtime)

    def create_actor(self, atespace: str, name: str, template=TEMPLATE):
        created = super().create_actor(atespace, name, template)
        if name.endswith("-1"):
            super().resume(atespace, name)
            over_limit = g.WriteRAMRequest(key="crash", size="128Mi", write_mode=g.WRITE_MODE_TRUNCATE)
            with contextlib.suppress(Exception):  # the actor dies answering
                self.router.post(f"{atespace}/{name}", "/writeram", over_limit.SerializeToString())
            wait_until(lambda: self.get_actor(atespace, name).status.state == pb.ACTOR_STATE_CRASHED,
                       f"{name} to be CRASHED")
        return created


def test_a_crashed_actor_books_crash_count_and_the_rest_still_count(runtime):
    rows = Rows()
    vu = make_spawn(runtime, rows, control=CrashingControl(runtime), total_actors=2, spawn_concurrency=1)
    vu.iterate()
    victim, survivor = (f"spawn-{vu.cohort_id}-{n}" for n in (1, 2))
    assert [row.name for row in rows.rows if row.context["session_id"] == victim] == [
        "CreateActor", "ResumeActor", "CrashCount", "ActorTimeToReady"]
    _, resume, crash, failed = (row for row in rows.rows if row.context["session_id"] == victim)
    assert "crashed" in resume.error.details() and resume.request_type == "grpc"
    assert (crash.request_type, crash.elapsed_s, str(crash.error)) == ("actor", 0.0, CRASHED_MESSAGE)
    assert not failed.ok and failed.request_type == "summary" and "crashed" in failed.error.details()
    assert [row.name for row in rows.rows if row.context["session_id"] == survivor] == [
        "CreateActor", "ResumeActor", "GluttonPing", "ActorTimeToReady"]
    # One of two ready: rank 1 fires the deciles up to 50; the batch still ends with the survivor's time.
    assert [row.name for row in rows.rows if row.name.startswith("TimeToReady_")] == DECILE_ROWS[:5]
    assert rows.rows[-1].name == "TimeToAllReady" and rows.rows[-1].ok
    assert state(runtime, victim) == "ACTOR_STATE_CRASHED" and state(runtime, survivor) == "ACTOR_STATE_RUNNING"
    vu.stop()
    assert_gone(runtime, *[victim, survivor])


class FlakyCreate(ControlClient):
    """The real control API, except that the first create lands and then reports Unavailable, as if the reply
    was lost, and the next ``more`` creates fail Unavailable without being sent."""

    def __init__(self, runtime, more: int) -> None:
        super().__init__(runtime.control_address)
        self.more = more
        self.calls = 0

    def create_actor(self, atespace: str, name: str, template=TEMPLATE):
        self.calls += 1
        if self.calls == 1:
            super().create_actor(atespace, name, template)
            raise Status(grpc.StatusCode.UNAVAILABLE, "connection reset after the create landed")
        if self.calls <= 1 + self.more:
            raise Status(grpc.StatusCode.UNAVAILABLE, "connection refused")
        return super().create_actor(atespace, name, template)


def test_create_backs_off_and_already_exists_on_a_retry_is_created(runtime):
    rows, sleeps = Rows(), Sleeps()
    control = FlakyCreate(runtime, more=2)
    vu = make_spawn(runtime, rows, control=control, sleep=sleeps, total_actors=1)
    vu.iterate()
    creates = [row for row in rows.rows if row.name == "CreateActor"]
    assert [row.ok for row in creates] == [False] * 4 and control.calls == 4
    assert creates[-1].error.code() == grpc.StatusCode.ALREADY_EXISTS
    jitter = random.Random(3)
    assert sleeps == [base + jitter.random() * BACKOFF_JITTER_S for base in (0.05, 0.1, 0.2)]
    assert rows.names()[len(creates) + 1:] == ["ResumeActor", "GluttonPing", *DECILE_ROWS, "ActorTimeToReady",
                                               "TimeToAllReady"]
    assert all(row.ok for row in rows.rows if row.name != "CreateActor")
    assert vu.actor_names == [f"spawn-{vu.cohort_id}-1"]
    vu.stop()
    assert_gone(runtime, *[f"spawn-{vu.cohort_id}-1"])


class RefusingCreate(ControlClient):
    """Creates fail with the given codes in turn, never reaching the runtime."""

    def __init__(self, runtime, codes) -> None:
        super().__init__(runtime.control_address)
        self.codes = list(codes)

    def create_actor(self, atespace: str, name: str, template=TEMPLATE):
        raise Status(self.codes.pop(0), "refused")


@pytest.mark.parametrize(("codes", "attempts"), [
    ([grpc.StatusCode.ALREADY_EXISTS], 1),  # on the first attempt it is somebody else's actor
    ([grpc.StatusCode.RESOURCE_EXHAUSTED] * 2 + [grpc.StatusCode.PERMISSION_DENIED], 3),
])
def test_a_terminal_create_ends_the_actor(runtime, codes, attempts):
    rows, sleeps = Rows(), Sleeps()
    vu = make_spawn(runtime, rows, control=RefusingCreate(runtime, codes), sleep=sleeps, total_actors=1)
    vu.iterate()
    assert rows.names() == ["CreateAtespace", *["CreateActor"] * attempts, "ActorTimeToReady", "TimeToAllReady"]
    assert len(sleeps) == attempts - 1
    assert rows.rows[-2].error.code() == codes[-1]
    assert str(rows.rows[-1].error) == NO_ACTOR_READY
    vu.stop()


def test_the_actor_deadline_ends_the_pings(runtime):
    rows, fake = Rows(), FakeTime()
    router = FailingRouter(PerThreadRouter(runtime), ["/ping"])
    vu = make_spawn(runtime, rows, router=router, sleep=fake.sleep, clock=fake.clock, total_actors=1,
                    actor_deadline=1.0)
    vu.iterate()
    # A ping every 100 ms of the fake clock until the deadline: ten failed attempts, each its own row.
    assert rows.names() == ["CreateAtespace", "CreateActor", "ResumeActor", *["GluttonPing"] * 10,
                            "ActorTimeToReady", "TimeToAllReady"]
    assert fake.sleeps == pytest.approx([0.1] * 10) and len(router.failed) == 10
    assert all(not row.ok and "timed out" in str(row.error) for row in rows.rows if row.name == "GluttonPing")
    actor, batch = rows.rows[-2], rows.rows[-1]
    assert isinstance(actor.error, Cancelled) and "context deadline exceeded" in str(actor.error)
    assert actor.elapsed_s == 1.0
    assert (str(batch.error), batch.elapsed_s) == (NO_ACTOR_READY, 1.0)
    vu.stop()


def test_a_failed_create_atespace_ends_the_batch(runtime):
    rows = Rows()
    vu = make_spawn(runtime, rows, atespace="Not_A_Name")
    vu.iterate()
    assert rows.names() == ["CreateAtespace", "TimeToAllReady"]
    atespace, batch = rows.rows
    assert atespace.error.code() == grpc.StatusCode.INVALID_ARGUMENT and atespace.request_type == "grpc"
    assert (batch.request_type, batch.elapsed_s, batch.error) == ("summary", 0.0, atespace.error)
    assert vu.actor_names == []
    vu.stop()
    assert len(rows.rows) == 2
