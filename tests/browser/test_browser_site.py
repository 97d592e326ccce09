"""The static site (``python -m tools.site``): every notebook becomes a page that needs no kernel and no network.

Without a browser: every page exists, loads nothing from the network (no CDN script, style or font), and
holds as many PNG figures, plotly figures and live-widget notes as its notebook has outputs. In headless
Chromium, from disk (file://): two pages draw their figures and math with no console error and no request
off the machine, a plotly step-through figure animates when its Play button is pressed, and on the other
page a figure's slider jumps when clicked. The Chinese edition's pages (``site/zh/``) are built and checked the
same way without a browser; in the browser, the Chinese 02 and 05 draw their figures and math, speak Chinese in
their navigation, and their language switch ("English") opens the English twin, whose "中文" leads back; and every
Chinese page draws all its figures, each saved as a screenshot.
"""
from __future__ import annotations

import re

import pytest

import kvlab_browser as kb
from expected import EXPECTED

from tools import site

# Pages opened in the browser: the generation player's page and the memory page, or the first two built.
OPEN = ["02_autoregressive_generation", "05_kv_cache_memory"]

MATH_DONE_JS = """() => !window.MathJax || (MathJax.Hub && MathJax.Hub.queue && MathJax.Hub.queue.pending === 0
                                         && !MathJax.Hub.queue.running)"""


@pytest.fixture(scope="session")
def built(tmp_path_factory):
    out = tmp_path_factory.mktemp("site")
    pages = site.build(out, verbose=False)
    return out, pages


def chinese_names() -> list[str]:
    return [n for n in kb.notebook_names() if (kb.NOTEBOOKS / "zh" / f"{n}.ipynb").is_file()]


@pytest.mark.parametrize("edition", ["en", "zh"])
def test_every_notebook_has_an_offline_page(built, edition):
    out, pages = built
    folder, names = (out, kb.notebook_names()) if edition == "en" else (out / "zh", chinese_names())
    assert sorted(p.stem for p in pages if p.parent == folder) == names
    assert (out / "plotly.min.js").stat().st_size > 1_000_000 and (out / "mathjax" / "MathJax.js").is_file()
    index = (folder / "index.html").read_text()
    for name in names:
        assert f'href="{name}.html"' in index, f"{edition} index.html does not link {name}.html"
        page = (folder / f"{name}.html").read_text()
        assert site.remote_loads(page) == [], f"{name}.html loads from the network: {site.remote_loads(page)}"
        want = EXPECTED[name]
        got = {"images": len(re.findall(r'<img\b[^>]*src="data:image/png;base64,', page)),
               "plotly": len(re.findall(r'Plotly\.newPlot\(', page)),
               "widgets": page.count('<div class="kvlab-live-note">')}
        assert got == want, f"{edition} {name}.html has {got}; the notebook has {want}"


def test_remote_loads_finds_cdn_scripts_styles_and_fonts():
    page = ('<script src="https://cdn.example/x.js"></script><link rel="stylesheet" href="//cdn.example/a.css">'
            '<style>@import "https://fonts.example/f.css"; .a { background: url(https://img.example/i.png) }</style>'
            '<a href="https://example.org/">a link is not loaded</a><script src="plotly.min.js"></script>')
    assert site.remote_loads(page) == ["https://cdn.example/x.js", "//cdn.example/a.css",
                                       "https://fonts.example/f.css", "https://img.example/i.png"]


def test_site_rejects_an_unknown_notebook(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"no notebook 'nope'; the notebooks are: 0"):
        site.build(tmp_path, ["nope"], verbose=False)


def pages_to_open() -> list[str]:
    names = kb.notebook_names()
    chosen = [n for n in OPEN if n in names]
    return (chosen + [n for n in names if n not in chosen and EXPECTED.get(n, {}).get("plotly")])[:2]


@pytest.mark.parametrize("name", pages_to_open())
def test_page_from_disk(name, built, browser, guard, clean_screenshots):
    out, _ = built
    label = f"site {name}"
    with kb.checked_page(browser, guard, label) as page:
        page.goto((out / f"{name}.html").as_uri())
        page.wait_for_load_state("load")
        page.wait_for_function(MATH_DONE_JS, timeout=60_000)
        want = EXPECTED[name]
        plots = page.locator(".js-plotly-plot")
        page.wait_for_function(f"() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= "
                               f"{want['plotly']}", timeout=60_000)
        assert plots.count() == want["plotly"], \
            f"{name}: {plots.count()} plotly figures drawn, {want['plotly']} expected"
        assert page.locator("img").evaluate_all("imgs => imgs.filter(i => i.complete && i.naturalWidth > 0).length") \
            >= want["images"]
        page.screenshot(path=str(kb.SCREENSHOTS / f"site-{name}-top.png"))
        notes = []
        for k in range(plots.count()):
            kb.screenshot(plots.nth(k), f"site-{name}-plotly-{k}")
        framed = [k for k in range(plots.count()) if plots.nth(k).evaluate(
            "g => ((g._transitionData || {})._frames || []).length > 1 && (g.layout.sliders || []).length > 0")]
        playable = [k for k in framed if plots.nth(k).evaluate("g => (g.layout.updatemenus || []).length > 0")]
        if name == pages_to_open()[0]:
            assert playable, f"{name}: no plotly figure with frames and a Play button to step"
        if playable:
            notes.append(play_animation(page, plots.nth(playable[0]), f"site-{name}-plotly-{playable[0]}"))
        elif framed:
            notes.append(click_slider(page, plots.nth(framed[0]), f"site-{name}-plotly-{framed[0]}"))
        print(f"\n{label}: {plots.count()} plotly figures drawn; " + "; ".join(notes))


STATE_JS = "g => JSON.stringify([g._fullLayout.sliders.map(s => s.active), g.layout.title, g.data])"


