"""Trials launched as the UI launches them, followed by the automation, then `substrate-bench ui` over them: a real
`dagster dev` on 127.0.0.1, started the way a script starts a background job (SIGINT ignored). Headless Chromium
reads its pages as a person would; then it is asked to stop, and stops with everything it started."""

import contextlib
import io
import json
import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

from substrate_assets.project import UI_PORT
from tests.support.ports import free_port
from tests.support.projects import ROOT, make_project, project_env

CLI = str(Path(sys.executable).parent / "substrate-bench")
STARTUP_S = 180.0
STOP_S = 60.0
LOADED_S = 120.0  # a page's data on a loaded machine


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # what `command &` in a non-interactive shell leaves a job with


# Its trials run beside the rest of the test suite, whose CPU they would count as other work: judged disturbed, they
# would have no history to draw (tests/support/projects.py's smoke suite says the same).
SUITES = """\
suites:
  - {name: smoke, script: quick-session, users: 2, spawn_rate: 2, duration: 4s, think_scale: 0.2, workers: 4,
     disturbance: {foreign_cpu_share: null, steal_share: null}}
"""


# The image in the open dialog: its natural width, where it is drawn, the dialog's edges and whether what holds it
# scrolls (an image wider than its dialog is cut at the right); null without one.
IMAGE_IN_ITS_DIALOG = """
(() => {
  const dialog = document.querySelector('.bp5-dialog');
  const image = dialog && dialog.querySelector('img');
  if (!image) return null;
  const box = image.getBoundingClientRect(), frame = dialog.getBoundingClientRect();
  let scrolled = false;
  for (let node = image.parentElement; node && node !== dialog.parentElement; node = node.parentElement) {
    if (node.scrollWidth > node.clientWidth + 1) scrolled = true;
  }
  return {natural: image.naturalWidth, left: box.left, right: box.right, frameLeft: frame.left,
          frameRight: frame.right, scrolled};
})()
"""

# Tables (a metadata preview among them) reaching past the right edge of the page: their last columns are out of sight.
TABLES_PAST_THE_PAGE = """
[...document.querySelectorAll('table')].filter(table => table.getBoundingClientRect().right > window.innerWidth + 1)
    .length
"""


@dataclass
class RunningUI:
    port: int
    process: subprocess.Popen
    project: Path
    trials: list[str]  # in the order they ran
    runs: list[str]  # their run_trial runs
    ticks: list[list[list[str | None]]]  # what each tick of the automation requested
    site_port: int  # where the benchmark site is served beside it

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.port}{path}"

    def site(self, path: str = "/") -> str:
        return f"http://127.0.0.1:{self.site_port}{path}"


@pytest.fixture(scope="module")
def running_ui(tmp_path_factory) -> Iterator[RunningUI]:
    """A project with two real trials, launched as run_trial runs with run config and followed by the automation
    conditions (tests/support/follow_trials.py), and `substrate-bench ui` over it, started as a script starts a
    background job: SIGINT ignored. The module's last test stops it; this only makes sure it is gone."""
    project = make_project(tmp_path_factory.mktemp("ui_project"), SUITES)
    err, out = project / "ui.err", project / "ui.out"
    env = project_env(project)
    followed = subprocess.run([sys.executable, "-m", "tests.support.follow_trials"], cwd=ROOT, env=env,
                              capture_output=True, text=True, timeout=400)
    assert followed.returncode == 0, followed.stderr[-3000:]
    outcome = json.loads(followed.stdout.strip().splitlines()[-1])
    port = free_port()
    ui = subprocess.Popen([CLI, "ui", "--port", str(port), "--site-port", "0"], env={**env, "PYTHONUNBUFFERED": "1"},
                          stdout=out.open("wb"),
                          stderr=err.open("wb"), start_new_session=True, preexec_fn=ignore_sigint)
    try:
        deadline = time.monotonic() + STARTUP_S
        while not answers(port):
            assert ui.poll() is None, err.read_text()[-3000:]
            assert time.monotonic() < deadline, "the UI did not answer"
            time.sleep(0.5)
        served = re.search(r"benchmark site on http://127\.0\.0\.1:(\d+)/", out.read_text())
        assert served, out.read_text()
        yield RunningUI(port, ui, project, outcome["trials"], outcome["runs"], outcome["ticks"], int(served.group(1)))
    finally:
        if ui.poll() is None:
            for process in [*psutil.Process(ui.pid).children(recursive=True), psutil.Process(ui.pid)]:
                with contextlib.suppress(psutil.NoSuchProcess):
                    process.kill()
            ui.wait(timeout=30)


