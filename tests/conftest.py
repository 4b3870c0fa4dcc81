"""Fixtures shared across test packages."""

import os

import pytest

from tests.support.kubernetes_api import FakeKubernetesAPI, serve


@pytest.fixture
def kubernetes_api_server(tmp_path, monkeypatch) -> FakeKubernetesAPI:
    """tests/support/kubernetes_api.py's stand-in API server, with a kubeconfig at ``.kubeconfig``; outside a pod."""
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    yield from serve(tmp_path)


@pytest.fixture(autouse=True, scope="session")
def trial_lock_of_this_session(tmp_path_factory):
    """The suite's trials queue on a machine lock of their own (tests run them one at a time), so a trial someone
    runs beside the suite neither refuses the suite's trials nor waits behind them."""
    os.environ["SUBSTRATE_BENCH_TRIAL_LOCK"] = str(tmp_path_factory.mktemp("machine") / "trial.lock")
