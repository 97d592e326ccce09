"""Every notebook in JupyterLab, in headless Chromium: the English ones in the light and the dark theme, the Chinese
edition's (notebooks/zh/) listed in ZH_IN_LAB in the light theme (their code is the
English code, whose dark-theme look is proven on the English twins); open it (a new kernel), clear its stored
outputs, run all cells, then check
what a reader would see and drive every widget once (a Chinese notebook's widgets are found and driven by their
Chinese labels, computed with lib.i18n).

Per notebook it asserts: every code cell ran, no error output, no "Error displaying widget", no browser
console error, no request to anything but loopback, the expected number of PNG figures, plotly figures and
widget views (tests/browser/expected.py), each of them drawn on the page; every piece of text in the widgets'
HTML has a contrast of at least 4.5:1 against the background it is drawn on (WCAG AA,
``lib.widgets.style.contrast_ratio``); and each widget reacts to its controls (tests/browser/drive.py). Every figure,
plotly figure and widget is saved as a screenshot whose name says the theme and edition (``lab-light-…``,
``lab-dark-…``, ``lab-zh-light-…``; ``python -m tools.gallery`` puts them side by side). One server and one page
serve both themes and both editions. Each notebook runs once: an English one is then looked at in the light theme
and in the dark one (switched as a person does, Settings → Theme, which stores it in the server's own settings
folder), its widgets driven, and looked at again in both; its figures are white cards in either theme
(``lib.widgets.style``), and its widgets' text is checked for contrast in each.
Before any notebook, JupyterLab must have started without its "official Jupyter news" prompt, with the same
settings as ``make lab``.
"""
from __future__ import annotations

import json
import time
import urllib.request

import pytest

import kvlab_browser as kb
from drive import drive, kind_of
from expected import EXPECTED, MUST_DRIVE, MUST_FIT, ZH_IN_LAB, counted, output_kind

RUN_ALL_TIMEOUT_MS = 300_000  # one notebook; its own budget is 40 s on an idle machine
DRIVEN: dict[tuple, set] = {}  # (edition, notebook) -> widget kinds driven in it (for every notebook that passed)
# Each edition and the themes it is looked at in. A notebook runs once; each theme is then switched to on that run,
# as a reader does with Settings -> Theme (figures are white cards in both themes, lib.widgets.style; the widgets'
# text follows the theme's CSS at once). The variant names the screenshots: lab-<variant>-…
# The Chinese edition's code cells and outputs are the English ones (tests/test_edition.py) and nbval runs every one
# of them; in JupyterLab it opens the notebooks of ZH_IN_LAB, whose widgets are found and driven by their Chinese
# labels, which keeps the browser test's share of `make test` within its budget now that notebooks run the real model.
EDITIONS = [("en", ("light", "dark")), ("zh", ("light",))]
CASES = [(lang, themes, name) for lang, themes in EDITIONS for name in kb.notebook_names(lang)
         if lang == "en" or name in ZH_IN_LAB]
NEWS = "official Jupyter news"  # JupyterLab's prompt: "Would you like to get notified about official Jupyter news?"

# Switch JupyterLab's theme (what Settings -> Theme does; it is stored in the server's settings folder).
SET_THEME_JS = "(theme) => window.jupyterapp.commands.execute('apputils:change-theme', {theme})"
THEME_IS_JS = "(theme) => document.body.dataset.jpThemeName === theme"

# Tag every output node of the open notebook with data-kvlab="<notebook>/c<cell>-o<output>"; list them.
OUTPUTS_JS = """(name) => {
  const nb = window.jupyterapp.shell.currentWidget.content, res = [];
  nb.widgets.forEach((c, i) => {
    if (c.model.type !== 'code') return;
    c.outputArea.widgets.forEach((o, j) => {
      const m = c.outputArea.model.get(j), id = `c${i}-o${j}`, js = m.toJSON();
      o.node.setAttribute('data-kvlab', `${name}/${id}`);
      res.push({id, cell: i, mimes: Object.keys(m.data || {}),
                error: m.type === 'error' ? `${js.ename}: ${js.evalue}` : null});
    });
  });
  return res;
}"""

