"""Build the gallery: ``python -m tools.gallery [--shots DIR] [--out FILE]`` (``make gallery``; ``make test``
builds it at the end of ``make test-browser``).

One offline HTML page with a screenshot of every figure and widget of the course, the light and the dark
JupyterLab theme side by side (and, when the browser test ran the Chinese edition, its twin in a third column),
grouped by notebook, so a reviewer sees the whole course at a glance. The screenshots are the browser test's
(``test-artifacts/screenshots/``): ``lab-<variant>-<notebook>-c<cell>-o<output>-<kind>.png`` for JupyterLab
(variant: ``light``, ``dark``, or ``zh-light`` for the Chinese notebook ``notebooks/zh/<notebook>``, whose cells
and outputs are the English one's; kind: image, plotly, or the widget's kind, ``-driven`` once its controls were
used), and ``classroom-[zh-]<notebook>-…`` / ``site-[zh-]<notebook>-…`` for the classroom view and the static site
(``zh-``: the Chinese edition's). The page refers to them by relative paths (it sits next to the folder) and loads
nothing else.
"""
from __future__ import annotations

import argparse
import html
import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path

from lib.widgets import style
from . import ROOT

ARTIFACTS = Path(os.environ.get("KVLAB_ARTIFACTS", ROOT / "test-artifacts"))
THEMES = ("light", "dark")
# Every column a figure can have: the two themes, then the Chinese edition's twin (shown only when there are any).
VARIANTS = {"light": "JupyterLab Light", "dark": "JupyterLab Dark", "zh-light": "中文版 (Chinese), JupyterLab Light"}
_LAB = re.compile(r"^lab-(?P<theme>light|dark|zh-light)-(?P<nb>\d\d_[A-Za-z0-9_]+)-c(?P<cell>\d+)-o(?P<out>\d+)-(?P<kind>.+)$")
_OTHER = re.compile(r"^(?P<view>(?:classroom|site)(?:-zh)?)-(?P<nb>\d\d_[A-Za-z0-9_]+)-(?P<what>.+)$")
VIEWS = {"classroom": "classroom view (make classroom)", "site": "static site (make site)",
         "classroom-zh": "classroom view, Chinese edition", "site-zh": "static site, Chinese edition"}


@dataclass
class Shot:
    """One figure or widget of one notebook: its screenshot in each theme (a theme may be missing)."""
    cell: int
    output: int
    kind: str
    files: dict = field(default_factory=dict)  # variant (a theme, or zh-light) -> Path

    @property
    def title(self) -> str:
        return f"cell {self.cell}, output {self.output}: {self.kind.replace('-driven', ', after driving its controls')}"


@dataclass
class Notebook:
    name: str
    shots: list = field(default_factory=list)  # Shot, in cell order
    others: list = field(default_factory=list)  # (view, what, Path): classroom view and static site


def collect(shots_dir: Path) -> list[Notebook]:
    """The screenshots in ``shots_dir`` grouped by notebook (in name order), each figure or widget with its light
    and dark screenshot (and its Chinese twin's, ``zh-light``, when there is one). Files whose names do not follow the browser test's pattern are left out."""
    books: dict[str, Notebook] = {}
    pairs: dict[tuple, Shot] = {}
    for path in sorted(Path(shots_dir).glob("*.png")):
        m = _LAB.match(path.stem)
        if m:
            book = books.setdefault(m["nb"], Notebook(m["nb"]))
            key = (m["nb"], int(m["cell"]), int(m["out"]), m["kind"])
            if key not in pairs:
                pairs[key] = Shot(int(m["cell"]), int(m["out"]), m["kind"])
                book.shots.append(pairs[key])
            pairs[key].files[m["theme"]] = path
            continue
        m = _OTHER.match(path.stem)
        if m:
            books.setdefault(m["nb"], Notebook(m["nb"])).others.append((m["view"], m["what"], path))
    for book in books.values():
        book.shots.sort(key=lambda s: (s.cell, s.output, s.kind.endswith("-driven"), s.kind))
    return [books[k] for k in sorted(books)]