RAW = sorted(["cluster_facts", "load_steps", "locust_stats", "request_samples", "runtime_events", "server_telemetry",
              "stats_history", "trial_manifests"])


def test_a_trial_launched_with_run_config_is_followed_by_its_raw_tables_the_marts_and_its_comparison(running_ui):
    """Each run_trial run named its own trial; tick by tick after it, the automation loaded its raw tables (one
    step), then rebuilt the marts, then compared it, once, and built the benchmark site again, and then requested
    nothing more."""
    import dagster as dg

    first, second = running_ui.trials
    assert first.startswith("smoke-") and second.startswith("smoke-") and first != second
    after_each = [running_ui.ticks[1:5], running_ui.ticks[5:9]]
    for trial, ticks in zip(running_ui.trials, after_each, strict=True):
        assert [sorted(run[0] or "" for run in runs) for runs in ticks] == [[trial], [""], ["", trial], []]
        assert ticks[0][0][1:] == RAW and "capacity_history" in ticks[1][0]
        # After the marts, the trial's judgement and the benchmark site, in runs of their own.
        assert sorted(run[1:] for run in ticks[2]) == [["benchmark_site"], ["no_regression_against_history"]]
    instance = dg.DagsterInstance.from_config(str(running_ui.project / ".dagster_home"))
    assert set(instance.get_dynamic_partitions("trial")) == {first, second}
    for run_id, trial in zip(running_ui.runs, running_ui.trials, strict=True):
        run = instance.get_run_by_id(run_id)
        assert run.job_name == "run_trial" and run.tags["substrate/trial"] == trial
        assert run.remote_job_origin.location_name == "substrate_assets"  # the UI's own code location
    compared = instance.event_log_storage.get_asset_check_execution_history(
        dg.AssetCheckKey(dg.AssetKey("trial_run"), "no_regression_against_history"), limit=5)
    assert sorted(check.partition for check in compared) == sorted([first, second])