OUTPUT_COUNT_JS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .filter(c => c.model.type === 'code' && (c.model.outputs.length > 0 || c.model.executionCount !== null)).length"""

NOT_RUN_JS = """() => window.jupyterapp.shell.currentWidget.content.widgets
  .map((c, i) => (c.model.type === 'code' && c.model.sharedModel.source.trim() && c.model.executionCount === null)
                 ? i : -1)
  .filter(i => i >= 0)"""

KERNEL_IDLE_JS = """(path) => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  if (!w || !w.context || w.context.path !== path) return false;
  const k = w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle';
}"""

# True once JupyterLab has started and restored its layout. A polled page function, not an awaited promise
# (see kvlab_browser.settle): the wait hangs on window and starts again if the page reloads.
STARTED_JS = """() => {
  const app = window.jupyterapp;
  if (!app || !app.serviceManager.isReady) return false;
  if (!window.__kvlabStarted) {
    const s = window.__kvlabStarted = {done: false};
    s.promise = Promise.all([app.started, app.restored]).then(() => { s.done = true; });
  }
  return window.__kvlabStarted.done;
}"""

# Shut the kernel down and close the tab without saving (the copy's outputs are thrown away anyway).
CLOSE_JS = """async (path) => {
  for (const w of Array.from(window.jupyterapp.shell.widgets('main'))) {
    if (!w.context || w.context.path !== path) continue;
    try { await w.sessionContext.shutdown(); } catch (e) {}
    w.context.model.dirty = false;
    w.dispose();
  }
}"""


# Two animation frames and a short pause: time for deferred work (a closed notebook's teardown, the splash's
# 200-ms timer) to run while the guard's label is still the one it belongs to.
QUIET_JS = """() => new Promise(done => requestAnimationFrame(() => requestAnimationFrame(() => setTimeout(done, 300))))"""


# The widget's span on the page, from the top of its first control to the lowest bottom of its tables, against the
# height of the notebook panel that shows it (JupyterLab's window less its bars), in px.
SPAN_JS = """(el) => {
  const box = el.getBoundingClientRect(), first = el.querySelector('.widget-slider, .widget-text, .widget-dropdown');
  const tables = Array.from(el.querySelectorAll('table'));
  const panel = el.closest('.jp-WindowedPanel-outer, .jp-Notebook') || document.body;
  const top = (first || el).getBoundingClientRect().top;
  const bottom = Math.max(...[el].concat(tables).map(t => t.getBoundingClientRect().bottom));
  return {height: box.height, span: bottom - top, panel: panel.getBoundingClientRect().height,
          window: window.innerHeight};
}"""


def fits_on_screen(out, what: str) -> str:
    """A MUST_FIT widget's controls and all of its tables fit the visible notebook panel together."""
    m = out.evaluate(SPAN_JS)
    assert m["span"] <= m["panel"], f"{what}: from its first control to the bottom of its tables the widget spans " \
        f"{m['span']:.0f} px, more than the {m['panel']:.0f} px of notebook a {m['window']}-px window shows"
    return f"fits one screen: widget {m['height']:.0f} px tall, controls to tables' bottom {m['span']:.0f} px, " \
           f"panel {m['panel']:.0f} px of a {m['window']}-px window"


def variant(theme: str, lang: str) -> str:
    """``light`` / ``dark`` for English, ``zh-light`` for the Chinese edition: in test ids and screenshot names."""
    return theme if lang == "en" else f"{lang}-{theme}"


@pytest.fixture(scope="session")
def lab_page(lab, browser, guard, clean_screenshots):
    page = browser.new_page()
    guard.label = "JupyterLab start-up"
    # Plain /lab: the server's workspace folder is new and empty (isolated_env). "?reset" is not needed, and
    # JupyterLab answers a second routing of it with a page reload, which broke the start-up wait in CI.
    page.goto(f"{lab.url}/lab")
    page.wait_for_function(STARTED_JS, timeout=180_000)
    yield page
    page.close()


