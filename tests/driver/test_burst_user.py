"""The burst virtual user against a real embedded runtime: its batches' rows counted as upstream's burst_test.go
counts them, its deciles, its retirements, its stop gate and its teardown."""

import random
import threading
from collections import Counter

import grpc
import pytest

from substrate_assets.driver.clients import ControlClient
from substrate_assets.driver.users.burst import (
    FIRST_RESUME,
    FIRST_SUSPEND,
    NO_ACTOR_SUCCEEDED,
    RESUME,
    SUSPEND,
    BurstPhase,
    BurstVU,
)
from substrate_assets.driver.users.cohort import IDLE_S, Cancelled, RetryBudget, create_landed, retry_with_backoff
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.driver.users.session import CRASHED_MESSAGE
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig
from tests.driver.conftest import Rows
from tests.support.driver_doubles import PerThreadRouter, Status, assert_gone

MiB = 1 << 20
DECILES = range(10, 101, 10)


@pytest.fixture(scope="module")
def runtime():
    with EmbeddedRuntime(RuntimeConfig(workers=2, actors_per_worker=4, warm_hosts=1, actor_memory="64Mi")) as rt:
        yield rt


class Control:
    """The real control client; ``resume`` first goes through ``before_resume``, which may raise."""

    def __init__(self, runtime, before_resume=lambda actor: None) -> None:
        self.inner = ControlClient(runtime.control_address)
        self.before_resume = before_resume

    def resume(self, atespace: str, name: str):
        self.before_resume(name)
        return self.inner.resume(atespace, name)

    def __getattr__(self, name: str):
        return getattr(self.inner, name)


class StopOn(Rows):
    """Rows that turn ``stopped`` true once the named row has been booked (the row itself is kept)."""

    def __init__(self, name: str | None = None) -> None:
        super().__init__()
        self.trigger = name
        self.event = threading.Event()

    def __call__(self, request_type, name, started, elapsed_s, error, context) -> None:
        super().__call__(request_type, name, started, elapsed_s, error, context)
        if name == self.trigger:
            self.event.set()

    def stopped(self) -> bool:
        return self.event.is_set()

    def counts(self) -> Counter:
        return Counter(f"{row.name}/{'success' if row.ok else 'failure'}" for row in self.rows)


def make_burst(runtime, rows: StopOn, *, control=None, router=None, clock=None, sleep=None, total_actors: int,
               actor_deadline: float = 30.0, **knobs) -> BurstVU:
    extra = {"clock": clock} if clock else {}
    return BurstVU(control or ControlClient(runtime.control_address), router or PerThreadRouter(runtime),
                   WorkerKnobs(**knobs, total_actors=total_actors, actor_deadline=actor_deadline),
                   rows, sleep=sleep or (lambda seconds: None), rng=random.Random(9), stopped=rows.stopped,
                   **extra)


def phase_rows(phase: BurstPhase, n: int) -> Counter:
    """What one burst over n actors books when every op succeeds."""
    rows = Counter({f"{phase.actor_row}/success": n, f"{phase.all_row}/success": 1})
    rows.update({f"{phase.decile_prefix}_{k}pct/success": 1 for k in DECILES})
    return rows


def assert_phase_booked(rows: Rows, phase: BurstPhase, batch: int) -> None:
    """Each decile once, at latencies that never fall as k grows, the all-done row at the last of them."""
    marks = {row.name: row for row in rows.rows if row.name.startswith(f"{phase.decile_prefix}_")}
    assert sorted(marks) == sorted(f"{phase.decile_prefix}_{k}pct" for k in DECILES)
    latencies = [marks[f"{phase.decile_prefix}_{k}pct"].elapsed_s for k in DECILES]
    assert latencies == sorted(latencies) and latencies[0] >= 0
    (done,) = [row for row in rows.rows if row.name == phase.all_row]
    assert done.elapsed_s == latencies[-1]
    for row in (*marks.values(), done):
        assert (row.request_type, row.context["session_id"], row.context["lap"]) == ("summary", None, batch)
    actors = [row for row in rows.rows if row.name == phase.actor_row]
    assert all(row.context["session_id"].startswith("burst-") and row.context["lap"] == batch for row in actors)
    assert max(row.elapsed_s for row in actors) <= done.elapsed_s


