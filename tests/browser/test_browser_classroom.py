"""The classroom view (``python -m tools.classroom NAME``, Voilà with our template) in headless Chromium, for
two notebooks: the page shows no code, uses large type, has every plotly figure and widget of the notebook
drawn and working (driven as in JupyterLab), → steps the player from the keyboard, PgDn / PgUp / j / k land
each on the next / previous section heading (its top at the top of the element that really scrolls: Voilà's
inner panel), the widget HTML text has >= 4.5:1 contrast, and the page loads nothing but loopback, with no
console error. ``KVLAB_CLASSROOM_ALL=1`` opens every notebook instead of two. The Chinese 05
(``/voila/render/zh/...``, served by the same Voilà) show the same outputs, their widgets, Chinese key bar and a
language switch to the English page of the same notebook.
"""
from __future__ import annotations

import json
import os
import re
import shutil

import pytest

import kvlab_browser as kb
from drive import button, drive, kind_of, readout, wait_readout
from expected import CLASSROOM, EXPECTED

from tools import classroom

# Two notebooks by default; KVLAB_CLASSROOM_ALL=1 opens every notebook in the classroom view.
NOTEBOOKS = (kb.notebook_names() if os.environ.get("KVLAB_CLASSROOM_ALL") == "1"
             else [n for n in CLASSROOM if (kb.NOTEBOOKS / f"{n}.ipynb").exists()][:2])

RENDERED_JS = """() => {
  const r = document.querySelector('#rendered_cells');
  return !!r && getComputedStyle(r).display !== 'none' && !document.querySelector('#loading');
}"""

# Top-level outputs (not the ones inside a widget), tagged data-kvlab="<kind>-<n>", counted by kind.
OUTPUTS_JS = """() => {
  const count = {image: 0, plotly: 0, widget: 0};
  document.querySelectorAll('#rendered_cells .jp-OutputArea-output').forEach(o => {
    if (o.parentElement.closest('.jp-OutputArea-output')) return;
    let kind = null;
    if (o.classList.contains('jp-RenderedPlotly') || o.querySelector(':scope > .js-plotly-plot')) kind = 'plotly';
    else if (o.querySelector('.jupyter-widgets')) kind = 'widget';
    else if (o.classList.contains('jp-RenderedImage')) kind = 'image';
    if (!kind) return;
    o.setAttribute('data-kvlab', `${kind}-${count[kind]}`);
    count[kind] += 1;
  });
  return count;
}"""


# The type a projector shows, in CSS px as drawn (a size times every CSS zoom above it): the prose (paragraphs of
# the markdown), the widgets (their HTML text and control labels) and the plotly figures (every text of their SVG),
# each as the median over its pieces, with the smallest. And the page's edges: where the content starts and ends
# across (projector overscan), and the key bar against the bottom of the panel that scrolls.
TYPE_JS = """() => {
  const zoom = n => {
    let z = 1;
    for (; n && n.nodeType === 1; n = n.parentElement) z *= parseFloat(getComputedStyle(n).zoom) || 1;
    return z;
  };
  const shown = n => { const r = n.getBoundingClientRect(); return r.width > 0 && r.height > 0; };
  const own = n => Array.from(n.childNodes).some(t => t.nodeType === 3 && t.textContent.trim());
  const sizes = sel => Array.from(document.querySelectorAll(sel)).filter(n => own(n) && shown(n))
    .map(n => parseFloat(getComputedStyle(n).fontSize) * zoom(n)).sort((a, b) => a - b);
  const sum = v => v.length ? {median: +v[Math.floor(v.length / 2)].toFixed(1), min: +v[0].toFixed(1),
                               n: v.length} : null;
  const cells = Array.from(document.querySelectorAll('#rendered_cells .jp-Cell')).filter(shown);
  const sc = document.querySelector('#rendered_cells'), bar = document.querySelector('#kvlab-keys');
  return {
    body: sum(sizes('#rendered_cells .jp-RenderedHTMLCommon p, #rendered_cells .jp-RenderedHTMLCommon li')),
    widgets: sum(sizes('#rendered_cells .widget-html-content, #rendered_cells .widget-html-content *, ' +
                       '#rendered_cells .jupyter-widgets label.widget-label')),
    plotly: sum(sizes('#rendered_cells .js-plotly-plot text')),
    width: window.innerWidth, left: Math.min(...cells.map(c => c.getBoundingClientRect().left)),
    right: Math.max(...cells.map(c => c.getBoundingClientRect().right)),
    panelBottom: sc.getBoundingClientRect().bottom, barTop: bar ? bar.getBoundingClientRect().top : null,
  };
}"""
SAFE_SHARE = 0.04  # content keeps at least 4% of the width from each edge (the CSS asks max(5vw, 48px))
PLOTLY_SHARE = 0.6  # plotly's median text at least 60% of the prose's (it was 45% before plotly was scaled)


