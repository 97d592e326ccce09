"""No committed figure uses red and green as a pair of categories (about 1 man in 12 cannot tell them apart).

Every PNG stored in a notebook's outputs is scanned: a figure fails when it holds both a noticeable area of
saturated red and of saturated green. The course's palette (lib/widgets/style.py, Okabe–Ito) has neither a pure red nor a
pure green (its vermillion sits at hue 26°, its bluish green at 164°), so only a figure that bypasses the style
can fail; viridis heat-maps contain green but no red."""
import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parent.parent / "notebooks").rglob("[0-9][0-9]_*.ipynb"))
SHARE = 0.002  # 0.2% of the pixels: a legend swatch plus a line, not a stray anti-aliased pixel


def hue_masks(png: bytes):
    from PIL import Image

    rgb = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"), dtype=np.float64) / 255
    mx, mn = rgb.max(-1), rgb.min(-1)
    delta = np.where(mx - mn == 0, 1, mx - mn)
    r, g, b = rgb[..., 0], rgb[..., 1], rgb[..., 2]
    hue = np.select([mx == r, mx == g], [((g - b) / delta) % 6, (b - r) / delta + 2], (r - g) / delta + 4) * 60
    sat = np.where(mx == 0, 0, (mx - mn) / np.where(mx == 0, 1, mx))
    vivid = (sat > 0.35) & (mx > 0.35)
    red = vivid & ((hue >= 345) | (hue <= 15))
    green = vivid & (hue >= 90) & (hue <= 150)
    return red.mean(), green.mean()


def stored_pngs(path):
    nb = json.loads(path.read_text(encoding="utf-8"))
    for i, cell in enumerate(nb["cells"]):
        for out in cell.get("outputs", []):
            data = out.get("data", {}).get("image/png")
            if data:
                yield i, base64.b64decode(data)


def test_the_scan_tells_red_green_from_the_course_palette():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from lib.widgets import style

    def drawn(colours):
        fig, ax = plt.subplots(figsize=(4, 2))
        ax.bar(range(len(colours)), [1] * len(colours), color=colours)
        buf = io.BytesIO()
        fig.savefig(buf, format="png")
        plt.close(fig)
        return buf.getvalue()

    red, green = hue_masks(drawn(["#d62728", "#2ca02c"]))
    assert red > SHARE and green > SHARE
    red, green = hue_masks(drawn(style.CATEGORICAL))
    assert not (red > SHARE and green > SHARE)


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(p.parents[1])))
def test_no_committed_figure_pairs_red_with_green(path):
    bad = []
    for cell, png in stored_pngs(path):
        red, green = hue_masks(png)
        if red > SHARE and green > SHARE:
            bad.append(f"cell {cell}: {red:.1%} red and {green:.1%} green pixels")
    assert not bad, f"{path.name}: figures that pair red with green (use lib.widgets.style's concepts): {bad}"
