"""The browser tests' own plumbing: waiting on a page's promise (kvlab_browser.settle) and what the guard records."""
from __future__ import annotations

import pytest

import kvlab_browser as kb


@pytest.fixture()
def blank(browser):
    page = browser.new_page()
    page.goto("about:blank")
    yield page
    page.close()


def test_settle_waits_for_a_slow_promise_and_leaves_nothing_on_window(blank):
    kb.settle(blank, "(ms) => new Promise(r => setTimeout(() => { window.__done = ms; r(); }, ms))", 400)
    assert blank.evaluate("window.__done") == 400
    assert blank.evaluate("Object.keys(window).filter(k => k.startsWith('__kvlabSettle'))") == []


def test_settle_reports_a_rejection_with_what_was_awaited(blank):
    with pytest.raises(AssertionError, match=r"opening x\.ipynb: the page's promise was rejected: .*no such file"):
        kb.settle(blank, "() => Promise.reject(new Error('no such file'))", what="opening x.ipynb")
    with pytest.raises(AssertionError, match="rejected: .*thrown"):
        kb.settle(blank, "() => { throw new Error('thrown'); }")  # a plain throw counts as a rejection


def test_settle_times_out_on_a_promise_that_never_settles(blank):
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
    with pytest.raises(PlaywrightTimeout):
        kb.settle(blank, "() => new Promise(() => {})", timeout_ms=500)


def test_guard_records_a_page_error_with_its_stack(blank, guard):
    guard.label = "plumbing: a thrown error"
    blank.evaluate("() => { function deepInside() { throw new Error('boom'); } setTimeout(deepInside, 0); }")
    blank.wait_for_timeout(300)
    [text] = guard.errors_for("plumbing: a thrown error")
    assert text.startswith("page error: boom") and "deepInside" in text, text