def test_expected_table_matches_committed_notebooks():
    """The table of expected outputs must describe the committed notebooks (it is derived from them)."""
    rows = {name: counted(kb.NOTEBOOKS / f"{name}.ipynb") for name in kb.notebook_names()}
    missing = sorted(set(rows) - set(EXPECTED))
    assert not missing, "add these rows to EXPECTED in tests/browser/expected.py (or run it with --write):\n" + \
        "\n".join(f"    {n!r}: {rows[n]!r}," for n in missing)
    wrong = {n: (EXPECTED[n], rows[n]) for n in rows if EXPECTED[n] != rows[n]}
    assert not wrong, "tests/browser/expected.py no longer matches the committed outputs (table != notebook); " \
        "run it with --write:\n" + "\n".join(f"    {n}: {t} != {r}" for n, (t, r) in wrong.items())


def test_chinese_notebooks_expect_the_english_rows():
    """The Chinese edition has every English notebook, each with the English outputs (same code cells): the browser
    test expects the English row of EXPECTED for it."""
    assert kb.notebook_names("zh") == kb.notebook_names(), \
        f"notebooks/zh/ {kb.notebook_names('zh')} != notebooks/ {kb.notebook_names()}: build the Chinese edition " \
        f"(python -m tools.edition build zh NN_name)"
    wrong = {n: (EXPECTED[n], counted(kb.edition_folder("zh") / f"{n}.ipynb")) for n in kb.notebook_names("zh")}
    wrong = {n: pair for n, pair in wrong.items() if pair[0] != pair[1]}
    assert not wrong, "the Chinese notebooks' committed outputs differ from the English row (rebuild and rerun " \
        "them):\n" + "\n".join(f"    zh/{n}: {r} != English {e}" for n, (e, r) in wrong.items())


def run_all(page, path: str):
    """Open the notebook, clear its stored outputs and run every cell, as a person does with Edit -> Clear Outputs
    of All Cells and Run -> Run All Cells. Opening it starts a new kernel (the previous notebook's was shut down with
    its tab), so nothing of another notebook is in it; a restart first would only start a second kernel (5-9 s
    each). Clearing first makes every output on the page this run's, and a cell that did not run one without an
    execution count (the committed notebooks store theirs)."""
    kb.settle(page, "(path) => window.jupyterapp.commands.execute('docmanager:open', {path, factory: 'Notebook'})",
              path, timeout_ms=180_000, what=f"opening {path}")
    page.wait_for_function(KERNEL_IDLE_JS, arg=path, timeout=180_000)
    kb.settle(page, "() => window.jupyterapp.commands.execute('notebook:clear-all-cell-outputs')",
              what=f"clearing {path}'s stored outputs")
    assert not page.evaluate(OUTPUT_COUNT_JS), f"{path}: outputs left after clearing them"
    page.evaluate("() => { window.__kvlabRun = null; window.jupyterapp.commands.execute('notebook:run-all-cells')"
                  ".then(r => window.__kvlabRun = String(r), e => window.__kvlabRun = 'failed: ' + e); }")
    page.wait_for_function("() => window.__kvlabRun !== null", timeout=RUN_ALL_TIMEOUT_MS)
    page.wait_for_function(KERNEL_IDLE_JS, arg=path, timeout=60_000)


def test_lab_starts_without_the_news_prompt(lab, lab_page):
    """The server has the project's settings (news off, as ``make lab``), and no news prompt shows after start-up."""
    url = f"{lab.url}/lab/api/settings/@jupyterlab/apputils-extension:notification"
    with urllib.request.urlopen(url, timeout=30) as r:
        schema = json.load(r)["schema"]["properties"]
    assert schema["fetchNews"]["default"] == "false" and schema["checkForUpdates"]["default"] is False, \
        f"JupyterLab did not get the project's settings (tools/lab_settings/overrides.json): " \
        f"fetchNews={schema['fetchNews'].get('default')!r}, " \
        f"checkForUpdates={schema['checkForUpdates'].get('default')!r}"
    time.sleep(3)  # the prompt is emitted once the layout is restored and the settings are loaded
    text = lab_page.evaluate("() => document.body.innerText")
    assert NEWS not in text, "JupyterLab asks about news at start-up; tools/lab_settings/overrides.json should " \
                             "set fetchNews to 'false'"


