"""The sweperf virtual user against a real embedded runtime replaying a tiny trajectory: its cycles, its rows and
their counts, failed cycles and resumes, its start and teardown."""

import itertools
import json
import random
import time

import grpc
import pytest

from substrate_assets.driver.clients import ControlClient, RouterClient
from substrate_assets.driver.users.knobs import WorkerKnobs
from substrate_assets.driver.users.sweperf import TRAJECTORY_FAILED, Chunk, SweperfVU, generate_chunks
from substrate_assets.runtime import EmbeddedRuntime, RuntimeConfig, TemplateConfig
from tests.driver.conftest import Rows

TEMPLATE = "swebench-tiny"
POLL_MS = 20
WAIT_S = 0.25
# Five ms-long steps of real work: RAM, files, CPU.
TINY = {"format": 1, "name": "tiny", "steps": [
    {"kind": "checkout", "duration_ms": 4, "cpu_ms": 1, "ram_bytes": 1 << 20, "file_bytes": 16 << 10},
    {"kind": "search", "duration_ms": 2, "cpu_ms": 1, "ram_bytes": 256 << 10},
    {"kind": "edit", "duration_ms": 2, "file_bytes": 4 << 10},
    {"kind": "test", "duration_ms": 5, "cpu_ms": 2, "ram_bytes": 2 << 20},
    {"kind": "submit", "duration_ms": 2, "file_bytes": 1 << 10},
]}
EXECUTE_REPLY_BYTES = len(json.dumps({"job_id": "0" * 32, "status": "RUNNING"}))
GRPC = ("CreateAtespace", "CreateActor", "ResumeActor", "SuspendActor", "DeleteActor")
START = ["CreateAtespace", "CreateActor"]


def cycle_rows(number: int) -> list[str]:
    return ["ResumeActor", f"Workload_Cycle_{number}", "ResumeToFirstExec", "CycleCEL", "SuspendActor"]


TASK = ["TaskCEL", "TaskWallClock"]


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    trajectory = tmp_path_factory.mktemp("trajectory") / "tiny.json"
    trajectory.write_text(json.dumps(TINY))
    template = TemplateConfig(name=TEMPLATE, service="sweperf", trajectory=trajectory, memory_limit="64Mi")
    config = RuntimeConfig(workers=2, actors_per_worker=2, warm_hosts=1, actor_memory="64Mi", templates=(template,))
    with EmbeddedRuntime(config) as started:
        yield started


class Sleeps(list):
    """Records every sleep; only the job polls really sleep (the service runs the job meanwhile)."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)
        if seconds == POLL_MS / 1000:
            time.sleep(seconds)


class Ticks:
    """A clock that moves one second per reading, so derived rows come out as exact counts of readings."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


def make_vu(runtime, rows, *, sleeps=None, clock=time.monotonic, **knobs) -> SweperfVU:
    knobs = {"sweperf_template": TEMPLATE, "sweperf_total_steps": 5, "sweperf_num_cycles": 2,
             "sweperf_poll_interval_ms": POLL_MS, "min_wait_time": WAIT_S, "max_wait_time": WAIT_S, **knobs}
    return SweperfVU(ControlClient(runtime.control_address), RouterClient(runtime.router_url), WorkerKnobs(**knobs),
                     rows, sleep=sleeps if sleeps is not None else Sleeps(), rng=random.Random(5), clock=clock)


def rows_named(rows: Rows, name: str):
    return [row for row in rows.rows if row.name == name]


def names(rows: Rows) -> list[str]:
    """The rows' names without the ``_rtt`` rows, which :func:`assert_rtt_pairs` checks."""
    return [name for name in rows.names() if not name.endswith("_rtt")]


def assert_rtt_pairs(rows: Rows) -> int:
    """An ``_rtt`` row (the client's round trip, same outcome) comes right before each control-API row whose
    server trailer came, and only then; the row itself then holds the server's time, within the round trip. The
    embedded runtime sends the trailer with every answer, a refusal too. The number of ``_rtt`` rows."""
    pairs = 0
    for index, row in enumerate(rows.rows):
        if row.name.endswith("_rtt"):
            assert rows.rows[index + 1].name == row.name.removesuffix("_rtt"), row
            continue
        if row.request_type != "grpc":
            continue
        assert row.name in GRPC, row
        pair = rows.rows[index - 1] if index else None
        assert pair is not None and pair.name == f"{row.name}_rtt", f"{row.name} came without its _rtt row"
        pairs += 1
        assert pair.request_type == "grpc" and pair.started == row.started and pair.context == row.context
        assert pair.error is row.error
        assert 0 < row.elapsed_s <= pair.elapsed_s
    return pairs