def test_two_batches_all_at_once_then_a_stop(runtime):
    n = 4
    arrived = threading.Barrier(n, timeout=20)
    first_resumes: list[str] = []

    def together(actor: str) -> None:
        # Batch 1's resumes each wait for all n to arrive, which only happens if they run at once.
        if len(first_resumes) < n:
            first_resumes.append(actor)
            try:
                arrived.wait()
            except threading.BrokenBarrierError:
                raise Status(grpc.StatusCode.FAILED_PRECONDITION, "batch 1's resumes did not run at once") from None

    rows, sleeps = StopOn("TimeToAllSuspended"), []
    vu = make_burst(runtime, rows, control=Control(runtime, together), sleep=sleeps.append, total_actors=n,
                    min_wait_time=0.4, max_wait_time=0.6)
    vu.iterate()
    assert len(sleeps) == 1 and 0.4 <= sleeps[0] <= 0.6  # the wait before batch 2; none before batch 1

    names = [actor.name for actor in vu.actors]
    assert names == [f"burst-{vu.cohort_id}-{k}" for k in range(1, n + 1)] and len(vu.cohort_id) == 8
    want = Counter({"GluttonReadyPing/success": 2 * n, "CreateAtespace/success": 1, "CreateActor/success": n,
                    "ResumeActorFirstResume/success": n, "ResumeActor/success": n, "GluttonPing/success": 2 * n,
                    "SuspendActor/success": 2 * n, "DeleteActor/success": n})
    for phase in (FIRST_RESUME, FIRST_SUSPEND, RESUME, SUSPEND):
        want += phase_rows(phase, n)
    assert rows.counts() == want
    assert sorted(first_resumes) == names
    assert_phase_booked(rows, FIRST_RESUME, 1)
    assert_phase_booked(rows, FIRST_SUSPEND, 1)
    assert_phase_booked(rows, RESUME, 2)
    assert_phase_booked(rows, SUSPEND, 2)
    assert all(not row.context["wake"] for row in rows.rows)
    assert {row.context["response_length"] for row in rows.rows if row.name != "GluttonPing"} == {0}
    assert all(36 < row.context["response_length"] < 60 for row in rows.rows if row.name == "GluttonPing")
    assert rows.names().index("TimeToAllFirstSuspended") < rows.names().index("ActorTimeToResume")
    assert_gone(runtime, *names)

    # One cohort per process: later iterations only idle, and the stop finds nothing left to delete.
    rows.clear()
    vu.iterate()
    vu.stop()
    assert sleeps[1:] == [IDLE_S] and rows.rows == []


def test_workloads_in_pause_mode(runtime):
    n = 2
    rows = StopOn("TimeToAllSuspended")
    vu = make_burst(runtime, rows, total_actors=n, lifecycle_mode="pause", mem_target="4Mi", mem_churn="1Mi",
                    mem_read="all", cpu_cores=1, cpu_duty_cycle=0.05)
    vu.iterate()
    want = Counter({"GluttonReadyPing/success": 2 * n, "CreateAtespace/success": 1, "CreateActor/success": n,
                    "ResumeActorFirstResume/success": n, "ResumeActor/success": n, "GluttonPing/success": 2 * n,
                    "PauseActor/success": 2 * n, "DeleteActor/success": n,
                    # Batch 1 sets each actor up; batch 2 reads what the snapshot kept, then churns it.
                    "GluttonFillRAM/success": n, "GluttonUseCPU/success": n, "GluttonReadRAM/success": n,
                    "GluttonChurnRAM/success": n})
    for phase in (FIRST_RESUME, FIRST_SUSPEND, RESUME, SUSPEND):
        want += phase_rows(phase, n)
    assert rows.counts() == want
    batch = {row.name: row.context["lap"] for row in rows.rows}
    assert batch["GluttonFillRAM"] == batch["GluttonUseCPU"] == 1
    assert batch["GluttonReadRAM"] == batch["GluttonChurnRAM"] == 2
    assert {row.context["response_length"] for row in rows.rows if row.name == "GluttonReadRAM"} == {4 * MiB}
    assert_gone(runtime, *[actor.name for actor in vu.actors])