def set_theme(page, theme: str):
    """Switch JupyterLab to ``theme`` ("light" / "dark") unless it is in it already; wait until it is drawn."""
    want = kb.THEMES[theme]
    if not page.evaluate(THEME_IS_JS, want):
        kb.settle(page, SET_THEME_JS, want, what=f"switching to {want}")
        page.wait_for_function(THEME_IS_JS, arg=want, timeout=60_000)
        # the next switch must not come before JupyterLab's splash is gone (test_theme_switches_back_and_forth…)
        page.wait_for_function("() => !document.getElementById('jupyterlab-splash')", timeout=60_000)
    assert page.evaluate("() => document.body.dataset.jpThemeLight") == str(theme == "light").lower()


def test_theme_switches_back_and_forth_without_errors(lab_page, guard):
    """Light, dark, light, dark as fast as set_theme allows (what the browser test does on a notebook without
    figures): JupyterLab logs no error. Each switch shows JupyterLab's splash and removes it 200 ms after the theme
    has loaded; a switch inside that window made the older timer remove the new splash, and the newer one then threw
    "Failed to execute 'removeChild' on 'Node'" (CI, en 07). set_theme waits until the splash is gone."""
    guard.label = "theme switches"
    for theme in ("light", "dark", "light", "dark", "light"):
        set_theme(lab_page, theme)
    kb.settle(lab_page, QUIET_JS, what="letting the last switch's timers run")
    assert not guard.errors_for("theme switches"), "\n".join(guard.errors_for("theme switches"))


