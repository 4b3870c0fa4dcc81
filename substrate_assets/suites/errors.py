"""What is wrong with a suite, said in the words of suites.yaml."""

from __future__ import annotations

from pydantic_core import ErrorDetails


class SuiteError(ValueError):
    """suites.yaml (or one suite in it) cannot be used; the message names the file and line.

    ``kinds`` holds the pydantic error types behind it, so a caller can tell which problem it could help with."""

    def __init__(self, message: str, kinds: frozenset[str] = frozenset()) -> None:
        super().__init__(message)
        self.kinds = kinds


def explained(detail: ErrorDetails) -> str:
    """One pydantic error as ``field: why``, the field as written in suites.yaml (``ladder.users[2]``); an error of
    the suite as a whole is its ``why`` alone."""
    field = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in detail["loc"]).lstrip(".")
    message = detail["msg"].removeprefix("Value error, ")
    if detail["type"] == "extra_forbidden":
        message = "unknown field (a misspelling?)"
    return f"{field}: {message}" if field else message