def slider_state(plot) -> tuple[str, int]:
    """The figure in view, and what it shows now: (its state, the slider's active frame)."""
    plot.scroll_into_view_if_needed()
    return plot.evaluate(STATE_JS), plot.evaluate("g => g._fullLayout.sliders[0].active")


def click_slider(page, plot, shot: str) -> str:
    """Click the figure's slider rail near its right end; the slider must jump there and the figure change."""
    before, active = slider_state(plot)
    rail = plot.locator(".slider-rail-rect").first
    box = rail.bounding_box()
    page.mouse.click(box["x"] + 0.95 * box["width"], box["y"] + box["height"] / 2)
    page.wait_for_function("([g, a]) => g._fullLayout.sliders[0].active > a", arg=[plot.element_handle(), active],
                           timeout=60_000)
    assert plot.evaluate(STATE_JS) != before, "the figure did not change when its slider moved"
    kb.screenshot(plot, shot + "-slid")
    return f"slider clicked: frame {active} -> {plot.evaluate('g => g._fullLayout.sliders[0].active')}"


def play_animation(page, plot, shot: str) -> str:
    """Press the figure's ▶ Play button; the slider must move on and the figure show another frame."""
    before, active = slider_state(plot)
    plot.locator(".updatemenu-button").first.click()
    page.wait_for_function("([g, a]) => g._fullLayout.sliders[0].active >= a + 2", arg=[plot.element_handle(), active],
                           timeout=60_000)
    after = plot.evaluate(STATE_JS)
    assert after != before, "the figure did not change while playing"
    kb.screenshot(plot, shot + "-played")
    return f"Play moved the slider from frame {active} to {plot.evaluate('g => g._fullLayout.sliders[0].active')}"


# The Chinese pages opened in the browser: 02 and 05 (those that exist).
OPEN_ZH = [n for n in OPEN if n in chinese_names()]


@pytest.mark.parametrize("name", OPEN_ZH)
def test_chinese_page_from_disk_and_its_language_switch(name, built, browser, guard, clean_screenshots):
    out, _ = built
    label = f"site zh {name}"
    with kb.checked_page(browser, guard, label) as page:
        page.goto((out / "zh" / f"{name}.html").as_uri())
        page.wait_for_load_state("load")
        page.wait_for_function(MATH_DONE_JS, timeout=60_000)
        want = EXPECTED[name]
        page.wait_for_function(f"() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= "
                               f"{want['plotly']}", timeout=60_000)
        assert page.locator(".js-plotly-plot").count() == want["plotly"]
        assert page.evaluate("document.documentElement.lang") == "zh"
        assert page.locator("nav.kvlab a").first.inner_text() == "全部笔记本"
        page.screenshot(path=str(kb.SCREENSHOTS / f"site-zh-{name}-top.png"))
        switch = page.locator("nav.kvlab a.kvlab-lang")
        assert switch.inner_text() == "English"
        switch.click()
        page.wait_for_url((out / f"{name}.html").as_uri())
        page.wait_for_load_state("load")
        assert page.evaluate("document.documentElement.lang") == "en"
        back = page.locator("nav.kvlab a.kvlab-lang")
        assert back.inner_text() == "中文" and back.evaluate("a => a.href") == (out / "zh" / f"{name}.html").as_uri()
        page.wait_for_function(MATH_DONE_JS, timeout=60_000)
        print(f"\n{label}: {want['plotly']} plotly figures drawn; English switch -> {name}.html, 中文 leads back")


@pytest.mark.parametrize("name", chinese_names())
def test_every_chinese_page_draws_every_figure(name, built, browser, guard, clean_screenshots):
    """The Chinese edition in the browser, every notebook (JupyterLab runs the Chinese notebooks of ZH_IN_LAB; these
    pages need no kernel, so all of them are cheap to look at): each page draws as many PNG and plotly figures as
    its notebook holds, with no console error and no request off the machine, says its text in Chinese, and each
    figure is saved (``site-zh-<notebook>-figure-k`` / ``-plotly-k``) for the gallery and a reviewer."""
    out, _ = built
    want = EXPECTED[name]
    with kb.checked_page(browser, guard, f"site zh {name} figures") as page:
        page.goto((out / "zh" / f"{name}.html").as_uri())
        page.wait_for_load_state("load")
        page.wait_for_function(MATH_DONE_JS, timeout=60_000)
        page.wait_for_function(f"() => document.querySelectorAll('.js-plotly-plot .main-svg').length >= "
                               f"{want['plotly']}", timeout=60_000)
        assert page.evaluate("document.documentElement.lang") == "zh"
        assert len(re.findall(r"[\u4e00-\u9fff]", page.locator("body").inner_text())) > 200, \
            f"{name}: the Chinese page says little in Chinese"
        figures = page.locator('img[src^="data:image/png"]')
        page.wait_for_function("() => Array.from(document.images).every(i => i.complete)", timeout=60_000)
        drawn = figures.evaluate_all("imgs => imgs.filter(i => i.naturalWidth > 0).length")
        assert figures.count() == drawn == want["images"], \
            f"{name}: {drawn} of {figures.count()} PNG figures drawn, {want['images']} in the notebook"
        plots = page.locator(".js-plotly-plot")
        assert plots.count() == want["plotly"], f"{name}: {plots.count()} plotly figures, {want['plotly']} expected"
        for k in range(figures.count()):
            kb.screenshot(figures.nth(k), f"site-zh-{name}-figure-{k}")
        for k in range(plots.count()):
            kb.screenshot(plots.nth(k), f"site-zh-{name}-plotly-{k}")
        print(f"\nsite zh {name}: {drawn} PNG and {plots.count()} plotly figures drawn and saved")
