"""What a failed call means for a session: replace the actor now, retry later, or replace if it persists.

The reference's classification: gRPC status codes from the control API, HTTP
statuses from the router (which override), anything else counts toward
"persistent". Three persistent failures in a row break the session; a whole
successful step resets the count.
"""

from __future__ import annotations

import enum
import random
import time
from collections.abc import Callable
from typing import TypeVar

import grpc

T = TypeVar("T")
MAX_CONSECUTIVE_FAILURES = 3
CONFLICT_MESSAGE = "concurrent update conflict, please retry"
CONFLICT_ATTEMPTS = 5


class Action(enum.Enum):
    REPLACE_NOW = "replace_now"
    RETRY_LATER = "retry_later"
    REPLACE_IF_PERSISTENT = "replace_if_persistent"


class RouterError(Exception):
    """The router answered a status of 400 or more."""

    def __init__(self, route: str, status: int, body: bytes, method: str = "POST") -> None:
        self.route = route
        self.status = status
        self.body = body[:512].decode("utf-8", "replace").strip()
        super().__init__(f"{method} {route}: HTTP {status}: {self.body}")


_REPLACE_NOW = {grpc.StatusCode.NOT_FOUND, grpc.StatusCode.DATA_LOSS, grpc.StatusCode.FAILED_PRECONDITION}
_RETRY_LATER = {grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                grpc.StatusCode.CANCELLED, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.PERMISSION_DENIED,
                grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.UNIMPLEMENTED}


def rpc_code(error: BaseException) -> grpc.StatusCode | None:
    code = getattr(error, "code", None)
    if isinstance(error, grpc.RpcError) and callable(code):
        return code()
    return None


def rpc_details(error: BaseException) -> str:
    details = getattr(error, "details", None)
    return (details() or "") if callable(details) else str(error)


def is_crashed(error: BaseException) -> bool:
    """Aborted with a message containing ``crashed`` (case-sensitive, as upstream)."""
    return rpc_code(error) == grpc.StatusCode.ABORTED and "crashed" in rpc_details(error)


def classify_http(status: int) -> Action:
    """A router status of 400 or more: 503/504/429 retry later, 404 replaces now, anything else may persist."""
    if status in (503, 504, 429):
        return Action.RETRY_LATER
    if status == 404:
        return Action.REPLACE_NOW
    return Action.REPLACE_IF_PERSISTENT


def classify_status(code: grpc.StatusCode, details: str) -> Action:
    """A control-API status (upstream's ClassifyLifecycleFailure)."""
    if code in _REPLACE_NOW or (code == grpc.StatusCode.ABORTED and "crashed" in details):
        return Action.REPLACE_NOW
    if code in _RETRY_LATER:
        return Action.RETRY_LATER
    return Action.REPLACE_IF_PERSISTENT


def classify(error: BaseException) -> Action:
    """Router errors by status, gRPC errors by code; transport errors and timeouts may persist."""
    if isinstance(error, RouterError):
        return classify_http(error.status)
    code = rpc_code(error)
    if code is None:
        return Action.REPLACE_IF_PERSISTENT
    return classify_status(code, rpc_details(error))


def retry_on_conflict(call: Callable[[], T], sleep: Callable[[float], None] = time.sleep) -> T:
    """Retry Aborted "concurrent update conflict" up to 5 attempts: at once, then 50 ms + [0, 5 ms) apart."""
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            return call()
        except grpc.RpcError as error:
            conflict = rpc_code(error) == grpc.StatusCode.ABORTED and CONFLICT_MESSAGE in rpc_details(error)
            if not conflict or attempt == CONFLICT_ATTEMPTS:
                raise
            if attempt > 1:
                sleep(0.050 + random.uniform(0, 0.005))
    raise AssertionError("unreachable")
