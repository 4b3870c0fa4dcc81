"""The main job, in-process on the project's Dagster instance: validate a suite's script, run a trial, load it,
refresh the models. Also the reload of an existing trial.

Each run is tagged with the process that executes it; before one starts, what dead runs hold is freed and a pool
held by a live run is waited for (``pool_slots``); a run this process leaves unfinished, because a signal or an
error stopped it, is marked canceled and its slots freed on the way out."""

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar, cast

import dagster as dg

from substrate_assets.analysis.comparison import Comparison
from substrate_assets.app.code_location import run_job
from substrate_assets.app.dead_time import TrialLoad
from substrate_assets.app.pool_slots import Say, end_own_runs, wait_for_pools
from substrate_assets.app.raw_loads import RawLoadFailed, load_raw_tables
from substrate_assets.app.stopped import Stopped, raise_if_stopped
from substrate_assets.app.time_to_insight import TimeToInsight, measure, measure_outside_a_run
from substrate_assets.app.whole_loads import WholeLoad, WholeLoadFailed, load_whole
from substrate_assets.definitions import defs
from substrate_assets.defs.partitions import SCRIPT_PARTITIONS, TRIAL_PARTITIONS
from substrate_assets.defs.runs.owners import owner_tags
from substrate_assets.defs.scripts.assets import SCRIPT_IS_VALID, validated_before, workload_script
from substrate_assets.defs.trials.assets import trial_run
from substrate_assets.defs.trials.checks import NO_REGRESSION
from substrate_assets.defs.trials.jobs import TRIAL_TAG, TrialConfig, run_config, run_trial_job
from substrate_assets.defs.trials.started_ahead import start_trial_child_ahead
from substrate_assets.defs.warehouse.models import mart_assets
from substrate_assets.defs.warehouse.raw import raw_assets
from substrate_assets.defs.warehouse.site import site_assets
from substrate_assets.processes import warm_start
from substrate_assets.processes.owner import Owner
from substrate_assets.results.layout import RunStore
from substrate_assets.results.trial_directory import TrialDirectory
from substrate_assets.results.trial_key import group_id
from substrate_assets.suites import Suite

Result = TypeVar("Result", dg.ExecuteInProcessResult, dg.JobExecutionResult)
TRIALS_POOL = "trials"
INFO_LOGS = {"loggers": {"console": {"config": {"log_level": "INFO"}}}}


class MainJobError(RuntimeError):
    """A step of the main job failed; the message says which and why."""


class MachineTooBusy(MainJobError):
    """More trials were disturbed than a job may replace: the machine is too busy with other work to judge."""


