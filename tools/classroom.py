"""Classroom view: ``python -m tools.classroom NAME`` (``make classroom NB=NAME``) serves one notebook as a page
for a projector: no code, large type, high contrast, the widgets live (a kernel runs behind the page).

It is Voilà with a template of our own (written to a temporary folder at start): Voilà's "lab" template
without the icon font it would fetch from a CDN (the widget manager ships the icons), plus larger type, more
contrast, and keys for stepping: → / ← press "Step ▶" / "◀ Back" of the player nearest the middle of the
screen, Page Down / Page Up (or j / k) jump to the next / previous heading. Nothing is loaded from the network.

Voilà's page scrolls an inner panel, not the window, so the keys look for the element that really scrolls (the
nearest ancestor of the cells that can scroll, else the page) and move it until the heading's top is the
panel's top. The kernel draws its figures in the course's style at projector scale: an IPython start-up file
(in a private IPYTHONDIR) calls ``lib.widgets.style.apply(scale=lib.widgets.style.classroom_scale())`` once the notebook's
``lib.notebook.setup()`` has installed the style at notebook scale (matplotlib's sizes and plotly's ``kvlab``
template alike, so plotly's text grows with the page's). The page keeps a safe margin from every edge (a
projector's overscan crops them) and its key bar below the panel that scrolls, never over the content.

Voilà serves the whole ``notebooks/`` folder, so both editions are one path apart: ``/voila/render/NN_name.ipynb``
and ``/voila/render/zh/NN_name.ipynb`` (``make classroom NB=NAME EDITION=zh``). Each page has a language switch
("中文" / "English", top right) to the same notebook in the other edition, and a Chinese page's key bar and
stepping keys speak the Chinese widgets' words (``lib.i18n``).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import threading
import time
import webbrowser
from pathlib import Path

from lib.widgets import style
from lib.checks import choice
from lib.i18n import ZH
from . import NOTEBOOKS, lab, notebook_path
from .edition import ALL_EDITIONS, edition_dir

TEMPLATE = "kvlab-classroom"
DEFAULT_PORT = 8866

# Colours come from lib.widgets.style (INK on PAPER, links in the palette's blue at text contrast, the pressed button
# in the "newest" colour). The bottom padding lets the last heading reach the top of the panel too.
# A projector may crop its picture's edges (overscan): every piece of the page keeps SAFE from each edge (5% of the
# width: the "title safe" area of broadcast video, at least 48 px). The key bar is the page's bottom strip, not a
# layer over it: the body keeps BAR_PX free under the panel that scrolls (Voilà sizes that panel to the body), so
# the bar never covers the last line of a widget.
SAFE, BAR_PX = "max(5vw, 48px)", 44
CSS = """
:root {
  --jp-content-font-size1: 22px; --jp-content-font-size0: 20px; --jp-ui-font-size1: 19px; --jp-code-font-size: 19px;
  --jp-widgets-font-size: 19px; --jp-widgets-inline-height: 36px; --jp-widgets-inline-label-width: 150px;
  --jp-content-font-color0: @INK@; --jp-content-font-color1: @INK@; --jp-content-font-color2: @INK@;
  --jp-ui-font-color0: @INK@; --jp-ui-font-color1: @INK@; --jp-ui-font-color2: @INK@;
  --jp-content-link-color: @LINK@;
}
html, body { height: 100%; }
body { background: @PAPER@ !important; color: @INK@; box-sizing: border-box; padding-bottom: @BAR@px !important; }
#main { height: 100% !important; }
body #rendered_cells > div { padding: 3vh @SAFE@ 90vh @SAFE@ !important; box-sizing: border-box; }
body .jp-RenderedHTMLCommon { font-size: 22px; line-height: 1.5; max-width: 1400px; }
body .jp-RenderedHTMLCommon h1 { font-size: 2.1em; border-bottom: 3px solid @INK@; padding-bottom: 0.2em; }
body .jp-RenderedHTMLCommon h2 { font-size: 1.6em; margin-top: 1.6em; }
body .jp-RenderedHTMLCommon h3 { font-size: 1.3em; }
body .jp-RenderedHTMLCommon code { font-size: 0.9em; background: @FREE@; color: @INK@; }
body .jp-OutputArea-output pre { font-size: 18px; line-height: 1.35; color: @INK@; }
.jp-OutputArea-output .widget-html-content { zoom: 1.3; }  /* the widgets' own HTML uses small pixel sizes */
.jupyter-widgets button.jupyter-button { font-weight: bold; border: 2px solid @INK@; }
.jupyter-widgets button.jupyter-button.kvlab-pressed { background: @NEWEST@; }
#kvlab-keys { position: fixed; bottom: 0; left: 0; right: 0; height: @BAR@px; box-sizing: border-box; padding: 0 @SAFE@;
              line-height: @BAR@px; white-space: nowrap; overflow: hidden; background: @INK@; color: @PAPER@;
              font: 18px/@BAR@px sans-serif; z-index: 1000; }
