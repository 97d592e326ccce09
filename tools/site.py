"""Build the offline static site: ``python -m tools.site [--out site] [NAME ...]`` (``make site``).

Every notebook becomes one HTML page made from its committed outputs (no kernel runs): prose, code, PNG
figures (tier 1), and the plotly step-through figures (tier 2), drawn by a local copy of ``plotly.min.js`` so
their sliders and Play buttons work in the page. A live widget (tier 3) needs a kernel; the page says so
where one was, and how to open it. Math is typeset by a local MathJax. No page loads anything from the
network: open ``site/index.html`` straight from disk.

Both editions are built: the English pages at the top of the site, the Chinese edition (``notebooks/zh/``) under
``zh/`` (``site/zh/02_autoregressive_generation.html``, ``site/zh/index.html``). Every page and both indexes carry a
language switch, a link to the same page in the other edition ("中文" / "English"); a Chinese page's own words
(navigation, the live-widget note, the index) come from ``lib.i18n`` in Chinese.
"""
from __future__ import annotations

import argparse
import copy
import html
import re
import shutil
import sys
from pathlib import Path

from lib.widgets import style
from lib.i18n import speaking, t
from . import ROOT, notebook_paths
from .edition import ALL_EDITIONS, edition_dir

PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"

# The nbconvert "lab" page with every CDN script replaced by local files next to the page.
TEMPLATE = r"""{%- extends 'lab/index.html.j2' -%}
{%- block html_head_js -%}
<script src="{{ resources.kvlab_root }}plotly.min.js"></script>
{%- endblock html_head_js -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mermaidjs -%}{%- endblock html_head_js_mermaidjs -%}
{%- block html_head_js_mathjax -%}
<script type="text/x-mathjax-config">
MathJax.Hub.Config({
  showMathMenu: false, messageStyle: "none",
  TeX: {extensions: ["AMSmath.js", "AMSsymbols.js", "noErrors.js", "noUndefined.js"]},
  tex2jax: {inlineMath: [["$", "$"], ["\\(", "\\)"]], displayMath: [["$$", "$$"], ["\\[", "\\]"]],
            processEscapes: true, processEnvironments: true},
  "HTML-CSS": {availableFonts: [], preferredFont: null, webFont: "STIX-Web", imageFont: null,
               // MathJax's blank test font points at about:blank, which a page opened from disk may not load
               styles: {"@font-face": {"font-family": "MathJax_Blank", src: "local('MathJax_Blank')"}}}
});
</script>
<script src="{{ resources.kvlab_root }}mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML-full"></script>
{%- endblock html_head_js_mathjax -%}
{% block extra_css %}
<style>
  nav.kvlab { font-family: var(--jp-ui-font-family, sans-serif); font-size: 14px; padding: 8px 16px;
              border-bottom: 1px solid @GRID@; background: @FREE@; display: flex; gap: 24px; }
  nav.kvlab a { color: @LINK@; }
  nav.kvlab a.kvlab-lang { margin-left: auto; font-weight: bold; }
  .kvlab-live-note { border-left: 4px solid @NOTE@; background: @FREE@; color: @INK@; padding: 8px 12px;
                     font-family: var(--jp-ui-font-family, sans-serif); font-size: 14px; }
</style>
{% endblock extra_css %}
{%- block body_header -%}
{{ super() }}
{{ resources.kvlab_nav }}
{%- endblock body_header -%}
"""

INDEX = """<!DOCTYPE html>
<html lang="{lang}"><head><meta charset="utf-8"><title>{title}</title>
<style>
 body {{ font-family: sans-serif; max-width: 860px; margin: 40px auto; padding: 0 16px; color: @INK@;
        line-height: 1.5; }}
 li {{ margin: 6px 0; }} a {{ color: @LINK@; }} code {{ background: @FREE@; padding: 0 3px; }}
 p.kvlab-lang {{ text-align: right; font-weight: bold; margin: 0; }}
</style></head>
<body>
{switch}
<h1>{title}</h1>
<p>{intro}</p>
<ol>
{items}
</ol>
</body></html>
"""

# The site's own words, in English; a Chinese page shows them through lib.i18n.t (their entries are in lib.i18n.ZH).
SITE_TITLE = "KV Cache Lab"
INDEX_INTRO = ("Every notebook as a page made from its stored outputs: no kernel, no network. The plotly figures "
               "step with their slider and Play button. The live widgets need a kernel: open the notebooks with "
               "{lab}, or one as a classroom page with {classroom}.")
LIVE_NOTE = ("Live widget{what}: it runs the model, so it needs a Python kernel. Open this notebook in JupyterLab "
             "({lab}) or as a classroom page ({classroom}) to use it.")
ALL_NOTEBOOKS = "all notebooks"

EDITIONS = ALL_EDITIONS  # English at the site's top, Chinese under zh/
SWITCH_LABEL = {"en": "English", "zh": "中文"}  # the link to an edition, in that edition's own language


def other(lang: str) -> str:
    """The edition a page's language switch leads to."""
    return "zh" if lang == "en" else "en"


