"""tools.classroom without a browser: the kernel's start-up file puts the course's style at projector scale,
and the page's colours come from lib.widgets.style; the Chinese edition's page (its notebook, URL, buttons, key bar and language
switch). (The page itself, its keys and widgets: tests/browser.)"""
from __future__ import annotations

import json
import re

import matplotlib as mpl
import pytest

from lib.widgets import style
from tools import classroom


class _Events:
    def __init__(self):
        self.hooks = {}

    def register(self, event, fn):
        self.hooks.setdefault(event, []).append(fn)


class _Shell:
    def __init__(self):
        self.events = _Events()


def test_startup_file_scales_the_style_after_setup_and_only_then(tmp_path):
    path = classroom.write_startup(tmp_path)
    assert path == tmp_path / "ipython" / "profile_default" / "startup" / "50-kvlab-classroom.py"
    assert classroom.environment(tmp_path)["IPYTHONDIR"] == str(tmp_path / "ipython")
    shell = _Shell()
    exec(compile(path.read_text(), str(path), "exec"), {"get_ipython": lambda: shell})
    [hook] = shell.events.hooks["post_run_cell"]
    saved = mpl.rcParams.copy()
    try:
        style.apply()  # what lib.notebook.setup() does in the notebook's setup cell
        hook(None)
        assert mpl.rcParams["font.size"] == style.FONT_SIZE * style.classroom_scale()
        assert mpl.rcParams["axes.titlesize"] == style.TITLE_SIZE * style.classroom_scale()
        import plotly.io as pio  # plotly's text scales with the rest (the kvlab template takes the scale)
        k = style.classroom_scale()
        layout = pio.templates["kvlab"].layout
        assert layout.font.size == round((style.FONT_SIZE + 2) * k, 1)
        assert layout.xaxis.tickfont.size == round((style.SMALL_SIZE + 2) * k, 1)
        assert layout.title.font.size == round((style.TITLE_SIZE + 3) * k, 1)
        mpl.rcParams["font.size"] = 17.0  # a cell's own choice is left alone by later cells
        hook(None)
        assert mpl.rcParams["font.size"] == 17.0
    finally:
        mpl.rcParams.update(saved)
        style.apply()
    assert pio.templates["kvlab"].layout.font.size == style.FONT_SIZE + 2  # back at notebook scale


def test_plotly_template_takes_the_scale():
    small, large = style.plotly_template(1.0).layout, style.plotly_template(2.0).layout
    assert large.font.size == 2 * small.font.size and large.legend.font.size == 2 * small.legend.font.size
    assert large.margin.t == 2 * small.margin.t  # the room for a title grows with it
    with pytest.raises(ValueError, match="scale"):
        style.plotly_template(0)


def test_the_page_keeps_a_safe_margin_and_its_key_bar_off_the_content():
    css = classroom.CSS
    assert f"padding: 3vh {classroom.SAFE} 90vh {classroom.SAFE} !important" in css  # overscan: 5% each side
    assert f"padding-bottom: {classroom.BAR_PX}px !important" in css  # the panel that scrolls ends above the bar
    assert f"height: {classroom.BAR_PX}px" in css and f"right: {classroom.SAFE}" in css


def test_template_colours_come_from_the_style_module(tmp_path):
    folder = classroom.write_template(tmp_path)
    index = (folder / "index.html.j2").read_text()
    colours = set(re.findall(r"#[0-9A-Fa-f]{6}\b|#[0-9A-Fa-f]{3}\b", classroom.CSS))
    allowed = {style.INK, style.PAPER, style.FREE, style.colour("newest"), style.text_colour("blue", style.PAPER, 7.0)}
    assert colours <= allowed, f"colours not from lib.widgets.style: {sorted(colours - allowed)}"
    assert style.contrast_ratio(style.text_colour("blue", style.PAPER, 7.0), style.PAPER) >= 7.0
    assert "@" not in classroom.CSS.replace("@media", "").replace("@import", ""), "a colour placeholder was left"
    assert "PageDown" in index and "scroller()" in index and "ArrowRight" in index


# -- the two editions ---------------------------------------------------------------------------------------

def test_edition_notebook_is_the_english_file_or_its_chinese_twin(tmp_path, monkeypatch):
    from tools import NOTEBOOKS

    name = "02_autoregressive_generation"
    assert classroom.edition_notebook(name) == NOTEBOOKS / f"{name}.ipynb"
    assert classroom.edition_notebook(f"{name}.ipynb", "zh") == NOTEBOOKS / "zh" / f"{name}.ipynb"
    with pytest.raises(ValueError, match=r"edition='fr' is not supported; allowed: en, zh"):
        classroom.edition_notebook(name, "fr")
    with pytest.raises(FileNotFoundError, match=r"no notebook 'nope'; the notebooks are: 0\d_"):
        classroom.edition_notebook("nope", "zh")
    monkeypatch.setattr(classroom, "edition_dir", lambda lang: tmp_path)
    with pytest.raises(FileNotFoundError, match=rf"{name} has no zh edition yet .*python -m tools.runner "
                                                r"--edition zh"):
        classroom.edition_notebook(name, "zh")


def test_page_url_is_the_path_under_the_served_folder():
    from tools import NOTEBOOKS

    assert classroom.page_url(NOTEBOOKS / "zh" / "05_kv_cache_memory.ipynb", 8870) == \
        "http://127.0.0.1:8870/voila/render/zh/05_kv_cache_memory.ipynb"
    assert classroom.page_url(NOTEBOOKS / "05_kv_cache_memory.ipynb") == \
        f"http://127.0.0.1:{classroom.DEFAULT_PORT}/voila/render/05_kv_cache_memory.ipynb"


def test_the_page_path_names_the_edition_and_the_twin():
    pattern = re.compile(classroom.PAGE_PATH)
    assert pattern.match("/voila/render/zh/02_x.ipynb").groups() == ("/voila/render/", "zh/", "02_x.ipynb")
    assert pattern.match("/base/voila/render/02_x.ipynb").groups() == ("/base/voila/render/", None, "02_x.ipynb")
    assert pattern.match("/") is None  # a notebook served alone: no twin path, no switch
    assert classroom.PAGE_PATH.replace("/", "\\/") in classroom.KEYS_JS


def test_a_chinese_page_presses_the_chinese_buttons_and_says_its_keys_in_chinese(tmp_path):
    from lib import i18n

    words = classroom.WORDS
    assert words["en"] == {"step": "Step ▶", "back": "◀ Back", "bar": classroom.KEY_BAR, "switch": "中文"}
    i18n.set_language("zh")
    try:
        assert words["zh"] == {"step": i18n.t("Step ▶"), "back": i18n.t("◀ Back"), "bar": i18n.t(classroom.KEY_BAR),
                               "switch": "English"}
    finally:
        i18n.set_language("en")
    assert words["zh"]["step"] != "Step ▶" and "下一节" in words["zh"]["bar"]
    index = (classroom.write_template(tmp_path) / "index.html.j2").read_text()
    assert json.dumps(words, ensure_ascii=True) in index and 'a.id = "kvlab-lang"' in index


def test_make_classroom_edition_reaches_serve(monkeypatch):
    calls = []
    monkeypatch.setattr(classroom, "serve", lambda *a: calls.append(a) or 0)
    assert classroom.main(["05_kv_cache_memory", "--edition", "zh", "--no-browser", "--port", "8870"]) == 0
    assert classroom.main(["05_kv_cache_memory"]) == 0
    assert calls == [("05_kv_cache_memory", 8870, False, "zh"), ("05_kv_cache_memory", classroom.DEFAULT_PORT,
                                                                 True, "en")]
