"""``script_change_sensor``: when a workload script's content changes, run a new trial of every suite using it."""

import hashlib
import json
from datetime import UTC, datetime

import dagster as dg

from substrate_assets.defs.partitions import script_partitions
from substrate_assets.defs.resources import (
    DeploymentResource,
    ScriptLibraryResource,
    SuitesResource,
)
from substrate_assets.defs.scripts.jobs import validate_script_job
from substrate_assets.defs.trials.jobs import (
    GROUP_TAG,
    SCRIPT_TAG,
    SUITE_TAG,
    TrialConfig,
    run_config,
    run_trial_job,
)
from substrate_assets.results.trial_key import group_id
from substrate_assets.suites import Suite, SuiteError
from substrate_assets.workload import ScriptError


def _hashes(script_library: ScriptLibraryResource) -> dict[str, str]:
    return {path.stem: hashlib.sha256(path.read_bytes()).hexdigest() for path in script_library.library().paths()}


def _trial_requests(suite: Suite, script: str, sha: str) -> list[dg.RunRequest]:
    """The suite's ``repeat`` trials of the changed script, as one group when there are several. Each run names its
    trial when it starts: trials queued behind one another each get their own second."""
    group = group_id(suite.name, datetime.now(UTC), "x", suite.repeat) if suite.repeat > 1 else None
    return [dg.RunRequest(job_name=run_trial_job.name,
                          run_key=f"{suite.name}:{script}:{sha}" + (f":{number}" if group else ""),
                          run_config=run_config(TrialConfig(suite=suite.name, group=group)),
                          tags={SUITE_TAG: suite.name, SCRIPT_TAG: script, "substrate/script_sha256": sha,
                                **({GROUP_TAG: group} if group else {})})
            for number in range(1, suite.repeat + 1)]


@dg.sensor(
    name="script_change_sensor",
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    jobs=[validate_script_job, run_trial_job],
    description="Hashes scripts/*.yaml. For each script that is new or changed (and valid), requests the run_trial "
    "runs of every suite that uses it (in a cluster deployment, every kubernetes suite): the suite's `repeat` trials, "
    "one group (run_key = suite + script + sha, and the trial's number in a group), each naming its trial when it "
    "starts. The first tick records the current scripts as the baseline. An invalid "
    "script starts nothing: the skip reason says why when nothing else started, else a warning in the tick's log.",
)
def script_change_sensor(context: dg.SensorEvaluationContext, script_library: ScriptLibraryResource,
                         suites: SuitesResource, deployment: DeploymentResource) -> dg.SensorResult | dg.SkipReason:
    current = _hashes(script_library)
    if context.cursor is None:
        return dg.SensorResult(cursor=json.dumps(current, sort_keys=True), skip_reason=dg.SkipReason(
            f"recorded {len(current)} scripts as the baseline; edits from now on start trials"))
    known: dict[str, str] = json.loads(context.cursor)
    try:
        by_script: dict[str, list[Suite]] = {}
        here = deployment.deployment()
        for suite in suites.all().values():
            if here.runs_backend(suite.backend) and suite.script is not None:
                by_script.setdefault(suite.script, []).append(suite)
    except SuiteError as error:
        return dg.SkipReason(f"suites.yaml is invalid, nothing started:\n{error}")

    cursor = {name: sha for name, sha in known.items() if name in current}
    problems: list[str] = []
    runs: list[dg.RunRequest] = []
    scripts_added: list[str] = []
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
            runs += _trial_requests(suite, name, sha)
    if not runs:
        reason = "no script changed"
        if problems:
            reason = "invalid script(s), nothing started:\n" + "\n".join(problems)
        return dg.SensorResult(cursor=json.dumps(cursor, sort_keys=True), skip_reason=dg.SkipReason(reason))
    if problems:
        context.log.warning("invalid script(s) skipped:\n%s", "\n".join(problems))
    return dg.SensorResult(
        run_requests=runs,
        dynamic_partitions_requests=[script_partitions.build_add_request(scripts_added)],
        cursor=json.dumps(cursor, sort_keys=True),
    )