def page_href(from_lang: str, to_lang: str, file: str) -> str:
    """The relative link from a page of edition ``from_lang`` to ``file`` (a page or index.html) of ``to_lang``."""
    if from_lang == to_lang:
        return file
    return f"zh/{file}" if to_lang == "zh" else f"../{file}"


def language_switch(lang: str, file: str, tag: str = "a") -> str:
    """The link on a page of edition ``lang`` to the same ``file`` in the other edition, named in that edition's
    language ("中文" on an English page, "English" on a Chinese one)."""
    to = other(lang)
    link = (f'<a class="kvlab-lang" href="{page_href(lang, to, file)}" hreflang="{to}" lang="{to}">'
            f"{SWITCH_LABEL[to]}</a>")
    return link if tag == "a" else f'<p class="kvlab-lang">{link}</p>'


def make_commands(name: str, lang: str) -> tuple[str, str]:
    """The commands that open notebook ``name`` of edition ``lang`` live: JupyterLab, the classroom view."""
    suffix = " EDITION=zh" if lang == "zh" else ""
    return f"make lab{suffix}", f"make classroom NB={name}{suffix}"


# The pages' own colours come from lib.widgets.style: links in the palette's blue at text contrast, the live-widget
# note marked in the "computed" orange (it is a side note, not a state), neutral fills and borders.
_COLOURS = {"@INK@": style.INK, "@GRID@": style.GRID, "@FREE@": style.FREE, "@LINK@": style.text_colour("blue"),
            "@NOTE@": style.colour("computed")}
for _key, _value in _COLOURS.items():
    TEMPLATE, INDEX = TEMPLATE.replace(_key, _value), INDEX.replace(_key, _value)


def title_of(nb, default: str) -> str:
    """The first Markdown heading of the notebook, without the #s (or ``default``)."""
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            for line in cell.source.splitlines():
                if line.startswith("#"):
                    return line.lstrip("#").strip()
    return default


def plotly_html(figure: dict, div_id: str) -> str:
    """A plotly figure (the mime bundle's JSON, frames included) as a div + script for a page that has
    loaded plotly.min.js itself; the frames are added but not played until the reader presses Play."""
    import plotly.io as pio

    return pio.to_html(figure, include_plotlyjs=False, full_html=False, auto_play=False, validate=False,
                       div_id=div_id, config={"displaylogo": False, "showSendToCloud": False})


def live_widget_note(text_repr: str, name: str, lang: str = "en") -> str:
    """Where a live widget was: what it is and how to open it with a kernel, in the page's language."""
    # the widget's name: from its fallback text ("▶ Live widget (AttentionExplorer): ...", "交互控件（...）") or, in
    # an older notebook, from the front of its repr ("GenerationPlayer(children=...")
    match = (re.search(r"[(（]([A-Za-z_]\w*)[)）]", text_repr or "")
             or re.match(r"\s*([A-Za-z_]\w*)\(", text_repr or ""))
    lab, room = (f"<code>{html.escape(c)}</code>" for c in make_commands(name, lang))
    with speaking(lang):
        what = t(" ({widget})", widget=f"<code>{html.escape(match.group(1))}</code>") if match else ""
        return f'<div class="kvlab-live-note">{t(LIVE_NOTE, what=what, lab=lab, classroom=room)}</div>'


def static_outputs(nb, name: str, lang: str = "en"):
    """A copy of ``nb`` whose outputs a page without a kernel can show: plotly figures become HTML that
    plotly.min.js draws (with their frames), live widget views become a note saying where they work."""
    nb = copy.deepcopy(nb)
    nb.metadata.pop("widgets", None)
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        for j, out in enumerate(cell.get("outputs", [])):
            data = out.get("data")
            if not data:
                continue
            if PLOTLY in data:
                out["data"] = {"text/html": plotly_html(data[PLOTLY], f"kvlab-plot-{i}-{j}")}
            elif WIDGET in data:
                text = data.get("text/plain", "")
                out["data"] = {"text/html": live_widget_note(text if isinstance(text, str) else "".join(text), name,
                                                             lang)}
            data = out.get("data", {})
            data.pop(WIDGET_STATE, None)
    return nb


def nav_html(pages: list[tuple[str, str]], k: int, lang: str = "en", twin: bool = False) -> str:
    """Links to the index and the previous / next page, for page ``k`` of ``pages`` [(file, title)] of edition
    ``lang``, in its language; ``twin``: the page has a twin in the other edition, and the language switch."""
    with speaking(lang):
        links = [f'<a href="index.html">{html.escape(t(ALL_NOTEBOOKS))}</a>']
    if k > 0:
        links.append(f'<a href="{pages[k - 1][0]}">← {html.escape(pages[k - 1][1])}</a>')
    if k + 1 < len(pages):
        links.append(f'<a href="{pages[k + 1][0]}">{html.escape(pages[k + 1][1])} →</a>')
    if twin:
        links.append(language_switch(lang, pages[k][0]))
    return '<nav class="kvlab">' + "".join(links) + "</nav>"


