"""The ``pipes_k8s_client`` resource: Dagster's PipesK8sClient, built only when a kubernetes trial runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from substrate_assets.defs.resources import Resource

if TYPE_CHECKING:
    from dagster_k8s import PipesK8sClient


class KubernetesPipesClient(Resource):
    """Runs a kubernetes trial's driver pod through Dagster's PipesK8sClient (in-cluster or kubeconfig credentials,
    as dagster-k8s finds them). The Kubernetes client library costs ~2 s to import, in every process that loads the
    definitions (each run's worker, each command), so it is imported when a pod is to be run."""

    def client(self) -> PipesK8sClient:
        from dagster_k8s import PipesK8sClient

        return PipesK8sClient()
