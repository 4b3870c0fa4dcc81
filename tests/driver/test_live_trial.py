"""A live trial: Locust's own web UI on 127.0.0.1 while the load runs, read-only, and a trial that lands exactly as a
headless one does (the same files, columns and figures). Real Locust against the embedded runtime."""

import json
import re
import threading
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from substrate_assets.driver.locust_command import locust_command
from substrate_assets.driver.trial import LIVE_LINE, run_local_trial
from substrate_assets.results.layout import RunStore
from substrate_assets.results.readers import read_requests, read_stats, read_stats_history
from substrate_assets.suites import get_suite
from substrate_assets.workload import ScriptLibrary

ROOT = Path(__file__).resolve().parents[2]
LIVE = re.escape(LIVE_LINE).replace(re.escape("{url}"), r"(http://127\.0\.0\.1:\d+/)")


def _ask(url: str, method: str = "GET", host: str | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(url, method=method, headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=5) as response:
            return response.status, response.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


class Watcher:
    """What a person watching the live UI sees: polls its statistics until the trial has landed."""

    def __init__(self) -> None:
        self.url: str | None = None
        self.seen: list[dict] = []
        self.refused: dict[str, int] = {}
        self.done = threading.Event()
        self._thread: threading.Thread | None = None

    def notice(self, line: str) -> None:
        found = re.fullmatch(LIVE, line)
        if found:
            self.url = found.group(1)
            self._thread = threading.Thread(target=self._watch, daemon=True)
            self._thread.start()

    def _watch(self) -> None:
        assert self.url is not None
        while not self.done.wait(0.25):
            try:
                status, body = _ask(self.url + "stats/requests")
            except OSError:
                continue  # not up yet, or gone
            if status != 200:
                continue
            stats = json.loads(body)
            self.seen.append(stats)
            if stats.get("state") == "running" and not self.refused:
                # While it runs: its controls are refused, as is a request addressed to another host.
                self.refused["stop"] = _ask(self.url + "stop", "POST")[0]
                self.refused["swarm"] = _ask(self.url + "swarm", "POST")[0]
                self.refused["host"] = _ask(self.url, host="attacker.example")[0]
                self.refused["page"] = _ask(self.url)[0]

    def stop(self) -> None:
        self.done.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


@pytest.fixture(scope="module")
def trials(tmp_path_factory):
    """The same short suite run headless, then live, into one store."""
    store = RunStore(tmp_path_factory.mktemp("store"))
    library = ScriptLibrary(ROOT / "scripts")
    suite = get_suite("quick-smoke").with_overrides(users=2, duration="6s")
    headless = run_local_trial(suite, store, library)
    watcher = Watcher()
    try:
        live = run_local_trial(suite, store, library, live=True, on_notice=watcher.notice)
    finally:
        watcher.stop()
    return headless, live, watcher


def test_the_live_ui_answers_with_the_running_load_and_changes_nothing(trials):
    _headless, live, watcher = trials
    assert watcher.url is not None, "the live trial never said where its web UI was"
    running = [stats for stats in watcher.seen if stats.get("state") == "running"]
    assert running, f"never saw the load running: {[stats.get('state') for stats in watcher.seen]}"
    names = {row["name"] for stats in running for row in stats["stats"]}
    assert "WakeFirstTouch" in names or "Aggregated" in names
    assert watcher.refused == {"stop": 403, "swarm": 403, "host": 421, "page": 200}
    assert live.completed  # the refused stop stopped nothing
    with pytest.raises(OSError):  # gone with the load
        _ask(watcher.url)


def test_a_live_trial_lands_as_a_headless_one(trials):
    headless, live, _watcher = trials
    for result in (headless, live):
        assert result.completed and json.loads((Path(result.trial_dir) / "status.json").read_text())[
            "locust_exit_code"] == 0
    assert {path.name for path in Path(headless.trial_dir).iterdir()} == {
        path.name for path in Path(live.trial_dir).iterdir()}
    for read, name in ((read_stats, "stats.csv"), (read_stats_history, "stats_history.csv"),
                       (read_requests, "requests.parquet")):
        one, other = read(Path(headless.trial_dir) / name), read(Path(live.trial_dir) / name)
        assert one.schema == other.schema and one.height and other.height, name
    assert set(read_stats(Path(headless.trial_dir) / "stats.csv")["name"]) == set(
        read_stats(Path(live.trial_dir) / "stats.csv")["name"])
    manifests = [json.loads((Path(result.trial_dir) / "trial.json").read_text()) for result in (headless, live)]
    assert set(manifests[0]) == set(manifests[1])
    assert headless.summary.wake_n > 0 and live.summary.wake_n > 0
    figures = [{key: value is None for key, value in vars(result.summary).items()} for result in (headless, live)]
    assert figures[0] == figures[1]  # the same figures measured (none missing on one side)


def test_the_command_line_is_headless_unless_asked(tmp_path):
    suite = get_suite("quick-smoke")
    headless = locust_command(suite, None, tmp_path, "127.0.0.1:1", "http://127.0.0.1:2")
    live = locust_command(suite, None, tmp_path, "127.0.0.1:1", "http://127.0.0.1:2", live_port=8089)
    assert "--headless" in headless and "--web-port" not in headless
    assert "--headless" not in live
    assert live[live.index("--web-host") + 1] == "127.0.0.1" and live[live.index("--web-port") + 1] == "8089"
    assert "--autostart" in live and live[live.index("--autoquit") + 1] == "0"
    # Everything else is the same command.
    rest = [part for part in live if part not in ("--autostart", "--autoquit", "0", "--web-host", "127.0.0.1",
                                                  "--web-port", "8089")]
    assert rest == [part for part in headless if part != "--headless"]