# Tags that load something when the page opens (links in prose, <a href>, are not loaded and are allowed).
_LOADS = re.compile(r"<(script|link|img|iframe|source|audio|video|embed|object)\b[^>]*?\b(src|href|data)\s*=\s*"
                    r"[\"']?([^\"'\s>]+)", re.I)
_CSS_URL = re.compile(r"(?:url\(\s*[\"']?|@import\s+[\"'])((?:https?:)?//[^\"')\s]+)", re.I)


def remote_loads(page: str) -> list[str]:
    """Every URL a page would load from the network when opened: scripts, styles, images, frames, CSS url()
    and @import. A page of the site must have none."""
    found = [m.group(3) for m in _LOADS.finditer(page) if re.match(r"(?:https?:)?//", m.group(3), re.I)]
    return found + _CSS_URL.findall(page)


def copy_assets(out: Path):
    """plotly.min.js and MathJax 2 (HTML-CSS output, STIX web fonts) next to the pages."""
    import jupyter_server_mathjax
    import plotly

    shutil.copy2(Path(plotly.__file__).parent / "package_data" / "plotly.min.js", out / "plotly.min.js")
    mathjax = Path(jupyter_server_mathjax.__file__).parent / "static"
    target = out / "mathjax"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(mathjax, target, ignore=shutil.ignore_patterns("localization", "*.md"))


def edition_paths(lang: str, names=None) -> list[Path]:
    """The notebooks of edition ``lang``: the English ones named (every one when ``names`` is empty), or their
    Chinese twins in ``notebooks/zh/`` that exist."""
    english = notebook_paths(names)
    if lang == "en":
        return english
    return [q for q in (edition_dir(lang) / p.name for p in english) if q.is_file()]


def build(out: Path | str = ROOT / "site", names=None, verbose: bool = True) -> list[Path]:
    """Build the site into ``out`` (created; earlier pages are replaced): the English pages at its top, the
    Chinese edition's under ``out/zh/``, each with its index; returns the page files (English first)."""
    import nbformat
    from jinja2 import DictLoader
    from nbconvert import HTMLExporter

    out = Path(out)
    editions = {lang: edition_paths(lang, names) for lang in EDITIONS}
    out.mkdir(parents=True, exist_ok=True)
    copy_assets(out)
    stems = {lang: {p.stem for p in paths} for lang, paths in editions.items()}
    written = []
    for lang, paths in editions.items():
        folder = out if lang == "en" else out / lang
        folder.mkdir(parents=True, exist_ok=True)
        exporter = HTMLExporter(template_name="lab", extra_loaders=[DictLoader({"kvlab_site.html.j2": TEMPLATE})],
                                theme="light", language_code=lang)
        exporter.template_file = "kvlab_site.html.j2"
        books = [(p, nbformat.read(p, as_version=4)) for p in paths]
        pages = [(f"{p.stem}.html", title_of(nb, p.stem)) for p, nb in books]
        for k, (p, nb) in enumerate(books):
            twin = p.stem in stems[other(lang)]
            body, _ = exporter.from_notebook_node(static_outputs(nb, p.stem, lang), resources={
                "metadata": {"name": pages[k][1]}, "kvlab_nav": nav_html(pages, k, lang, twin),
                "kvlab_root": "" if lang == "en" else "../"})
            remote = remote_loads(body)
            if remote:
                raise RuntimeError(f"{p.name}: the page would load {remote} from the network; every script and "
                                   f"style of the site must be a local file")
            target = folder / pages[k][0]
            target.write_text(body, encoding="utf-8")
            written.append(target)
            if verbose:
                print(f"{target}  {len(body) / 1e3:7.1f} kB")
        (folder / "index.html").write_text(index_html(pages, lang, twin=bool(editions[other(lang)])),
                                           encoding="utf-8")
        if verbose:
            print(f"{folder / 'index.html'}: {len(pages)} pages ({lang})")
    if verbose:
        print(f"open {out / 'index.html'} from disk (file://), no server needed")
    return written


def index_html(pages: list[tuple[str, str]], lang: str = "en", twin: bool = True) -> str:
    """The index page of edition ``lang``: its pages [(file, title)], in its language, with the language switch
    to the other edition's index when ``twin``."""
    items = "\n".join(f'<li><a href="{f}">{html.escape(title)}</a> <small>({html.escape(Path(f).stem)})</small></li>'
                      for f, title in pages)
    lab, room = (f"<code>{html.escape(c)}</code>" for c in make_commands("NAME", lang))
    with speaking(lang):
        return INDEX.format(lang=lang, title=html.escape(t(SITE_TITLE)), intro=t(INDEX_INTRO, lab=lab, classroom=room),
                            items=items, switch=language_switch(lang, "index.html", tag="p") if twin else "")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.site", description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebook names (default: every notebook)")
    parser.add_argument("--out", default=str(ROOT / "site"), help="output folder (default: site/)")
    args = parser.parse_args(argv)
    try:
        build(args.out, args.names)
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
