"""lib.course.classroom without a browser: the kernel's start-up file puts the course's style at projector scale,
and the page's colours come from lib.style. (The page itself, its keys and widgets: tests/browser.)"""
from __future__ import annotations

import re

import matplotlib as mpl

from lib import style
from lib.course import classroom


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
        mpl.rcParams["font.size"] = 17.0  # a cell's own choice is left alone by later cells
        hook(None)
        assert mpl.rcParams["font.size"] == 17.0
    finally:
        mpl.rcParams.update(saved)


def test_template_colours_come_from_the_style_module(tmp_path):
    folder = classroom.write_template(tmp_path)
    index = (folder / "index.html.j2").read_text()
    colours = set(re.findall(r"#[0-9A-Fa-f]{6}\b|#[0-9A-Fa-f]{3}\b", classroom.CSS))
    allowed = {style.INK, style.PAPER, style.FREE, style.colour("newest"), style.text_colour("blue", style.PAPER, 7.0)}
    assert colours <= allowed, f"colours not from lib.style: {sorted(colours - allowed)}"
    assert style.contrast_ratio(style.text_colour("blue", style.PAPER, 7.0), style.PAPER) >= 7.0
    assert "@" not in classroom.CSS.replace("@media", "").replace("@import", ""), "a colour placeholder was left"
    assert "PageDown" in index and "scroller()" in index and "ArrowRight" in index
