"""Test stand-ins for what the driver's clients raise or share, for virtual users driven outside Locust."""

import threading

import grpc
import pytest

from substrate_assets.driver.clients import ControlClient, RouterClient
from substrate_assets.driver.failures import RouterError


class Status(grpc.RpcError):
    """A control-API status as the client raises it."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details


class PerThreadRouter:
    """A router client per thread: a spawn batch's or a burst's workers are OS threads in tests, and a gevent-based
    client belongs to the thread that made it (under Locust they are greenlets of one thread and share one).
    ``fail(actor, route)`` picks requests that get HTTP 500 without being sent."""

    def __init__(self, runtime, fail=lambda actor, route: False) -> None:
        self.url, self.fail = runtime.router_url, fail
        self.local = threading.local()

    def post(self, actor: str, route: str, body: bytes) -> bytes:
        if self.fail(actor, route):
            raise RouterError(route, 500, b"injected failure")
        if not hasattr(self.local, "client"):
            self.local.client = RouterClient(self.url)
        return self.local.client.post(actor, route, body)


class Sleeps(list):
    """An injected sleep that records how long it was asked to sleep, and returns at once."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


class FakeTime:
    """A clock that only the injected sleep moves, kept in whole microseconds so that sums are exact."""

    def __init__(self) -> None:
        self.us = 0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.us / 1e6

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.us += round(seconds * 1e6)


def assert_gone(runtime, *names: str) -> None:
    """Each actor is deleted: the runtime's control API does not know it."""
    control = ControlClient(runtime.control_address)
    for name in names:
        with pytest.raises(grpc.RpcError) as caught:
            control.get_actor("benchmark", name)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND, name
