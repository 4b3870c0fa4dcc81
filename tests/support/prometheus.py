"""A real Prometheus server (Debian's ``prometheus`` package) on 127.0.0.1 for tests: over a TSDB built
with ``promtool tsdb create-blocks-from openmetrics``, or scraping live targets."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.ports import free_port

REQUIRED = os.environ.get("SUBSTRATE_BENCH_REQUIRE_PROMETHEUS") == "1"


def binaries() -> tuple[str, str]:
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        message = "Prometheus is not installed (Debian: apt-get install prometheus; make test installs it as root)"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    return prometheus, promtool


def create_blocks(openmetrics: str, directory: Path) -> None:
    _, promtool = binaries()
    source = directory.parent / "series.om"
    source.write_text(openmetrics)
    done = subprocess.run([promtool, "tsdb", "create-blocks-from", "openmetrics", str(source), str(directory)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout


@contextmanager
def prometheus_server(storage: Path, scrape_targets: list[str] | None = None,
                      scrape_interval: str = "1s") -> Iterator[str]:
    """Start Prometheus on a free loopback port; yield its base URL; stop it (and wait) at exit."""
    prometheus, _ = binaries()
    port = free_port()
    config = storage.parent / f"prometheus-{port}.yml"
    lines = ["global:", f"  scrape_interval: {scrape_interval}", f"  evaluation_interval: {scrape_interval}"]
    if scrape_targets:
        lines += ["scrape_configs:", "  - job_name: substrate", f"    scrape_interval: {scrape_interval}",
                  "    static_configs:", f"      - targets: [{', '.join(repr(t) for t in scrape_targets)}]"]
    config.write_text("\n".join(lines) + "\n")
    storage.mkdir(parents=True, exist_ok=True)
    log = (storage.parent / f"prometheus-{port}.log").open("wb")
    process = subprocess.Popen([prometheus, f"--config.file={config}", f"--storage.tsdb.path={storage}",
                                f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=3650d",
                                "--web.enable-admin-api"], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                pass
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Prometheus did not start: {(storage.parent / f'prometheus-{port}.log').read_text()}")
            time.sleep(0.2)
        yield url
    finally:
        process.terminate()
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        log.close()