def replacements_allowed(planned: int) -> int:
    """How many disturbed trials a job of ``planned`` trials runs again before it gives up: half as many, at least
    two."""
    return max(2, (planned + 1) // 2)


@dataclass(frozen=True)
class JobOutcome:
    # The (last) trial the job ran or reloaded.
    trial_id: str
    runs: list[str]
    # A new trial's way from its last request to its rows in every mart; None for a reload.
    insight: TimeToInsight | None = None
    # Every trial the job ran, in order, and the group they form when there are several.
    trial_ids: tuple[str, ...] = ()
    group: str | None = None
    # The trials the machine's other work disturbed, each run again (left out of the group's verdict).
    disturbed: tuple[str, ...] = ()
    # Each trial the job ran (disturbed ones too) with its two runs, in order: where its seconds went.
    loads: tuple[TrialLoad, ...] = ()

    @property
    def comparison(self) -> Comparison | None:
        """The job's last trial with its group against its configuration's history, as its load judged it; None
        when the load did not judge it so."""
        return self.loads[-1].comparison if self.loads else None


@dataclass(frozen=True)
class Round:
    """What one trial of a job runs: a suite of suites.yaml by name, changed as its config says."""

    suite: str
    inject_wake_delay_ms: int | None = None
    group: str | None = None
    wait_at_most_s: int | None = None
    live: bool = False

    def config(self) -> TrialConfig:
        return TrialConfig(suite=self.suite, inject_wake_delay_ms=self.inject_wake_delay_ms, group=self.group,
                           wait_at_most_s=self.wait_at_most_s, live=self.live)


def _quiet(_line: str) -> None:
    pass


def pools_of(assets: Iterable[dg.AssetsDefinition]) -> list[str]:
    return sorted({asset.op.pool for asset in assets if asset.op.pool})


def _why_ended(error: BaseException) -> str:
    cause = f"was stopped by {error.signal_name}" if isinstance(error, Stopped) else \
        f"failed with {type(error).__name__}: {error}"
    return f"substrate-bench (pid {os.getpid()}) {cause} before this run finished"


def _owned(instance: dg.DagsterInstance, pools: Sequence[str], say: Say, execute: Callable[[], Result]) -> Result:
    """``execute`` a run of this process once ``pools`` are free, and end what it leaves unfinished."""
    wait_for_pools(instance, pools, say)
    try:
        result = execute()
    except BaseException as error:
        end_own_runs(instance, _why_ended(error))
        raise
    # Dagster frees a step's slot only when it sees the step end; whatever it did not see end is ended here.
    end_own_runs(instance, "substrate-bench ended this run's execution without finishing it")
    # Dagster turns a signal that arrives while it executes into a failed run and returns; stop here too.
    raise_if_stopped()
    return result


def _materialize(selection: Sequence[dg.AssetsDefinition], instance: dg.DagsterInstance,
                 partition_key: str | None, say: Say, checks: Sequence[dg.AssetCheckKey] = ()
                 ) -> dg.ExecuteInProcessResult:
    # The selection takes the checks of its assets with them, and ``checks`` of assets it leaves out (trial_run's
    # judgement against its history runs after the marts it reads).
    return _owned(instance, pools_of(selection), say, lambda: dg.materialize(
        # The project defines no cacheable assets, the one kind of definition materialize does not take.
        cast(list[dg.AssetsDefinition | dg.AssetSpec | dg.SourceAsset],
             [*(defs.assets or []), *(defs.asset_checks or [])]),
        selection=dg.AssetSelection.assets(*selection) | dg.AssetSelection.checks(*checks),
        partition_key=partition_key, instance=instance, resources=dict(defs.resources or {}), run_config=INFO_LOGS,
        raise_on_error=False, tags=owner_tags(Owner.this_process())))


def _succeeded(result: Result, what: str) -> Result:
    if not result.success:
        failures = [_step_failure(event) for event in result.all_events if event.event_type_value == "STEP_FAILURE"]
        raise MainJobError(f"{what} failed (run {result.run_id}):\n" + "\n".join(failures or ["see the run's logs"]))
    return result


def _step_failure(event: dg.DagsterEvent) -> str:
    # A step's failure names its step and carries the error that failed it.
    assert event.step_key is not None and event.step_failure_data.error is not None
    return event.step_key + ": " + str(event.step_failure_data.error.message).strip()


def materialize_script(suite: Suite, instance: dg.DagsterInstance, say: Say = _quiet) -> str | None:
    """workload_script for the suite's script: its run's id; MainJobError when the script is invalid. None when a run
    found the file as it is valid with the code that validates it now (nothing has changed that could change its
    verdict)."""
    assert suite.script is not None, "only an agent-session suite has a script to validate"
    assert defs.resources is not None, "the project's definitions always carry its shared resources"
    earlier = validated_before(instance, defs.resources["script_library"].library(), suite.script)
    if earlier is not None:
        say(f"script {suite.script}: valid, unchanged since run {earlier} validated it with this code; not validated "
            "again")
        return None
    instance.add_dynamic_partitions(SCRIPT_PARTITIONS, [suite.script])
    result = _materialize([workload_script], instance, suite.script, say)
    for evaluation in result.get_asset_check_evaluations():
        if evaluation.check_name == SCRIPT_IS_VALID and not evaluation.passed:
            problems = evaluation.metadata.get("problems")
            raise MainJobError(f"script {suite.script} is invalid; nothing ran:\n"
                               f"{problems.value if problems else ''}")
    return _succeeded(result, f"validating script {suite.script}").run_id


def _run_trial_job(config: TrialConfig, instance: dg.DagsterInstance, say: Say) -> tuple[str, str]:
    """A run of the run_trial job, as the UI launches it (so the UI can re-execute it): the trial it named and the
    run's id; MainJobError when it failed."""
    result = _owned(instance, [TRIALS_POOL], say, lambda: run_job(
        run_trial_job.name, instance, {**run_config(config), **INFO_LOGS}, tags=owner_tags(Owner.this_process())))
    run = instance.get_run_by_id(result.run_id)
    trial_id = run.tags.get(TRIAL_TAG) if run else None
    _succeeded(result, f"trial {trial_id}" if trial_id else f"run_trial for suite {config.suite}")
    if trial_id is None:
        raise MainJobError(f"run {result.run_id} of run_trial succeeded without naming a trial")
    return trial_id, result.run_id


def _warm_up() -> None:
    """Import what the load after the trial uses and this process has not yet (change point analysis, the chart
    libraries) and start the chart renderer's process, before the trial rather than between its last request and its
    rows in the marts (~1.5 s)."""
    from substrate_assets.analysis.change_points import load_engine
    from substrate_assets.report import pages  # noqa: F401
    from substrate_assets.report.plots import start_renderer

    load_engine()
    start_renderer()


def run_suite(suite: Suite, store: RunStore, instance: dg.DagsterInstance, say: Say = _quiet,
              repeat: int | None = None, inject_wake_delay_ms: int | None = None,
              wait_at_most_s: int | None = None, live: bool = False) -> JobOutcome:
    """The main job: validate the suite's script (agent sessions only; the other families run none), then
    ``repeat`` times (default: the suite's ``repeat``) run a trial of the suite as a run of the run_trial job (which
    names the trial's partition), load it into the raw tables, rebuild the models and judge it against its
    configuration's history, in one more run. Repeated trials form one group (trial.json's ``group``). ``say``
    hears about dead runs freed, pools waited for and each trial started; each trial queues for the machine at
    most ``wait_at_most_s``, and shows Locust's live web UI when ``live``."""
    repeat = repeat or suite.repeat
    group = group_id(suite.name, datetime.now(UTC), "x", repeat) if repeat > 1 else None
    return _run_rounds(suite, [Round(suite.name, inject_wake_delay_ms, group, wait_at_most_s, live)] * repeat,
                       store, instance, say, group)


def ab_rounds(suite_a: str, suite_b: str, rounds: int, inject_wake_delay_ms: int | None = None,
              started: datetime | None = None, wait_at_most_s: int | None = None) -> list[Round]:
    """``rounds`` trials of each suite, alternating A B, B A, A B, …: a slow spell of the machine falls on both
    sides alike (Abedi and Brecht's interleaved trials). A side's trials form a group (``a<N>``, ``b<N>``); an
    injected wake delay goes to B's trials, the candidate's."""
    started = started or datetime.now(UTC)
    a = Round(suite_a, None, group_id(suite_a, started, "a", rounds), wait_at_most_s)
    b = Round(suite_b, inject_wake_delay_ms, group_id(suite_b, started, "b", rounds), wait_at_most_s)
    return [trial for index in range(rounds) for trial in ((a, b) if index % 2 == 0 else (b, a))]


def run_ab(suite_a: Suite, suite_b: Suite, rounds: list[Round], store: RunStore, instance: dg.DagsterInstance,
           say: Say = _quiet) -> JobOutcome:
    """The trials of :func:`ab_rounds`, each run and loaded as the main job does; both suites' scripts validated
    first."""
    return _run_rounds(suite_a, rounds, store, instance, say, None, also_validate=suite_b)


def _run_rounds(suite: Suite, rounds: Sequence[Round], store: RunStore, instance: dg.DagsterInstance, say: Say,
                group: str | None, also_validate: Suite | None = None) -> JobOutcome:
    wait_for_pools(instance, pools_of([trial_run, *raw_assets, *mart_assets, *site_assets]), say)
    try:
        return _run_rounds_ahead(suite, rounds, store, instance, say, group, also_validate)
    finally:
        warm_start.discard()  # a trial child started ahead that no run launched


def _run_rounds_ahead(suite: Suite, rounds: Sequence[Round], store: RunStore, instance: dg.DagsterInstance,
                      say: Say, group: str | None, also_validate: Suite | None) -> JobOutcome:
    """:func:`_run_rounds`, each local trial's Pipes child started ahead: the first's while the scripts are
    validated, each next one's while the trial before is loaded (``defs/trials/started_ahead``)."""
    local = suite.backend == "local" and (also_validate is None or also_validate.backend == "local")
    if local:
        start_trial_child_ahead()
    validated: dict[str, str | None] = {}
    # The renderer starts in a process of its own, and Dagster waits on its event writes: the warm-up and the
    # scripts' validation overlap, and both are done before the first trial runs.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="warm-up") as warming:
        warmed = warming.submit(_warm_up)
        for chosen in (suite, also_validate):
            if chosen is not None and chosen.script is not None and chosen.script not in validated:
                validated[chosen.script] = materialize_script(chosen, instance, say)
        warmed.result()
    loads: list[TrialLoad] = []
    disturbed: list[str] = []
    try:
        _each_round(rounds, store, instance, say, replacements_allowed(len(rounds)), loads, disturbed, local)
    except MainJobError:
        # A job that ends early (a trial failed, the machine too busy) still shows the trials it loaded: their loads
        # left the models' refresh and the drawing to a last one that will not come (unless the last to land was
        # loaded whole, as a disturbed one is: then the site shows them all).
        if loads and loads[-1].load_parts is None:
            _draw(instance, say)
        raise
    runs = [*(run for run in validated.values() if run),
            *(run for load in loads for run in (load.trial_run, load.load_run) if run)]
    return JobOutcome(loads[-1].trial_id, runs, insight_of(instance, loads[-1]),
                      tuple(load.trial_id for load in loads), group, tuple(disturbed), tuple(loads))


def insight_of(instance: dg.DagsterInstance, load: TrialLoad) -> TimeToInsight:
    """The way of a job's last trial from its last request into every mart."""
    marts = [key for asset in mart_assets for key in asset.keys]
    if load.load_run is not None:
        return measure(instance, load.trial_dir, load.trial_run, load.load_run, marts)
    assert load.loaded_between is not None, "a job's last trial is loaded in a run or outside one"
    return measure_outside_a_run(instance, load.trial_dir, load.trial_run, load.loaded_between[0], marts)


def _draw(instance: dg.DagsterInstance, say: Say) -> None:
    """Refresh the marts (nothing new to load: they record and draw the suites' histories) and draw the site; a
    failure is said, not raised (the job's own error is the one to show)."""
    try:
        _succeeded(_materialize([*mart_assets, *site_assets], instance, None, say), "drawing the benchmark site")
    except MainJobError as error:
        say(f"the benchmark site was not drawn after the job's end: {error}")


def _each_round(rounds: Sequence[Round], store: RunStore, instance: dg.DagsterInstance, say: Say, allowed: int,
                loads: list[TrialLoad], disturbed: list[str], ahead: bool = False) -> None:
    """Run and load each round's trial (again, when it was disturbed), adding each to ``loads`` as it lands and
    each disturbed one's id to ``disturbed``; ``ahead``: start the next trial's Pipes child before loading."""
    for number, trial in enumerate(rounds, start=1):
        again = False
        while True:
            if len(rounds) > 1 or again:
                say(f"trial {number} of {len(rounds)}{' again' if again else ''}: suite {trial.suite}"
                    + (f", group {trial.group}" if trial.group else ""))
            trial_id, trial_run_id = _run_trial_job(trial.config(), instance, say)
            because = disturbed_because(store, trial_id)
            if ahead and (number < len(rounds) or because is not None):
                start_trial_child_ahead()
            # The models, the site and the verdict wait for the job's last trial: refreshed for each trial before,
            # they were a third of a group's dead time and never seen (the group is judged whole). A disturbed
            # trial is loaded whole: its check records in Dagster why it was set aside, and the site shows it.
            # Loads are outside a run (``whole_loads``; the trials before load their raw tables only, ``raw_loads``).
            if number == len(rounds) or because is not None:
                whole = _whole(trial_id, store, instance, say)
                loads.append(TrialLoad(trial_id, store.find(trial_id), trial_run_id, None,
                                       (whole.began, whole.judged), whole.parts(), whole.comparison))
            else:
                loads.append(TrialLoad(trial_id, store.find(trial_id), trial_run_id, None,
                                       _raw_tables_only(trial_id, store, instance, say)))
            if because is None:
                break
            disturbed.append(trial_id)
            again = True
            if len(disturbed) > allowed:
                raise MachineTooBusy(
                    f"the machine is too busy with other work to judge: {len(disturbed)} of {len(loads)} trials "
                    f"were disturbed (the last, {trial_id}: {because}), more than the {allowed} this job runs again. "
                    "Stop the other work (top shows it), or raise the suite's disturbance limits; the trials are "
                    "kept, marked disturbed")
            say(f"trial {trial_id} was disturbed ({because}): it is left out of the verdict, and trial {number} "
                "runs again")


def _raw_tables_only(trial_id: str, store: RunStore, instance: dg.DagsterInstance, say: Say) -> tuple[float, float]:
    """Load the trial's raw tables outside a run; when the load began and ended. MainJobError when it does not
    load."""
    assert defs.resources is not None, "the project's definitions always carry its shared resources"
    try:
        loaded = load_raw_tables(trial_id, store, instance, defs.resources["warehouse"], say)
    except RawLoadFailed as error:
        raise MainJobError(str(error)) from None
    raise_if_stopped()
    return loaded.began, loaded.ended


def _whole(trial_id: str, store: RunStore, instance: dg.DagsterInstance, say: Say) -> WholeLoad:
    """Load the trial whole outside a run (raw tables, models, records, site, verdict); MainJobError when it does
    not load."""
    resources = defs.resources or {}
    try:
        loaded = load_whole(trial_id, store, instance, resources["warehouse"], resources["suites"].all(),
                            resources["site"] if site_assets else None, say)
    except WholeLoadFailed as error:
        raise MainJobError(str(error)) from None
    raise_if_stopped()
    return loaded


def disturbed_because(store: RunStore, trial_id: str) -> str | None:
    """Why the trial counts as disturbed, as its trial.json says; None when it does not."""
    load = TrialDirectory(store.find(trial_id)).manifest.get("machine_load") or {}
    if not load.get("disturbed"):
        return None
    return "; ".join(load.get("disturbed_because") or []) or "the machine was busy with other work"


def reload_trial(trial_id: str, store: RunStore, instance: dg.DagsterInstance, say: Say = _quiet) -> JobOutcome:
    """Load an existing trial's files again (raw tables replaced, models refreshed for every trial loaded since they
    last ran, the benchmark site built again, the trial judged against its history), in one run; no load is
    generated. A group's earlier trial is judged with its group, or on request by reloading it."""
    store.find(trial_id)
    instance.add_dynamic_partitions(TRIAL_PARTITIONS, [trial_id])
    result = _materialize([*raw_assets, *mart_assets, *site_assets], instance, trial_id, say,
                          checks=[dg.AssetCheckKey(trial_run.key, NO_REGRESSION)])
    return JobOutcome(trial_id, [_succeeded(result, f"reloading trial {trial_id}").run_id])
