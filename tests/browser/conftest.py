"""Fixtures of the browser tests: one JupyterLab server and one headless Chromium for the whole session.

These tests start servers and a browser (a few minutes), so a plain ``pytest tests`` skips them; they run
with ``make test-browser`` (part of ``make test``), ``pytest tests/browser`` or ``KVLAB_BROWSER=1``.
"""
from __future__ import annotations

import time
from pathlib import Path

import pytest

import drive
import kvlab_browser as kb
from helpers import opted_in

HERE = Path(__file__).resolve().parent
TIMINGS: list[tuple[str, float]] = []


def _enabled(config) -> bool:
    return opted_in(config, HERE, "KVLAB_BROWSER")


def pytest_collection_modifyitems(config, items):
    # The gallery is built from the screenshots of every other browser test: it runs last.
    items.sort(key=lambda item: Path(str(item.path)).name == "test_browser_gallery.py")
    if _enabled(config):
        return
    skip = pytest.mark.skip(reason="browser test: run `make test-browser`, `pytest tests/browser` or set "
                                   "KVLAB_BROWSER=1")
    for item in items:
        if HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(skip)


@pytest.fixture(autouse=True)
def _timed(request):
    t0 = time.monotonic()
    yield
    if HERE in Path(str(request.node.path)).resolve().parents:
        TIMINGS.append((request.node.name, time.monotonic() - t0))


def pytest_terminal_summary(terminalreporter):
    if not TIMINGS:
        return
    tr = terminalreporter
    tr.section("browser tests")
    for name, seconds in TIMINGS:
        tr.write_line(f"{seconds:7.1f} s  {name}")
    tr.write_line(f"{sum(s for _, s in TIMINGS):7.1f} s  in all (server and browser start-up not counted)")
    if kb.SCREENSHOTS.exists():
        tr.write_line(f"screenshots: {kb.SCREENSHOTS} ({len(list(kb.SCREENSHOTS.glob('*.png')))} files)")
    if drive.E2E:
        lines = ["control changed in the page -> the widget's new drawing on it, end to end (ms; make test's other "
                 "work runs beside it)"] + [f"{ms:8.0f}  {kind:18s} {what}" for kind, what, ms in drive.E2E]
        out = kb.SCREENSHOTS.parent / "widget-timings.txt"
        out.write_text("\n".join(lines) + "\n", encoding="utf-8")
        tr.write_line(f"widget timings, end to end: {out} ({len(drive.E2E)} changes)")


@pytest.fixture(scope="session")
def playwright_session():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="session")
def guard():
    return kb.Guard()


@pytest.fixture(scope="session")
def browser(playwright_session, guard):
    """One Chromium (Debian's, headless, its own throw-away profile) for every browser test."""
    context = kb.launch(playwright_session, guard)
    yield context
    kb.close(context)


@pytest.fixture(scope="session")
def lab(tmp_path_factory):
    """JupyterLab on 127.0.0.1 over a temporary copy of notebooks/ (nothing in the repository is touched)."""
    base = tmp_path_factory.mktemp("lab")
    server = kb.start_lab(kb.copy_notebooks(base / "notebooks"), base / "home")
    yield server
    server.stop()


@pytest.fixture(scope="session", autouse=False)
def clean_screenshots():
    """Screenshots of this run only: the folder is emptied once per session."""
    if kb.SCREENSHOTS.exists():
        for p in kb.SCREENSHOTS.glob("*.png"):
            p.unlink()
    kb.SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    return kb.SCREENSHOTS
