"""Faults injected at a session's clients, so a failure happens by construction rather than by timing."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from substrate_assets.driver.clients import RouterClient


def read_timeout(route: str) -> BaseException:
    """What a router client raises when the router does not answer in time: a transport error, not a status."""
    return TimeoutError(f"POST {route}: timed out")


class FailingRouter:
    """A ``RouterClient`` whose calls to ``routes`` fail every time without being sent; other routes go through."""

    def __init__(self, inner: RouterClient, routes: Iterable[str],
                 error: Callable[[str], BaseException] = read_timeout) -> None:
        self.inner = inner
        self.routes = frozenset(routes)
        self.error = error
        self.failed: list[str] = []

    def post(self, actor: str, route: str, body: bytes) -> bytes:
        if route in self.routes:
            self.failed.append(route)
            raise self.error(route)
        return self.inner.post(actor, route, body)

    def close(self) -> None:
        self.inner.close()