def projector_type_and_edges(page, name: str) -> str:
    """The classroom's type sizes (prose, widgets, plotly) and edges, checked; returns them as a line to print."""
    m = page.evaluate(TYPE_JS)
    body, widgets, plotly = m["body"], m["widgets"], m["plotly"]
    assert body and body["median"] >= 20, f"{name}: prose is {body}px; the classroom view uses large type (>= 20px)"
    assert widgets is None or widgets["median"] >= 0.8 * body["median"], \
        f"{name}: widget text {widgets} px is small beside the prose's {body['median']} px"
    assert plotly is None or plotly["median"] >= PLOTLY_SHARE * body["median"], \
        f"{name}: plotly text {plotly} px is under {PLOTLY_SHARE:.0%} of the prose's {body['median']} px " \
        f"(is the kvlab template scaled? lib.widgets.style.plotly_template(scale))"
    safe = SAFE_SHARE * m["width"]
    assert m["left"] >= safe and m["right"] <= m["width"] - safe, \
        f"{name}: content spans x = {m['left']:.0f}..{m['right']:.0f} px of {m['width']}; a projector's overscan " \
        f"may cut anything within {safe:.0f} px of an edge"
    assert m["barTop"] is not None and m["panelBottom"] <= m["barTop"] + 0.5, \
        f"{name}: the key bar (top {m['barTop']}) covers the scrolling panel (bottom {m['panelBottom']})"
    return (f"type in px (median / smallest / pieces): prose {body}, widgets {widgets}, plotly {plotly}; "
            f"content x = {m['left']:.0f}..{m['right']:.0f} of {m['width']}; panel ends at {m['panelBottom']:.0f}, "
            f"key bar starts at {m['barTop']:.0f}")


def test_two_notebooks_for_the_classroom_exist():
    assert len(NOTEBOOKS) >= 2, f"the classroom test needs two of {CLASSROOM}; found {NOTEBOOKS}"


@pytest.fixture(scope="session")
def voila(tmp_path_factory):
    """The classroom server (Voilà, our template) over a temporary copy of notebooks/."""
    base = tmp_path_factory.mktemp("classroom")
    root = kb.copy_notebooks(base / "notebooks")
    (root / "zh").mkdir(exist_ok=True)  # the Chinese edition, one path apart (the language switch's target)
    for p in (kb.NOTEBOOKS / "zh").glob("[0-9][0-9]_*.ipynb"):
        shutil.copy2(p, root / "zh" / p.name)
    classroom.write_template(base / "template")
    env = kb.isolated_env(base / "home")
    for key in ("JUPYTER_PATH", "IPYTHONDIR"):  # our template, and the kernel's projector-scale start-up file
        env[key] = classroom.environment(base / "template")[key]
    port = kb.free_port()
    server = kb.Server(classroom.command(root, port), port, kb.ARTIFACTS / "logs" / "classroom.log", env=env,
                       cwd=root).wait_ready()
    yield server
    server.stop()


def shows_every_output(page, name: str, label: str) -> dict:
    """Wait until the classroom page has drawn its widgets and plotly figures; its images, plotly figures and
    widgets must be as many as the notebook's (``expected.py``). Returns the counts."""
    want = EXPECTED[name]
    page.wait_for_function(f"() => document.querySelectorAll('#rendered_cells .jupyter-widgets').length >= "
                           f"{want['widgets']}", timeout=120_000)
    page.wait_for_function(f"() => document.querySelectorAll('#rendered_cells .js-plotly-plot .main-svg')"
                           f".length >= {want['plotly']}", timeout=120_000)
    got = page.evaluate(OUTPUTS_JS)
    assert got == {"image": want["images"], "plotly": want["plotly"], "widget": want["widgets"]}, \
        f"{label}: the classroom page shows {got}; the notebook has {want}"
    return got