def test_the_asset_graph_and_a_trial_read_as_people_read_them(running_ui):
    """In headless Chromium: the asset graph, the trial's trial_run partition (its wake p50 to 0.1 ms, as the
    warehouse has it), its raw manifest row (its densities and column schema), the run_trial launchpad (a form opened
    with a suite) and the trial's run (which can be re-executed) load with no console or page error, request nothing
    beyond the UI and fit a 1600 px page. SUBSTRATE_BENCH_UI_SCREENSHOTS=<dir> keeps the screenshots."""
    import duckdb
    from PIL import Image
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    from tests.report.browser import assert_not_blank, chromium

    trial = running_ui.trials[-1]
    with duckdb.connect(str(running_ui.project / "warehouse.duckdb"), read_only=True) as connection:
        [(p50,)] = connection.execute("SELECT p50_ms FROM wake_latency_distribution WHERE trial_id = ?",
                                      [trial]).fetchall()
    # By the name of its screenshot, docs/ui-<name>.png.
    pages = {"asset-graph": "/asset-groups",
             "trial-run": f"/assets/trial_run?view=partitions&partition={trial}",
             "trial-manifests": f"/assets/trial_manifests?view=partitions&partition={trial}",
             "load-points": "/assets/load_points?view=events",
             "change-points": "/assets/change_points?view=events",
             "benchmark-site-asset": "/assets/benchmark_site?view=events",
             "run-trial-launchpad": "/locations/substrate_assets/jobs/run_trial/playground",
             "run-trial-run": f"/runs/{running_ui.runs[-1]}"}
    # What each page shows once it has loaded its data: the screenshot waits for it, however busy the machine.
    loaded = {"asset-graph": "marts", "trial-run": "wake_p50_ms", "trial-manifests": "actors_per_node",
              "load-points": "[Show Markdown]", "change-points": "history/smoke",
              "benchmark-site-asset": "build_s", "run-trial-launchpad": "suite: quick-smoke",
              "run-trial-run": "Re-execute"}
    keep = os.environ.get("SUBSTRATE_BENCH_UI_SCREENSHOTS")
    seen: dict[str, str] = {}
    errors: list[str] = []
    beyond: list[str] = []
    ours = (running_ui.url("/"), f"blob:{running_ui.url('/')}", "data:", running_ui.site())
    with chromium() as browser:
        context = browser.new_context(viewport={"width": 1600, "height": 1000}, device_scale_factor=1)
        page = context.new_page()
        page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.on("request", lambda request: None if request.url.startswith(ours) else beyond.append(request.url))
        for name, path in pages.items():
            page.goto(running_ui.url(path), wait_until="networkidle")
            try:
                page.wait_for_function("text => document.body.innerText.includes(text)", arg=loaded[name],
                                       timeout=LOADED_S * 1000)
            except PlaywrightTimeout:
                if keep:
                    page.screenshot(path=str(Path(keep) / f"ui-{name}-timed-out.png"))
                raise AssertionError(f"{name}: {loaded[name]!r} never shown; the page reads:\n"
                                     f"{page.inner_text('body')[:2000]}") from None
            page.wait_for_timeout(800)  # the layout settles (the graph's edges, a table's widths) after the data
            if name == "load-points":  # the events view keeps a mart's preview behind a link: open it
                page.get_by_text("[Show Markdown]").first.click()
                page.wait_for_timeout(800)
                # 70-odd columns, shown on their side: the load's one row (column, value) or its first rows.
                assert re.search(r"\bcolumn\t(value|row 1)\b", page.inner_text("body"))
            if name == "change-points":  # the suite's history, an image behind a link: it fits its dialog
                for link in page.get_by_text("[Show Markdown]").all():
                    link.click()
                    page.wait_for_timeout(800)
                    fits = page.evaluate(IMAGE_IN_ITS_DIALOG)
                    if fits is not None:
                        break
                    page.keyboard.press("Escape")
                assert fits is not None, "no history image on change_points"
                assert fits["natural"] > 300 and fits["left"] >= fits["frameLeft"] - 1, fits
                assert fits["right"] <= fits["frameRight"] + 1 and fits["scrolled"] is False, fits
            shot = page.screenshot(path=str(Path(keep) / f"ui-{name}.png") if keep else None)
            try:
                assert_not_blank(shot, colours=50, ink=0.02)
            except AssertionError as blank:
                raise AssertionError(f"{name}: {blank}") from None
            assert Image.open(io.BytesIO(shot)).size == (1600, 1000)
            assert page.evaluate("document.documentElement.scrollWidth") <= 1600, name
            assert page.evaluate(TABLES_PAST_THE_PAGE) == 0, name
            seen[name] = page.inner_text("body")
            assert "Join the Dagster community" not in seen[name], f"{name}: a first-visit dialog over the page"
            if name == "run-trial-run":
                again = page.get_by_role("button", name=re.compile("Re-execute"))
                assert again.count() and again.first.is_enabled()
        # The benchmark site's asset leads to the site, served beside the UI: one click.
        page.goto(running_ui.url(pages["benchmark-site-asset"]), wait_until="networkidle")
        # Its runs here ran outside the UI, so it links where `make ui` serves the site; this UI serves it on
        # the port it was given.
        page.get_by_role("link", name=f"http://127.0.0.1:{UI_PORT + 1}/").first.wait_for(timeout=LOADED_S * 1000)
        page.goto(running_ui.site(), wait_until="load")
        assert page.title() == "Benchmarks" and "Latest verdicts" in page.inner_text("body")
        page.get_by_role("link", name="smoke").first.click()
        page.wait_for_load_state()
        assert page.title() == "Suite smoke" and "Primary figures through time" in page.inner_text("body")
        shot = page.screenshot(path=str(Path(keep) / "ui-benchmark-site-suite.png") if keep else None)
        assert_not_blank(shot, colours=50, ink=0.02)
        context.close()
    assert errors == [] and beyond == [], (errors, beyond)
    assert all(group in seen["asset-graph"] for group in ("trials", "raw", "marts"))
    # A Dagster metadata entry reads as its key, then its value on a line of its own.
    lines = [line.strip() for line in seen["trial-run"].splitlines() if line.strip()]
    shown = lines[lines.index("smoke/wake_p50_ms") + 1]  # Dagster drops a float's trailing .0
    assert re.fullmatch(r"\d+(\.\d)?", shown) and float(shown) == round(p50, 1), (shown, p50)
    assert not re.search(r"\d\.\d{5,}", seen["trial-run"]), "an unrounded figure on the trial's page"
    assert "smoke/actors_per_node" in seen["trial-manifests"] and "Show Table Schema" in seen["trial-manifests"]
    assert "suite: quick-smoke" in seen["run-trial-launchpad"]


