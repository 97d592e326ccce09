"""One call at the top of every notebook: ``device = lib.notebook.setup()``.

Seeds every random generator, makes Chinese characters render in matplotlib (shipped CJK font), keeps
plotly on its ``plotly_mimetype`` renderer (no 5 MB JavaScript bundle inside the notebook, no CDN), and
picks the device (``KVLAB_DEVICE`` overrides; the stored outputs were made on the CPU).
"""
from __future__ import annotations

import os
import random
import sys

import torch

from . import i18n
from .device import pick_device
from .widgets import style
from .widgets.fonts import use_cjk_font


def seed_everything(seed: int = 0) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
        np.random.seed(seed)
    except ImportError:  # numpy is a dependency, but seeding must never be the thing that fails
        pass


CARD_PAD_INCHES = 0.2  # the white card's margin around a figure (20 px at 100 dpi): it reads as a card on a dark page
CARD_RADIUS = 10  # px: the card's rounded corners (transparent, so a dark theme shows through them)


def figure_png(fig) -> bytes:
    """A matplotlib figure as the PNG a notebook stores: a white card with a margin (``CARD_PAD_INCHES``) and
    rounded, transparent corners (``CARD_RADIUS``) around the figure cropped to its content
    (``bbox_inches="tight"``), in a 255-colour palette (a figure has few colours; about a third of the bytes of
    full RGB, which keeps each notebook under 1 MB with the projector's larger type)."""
    import io

    from PIL import Image, ImageDraw

    report_collisions(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", pad_inches=CARD_PAD_INCHES, facecolor=fig.get_facecolor())
    image = Image.open(buf).convert("RGB").quantize(255, method=Image.Quantize.MEDIANCUT)
    clear = max(i for _, i in image.getcolors(256)) + 1  # the first palette index no pixel uses: transparent
    w, h = image.size
    card = Image.new("L", (w, h), 0)
    ImageDraw.Draw(card).rounded_rectangle((0, 0, w - 1, h - 1), radius=CARD_RADIUS, fill=255)
    image.paste(clear, mask=Image.eval(card, lambda v: 255 - v))  # outside the rounded card
    image.putpalette(image.getpalette()[: clear * 3] + [255, 255, 255])
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True, transparency=clear)
    return out.getvalue()


FIGURE_CHECK = "KVLAB_FIGURE_CHECK"  # a file: each figure a notebook shows is checked for texts drawn over each other


def report_collisions(fig) -> list:
    """Where the environment names a file in ``KVLAB_FIGURE_CHECK`` (nbval's kernels and the runner's: see the root
    conftest.py and tools/runner.py), the texts of ``fig`` drawn over each other (``style.text_collisions``) and
    its legends over lines (``style.legend_collisions``: "legend: <first entry>", the line, points under it) are
    appended to it as one JSON line, with the figure's first title to find it by; returns them. Nothing is
    measured otherwise (a learner's kernel)."""
    path = os.environ.get(FIGURE_CHECK)
    if not path:
        return []
    import json

    clashes = style.text_collisions(fig) + [(f"legend: {a}", b, n) for a, b, n in style.legend_collisions(fig)]
    if clashes:
        titles = [t for t in [getattr(fig, "_suptitle", None)] + [t for ax in fig.axes for t in
                                                                   (ax.title, ax._left_title, ax._right_title)]
                  if t is not None and t.get_text().strip()]
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"figure": titles[0].get_text() if titles else "(untitled)", "cwd": os.getcwd(),
                                "collisions": [[a, b, float(px)] for a, b, px in clashes]}, ensure_ascii=False) + "\n")
    return clashes


def _store_compact_pngs() -> None:
    """In a notebook kernel, show matplotlib figures through ``figure_png`` (nothing outside IPython)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    ip = get_ipython()
    if ip is None or not hasattr(ip, "display_formatter"):
        return
    import matplotlib.pyplot as plt
    from matplotlib.figure import Figure

    plt.close(plt.figure())  # resolves the (inline) backend now, which registers its own PNG formatter: then ours
    ip.display_formatter.formatters["image/png"].for_type(Figure, figure_png)


def _skip_iri_grammar():
    """Every notebook shows a plotly figure, and ``plotly.io`` imports ``nbformat``, which imports ``jsonschema``,
    which imports ``rfc3987_syntax`` when it is installed (jupyter-events installs it) to check IRI formats: that
    import builds some forty Earley parsers, 3 s of every kernel's first cell (jsonschema issue #1428). No notebook
    validates an IRI, so the kernel does without it: jsonschema skips that one format check when the import fails,
    as it does where the package is not installed. Only this process, and only if jsonschema is not loaded yet."""
    if "jsonschema" not in sys.modules:
        sys.modules.setdefault("rfc3987_syntax", None)  # None in sys.modules: `import rfc3987_syntax` fails


def language() -> str:
    """The notebook's language, as its ``setup(lang=...)`` line set it: "en" in notebooks/, "zh" in notebooks/zh/. A
    cell that shows the real model a prompt in its reader's language picks it with this (``lib.lm.PLAYER_PROMPTS``)."""
    return i18n.language()


def setup(seed: int = 0, device=None, verbose: bool = True, threads: int | None = 1,
          lang: str = "en") -> torch.device:
    """Seed, fonts, plotting defaults; returns the device the notebook should use.

    ``threads`` (default 1) fixes torch's CPU threads: the demo models are tiny, one thread is fastest for
    them (thread hand-offs cost more than the maths), and it makes CPU results bit-identical on any machine.
    Pass ``threads=None`` to keep torch's default. ``lang="zh"`` makes lib speak Chinese: its widgets, figures,
    tables and messages (the Chinese edition's notebooks, ``notebooks/zh/``, say so in this one line). What a
    notebook cell prints or draws itself is in the cell's own words: the Chinese edition's code cells carry their
    Chinese strings (``tools.edition``); nothing here patches ``print``, ``Text.set_text`` or ``Markdown``."""
    _skip_iri_grammar()
    i18n.set_language(lang)
    seed_everything(seed)
    if threads is not None:
        torch.set_num_threads(threads)
    style.apply()  # the course's colours, fonts and sizes for matplotlib and plotly (lib/widgets/style.py)
    use_cjk_font()
    _store_compact_pngs()
    import plotly.io as pio
    pio.renderers.default = "plotly_mimetype"
    pio.renderers["plotly_mimetype"].config = dict(style.PLOTLY_CONFIG)  # no toolbar over the figures
    dev = pick_device(device if device is not None else os.environ.get("KVLAB_DEVICE"), verbose=False)
    if verbose:
        print(i18n.t("device: {device}   torch {version}   seed {seed}", device=dev.type,
                     version=torch.__version__.split('+')[0], seed=seed))
    return dev