@pytest.mark.parametrize("name", NOTEBOOKS)
def test_classroom_view(name, voila, browser, guard, clean_screenshots):
    label = f"classroom {name}"
    with kb.checked_page(browser, guard, label) as page:
        page.goto(f"{voila.url}/voila/render/{name}.ipynb", timeout=300_000)  # Voilà runs every cell first
        page.wait_for_function(RENDERED_JS, timeout=300_000)  # Voilà runs every cell before it shows the page
        text = page.locator("#rendered_cells").inner_text()
        assert page.locator("#rendered_cells .jp-InputArea-editor").count() == 0, f"{name}: code cells are shown"
        shown = [c for c in code_openings(name) if c in text]
        assert not shown, f"{name}: the page shows code: {shown}"
        assert "Error displaying widget" not in text
        size = page.evaluate("parseFloat(getComputedStyle(document.querySelector('.jp-RenderedHTMLCommon'))"
                             ".fontSize)")
        assert size >= 20, f"{name}: prose is {size}px; the classroom view should use large type (>= 20px)"
        got = shows_every_output(page, name, name)
        notes = [projector_type_and_edges(page, name)]
        page.screenshot(path=str(kb.SCREENSHOTS / f"classroom-{name}-top.png"))
        switch = page.locator("#kvlab-lang")  # the language switch: the Chinese twin, one path apart
        assert switch.inner_text() == "中文" and switch.evaluate("a => a.href") == f"{voila.url}/voila/render/zh/{name}.ipynb"
        for k in range(got["plotly"]):
            kb.screenshot(page.locator(f'[data-kvlab="plotly-{k}"]'), f"classroom-{name}-plotly-{k}")
        for k in range(got["widget"]):
            out = page.locator(f'[data-kvlab="widget-{k}"]')
            kind = kind_of(out)
            kb.screenshot(out, f"classroom-{name}-widget-{k}-{kind}")
            notes += [f"widget {k} {kind}: {line}" for line in drive(page, out, kind)]
            if kind in ("player", "stepper"):
                notes.append(f"widget {k} {kind}: {keyboard_step(page, out)}")
            unreadable = kb.unreadable_text(out)
            assert not unreadable, f"{name} widget {k} ({kind}): text below 4.5:1 contrast:\n" + "\n".join(unreadable)
            kb.screenshot(out, f"classroom-{name}-widget-{k}-{kind}-driven")
        notes += section_keys(page)
        print(f"\n{label}: {got}" + "".join(f"\n    {n}" for n in notes))


# The element that really scrolls the page (the nearest ancestor of the cells that can scroll, else the page),
# and the offset of every section heading (h1, h2) from its top edge, in px.
SECTIONS_JS = """() => {
  const page = document.scrollingElement || document.documentElement;
  let sc = page;
  for (let n = document.querySelector('#rendered_cells'); n && n !== document.body && n !== page; n = n.parentElement) {
    if (/(auto|scroll|overlay)/.test(getComputedStyle(n).overflowY) && n.scrollHeight > n.clientHeight + 1) {
      sc = n; break;
    }
  }
  const top = sc === page ? 0 : sc.getBoundingClientRect().top + sc.clientTop;
  const hs = Array.from(document.querySelectorAll('#rendered_cells h1, #rendered_cells h2'))
    .filter(h => h.getBoundingClientRect().height > 0);
  return {scroller: sc === page ? 'the page' : `${sc.tagName.toLowerCase()}#${sc.id}.${sc.className}`,
          height: sc.scrollHeight, scrollTop: sc.scrollTop, texts: hs.map(h => h.textContent.trim().slice(0, 40)),
          offsets: hs.map(h => h.getBoundingClientRect().top - top)};
}"""
SCROLL_TOP_JS = """() => { const s = (%s)(); const page = document.scrollingElement || document.documentElement;
  let sc = page;
  for (let n = document.querySelector('#rendered_cells'); n && n !== document.body && n !== page; n = n.parentElement) {
    if (/(auto|scroll|overlay)/.test(getComputedStyle(n).overflowY) && n.scrollHeight > n.clientHeight + 1) {
      sc = n; break;
    }
  }
  sc.scrollTo({top: 0, behavior: 'instant'}); return s.scroller; }""" % SECTIONS_JS
LANDED_PX = 3  # a heading "is at the top" when its top is within this many px of the scroller's top
KEYS = [("PageDown", 1), ("j", 1), ("PageDown", 1), ("k", -1), ("PageUp", -1)]


def section_keys(page) -> list[str]:
    """From the top of the page: PgDn, j, PgDn, k, PgUp; each must bring the next / previous heading's top to the
    top of the element that really scrolls."""
    page.evaluate(SCROLL_TOP_JS)
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    notes = []
    for key, direction in KEYS:
        before = page.evaluate(SECTIONS_JS)
        offs = before["offsets"]
        ahead = [i for i, o in enumerate(offs) if (o > LANDED_PX if direction > 0 else o < -LANDED_PX)]
        assert ahead, f"no heading {'below' if direction > 0 else 'above'} the top to jump to with {key}: {offs}"
        want = ahead[0] if direction > 0 else ahead[-1]
        page.keyboard.press(key)
        try:
            page.wait_for_function(f"() => Math.abs(({SECTIONS_JS})().offsets[{want}]) <= {LANDED_PX}", timeout=10_000)
        except Exception as e:
            after = page.evaluate(SECTIONS_JS)
            raise AssertionError(
                f"{key} should bring heading {want} ({before['texts'][want]!r}) to the top of {before['scroller']} "
                f"(scrollHeight {before['height']} px); it moved the scroller {before['scrollTop']} -> "
                f"{after['scrollTop']} px and the heading is {after['offsets'][want]:.0f} px from the top") from e
        after = page.evaluate(SECTIONS_JS)
        notes.append(f"key {key}: {before['scroller']} scrolled {before['scrollTop']:.0f} -> {after['scrollTop']:.0f}"
                     f" px, heading {want} {after['texts'][want]!r} at {after['offsets'][want]:+.1f} px")
    return notes


