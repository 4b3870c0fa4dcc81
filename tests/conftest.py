"""Fixtures shared across test packages."""

import pytest

from tests.support.kubernetes_api import FakeKubernetesAPI, serve


@pytest.fixture
def kubernetes_api_server(tmp_path, monkeypatch) -> FakeKubernetesAPI:
    """tests/support/kubernetes_api.py's stand-in API server, with a kubeconfig at ``.kubeconfig``; outside a pod."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    yield from serve(tmp_path)
