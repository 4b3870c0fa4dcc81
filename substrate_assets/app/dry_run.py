"""What a kubernetes trial would submit, without a cluster: every object, the driver pod as PipesK8sClient builds
it."""

from typing import Any

from substrate_assets.defs.trials.kubernetes import kubernetes_objects
from substrate_assets.results.layout import RunStore, TrialKey
from substrate_assets.suites import Suite
from substrate_assets.workload import ScriptLibrary


def kubernetes_dry_run(suite: Suite, store: RunStore, library: ScriptLibrary) -> tuple[TrialKey, list[Any]]:
    """The key the next trial of ``suite`` would get (nothing is claimed) and its manifests; ScriptError if its
    script is invalid."""
    script = library.load(suite.script) if suite.script is not None else None
    key = store.propose_key(suite.name, suite.tag)
    return key, kubernetes_objects(suite, key.trial_id, script.text if script is not None else None)