def code_openings(name: str) -> list[str]:
    """The first two lines of every code cell of two lines or more (text no prose would repeat)."""
    nb = json.loads((kb.NOTEBOOKS / f"{name}.ipynb").read_text())
    out = []
    for cell in nb["cells"]:
        lines = [ln for ln in "".join(cell["source"]).splitlines() if ln.strip()]
        if cell["cell_type"] == "code" and len(lines) >= 2:
            out.append("\n".join(lines[:2]))
    return out


def keyboard_step(page, widget) -> str:
    """→ on the page (nothing focused) presses Step of the player nearest the middle of the screen."""
    slider = widget.locator(".widget-slider").last
    button(widget, "Step ▶").evaluate("b => b.scrollIntoView({block: 'center'})")
    page.evaluate("() => document.activeElement && document.activeElement.blur()")
    s = int(readout(slider))
    top = int(float(slider.locator(".noUi-handle").get_attribute("aria-valuemax")))
    key, want = ("ArrowLeft", s - 1) if s >= top else ("ArrowRight", s + 1)
    page.keyboard.press(key)
    wait_readout(page, slider, str(want), f"after pressing {key}")
    return f"key {key}: step {s} -> {want}"


ZH_NOTEBOOKS = [n for n in ["05_kv_cache_memory"]  # the English 02 and 05 above; the Chinese page and its switch once
                if (kb.NOTEBOOKS / "zh" / f"{n}.ipynb").exists()]


@pytest.mark.parametrize("name", ZH_NOTEBOOKS)
def test_chinese_classroom_view_and_its_language_switch(name, voila, browser, guard, clean_screenshots):
    label = f"classroom zh {name}"
    with kb.checked_page(browser, guard, label) as page:
        page.goto(f"{voila.url}/voila/render/zh/{name}.ipynb", timeout=300_000)
        page.wait_for_function(RENDERED_JS, timeout=300_000)
        assert page.locator("#rendered_cells .jp-InputArea-editor").count() == 0, f"zh {name}: code cells are shown"
        assert "Error displaying widget" not in page.locator("#rendered_cells").inner_text()
        got = shows_every_output(page, name, f"zh {name}")
        assert "下一节" in page.locator("#kvlab-keys").inner_text()
        switch = page.locator("#kvlab-lang")
        assert switch.inner_text() == "English"
        assert switch.evaluate("a => a.href") == f"{voila.url}/voila/render/{name}.ipynb"
        page.screenshot(path=str(kb.SCREENSHOTS / f"classroom-zh-{name}-top.png"))
        for k in range(got["widget"]):
            kb.screenshot(page.locator(f'[data-kvlab="widget-{k}"]'), f"classroom-zh-{name}-widget-{k}")
        print(f"\n{label}: {got}; switch -> {switch.evaluate('a => a.href')}")


def test_classroom_template_loads_nothing_from_the_network(tmp_path):
    folder = classroom.write_template(tmp_path)
    assert json.loads((folder / "conf.json").read_text()) == {"base_template": "lab"}
    for page in folder.glob("*.j2"):
        remote = re.findall(r'(?:src|href)="(https?://[^"]*)"', page.read_text())
        assert remote == [], f"{page.name} loads {remote}"
    index = (folder / "index.html.j2").read_text()
    assert "kvlab_voila_lab.html.j2" in index and "ArrowRight" in index and "font-size: 22px" in index


def test_classroom_serves_on_loopback_without_code(tmp_path):
    argv = classroom.command(tmp_path / "x.ipynb", 8999)
    assert "--Voila.ip=127.0.0.1" in argv and "--port=8999" in argv and "--strip_sources=True" in argv
    assert "--no-browser" in argv and "--no-browser" not in classroom.command(tmp_path, 8999, open_browser=True)


def test_classroom_rejects_an_unknown_notebook():
    with pytest.raises(FileNotFoundError, match=r"no notebook 'nope'; the notebooks are: 0\d_"):
        classroom.notebook_path("nope")
    assert classroom.notebook_path("05_kv_cache_memory.ipynb") == kb.NOTEBOOKS / "05_kv_cache_memory.ipynb"