def test_a_failed_setup_retires_the_actor_and_the_rest_go_on(runtime):
    n = 3
    rows = StopOn("TimeToAllFirstSuspended")
    router = PerThreadRouter(runtime, fail=lambda actor, route: route == "/writeram" and actor.endswith("-1"))
    vu = make_burst(runtime, rows, router=router, total_actors=n, mem_target="4Mi")
    vu.iterate()
    want = Counter({"GluttonReadyPing/success": n, "RetiredSetup/failure": 1, "CreateAtespace/success": 1,
                    "CreateActor/success": n, "ResumeActorFirstResume/success": n, "GluttonFillRAM/success": n - 1,
                    "GluttonFillRAM/failure": 1, "GluttonPing/success": n - 1, "SuspendActor/success": n - 1,
                    "DeleteActor/success": n})
    want += phase_rows(FIRST_RESUME, n) + phase_rows(FIRST_SUSPEND, n - 1)
    assert rows.counts() == want
    retired = f"burst-{vu.cohort_id}-1"
    (row,) = [row for row in rows.rows if row.name == "RetiredSetup"]
    assert (row.request_type, row.elapsed_s, str(row.error), row.context["session_id"]) == (
        "actor", 0.0, "GluttonFillRAM failed", retired)
    names = rows.names()
    deletes = [i for i, row in enumerate(rows.rows) if row.name == "DeleteActor"]
    assert rows.rows[deletes[0]].context["session_id"] == retired  # deleted at once, before the suspend burst
    assert deletes[0] < names.index("SuspendActor")
    assert_phase_booked(rows, FIRST_SUSPEND, 1)


def test_a_fill_above_the_limit_crashes_every_actor_and_the_run_ends_on_its_own(runtime):
    n = 2
    rows = StopOn()
    vu = make_burst(runtime, rows, total_actors=n, mem_target="96Mi")
    vu.iterate()
    want = Counter({"GluttonReadyPing/success": n, "RetiredSetup/failure": n, "CreateAtespace/success": 1,
                    "CreateActor/success": n, "ResumeActorFirstResume/success": n, "GluttonFillRAM/failure": n,
                    "DeleteActor/success": n})
    assert rows.counts() == want + phase_rows(FIRST_RESUME, n)
    assert all("WriteRAM memload (96Mi)" in str(row.error) for row in rows.rows if row.name == "GluttonFillRAM")
    assert all(actor.retired and actor.delete_done for actor in vu.actors)
    assert_gone(runtime, *[actor.name for actor in vu.actors])


@pytest.mark.parametrize(("code", "details", "crashes"), [
    (grpc.StatusCode.FAILED_PRECONDITION, "no room on any node", 0),
    (grpc.StatusCode.ABORTED, "actor is crashed (killed)", 2),
], ids=["failed-precondition", "crashed"])
def test_failed_resumes_retire_the_cohort(runtime, code, details, crashes):
    n = 2

    def refuse(actor: str) -> None:
        raise Status(code, details)

    rows = StopOn()
    vu = make_burst(runtime, rows, control=Control(runtime, refuse), total_actors=n)
    vu.iterate()  # every actor retired: the run ends on its own
    want = Counter({"ActorTimeToFirstResume/failure": n, "TimeToAllFirstResumed/failure": 1,
                    "CreateAtespace/success": 1, "CreateActor/success": n, "ResumeActorFirstResume/failure": n,
                    "DeleteActor/success": n})
    if crashes:
        want["CrashCount/failure"] = crashes
    assert rows.counts() == want
    (done,) = [row for row in rows.rows if row.name == "TimeToAllFirstResumed"]
    assert (done.elapsed_s, str(done.error)) == (0.0, NO_ACTOR_SUCCEEDED)
    assert all(str(row.error) == CRASHED_MESSAGE and row.elapsed_s == 0.0
               for row in rows.rows if row.name == "CrashCount")
    assert_gone(runtime, *[actor.name for actor in vu.actors])


def test_a_stop_mid_burst_books_no_more_burst_rows_and_deletes_the_cohort(runtime):
    n = 3
    rows = StopOn("ResumeActor")  # batch 2's first resume
    vu = make_burst(runtime, rows, total_actors=n)
    vu.iterate()
    counts = rows.counts()
    resumed = counts.pop("ResumeActor/success")
    assert 1 <= resumed <= n
    assert counts == Counter({"GluttonReadyPing/success": n, "CreateAtespace/success": 1, "CreateActor/success": n,
                              "ResumeActorFirstResume/success": n, "GluttonPing/success": n,
                              "SuspendActor/success": n, "DeleteActor/success": n}) + phase_rows(
        FIRST_RESUME, n) + phase_rows(FIRST_SUSPEND, n)
    # Batch 2's own rows (its readiness pings, per-actor times, deciles) all fell behind the gate.
    assert all(row.context["lap"] == 1 for row in rows.rows if row.request_type == "summary")
    assert_gone(runtime, *[actor.name for actor in vu.actors])


