"""One call at the top of every notebook: ``device = lib.notebook.setup()``.

Seeds every random generator, makes Chinese characters render in matplotlib (shipped CJK font), keeps
plotly on its ``plotly_mimetype`` renderer (no 5 MB JavaScript bundle inside the notebook, no CDN), and
picks the device (``KVLAB_DEVICE`` overrides; the stored outputs were made on the CPU).
"""
from __future__ import annotations

import os
import random

import torch

from .device import pick_device
from .widgets import i18n, style
from .widgets.fonts import use_cjk_font


def seed_everything(seed: int = 0) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy as np
        np.random.seed(seed)
    except ImportError:  # numpy is a dependency, but seeding must never be the thing that fails
        pass


def figure_png(fig) -> bytes:
    """A matplotlib figure as the PNG a notebook stores: cropped to its content (``bbox_inches="tight"``) and in a
    256-colour palette (a figure has few colours; about a third of the bytes of full RGB, which keeps each
    notebook under 1 MB with the projector's larger type)."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight", facecolor=fig.get_facecolor())
    image = Image.open(buf).convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT)
    out = io.BytesIO()
    image.save(out, format="PNG", optimize=True)
    return out.getvalue()


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


def setup(seed: int = 0, device=None, verbose: bool = True, threads: int | None = 1,
          lang: str = "en") -> torch.device:
    """Seed, fonts, plotting defaults; returns the device the notebook should use.

    ``threads`` (default 1) fixes torch's CPU threads: the demo models are tiny, one thread is fastest for
    them (thread hand-offs cost more than the maths), and it makes CPU results bit-identical on any machine.
    Pass ``threads=None`` to keep torch's default. ``lang="zh"`` makes widgets and figures speak Chinese (the
    Chinese edition's notebooks, ``notebooks/zh/``, say so in this one line)."""
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
        print(f"device: {dev.type}   torch {torch.__version__.split('+')[0]}   seed {seed}")
    return dev