CSS = """
body { font-family: sans-serif; color: @INK@; background: @PAPER@; margin: 0 24px 48px 24px; }
h1 { font-size: 1.6em; } h2 { font-size: 1.3em; margin-top: 2em; border-bottom: 2px solid @GRID@; }
h3 { font-size: 1em; font-weight: normal; color: @MUTED@; margin: 1.2em 0 0.3em 0; }
nav a, a { color: @LINK@; } nav a { margin-right: 12px; }
.pair { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; align-items: start; }
.pair.three { grid-template-columns: 1fr 1fr 1fr; }
.pair figure { margin: 0; } .pair figcaption { font-size: 0.85em; color: @MUTED@; }
.pair img, .views img { max-width: 100%; border: 1px solid @GRID@; }
.missing { padding: 24px; border: 1px dashed @GRID@; color: @MUTED@; }
.views { display: grid; grid-template-columns: 1fr 1fr; gap: 12px; }
"""
for _key, _value in {"@INK@": style.INK, "@PAPER@": style.PAPER, "@GRID@": style.GRID, "@MUTED@": style.MUTED,
                     "@LINK@": style.text_colour("blue")}.items():
    CSS = CSS.replace(_key, _value)


def _img(path: Path, folder: Path, alt: str) -> str:
    src = Path(os.path.relpath(path, folder)).as_posix()
    return f'<img src="{html.escape(src)}" alt="{html.escape(alt)}" loading="eager">'


def render(books: list[Notebook], folder: Path) -> str:
    """The gallery page for ``books``, with image paths relative to ``folder`` (where the page will be)."""
    pairs = sum(len(b.shots) for b in books)
    both = sum(all(t in s.files for t in THEMES) for b in books for s in b.shots)
    chinese = sum("zh-light" in s.files for b in books for s in b.shots)
    columns = [*THEMES, "zh-light"] if chinese else list(THEMES)
    parts = ['<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8"><title>KV Cache Lab: gallery</title>',
             f"<style>{CSS}</style></head><body>", "<h1>KV Cache Lab: every figure and widget</h1>",
             f"<p>{len(books)} notebook{'s' * (len(books) != 1)}, {pairs} figures and widgets as JupyterLab shows "
             f"them ({both} in both themes): JupyterLab Light on the left, JupyterLab Dark on the right"
             + (f"; the Chinese edition's twin in JupyterLab Light in the third column ({chinese} of them)"
                if chinese else "") + ". Made by "
             f"<code>python -m tools.gallery</code> from the browser test's screenshots.</p>",
             "<nav>" + "".join(f'<a href="#{b.name}">{html.escape(b.name)}</a>' for b in books) + "</nav>"]
    for b in books:
        parts.append(f'<h2 id="{b.name}">{html.escape(b.name)}</h2>')
        for s in b.shots:
            parts.append(f"<h3>{html.escape(s.title)}</h3>")
            cells = []
            for theme in columns:
                label = VARIANTS[theme]
                if theme in s.files:
                    cells.append(f"<figure>{_img(s.files[theme], folder, f'{b.name} {s.title}, {label}')}"
                                 f"<figcaption>{label}</figcaption></figure>")
                else:
                    cells.append(f'<div class="missing">no screenshot in {label}</div>')
            parts.append(f'<div class="pair{" three" if len(columns) == 3 else ""}">' + "".join(cells) + "</div>")
        if b.others:
            parts.append("<h3>other views</h3><div class=\"views\">")
            for view, what, path in b.others:
                caption = f"{VIEWS[view]}: {what}"
                parts.append(f"<figure>{_img(path, folder, f'{b.name} {caption}')}"
                             f"<figcaption>{html.escape(caption)}</figcaption></figure>")
            parts.append("</div>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def build(shots: Path | str = ARTIFACTS / "screenshots", out: Path | str = ARTIFACTS / "gallery.html") -> Path:
    """Write the gallery of the screenshots in ``shots`` to ``out``; returns ``out``."""
    shots, out = Path(shots), Path(out)
    books = collect(shots)
    if not books:
        raise FileNotFoundError(f"no browser-test screenshots in {shots}: run `make test-browser` first (it writes "
                                f"lab-<theme>-<notebook>-….png there)")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(books, out.parent.resolve()), encoding="utf-8")
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.gallery", description=__doc__.splitlines()[0])
    parser.add_argument("--shots", default=str(ARTIFACTS / "screenshots"), help="the screenshots folder")
    parser.add_argument("--out", default=str(ARTIFACTS / "gallery.html"), help="the page to write")
    args = parser.parse_args(argv)
    try:
        out = build(args.shots, args.out)
    except FileNotFoundError as e:
        print(e, file=sys.stderr)
        return 2
    books = collect(Path(args.shots))
    shots = sum(len(b.shots) for b in books)
    print(f"{out}: {len(books)} notebook{'s' * (len(books) != 1)}, {shots} figures and widgets "
          f"(light and dark side by side); open it from disk")
    return 0


if __name__ == "__main__":
    sys.exit(main())
