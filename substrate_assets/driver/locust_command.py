"""The Locust command line of a trial, assembled in one place for both backends: the locustfile (and a ladder's
shape), the load (users, spawn rate, run time, or a ladder's steps), the suite's family options — its script, modes
and knobs, each knob the flag of its one declaration in :data:`substrate_assets.families.KNOBS` — the endpoints, and
where Locust writes its CSVs and the request log."""

from __future__ import annotations

import sys
from pathlib import Path

from substrate_assets.families import ATESPACE
from substrate_assets.results.trial_directory import LADDER_LOG, LOCUST_CSV_PREFIX, REQUEST_LOG
from substrate_assets.suites import Suite
from substrate_assets.workload import ScriptFile

LOCUSTFILE = Path(__file__).with_name("locustfile.py")
LADDER_SHAPE = Path(__file__).with_name("ladder_shape.py")


def session_options(suite: Suite, script_file: str | None, control_endpoint: str, router_url: str,
                    request_log_dir: str, control_tls: bool = False) -> list[str]:
    """The locustfile's options for ``suite``'s users: the same for a lone Locust, a master and its workers. An agent
    session takes its script and think scale; every family its modes and knobs (``--mem-target``, …)."""
    script = (["--agentsession-script-file", script_file, "--agentsession-think-scale", f"{suite.think_scale:g}"]
              if script_file is not None else [])
    return [*script, "--lifecycle-mode", suite.lifecycle_mode, "--resume-mode", suite.resume_mode,
            *suite.knobs.locust_options(),
            "--control-endpoint", control_endpoint, "--router-url", router_url, "--atespace", ATESPACE,
            "--request-log-dir", request_log_dir, *(["--control-tls"] if control_tls else [])]


def locust_command(suite: Suite, script_file: Path | None, work: Path, control_endpoint: str, router_url: str,
                   extra: list[str] | None = None, control_tls: bool = False,
                   live_port: int | None = None) -> list[str]:
    """Locust headless with the suite's user class (AgentSessionUser, GluttonUser, …), writing its CSVs and the
    request log into ``work``: a flat load (``-u``, ``-r``, ``-t``), or a ladder suite's LoadTestShape with its
    steps and the log of when each began. With ``live_port``, Locust's own web UI too, on 127.0.0.1 at that port,
    started at once and quit when the load ends (``--autostart --autoquit 0``): the same load and files, its charts
    to watch while it runs (the locustfile makes the UI read-only)."""
    mode = ["--headless"] if live_port is None else [
        "--autostart", "--autoquit", "0", "--web-host", "127.0.0.1", "--web-port", str(live_port)]
    return [
        sys.executable, "-m", "locust", "-f", locustfiles(suite), *mode, "--only-summary",
        *load_options(suite, work), "--csv", str(work / LOCUST_CSV_PREFIX), "--loglevel", "INFO",
        *session_options(suite, None if script_file is None else str(script_file), control_endpoint, router_url,
                         str(work / REQUEST_LOG), control_tls),
        *(extra or []), suite.user_class,
    ]


def workload_line(suite: Suite, loaded: ScriptFile | None) -> str:
    """What the trial's users run, for its notes: the script and its digest, or the family and its knobs."""
    if loaded is not None:
        return f"script {loaded.script.name} (sha256 {loaded.sha256[:12]})"
    knobs = " ".join(suite.knobs.locust_options())
    return f"family {suite.family}" + (f" ({knobs})" if knobs else "")


def locustfiles(suite: Suite) -> str:
    """Locust's ``-f``: the locustfile, and the ladder shape for a ladder suite (Locust runs any shape it loads)."""
    return f"{LOCUSTFILE},{LADDER_SHAPE}" if suite.ladder is not None else str(LOCUSTFILE)


def load_options(suite: Suite, work: Path) -> list[str]:
    if suite.ladder is None:
        return ["-u", str(suite.users), "-r", f"{suite.spawn_rate:g}", "-t", f"{suite.duration_s}s"]
    return ["--ladder", suite.ladder.locust_spec(), "--ladder-spawn-rate", f"{suite.spawn_rate:g}",
            "--ladder-log", str(work / LADDER_LOG)]