#kvlab-keys kbd { background: @PAPER@; color: @INK@; border-radius: 3px; padding: 0 5px; }
#kvlab-lang { position: fixed; top: 3vh; right: @SAFE@; z-index: 1000; font: bold 18px sans-serif; padding: 4px 10px;
              background: @PAPER@; color: @LINK@; border: 2px solid @LINK@; border-radius: 4px; }
"""
for _key, _value in {"@INK@": style.INK, "@PAPER@": style.PAPER, "@FREE@": style.FREE,
                     "@LINK@": style.text_colour("blue", style.PAPER, 7.0), "@NEWEST@": style.colour("newest"),
                     "@SAFE@": SAFE, "@BAR@": str(BAR_PX)}.items():
    CSS = CSS.replace(_key, _value)

# The page's own words, per edition: the player's buttons the keys press (as the widgets label them, through
# lib.i18n) and the key bar. The page's path says its edition: /voila/render/zh/... is Chinese.
KEY_BAR = ("<kbd>\u2192</kbd> / <kbd>\u2190</kbd> step the player nearest the middle of the screen "
           "&nbsp;\u00b7&nbsp; <kbd>PgDn</kbd> / <kbd>PgUp</kbd> (or <kbd>j</kbd> / <kbd>k</kbd>) next / previous section")
WORDS = {lang: {"step": words.get("Step \u25B6", "Step \u25B6"), "back": words.get("\u25C0 Back", "\u25C0 Back"),
                "bar": words.get(KEY_BAR, KEY_BAR), "switch": "English" if lang == "zh" else "\u4e2d\u6587"}
         for lang, words in {"en": {}, "zh": ZH}.items()}
# /voila/render/[zh/]NAME.ipynb -> (prefix, "zh/" or "", NAME.ipynb)
PAGE_PATH = r"^(.*/voila/render/)(zh/)?([^/]+\.ipynb)$"

KEYS_JS = r"""
(function () {
  var WORDS = @WORDS@, m = location.pathname.match(/@PAGE_PATH@/), lang = m && m[2] ? "zh" : "en";
  var STEP = WORDS[lang].step, BACK = WORDS[lang].back;
  function visibleButtons(label) {
    return Array.prototype.filter.call(document.querySelectorAll("button.jupyter-button"), function (b) {
      var r = b.getBoundingClientRect();
      return b.textContent.trim() === label && r.width > 0 && r.height > 0;
    });
  }
  function nearest(buttons) {  // the one closest to the middle of the screen
    var mid = window.innerHeight / 2, best = null, dist = Infinity;
    buttons.forEach(function (b) {
      var r = b.getBoundingClientRect(), d = Math.abs((r.top + r.bottom) / 2 - mid);
      if (d < dist) { dist = d; best = b; }
    });
    return best;
  }
  function press(label) {
    var b = nearest(visibleButtons(label));
    if (!b) return false;
    b.click();
    b.classList.add("kvlab-pressed");
    setTimeout(function () { b.classList.remove("kvlab-pressed"); }, 250);
    return true;
  }
  function scroller() {  // what really scrolls: Voilà's inner panel, or else the page
    var page = document.scrollingElement || document.documentElement;
    for (var n = document.querySelector("#rendered_cells"); n && n !== document.body && n !== page;
         n = n.parentElement) {
      if (/(auto|scroll|overlay)/.test(getComputedStyle(n).overflowY) && n.scrollHeight > n.clientHeight + 1) return n;
    }
    return page;
  }
  function jump(dir) {  // scroll until the next / previous heading's top is the scroller's top
    var sc = scroller(), page = document.scrollingElement || document.documentElement;
    var top = sc === page ? 0 : sc.getBoundingClientRect().top + sc.clientTop;
    var offsets = Array.prototype.map.call(document.querySelectorAll("#rendered_cells h1, #rendered_cells h2"),
      function (h) { var r = h.getBoundingClientRect(); return r.height > 0 ? r.top - top : NaN; })
      .filter(function (d) { return !isNaN(d); });
    var d = dir > 0 ? offsets.find(function (o) { return o > 3; })
                    : offsets.filter(function (o) { return o < -3; }).pop();
    if (d === undefined) return false;
    sc.scrollTo({top: sc.scrollTop + d, behavior: "instant"});
    return true;
  }
  window.kvlabClassroom = {scroller: scroller, jump: jump};  // for the browser test
  document.addEventListener("keydown", function (e) {
    var t = e.target;
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    if (t && t.closest && t.closest("input, textarea, select, [contenteditable=true], .noUi-handle")) return;
    var done = false;
    if (e.key === "ArrowRight") done = press(STEP);
    else if (e.key === "ArrowLeft") done = press(BACK);
    else if (e.key === "PageDown" || e.key === "j") done = jump(1);
    else if (e.key === "PageUp" || e.key === "k") done = jump(-1);
    if (done) e.preventDefault();
  });
  var bar = document.createElement("div");
  bar.id = "kvlab-keys";
  bar.innerHTML = WORDS[lang].bar;
  document.addEventListener("DOMContentLoaded", function () {
    document.body.appendChild(bar);
    if (!m) return;  // a single notebook served alone has no twin path
    var a = document.createElement("a");  // the language switch: the same notebook in the other edition
    a.id = "kvlab-lang";
    a.href = m[1] + (m[2] ? "" : "zh/") + m[3];
    a.lang = a.hreflang = lang === "zh" ? "en" : "zh";
    a.textContent = WORDS[lang].switch;
    document.body.appendChild(a);
  });
})();
""".replace("@WORDS@", json.dumps(WORDS, ensure_ascii=True)).replace("@PAGE_PATH@", PAGE_PATH.replace("/", "\\/"))

# jupyterlab-plotly stores a PNG copy of each figure into the output's model (model.setData); Voilà's output
# models have no setData, so that promise fails after the figure is drawn. Nothing is lost (there is no
# notebook file to store the copy in): drop exactly that rejection instead of reporting a page error.
PLOTLY_PNG_FIX = r"""
window.addEventListener("unhandledrejection", function (e) {
  var msg = String(e.reason && e.reason.message || e.reason);
  if (/setData is not a function/.test(msg)) e.preventDefault();
});
"""

INDEX = """{%- extends 'kvlab_voila_lab.html.j2' -%}
{# nbconvert would import mermaid from a CDN when a page has a diagram; ours have none, and stay offline #}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{% block html_head_css %}
{{ super() }}
<style>
""" + CSS + """
</style>
<script>
""" + PLOTLY_PNG_FIX + """
</script>
{% endblock html_head_css %}
{% block footer_js %}
<script>
""" + KEYS_JS + """
</script>
{% endblock footer_js %}
"""

_CDN_LINK = re.compile(r'[ \t]*<link[^>]+href="https?://[^"]*"[^>]*>\n?')


def _voila_lab_template() -> Path:
    import voila

    candidates = [Path(sys.prefix) / "share" / "jupyter" / "voila" / "templates" / "lab" / "index.html.j2",
                  Path(voila.__file__).resolve().parents[3] / "share" / "jupyter" / "voila" / "templates" / "lab"
                  / "index.html.j2"]
    for p in candidates:
        if p.is_file():
            return p
    raise FileNotFoundError(f"Voilà's lab template was not found (looked in {[str(c) for c in candidates]}); "
                            f"is voila installed in this environment ({sys.prefix})?")


STARTUP = """# KV Cache Lab, classroom view: the course's style at projector scale (tools/classroom.py).
def _kvlab_classroom_style(*_):
    import sys
    style = sys.modules.get("lib.widgets.style")
    if style is None:
        return
    import matplotlib as mpl
    if mpl.rcParams["font.size"] == style.FONT_SIZE:  # lib.notebook.setup() has just installed the notebook scale
        style.apply(scale=style.classroom_scale())


get_ipython().events.register("post_run_cell", _kvlab_classroom_style)
"""


def write_startup(root: Path) -> Path:
    """Write the IPython start-up file of the classroom kernel under ``root`` (the IPYTHONDIR ``environment``
    sets); returns it."""
    path = root / "ipython" / "profile_default" / "startup" / "50-kvlab-classroom.py"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(STARTUP)
    return path


def write_template(root: Path) -> Path:
    """Write the classroom template under ``root`` (a folder to put on JUPYTER_PATH) and the kernel's start-up
    file (``write_startup``); returns the template's folder.

    Voilà's own lab page, minus the stylesheets it would fetch from a CDN, is the base; ours adds the
    classroom CSS and the stepping keys."""
    write_startup(root)
    text = _voila_lab_template().read_text()
    offline = _CDN_LINK.sub("", text)
    remote = re.findall(r'(?:src|href)="(https?://[^"]*)"', offline)
    if remote:
        raise RuntimeError(f"Voilà's lab template still loads {remote} from the network; the classroom view "
                           f"must work offline (update tools/classroom.py for this Voilà version)")
    folder = root / "voila" / "templates" / TEMPLATE
    (folder / "static").mkdir(parents=True, exist_ok=True)
    (folder / "conf.json").write_text(json.dumps({"base_template": "lab"}))
    (folder / "kvlab_voila_lab.html.j2").write_text(offline)
    (folder / "index.html.j2").write_text(INDEX)
    return folder


def command(target: Path, port: int = DEFAULT_PORT, open_browser: bool = False) -> list[str]:
    """The Voilà command line serving ``target`` (a notebook, or a folder of notebooks) on 127.0.0.1:port."""
    argv = [sys.executable, "-m", "voila", str(target), f"--template={TEMPLATE}", "--theme=light",
            "--strip_sources=True", f"--port={port}", "--Voila.ip=127.0.0.1",
            "--VoilaConfiguration.show_tracebacks=True"]
    if not open_browser:
        argv.append("--no-browser")
    return argv


def environment(template_root: Path) -> dict:
    """The environment for Voilà: our template first on JUPYTER_PATH, then the course's kernel, and IPYTHONDIR at the folder of the
    kernel's start-up file (projector-scale style; the user's own IPython profile is not read). Stored outputs
    were made on the CPU, but a classroom may use its GPU, so KVLAB_DEVICE is left as the user set it."""
    env = dict(os.environ)
    rest = [p for p in env.get("JUPYTER_PATH", "").split(os.pathsep) if p]
    # then tools/lab_settings: its kernels/ holds the course's kernel, the one make lab offers and every notebook names
    env["JUPYTER_PATH"] = os.pathsep.join([str(template_root), str(lab.SETTINGS)] + rest)
    env["IPYTHONDIR"] = str(Path(template_root) / "ipython")
    return env


EDITIONS = ALL_EDITIONS


def edition_notebook(name, edition: str = "en") -> Path:
    """The notebook ``name`` of ``edition``: the English file, or its Chinese twin in ``notebooks/zh/``."""
    edition = choice(edition, "edition", EDITIONS)
    path = notebook_path(name)
    if edition == "en":
        return path
    twin = edition_dir(edition) / path.name
    if not twin.is_file():
        raise FileNotFoundError(f"{path.stem} has no {edition} edition yet ({twin} is missing); build it with "
                                f"python -m tools.runner --edition {edition}")
    return twin


def page_url(notebook: Path, port: int = DEFAULT_PORT, root: Path = NOTEBOOKS) -> str:
    """The classroom page of ``notebook`` when Voilà serves the folder ``root``."""
    return f"http://127.0.0.1:{port}/voila/render/{Path(notebook).resolve().relative_to(Path(root).resolve()).as_posix()}"


def _open_when_up(url: str, port: int, timeout: float = 120.0):
    import socket

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                webbrowser.open(url)
                return
        time.sleep(0.5)


def serve(name: str, port: int = DEFAULT_PORT, open_browser: bool = True, edition: str = "en") -> int:
    """Serve notebook ``name`` of ``edition`` ("en" or "zh") until Ctrl-C; returns Voilà's exit status. Voilà
    serves all of ``notebooks/``, so the page's language switch reaches the other edition's page."""
    path = edition_notebook(name, edition)
    url = page_url(path, port)
    with tempfile.TemporaryDirectory(prefix="kvlab-classroom-") as tmp:
        write_template(Path(tmp))
        print(f"classroom view of {path.relative_to(NOTEBOOKS).as_posix()}: {url}  (Ctrl-C stops it)", flush=True)
        if open_browser:
            threading.Thread(target=_open_when_up, args=(url, port), daemon=True).start()
        try:
            return subprocess.call(command(NOTEBOOKS, port), env=environment(Path(tmp)), cwd=NOTEBOOKS)
        except KeyboardInterrupt:
            return 0


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.classroom", description=__doc__.splitlines()[0])
    parser.add_argument("name", help="the notebook, e.g. 02_autoregressive_generation")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})")
    parser.add_argument("--edition", choices=EDITIONS, default="en", help="en (notebooks/) or zh (notebooks/zh/)")
    parser.add_argument("--no-browser", action="store_true", help="do not open a browser")
    args = parser.parse_args(argv)
    try:
        return serve(args.name, args.port, not args.no_browser, args.edition)
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
