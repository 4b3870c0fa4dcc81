"""A real headless Chromium (Debian's ``chromium`` package) driven by Playwright, offline: a page is opened from its
file, every request that is not a file is aborted and recorded, console errors and page errors are collected, and
the screenshot is judged blank or not by its pixels."""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from PIL import Image

REQUIRED = os.environ.get("SUBSTRATE_BENCH_REQUIRE_CHROMIUM") == "1"
CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]
VIEWPORT = {"width": 1280, "height": 900}


def executable() -> str:
    if not (Path(CHROMIUM).is_file() and os.access(CHROMIUM, os.X_OK)):
        message = f"Chromium is not installed at {CHROMIUM} (Debian: apt-get install chromium; make test installs it as root)"
        if REQUIRED:
            pytest.fail(message)
        pytest.skip(message)
    return CHROMIUM


@contextmanager
def chromium() -> Iterator[object]:
    """A headless Chromium, closed at exit."""
    from playwright.sync_api import sync_playwright

    path = executable()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=ARGS, headless=True)
        try:
            yield browser
        finally:
            browser.close()


@dataclass
class Visit:
    screenshot: bytes
    console_errors: list[str] = field(default_factory=list)
    page_errors: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    svg_boxes: list[dict] = field(default_factory=list)
    scripts: int = 0
    title: str = ""
    body_text: str = ""
    # Key-value tables wider than their place: their right-aligned figures are scrolled out of sight.
    overflowing_key_values: int = 0
    # Every link's target as the browser resolved it (an absolute URL).
    links: list[str] = field(default_factory=list)


OVERFLOWING_KEY_VALUES = """
[...document.querySelectorAll('.table-wrap')].filter(wrap => wrap.querySelector('table.figures')
    && wrap.scrollWidth > wrap.clientWidth + 1).length
"""


def visit(browser, page_file: Path, screenshot: Path | None = None) -> Visit:
    """Open ``page_file`` offline, wait for it to load, and take a full-page screenshot."""
    context = browser.new_context(viewport=VIEWPORT, device_scale_factor=1, offline=True)
    blocked: list[str] = []

    def only_files(route) -> None:
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            blocked.append(route.request.url)
            route.abort()

    try:
        context.route("**/*", only_files)
        page = context.new_page()
        console_errors: list[str] = []
        page_errors: list[str] = []
        failed: list[str] = []
        page.on("console", lambda message: console_errors.append(message.text) if message.type == "error" else None)
        page.on("pageerror", lambda error: page_errors.append(str(error)))
        page.on("requestfailed", lambda request: failed.append(request.url))
        page.on("request", lambda request: None if request.url.startswith("file:") else blocked.append(request.url))
        page.goto(page_file.resolve().as_uri(), wait_until="load")
        page.wait_for_timeout(200)  # console messages of the load arrive asynchronously
        image = page.screenshot(full_page=True, path=str(screenshot) if screenshot else None)
        boxes = [box for box in (svg.bounding_box() for svg in page.locator("figure svg").all()) if box]
        return Visit(screenshot=image, console_errors=console_errors, page_errors=page_errors,
                     blocked=sorted(set(blocked)), failed=failed, svg_boxes=boxes,
                     scripts=page.locator("script").count(), title=page.title(), body_text=page.inner_text("body"),
                     overflowing_key_values=page.evaluate(OVERFLOWING_KEY_VALUES),
                     links=page.evaluate("[...document.querySelectorAll('a[href]')].map(a => a.href)"))
    finally:
        context.close()


def pixels(screenshot: bytes) -> tuple[int, float]:
    """(distinct colours, share of pixels that differ from the page's commonest colour, its background)."""
    image = Image.open(io.BytesIO(screenshot)).convert("RGB")
    colours = image.getcolors(maxcolors=image.width * image.height)
    background = max(colours)[0]
    return len(colours), 1 - background / (image.width * image.height)


def assert_not_blank(screenshot: bytes, colours: int = 200, ink: float = 0.04) -> None:
    distinct, share = pixels(screenshot)
    assert distinct >= colours and share >= ink, f"blank page? {distinct} colours, {share:.1%} not background"


def assert_clean(seen: Visit) -> None:
    assert seen.blocked == [], f"requests beyond the file: {seen.blocked}"
    assert seen.failed == [], f"failed requests: {seen.failed}"
    assert seen.console_errors == [], f"console errors: {seen.console_errors}"
    assert seen.page_errors == [], f"page errors: {seen.page_errors}"