@pytest.mark.parametrize(("total", "cycles", "lengths"), [
    (21, 4, [6, 5, 5, 5]), (21, 1, [21]), (21, 0, [21]), (10, 3, [4, 3, 3]), (3, 5, [1, 1, 1]), (4, 4, [1, 1, 1, 1]),
    (0, 3, [1]), (7, 2, [4, 3]),
])
def test_chunks_split_the_steps_as_upstream(total, cycles, lengths):
    chunks = generate_chunks(total, cycles)
    assert [chunk.end - chunk.start for chunk in chunks] == lengths
    assert chunks[0].start == 0 and all(a.end == b.start for a, b in itertools.pairwise(chunks))


def test_21_steps_in_4_cycles_ask_for_these_ranges():
    assert generate_chunks(21, 4) == [Chunk(0, 6), Chunk(6, 11), Chunk(11, 16), Chunk(16, 21)]


@pytest.mark.parametrize(("knob", "seconds"), [(200, 0.2), (50, 0.05), (0, 0.2)])
def test_the_poll_interval_knob_is_honoured(runtime, knob, seconds):
    # Upstream bf5f54cc polls every 200 ms whatever the flag says; here the knob sets it, 0 reading as 200 ms.
    assert make_vu(runtime, Rows(), sweperf_poll_interval_ms=knob).poll_interval_s == seconds


def test_two_passes_of_two_cycles(runtime):
    rows, sleeps = Rows(), Sleeps()
    vu = make_vu(runtime, rows, sleeps=sleeps)
    for _ in range(4):
        vu.iterate()
    expected = START + cycle_rows(1) + cycle_rows(2) + TASK + cycle_rows(1) + cycle_rows(2) + TASK
    assert names(rows) == expected
    assert all(row.ok for row in rows.rows), [(row.name, row.error) for row in rows.rows if not row.ok]
    assert_rtt_pairs(rows)
    for row in rows.rows:
        kind = "grpc" if row.name.split("_rtt")[0] in GRPC else "http" if row.name.startswith("Workload") else "actor"
        assert row.request_type == kind, row
        assert set(row.context) == {"session_id", "wake", "response_length", "lap"}
        assert row.context["wake"] == (row.name == "ResumeToFirstExec")
        length = row.context["response_length"]
        assert length == (EXECUTE_REPLY_BYTES if row.name.startswith("Workload_Cycle_") else 0), row
    actor = vu.actor
    assert actor.startswith("sb-") and len(actor) == len("sb-") + 36
    assert rows.rows[0].context["session_id"] is None and {row.context["session_id"] for row in rows.rows[2:]} == {actor}
    laps = [row.context["lap"] for row in rows.rows if not row.name.endswith("_rtt")]
    assert laps == [0] * (2 + 10 + 2) + [1] * (10 + 2)
    # 10 control calls, all with the server's trailer (CreateAtespace's only when it created the atespace).
    assert assert_rtt_pairs(rows) == 10 - (rows.rows[0].name == "CreateAtespace")
    # The CEL is the service's measure of real work, at least the steps' recorded durations.
    cel = [row.elapsed_s for row in rows_named(rows, "CycleCEL")]
    assert cel[0] >= 0.008 and cel[1] >= 0.007 and cel[2] >= 0.008 and cel[3] >= 0.007  # steps 1..3, 4..5
    assert [row.elapsed_s for row in rows_named(rows, "TaskCEL")] == pytest.approx([cel[0] + cel[1], cel[2] + cel[3]])
    # The wake runs from the resume's start to the ack: it holds the resume's round trip.
    for wake, resume in zip(rows_named(rows, "ResumeToFirstExec"), rows_named(rows, "ResumeActor_rtt"), strict=True):
        assert wake.elapsed_s >= resume.elapsed_s
    # Each Workload_Cycle spans the job, so at least its CEL.
    for cycle, job in zip([r for r in rows.rows if r.name.startswith("Workload")], cel, strict=True):
        assert cycle.elapsed_s >= job
    # Every cycle restored the actor from a real snapshot: one boot (the liveness poll) and four restores.
    restores = [event for event in runtime.event_log() if event.actor == actor and event.kind == "restore"]
    assert [event.detail for event in restores] == ["boot", None, None, None, None]
    # One wait per iteration; every other sleep is one job-poll interval.
    assert sleeps.count(WAIT_S) == 4 and set(sleeps) <= {WAIT_S, POLL_MS / 1000}
    vu.stop()


def test_the_derived_rows_sum_the_cycles(runtime):
    rows, clock = Rows(), Ticks()
    vu = make_vu(runtime, rows, clock=clock, sweperf_num_cycles=3)
    for _ in range(3):
        vu.iterate()
    assert names(rows) == START + cycle_rows(1) + cycle_rows(2) + cycle_rows(3) + TASK
    # Per cycle the clock is read at the resume's start, at the ack and after the suspend.
    assert [row.elapsed_s for row in rows_named(rows, "ResumeToFirstExec")] == [1.0, 1.0, 1.0]
    assert rows_named(rows, "TaskWallClock")[0].elapsed_s == 6.0
    cel = sum(row.elapsed_s for row in rows_named(rows, "CycleCEL"))
    assert rows_named(rows, "TaskCEL")[0].elapsed_s == pytest.approx(cel)
    assert rows_named(rows, "TaskCEL")[0].started == rows_named(rows, "ResumeToFirstExec")[0].started
    vu.stop()