def test_a_stop_during_setup_deletes_each_actor_it_sent_a_create_for(runtime):
    n = 4
    rows = StopOn("CreateActor")
    vu = make_burst(runtime, rows, total_actors=n)
    vu.iterate()
    counts = rows.counts()
    created = counts["CreateActor/success"]
    assert 1 <= created <= n
    assert counts == Counter({"CreateAtespace/success": 1, "CreateActor/success": created,
                              "DeleteActor/success": created})
    assert sorted(row.context["session_id"] for row in rows.rows if row.name == "DeleteActor") == sorted(
        actor.name for actor in vu.actors if actor.created)
    assert_gone(runtime, *[actor.name for actor in vu.actors])


class ManualClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_a_step_still_running_at_the_deadline_retires_the_actor(runtime):
    clock = ManualClock()

    def slow_read(actor: str, route: str) -> bool:
        if route == "/readram":
            clock.now += 31.0  # the read outlasts the 30 s actor deadline
        return False

    rows = StopOn()
    vu = make_burst(runtime, rows, router=PerThreadRouter(runtime, fail=slow_read), clock=clock, total_actors=1,
                    mem_target="1Mi", mem_read="all", mem_churn="512Ki")
    vu.iterate()  # batch 2 retires the only actor: the run ends on its own
    want = Counter({"GluttonReadyPing/success": 2, "RetiredChurn/failure": 1, "CreateAtespace/success": 1,
                    "CreateActor/success": 1, "ResumeActorFirstResume/success": 1, "ResumeActor/success": 1,
                    "GluttonFillRAM/success": 1, "GluttonReadRAM/success": 1, "GluttonPing/success": 1,
                    "SuspendActor/success": 1, "DeleteActor/success": 1})
    assert rows.counts() == want + phase_rows(FIRST_RESUME, 1) + phase_rows(FIRST_SUSPEND, 1) + phase_rows(
        RESUME, 1)
    (row,) = [row for row in rows.rows if row.name == "RetiredChurn"]
    assert "still running at the actor deadline" in str(row.error) and row.context["lap"] == 2
    assert_gone(runtime, *[vu.actors[0].name])


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_retry_with_backoff():
    time = FakeTime()
    budget = RetryBudget(time.clock, time.sleep, 10.0, lambda: False)
    attempts: list[int] = []

    def transient(attempt: int):
        attempts.append(attempt)
        return Status(grpc.StatusCode.UNAVAILABLE, "down") if attempt < 2 else None

    assert retry_with_backoff(transient, budget, random.Random(1)) is None
    assert attempts == [0, 1, 2]
    assert 0.050 <= time.sleeps[0] < 0.055 and 0.100 <= time.sleeps[1] < 0.105

    calls: list[int] = []
    stuck = Status(grpc.StatusCode.FAILED_PRECONDITION, "stuck")
    assert retry_with_backoff(lambda attempt: calls.append(attempt) or stuck, budget, random.Random(1)) is stuck
    assert calls == [0]

    time.sleeps.clear()
    short = RetryBudget(time.clock, time.sleep, time.now + 3.0, lambda: False)
    error = retry_with_backoff(lambda _: Status(grpc.StatusCode.RESOURCE_EXHAUSTED, "no room"), short,
                               random.Random(1))
    assert isinstance(error, Cancelled) and "deadline" in str(error)
    assert max(time.sleeps) <= 1.005 and time.now == pytest.approx(short.until)

    stopped = RetryBudget(time.clock, time.sleep, time.now + 3.0, lambda: True)
    never: list[int] = []
    error = retry_with_backoff(lambda attempt: never.append(attempt), stopped, random.Random(1))
    assert isinstance(error, Cancelled) and "canceled" in str(error) and never == []


def test_create_landed():
    exists = Status(grpc.StatusCode.ALREADY_EXISTS, "exists")
    assert create_landed(0, None) and create_landed(1, exists)
    assert not create_landed(0, exists)  # on the first attempt it is a name clash
    assert not create_landed(1, Status(grpc.StatusCode.UNAVAILABLE, "down"))

