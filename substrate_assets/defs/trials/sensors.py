"""``script_change_sensor``: when a workload script's content changes, run a new trial of every suite using it."""

import hashlib
import json

import dagster as dg

from substrate_assets.defs.partitions import script_partitions, trial_partitions
from substrate_assets.defs.resources import (
    DeploymentResource,
    RunStoreResource,
    ScriptLibraryResource,
    SuitesResource,
)
from substrate_assets.defs.scripts.jobs import validate_script_job
from substrate_assets.defs.trials.jobs import run_trial_job
from substrate_assets.suites import Suite, SuiteError
from substrate_assets.workload import ScriptError


def _hashes(script_library: ScriptLibraryResource) -> dict[str, str]:
    return {path.stem: hashlib.sha256(path.read_bytes()).hexdigest() for path in script_library.library().paths()}


@dg.sensor(
    name="script_change_sensor",
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    jobs=[validate_script_job, run_trial_job],
    description="Hashes scripts/*.yaml. For each script that is new or changed (and valid), adds a trial partition "
    "for every suite that uses it (in a cluster deployment, every kubernetes suite) and requests its run "
    "(run_key = trial + script sha). The first tick records the current scripts as the baseline. An invalid script "
    "starts nothing: the skip reason says why when nothing else started, else a warning in the tick's log.",
)
def script_change_sensor(context: dg.SensorEvaluationContext, script_library: ScriptLibraryResource,
                         suites: SuitesResource, run_store: RunStoreResource,
                         deployment: DeploymentResource) -> dg.SensorResult | dg.SkipReason:
    current = _hashes(script_library)
    if context.cursor is None:
        return dg.SensorResult(cursor=json.dumps(current, sort_keys=True), skip_reason=dg.SkipReason(
            f"recorded {len(current)} scripts as the baseline; edits from now on start trials"))
    known: dict[str, str] = json.loads(context.cursor)
    try:
        by_script: dict[str, list[Suite]] = {}
        here = deployment.deployment()
        for suite in suites.all().values():
            if here.runs_backend(suite.backend):
                by_script.setdefault(suite.script, []).append(suite)
    except SuiteError as error:
        return dg.SkipReason(f"suites.yaml is invalid, nothing started:\n{error}")

    cursor = {name: sha for name, sha in known.items() if name in current}
    problems: list[str] = []
    runs: list[dg.RunRequest] = []
    scripts_added: list[str] = []
    trials_added: list[str] = []
    store = run_store.store()
    taken = set(context.instance.get_dynamic_partitions(trial_partitions.name))
    for name, sha in sorted(current.items()):
        if known.get(name) == sha:
            continue
        try:
            script_library.library().load(name)
        except ScriptError as error:
            problems.extend(str(problem) for problem in error.problems)
            continue
        cursor[name] = sha
        scripts_added.append(name)
        runs.append(dg.RunRequest(partition_key=name, job_name=validate_script_job.name, run_key=f"{name}:{sha}",
                                  tags={"substrate/script_sha256": sha}))
        for suite in sorted(by_script.get(name, []), key=lambda suite: suite.name):
            trial_id = store.propose_key(suite.name, suite.tag, taken).trial_id
            taken.add(trial_id)
            trials_added.append(trial_id)
            runs.append(dg.RunRequest(partition_key=trial_id, job_name=run_trial_job.name, run_key=f"{trial_id}:{sha}",
                                      tags={"substrate/script": name, "substrate/script_sha256": sha}))
    if not runs:
        reason = "no script changed"
        if problems:
            reason = "invalid script(s), nothing started:\n" + "\n".join(problems)
        return dg.SensorResult(cursor=json.dumps(cursor, sort_keys=True), skip_reason=dg.SkipReason(reason))
    if problems:
        context.log.warning("invalid script(s) skipped:\n%s", "\n".join(problems))
    return dg.SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=[script_partitions.build_add_request(scripts_added),
                                     trial_partitions.build_add_request(trials_added)],
        cursor=json.dumps(cursor, sort_keys=True),
    )