def test_a_failed_job_fails_its_cycle_and_the_trajectory(runtime):
    rows = Rows()
    vu = make_vu(runtime, rows, sweperf_total_steps=7)  # cycle 2 asks for steps 5..7 of a 5-step trajectory
    for _ in range(3):
        vu.iterate()
    assert names(rows) == START + cycle_rows(1) + cycle_rows(2) + TASK + cycle_rows(1)
    failed = [row for row in rows.rows if not row.ok]
    assert [row.name for row in failed] == ["Workload_Cycle_2", "CycleCEL", "TaskCEL", "TaskWallClock"]
    message = str(failed[0].error)
    assert message.startswith("cycle 2 job ") and "failed with exit code 2: steps 5..7 are not a range" in message
    assert failed[0].context["response_length"] == 0
    assert str(failed[1].error) == message and failed[1].elapsed_s == 0
    assert {str(row.error) for row in failed[2:]} == {TRAJECTORY_FAILED}
    # The job was acknowledged, so the wake is still a success; the CEL of the trajectory is cycle 1's alone.
    assert all(row.ok for row in rows_named(rows, "ResumeToFirstExec"))
    assert failed[2].elapsed_s == pytest.approx(rows_named(rows, "CycleCEL")[0].elapsed_s)
    # The next pass starts clean.
    assert rows.rows[-1].ok and rows.rows[-1].context["lap"] == 1
    assert_rtt_pairs(rows)
    vu.stop()


def test_a_failed_resume_repeats_the_cycle(runtime):
    rows = Rows()
    vu = make_vu(runtime, rows)
    vu.iterate()
    actor = vu.actor
    vu.control.delete("benchmark", actor, any_state=True)  # behind the VU's back
    rows.clear()
    vu.iterate()
    vu.iterate()
    assert names(rows) == ["ResumeActor", "ResumeToFirstExec"] * 2
    assert not any(row.ok for row in rows.rows)
    assert rows_named(rows, "ResumeActor")[0].error.code() == grpc.StatusCode.NOT_FOUND
    wake = rows_named(rows, "ResumeToFirstExec")[0]
    assert str(wake.error) == "ResumeActor failed" and wake.context["wake"] and wake.elapsed_s > 0
    assert vu.cycle_index == 1 and vu.loop_failed  # cycle 2 is tried again, the pass is already failed
    assert_rtt_pairs(rows)
    rows.clear()
    vu.stop()  # the delete fails, as a row
    assert names(rows) == ["DeleteActor"]
    assert rows_named(rows, "DeleteActor")[0].error.code() == grpc.StatusCode.NOT_FOUND


def test_stop_suspends_and_deletes_once(runtime):
    rows = Rows()
    vu = make_vu(runtime, rows)
    vu.iterate()
    actor = vu.actor
    rows.clear()
    vu.stop()
    vu.stop()
    assert rows.names() == ["DeleteActor_rtt", "DeleteActor"] and all(row.ok for row in rows.rows)
    assert rows.rows[1].context["session_id"] == actor
    with pytest.raises(grpc.RpcError) as caught:
        vu.control.get_actor("benchmark", actor)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert vu.actor is None


def test_an_unknown_template_fails_the_start_and_it_is_retried(runtime):
    rows, sleeps = Rows(), Sleeps()
    vu = make_vu(runtime, rows, sleeps=sleeps, sweperf_template="no-such-template")
    vu.iterate()
    vu.iterate()
    assert names(rows) == START * 2
    created = rows_named(rows, "CreateActor")
    assert all(row.error.code() == grpc.StatusCode.FAILED_PRECONDITION for row in created)
    assert all(row.ok for row in rows_named(rows, "CreateAtespace"))  # AlreadyExists is success
    assert_rtt_pairs(rows)
    assert vu.actor is None and sleeps == [WAIT_S, WAIT_S]


def test_an_actor_that_never_says_up_is_deleted(runtime):
    # A glutton actor answers /status with 404: the liveness poll gives up after 30 tries 2 s apart.
    rows, sleeps = Rows(), Sleeps()
    vu = make_vu(runtime, rows, sleeps=sleeps, sweperf_template="glutton")
    vu.iterate()
    assert names(rows) == [*START, "DeleteActor"]
    assert assert_rtt_pairs(rows) == 3  # CreateAtespace's (AlreadyExists), CreateActor's and DeleteActor's
    assert all(row.ok for row in rows.rows)
    assert sleeps == [2.0] * 30 + [WAIT_S]
    assert vu.actor is None
