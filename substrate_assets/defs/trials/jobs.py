"""The ``run_trial`` job: a form (run config) naming a suite and, optionally, the load to change; it names the new
trial's partition itself, runs the trial and records it as that partition of ``trial_run``. The raw tables and the
models follow on their own (``warehouse_refresh``)."""

from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import Field, create_model

from substrate_assets.defs.partitions import TRIAL_PARTITIONS
from substrate_assets.defs.resources import (
    DeploymentResource,
    RunStoreResource,
    ScriptLibraryResource,
    SuitesResource,
)
from substrate_assets.defs.runs.executor import owned_in_process_executor
from substrate_assets.defs.trials.assets import launch_trial, trial_run
from substrate_assets.defs.trials.kubernetes_client import KubernetesPipesClient
from substrate_assets.families import KNOBS
from substrate_assets.suites import Suite, SuiteError

TRIAL_TAG = "substrate/trial"
SUITE_TAG = "substrate/suite"
SCRIPT_TAG = "substrate/script"
FAMILY_TAG = "substrate/family"
GROUP_TAG = "substrate/group"
# Dagster keeps a materialization's data version under this tag (MaterializeResult.data_version as an event).
DATA_VERSION_TAG = "dagster/data_version"

# The launch form's knobs, one field per family knob (families.KNOBS), each null unless set: the suite validates the
# values and refuses a knob its family does not read, naming it.
if TYPE_CHECKING:
    class KnobsConfig(dg.Config):
        """The form built below from KNOBS, as the checker sees it: a field per knob, each Any."""

        def __getattr__(self, name: str) -> Any: ...
else:
    KnobsConfig = create_model(
        "KnobsConfig", __base__=dg.Config, __doc__="A family's knobs for this trial only; null keeps the suite's.",
        **{knob.name: (knob.kind | None, Field(None, description=f"{knob.description} Read by "
                                           f"{', '.join(knob.families)}."))
           for knob in KNOBS})


class TrialConfig(dg.Config):
    """One trial: a suite of suites.yaml, with its load optionally changed for this trial only."""

    suite: str = Field(description="A suite of suites.yaml, e.g. quick-smoke.")
    users: int | None = Field(default=None, description="Concurrent sessions (Locust users) instead of the "
                              "suite's; leave null to keep the suite's.")
    duration: str | None = Field(default=None, description="Run time instead of the suite's, Locust -t form (60s, "
                                 "2m, 1h30m); null keeps the suite's.")
    think_scale: float | None = Field(default=None, description="Multiplies every think time instead of the "
                                      "suite's factor; null keeps the suite's.")
    inject_wake_delay_ms: int | None = Field(default=None, description="Adds this many ms to every wake of the "
                                             "embedded runtime (a slowdown of known size; 0 adds none); null keeps "
                                             "the suite's.")
    group: str | None = Field(default=None, description="The group of repeated trials this one belongs to "
                              "(`substrate-bench run --repeat`, `ab`); null for a trial of its own.")
    knobs: KnobsConfig | None = Field(default=None, description="Family knobs instead of the suite's (merged "
                                      "into its knobs:); null keeps the suite's.")
    wait_at_most_s: int | None = Field(default=None, ge=1, description="A local trial queues for the machine while "
                                       "another trial holds it; past this many seconds it stops waiting and the run "
                                       "fails, having run nothing. Null waits as long as it takes.")
    live: bool = Field(default=False, description="A local trial shows Locust's own web UI (its live charts and "
                       "tables, read-only) on 127.0.0.1 while its load runs; the run's log says where. The trial "
                       "lands as a headless one does.")

    def chosen_suite(self, suites: SuitesResource) -> Suite:
        """The suite with this config's changes, validated as suites.yaml is; dg.Failure names what is wrong."""
        try:
            return suites.suite(self.suite).with_overrides(users=self.users, duration=self.duration,
                                                           think_scale=self.think_scale,
                                                           inject_wake_delay_ms=self.inject_wake_delay_ms,
                                                           knobs=self.knobs.model_dump(exclude_none=True)
                                                           if self.knobs else None)
        except SuiteError as error:
            raise dg.Failure(f"run config: {error}") from None


def run_config(config: TrialConfig) -> dict[str, object]:
    """The run config of a run_trial run for ``config``."""
    return {"ops": {"trial": {"config": config.model_dump(exclude_none=True)}}}


@dg.op(pool="trials")  # two trials at once on one runtime or cluster would measure each other
def trial(context: dg.OpExecutionContext, config: TrialConfig, pipes_subprocess_client: dg.PipesSubprocessClient,
          pipes_k8s_client: KubernetesPipesClient, run_store: RunStoreResource, script_library: ScriptLibraryResource,
          suites: SuitesResource, deployment: DeploymentResource) -> None:
    """Name the trial (`<suite>-<yyyymmddthhmmssz>`, the first free second from now), add it as a trial_run
    partition, run it, and record trial_run and its trial_completed check for that partition."""
    suite = config.chosen_suite(suites)
    taken = set(context.instance.get_dynamic_partitions(TRIAL_PARTITIONS))
    trial_id = run_store.store().propose_key(suite.name, suite.tag, taken).trial_id
    context.instance.add_dynamic_partitions(TRIAL_PARTITIONS, [trial_id])
    context.instance.add_run_tags(context.run_id, {TRIAL_TAG: trial_id, SUITE_TAG: suite.name, FAMILY_TAG: suite.family,
                                                   **({SCRIPT_TAG: suite.script} if suite.script else {}),
                                                   **({GROUP_TAG: config.group} if config.group else {})})
    invocation = launch_trial(context, suite, trial_id, pipes_subprocess_client, pipes_k8s_client, run_store,
                              script_library, deployment, config.group, config.wait_at_most_s, config.live)
    for result in invocation.get_results(implicit_materializations=False):
        if isinstance(result, dg.MaterializeResult):
            version = {DATA_VERSION_TAG: result.data_version.value} if result.data_version else {}
            context.log_event(dg.AssetMaterialization(
                asset_key=trial_run.key, partition=trial_id, tags=version,
                metadata={**(result.metadata or {}), "suite": suite.name, "family": suite.family,
                          **({"script": suite.script} if suite.script else {})}))
        elif isinstance(result, dg.AssetCheckResult):
            context.log_event(dg.AssetCheckEvaluation(  # type: ignore[arg-type]  # log_event's UserEvent omits it
                asset_key=trial_run.key, check_name=result.check_name or "", passed=result.passed,
                severity=result.severity, metadata=result.metadata or {}, partition=trial_id))


# What the launchpad opens with: the README's first suite, to edit.
LAUNCHPAD_DEFAULT = "quick-smoke"


@dg.job(
    name="run_trial",
    executor_def=owned_in_process_executor,
    config={"ops": {"trial": {"config": {"suite": LAUNCHPAD_DEFAULT}}}},
    tags={"substrate/kind": "trial"},
    description="Run one trial. Launchpad config: `ops: {trial: {config: {suite: quick-smoke}}}`, optionally "
    "`users`, `duration` (60s, 2m), `think_scale`, `inject_wake_delay_ms` (a slowdown of known size) and `group` (the "
    "group of repeated trials it belongs to). The job names the trial's partition of trial_run itself "
    "(`<suite>-<yyyymmddthhmmssz>`, tagged `substrate/trial` on the run); re-executing a run starts a new trial with "
    "the same config. On a workstation the raw tables, the models and the judgement against the trial's history "
    "follow on their own (sensor `warehouse_refresh`).",
)
def run_trial_job() -> None:
    trial()
