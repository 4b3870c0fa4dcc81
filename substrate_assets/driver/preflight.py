"""Checks made before any load: a trial that could measure nothing is refused, not run.

The script is valid by the time a trial holds it (it was loaded and validated). What is left to check
is the deployment: the control API and the router answer, and the actor template's memory limit is at
least the script's ``min_actor_memory`` — the same check every session makes, made once, up front, so a
wrong ``--actor-memory`` costs one line instead of a whole run of refused sessions.
"""

from __future__ import annotations

import urllib.error
import urllib.request

import grpc

from substrate_assets.driver.clients import TEMPLATE, ControlClient
from substrate_assets.driver.scripts import LoadedScript
from substrate_assets.driver.session import SessionStartError, TemplateCheck
from substrate_assets.workload import ScriptFile

ANSWER_TIMEOUT_S = 5.0


class TrialRefused(Exception):
    """The trial could not measure anything and was not started; the message says why, in one line."""


def check_before_load(script: ScriptFile, control_endpoint: str, router_url: str, *, control_tls: bool = False,
                      timeout_s: float = ANSWER_TIMEOUT_S) -> None:
    """Raise :class:`TrialRefused` unless the control API and the router answer and the template fits the script."""
    control = ControlClient(control_endpoint, deadline_s=timeout_s, tls=control_tls)
    try:
        try:
            control.get_template()
        except grpc.RpcError as error:
            raise TrialRefused(f"the control API at {control_endpoint} does not answer GetActorTemplate "
                               f"{TEMPLATE[0]}/{TEMPLATE[1]} ({error.code().name}: {error.details()})") from None
        try:
            TemplateCheck(control).ensure(LoadedScript(script, b""))
        except SessionStartError as error:
            raise TrialRefused(str(error)) from None
    finally:
        control.close()
    _check_router(router_url, timeout_s)


def _check_router(router_url: str, timeout_s: float) -> None:
    try:
        with urllib.request.urlopen(router_url, timeout=timeout_s):
            pass
    except urllib.error.HTTPError:
        return  # it answered (a request naming no actor is refused, as it should be)
    except (urllib.error.URLError, OSError, ValueError) as error:
        reason = getattr(error, "reason", error)
        raise TrialRefused(f"the router at {router_url} does not answer ({reason})") from None