@pytest.mark.parametrize("lang,themes,name", CASES, ids=[f"{lang}-{n}" for lang, _, n in CASES])
def test_notebook_in_jupyterlab(lang, themes, name, lab_page, guard):
    page = lab_page
    path = f"{name}.ipynb" if lang == "en" else f"{lang}/{name}.ipynb"  # relative to the server's root
    guard.label = f"{lang} {name}"
    # Looked at in each theme before driving, driven in the last, then looked at again back to the first: two theme
    # switches a notebook (each redraws the whole page), starting in the theme the last notebook ended in.
    order = sorted(themes, key=lambda t: not page.evaluate(THEME_IS_JS, kb.THEMES[t]))
    set_theme(page, order[0])
    want = EXPECTED.get(name)  # a Chinese notebook has its English twin's outputs
    assert want is not None, f"{name} has no row in tests/browser/expected.py; add " \
                             f"{name!r}: {counted(kb.edition_folder(lang) / f'{name}.ipynb')!r}"
    kinds = set()
    tag = path.removesuffix(".ipynb")
    try:
        run_all(page, path)
        outputs = page.evaluate(OUTPUTS_JS, tag)
        errors = [f"cell {o['cell']}: {o['error']}" for o in outputs if o["error"]]
        assert not errors, f"{name}: error outputs after Run All:\n" + "\n".join(errors)
        not_run = page.evaluate(NOT_RUN_JS)
        assert not not_run, f"{name}: code cells {not_run} did not run ({page.evaluate('window.__kvlabRun')})"

        by_kind = {"image": [], "plotly": [], "widget": []}
        for o in outputs:
            kind = output_kind(o["mimes"])
            if kind:
                by_kind[kind].append(o)
        got = {"images": len(by_kind["image"]), "plotly": len(by_kind["plotly"]), "widgets": len(by_kind["widget"])}
        assert got == want, f"{name}: outputs in the browser {got} differ from the committed ones {want}"

        def output(o):
            return page.locator(f'[data-kvlab="{tag}/{o["id"]}"]')

        widget_kinds = {}
        for o in by_kind["widget"]:
            out = output(o)
            out.locator(".jupyter-widgets").first.wait_for()
            assert "Error displaying widget" not in out.inner_text(), f"{name} {o['id']}: {out.inner_text()[:300]}"
            widget_kinds[o["id"]] = kind_of(out, lang)

        def look(theme: str, driven: bool):
            """In ``theme``: every figure drawn (before driving) and every widget's text readable, each saved."""
            set_theme(page, theme)
            shot = f"lab-{variant(theme, lang)}-{name}"
            if not driven:
                for o in by_kind["image"]:
                    img = output(o).locator("img").first
                    img.wait_for(state="attached")
                    assert img.evaluate("i => i.complete && i.naturalWidth > 0"), f"{name} {o['id']}: a PNG did not load"
                    kb.screenshot(output(o), f"{shot}-{o['id']}-image")
                for o in by_kind["plotly"]:
                    out = output(o)
                    plot = out.locator(".js-plotly-plot").first
                    plot.locator(".main-svg").first.wait_for(state="attached")
                    assert plot.evaluate("g => g.getBoundingClientRect().height > 50 && (g.data || []).length > 0"), \
                        f"{name} {o['id']}: the plotly figure has no size or no data"
                    kb.screenshot(out, f"{shot}-{o['id']}-plotly")
            for o in by_kind["widget"]:
                out, kind = output(o), widget_kinds[o["id"]]
                unreadable = kb.unreadable_text(out)
                assert not unreadable, f"{name} {o['id']} ({kind}) in {kb.THEMES[theme]}" + \
                    (", once driven" if driven else "") + ": text below 4.5:1 contrast:\n" + "\n".join(unreadable[:20])
                kb.screenshot(out, f"{shot}-{o['id']}-{kind}" + ("-driven" if driven else ""))

        for theme in order:
            look(theme, driven=False)
        notes = []  # driven in the theme last looked at
        for o in by_kind["widget"]:
            out, kind = output(o), widget_kinds[o["id"]]
            notes.append(f"{o['id']} {kind}: {kb.text_pieces(out)} pieces of text, all >= 4.5:1 contrast")
            if name in MUST_FIT:
                notes.append(f"{o['id']} {kind}: " + fits_on_screen(out, f"{name} {o['id']}"))
            notes += [f"{o['id']} {kind}: {line}" for line in drive(page, out, kind, lang)]
            kinds.add(kind)
        for theme in reversed(order):
            look(theme, driven=True)

        body = page.locator(".jp-NotebookPanel:not(.lm-mod-hidden)").inner_text()
        assert "Error displaying widget" not in body, f"{name}: a widget failed to display"
    finally:
        kb.settle(page, CLOSE_JS, path, what=f"closing {path}")
        kb.settle(page, QUIET_JS, what=f"letting {path} finish its teardown")
    # Checked once the notebook is closed: what its teardown throws is this notebook's, not the next one's.
    label = guard.label
    assert not guard.errors_for(label), f"{label}: browser console errors:\n" + "\n".join(guard.errors_for(label))
    assert not guard.offsite_for(label), f"{label}: requests off the machine: {guard.offsite_for(label)}"
    assert not guard.subshells_for(label), \
        f"{label}: the page asked the kernel for {guard.subshells_for(label)} subshell(s): comms went over " \
        "subshells, which tools/lab_settings/overrides.json turns off (commsOverSubshells: disabled)"
    print(f"\n{label}: {json.dumps(got)}" + "".join(f"\n    {n}" for n in notes))
    DRIVEN[lang, name] = kinds


def test_every_required_widget_kind_was_driven(lab_page):
    """The player, the heat-map, the memory explorer and the block stepper (MUST_DRIVE) were found and driven in
    their notebooks, in the English edition and in the Chinese one (by their Chinese labels)."""
    assert DRIVEN, "no notebook passed in JupyterLab"
    for (lang, name), kinds in DRIVEN.items():
        need = MUST_DRIVE.get(name, set())
        assert need <= kinds, f"{name} ({lang}): should show widgets of kinds {sorted(need)}, but the browser test " \
                              f"found and drove only {sorted(kinds)}"


def test_lab_start_up_was_clean(lab_page, guard):
    """JupyterLab itself (before any notebook) logged no console error and reached nothing off the machine."""
    assert not guard.errors_for("JupyterLab start-up"), guard.errors_for("JupyterLab start-up")
    assert not guard.offsite_for("JupyterLab start-up"), guard.offsite_for("JupyterLab start-up")