def test_the_ui_answers_only_requests_addressed_to_this_machine(running_ui):
    """A web page whose name was made to resolve to 127.0.0.1 (DNS rebinding) sends its own name as the Host."""
    import http.client

    def get(host: str) -> tuple[int, bytes]:
        connection = http.client.HTTPConnection("127.0.0.1", running_ui.port, timeout=30)
        try:
            connection.request("GET", "/server_info", headers={"Host": host})
            response = connection.getresponse()
            return response.status, response.read()
        finally:
            connection.close()

    for host in (f"127.0.0.1:{running_ui.port}", f"localhost:{running_ui.port}"):
        status, body = get(host)
        assert status == 200 and b"dagster_webserver_version" in body, (host, status, body[:200])
    status, body = get(f"attacker.example:{running_ui.port}")
    assert status == 421
    assert body == (b"This server answers only requests addressed to 127.0.0.1 or localhost; this one named "
                    + f"'attacker.example:{running_ui.port}'.\n".encode())
    assert f"refused a request addressed to 'attacker.example:{running_ui.port}'" in \
        (running_ui.project / "ui.err").read_text()


# SIGINT to a job a script started in the background (where it is ignored) is the hard case, with a real dagster dev;
# SIGTERM, and a child that ignores the polite request, are driven below with a process tree of the test's own.
def test_the_ui_stops_with_all_its_processes(running_ui):
    tree = psutil.Process(running_ui.process.pid).children(recursive=True)
    assert len(tree) >= 3  # dagster dev, its webserver, its daemon (and code servers)
    running_ui.process.send_signal(signal.SIGINT)
    assert running_ui.process.wait(timeout=STOP_S) == 128 + signal.SIGINT
    _gone, alive = psutil.wait_procs(tree, timeout=10)
    assert not alive, [process.cmdline() for process in alive]
    assert not answers(running_ui.port)


# A stand-in for dagster dev: two children and a grandchild, all ignoring SIGTERM unless told otherwise, so the
# grace period and the kill are exercised; it writes its tree's pids, then waits.
TREE = """
import os, signal, subprocess, sys, time
if sys.argv[1] == "stubborn":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
children = [subprocess.Popen([sys.executable, "-c", "import signal, time; signal.signal(signal.SIGTERM, "
                              "signal.SIG_IGN); time.sleep(600)"]) for _ in range(2)]
open(sys.argv[2], "w").write(" ".join(str(child.pid) for child in children))
time.sleep(600)
"""


@pytest.mark.parametrize("parent", ["polite", "stubborn"])
def test_a_stop_request_ends_the_whole_tree(tmp_path, parent):
    script = tmp_path / "pids.txt"
    helper = subprocess.Popen([sys.executable, "-c", f"""
import os, signal, sys, threading
from substrate_assets.app import dagster_ui
dagster_ui.SHUTDOWN_GRACE_S = 1.0
code = dagster_ui.run_ui([sys.executable, "-c", {TREE!r}, {parent!r}, {str(script)!r}], {str(tmp_path)!r},
                         dict(os.environ), print)
sys.exit(code)
"""], stdout=subprocess.PIPE, text=True, start_new_session=True)
    deadline = time.monotonic() + 60
    while not (script.exists() and script.read_text()):
        assert helper.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    children = [psutil.Process(int(pid)) for pid in script.read_text().split()]
    tree = [*psutil.Process(helper.pid).children(recursive=True)]
    helper.send_signal(signal.SIGTERM)
    assert helper.wait(timeout=30) == 128 + signal.SIGTERM
    assert "stopping the Dagster UI (SIGTERM)" in helper.stdout.read()
    _gone, alive = psutil.wait_procs([*tree, *children], timeout=10)
    assert not alive

