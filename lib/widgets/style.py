"""The course's one visual language: every colour, font and size that a figure or a widget uses is defined here.

**Colours mean the same thing everywhere.** The categorical palette is Okabe & Ito's "Color Universal Design"
set (2008): seven colours chosen to stay apart for the three common colour-vision deficiencies. Each concept of
the course owns one of them, in every notebook, figure and widget (``CONCEPTS``): K/V *read from the cache* is
always blue, *computed for the first time* orange, *computed again* (wasted work) vermillion, and so on. Colour
is never the only cue: every concept also has a hatch (bars, cells), a marker (points), a line style (lines) and a
label (legends), so a figure still reads in grey-scale print. Red against green as a pair of categories is
never used (``tests/test_style.py`` checks the palette under simulated deuteranopia, protanopia and tritanopia,
and scans every committed figure).

**Text is readable.** Text colours (``INK``, ``MUTED``, and ``text_colour(concept)`` for coloured labels) have
a WCAG contrast ratio of at least 4.5:1 on the paper they are drawn on.

**Light and dark.** Static figures are PNGs drawn on an opaque white ``PAPER`` (a light card that reads the
same in JupyterLab's light and dark themes); plotly figures get the same card through the ``kvlab`` template;
widget HTML takes its text and background colours from JupyterLab's theme variables (``css``), with this
module's light colours as fallbacks outside JupyterLab.

``apply()`` (called by ``lib.notebook.setup``) installs all of it: matplotlib's rcParams, plotly's default
template, and nothing global for ipywidgets (widgets call ``control_style`` / ``grid`` / ``css`` themselves).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["OKABE_ITO", "Concept", "CONCEPTS", "CATEGORICAL", "PAPER", "INK", "MUTED", "GRID", "FREE",
           "SEQUENTIAL", "DIVERGING", "FONT_SIZE", "SMALL_SIZE", "TITLE_SIZE", "FIGURE_WIDTH", "concept",
           "colour", "text_colour", "contrast_ratio", "relative_luminance", "cvd_distance", "apply",
           "apply_matplotlib", "plotly_template", "control_style", "control_layout", "grid", "css",
           "classroom_scale", "plotly_pattern", "plotly_symbol", "themed", "themed_plotly_css"]

# ---------------------------------------------------------------------------------------------- palette
OKABE_ITO = {  # Okabe & Ito (2008), https://jfly.uni-koeln.de/color/ — the order of their table
    "orange": "#E69F00",
    "sky blue": "#56B4E9",
    "bluish green": "#009E73",
    "yellow": "#F0E442",
    "blue": "#0072B2",
    "vermillion": "#D55E00",
    "reddish purple": "#CC79A7",
}

PAPER = "#FFFFFF"  # the card every static figure is drawn on
INK = "#1A1A1A"  # text and axes (contrast 17.4:1 on PAPER)
MUTED = "#595959"  # secondary text, reference lines (7.0:1 on PAPER)
GRID = "#D9D9D9"  # grid lines, cell borders (never text)
FREE = "#EEEEEE"  # empty / free / not yet (a neutral fill, never a category's colour)

SEQUENTIAL = "viridis"  # heat-maps of one sign (attention weights, probabilities): uniform, CVD-safe
DIVERGING = "PuOr"  # values around zero (logit differences): purple-orange, CVD-safe

FONT_SIZE = 10  # points; matplotlib and plotly alike
SMALL_SIZE = 8.5  # tick labels, annotations, legends
TITLE_SIZE = 11
FIGURE_WIDTH = 9.0  # inches at 100 dpi: 900 px, the width of a JupyterLab cell at a 1280 px window


@dataclass(frozen=True)
class Concept:
    """One idea the course draws, with every cue it is drawn with."""
    name: str
    colour: str
    hatch: str  # bars and cells
    marker: str  # points
    linestyle: str  # lines
    label: str  # what a legend calls it


_CONCEPTS = [
    Concept("cached", OKABE_ITO["blue"], "", "o", "-", "read from the KV cache"),
    Concept("computed", OKABE_ITO["orange"], "//", "s", "--", "computed (first time)"),
    Concept("recomputed", OKABE_ITO["vermillion"], "xx", "X", ":", "computed again (wasted)"),
    Concept("weights", OKABE_ITO["bluish green"], "--", "P", (0, (8, 2)), "model weights"),
    Concept("shared", OKABE_ITO["reddish purple"], "\\\\", "^", "-.", "shared (prefix, copy-on-write)"),
    Concept("draft", OKABE_ITO["sky blue"], "..", "v", (0, (5, 2, 1, 2)), "draft model"),
    Concept("newest", OKABE_ITO["yellow"], "oo", "D", (0, (1, 1)), "newest token"),
    Concept("free", FREE, "", ".", (0, (2, 3)), "free / empty"),
    Concept("reference", MUTED, "", "|", (0, (4, 3)), "reference"),
]
CONCEPTS = {c.name: c for c in _CONCEPTS}
CONCEPTS.update({  # other names for the same ideas, so a widget can say what it means
    "kv": CONCEPTS["cached"], "read": CONCEPTS["cached"], "used": CONCEPTS["cached"],
    "new": CONCEPTS["computed"], "prefill": CONCEPTS["computed"], "accepted": CONCEPTS["computed"],
    "wasted": CONCEPTS["recomputed"], "rejected": CONCEPTS["recomputed"], "preempted": CONCEPTS["recomputed"],
    "decode": CONCEPTS["cached"], "attention": CONCEPTS["cached"], "weight products": CONCEPTS["weights"],
    "empty": CONCEPTS["free"], "current": CONCEPTS["newest"],
})

# Sampling (notebook 01, the player's candidates): a token the rule keeps vs one it removes. Neither is a category
# of the palette: kept is a dark neutral, removed a light one, told apart by lightness and a hatch as well.
CONCEPTS.update({c.name: c for c in [
    Concept("kept", MUTED, "", "o", "-", "can be drawn (p after the cut)"),
    Concept("removed", GRID, "..", "x", ":", "removed by the rule (p before the cut)"),
]})

# The categorical colours (what the CVD test checks pairwise), in the order series are coloured by default.
CATEGORICAL = [OKABE_ITO[n] for n in ("blue", "orange", "bluish green", "vermillion", "reddish purple",
                                      "sky blue", "yellow")]


def concept(name: str) -> Concept:
    """The cues of a concept (``CONCEPTS``); an unknown name is an error that lists the known ones."""
    try:
        return CONCEPTS[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown concept {name!r}; the course's concepts are: {', '.join(sorted(CONCEPTS))}") \
            from None


def colour(name: str) -> str:
    """The colour of a concept (``CONCEPTS``) or of an Okabe–Ito name."""
    if name in OKABE_ITO:
        return OKABE_ITO[name]
    return concept(name).colour


# ------------------------------------------------------------------------------------- contrast, CVD
def _rgb(hex_colour: str) -> tuple[float, float, float]:
    h = hex_colour.lstrip("#")
    if len(h) != 6:
        raise ValueError(f"a colour is written #RRGGBB, got {hex_colour!r}")
    return tuple(int(h[i:i + 2], 16) / 255 for i in (0, 2, 4))


def relative_luminance(hex_colour: str) -> float:
    """WCAG 2.x relative luminance of an sRGB colour (0 black .. 1 white)."""
    def lin(c):
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4
    r, g, b = (lin(c) for c in _rgb(hex_colour))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(fg: str, bg: str = PAPER) -> float:
    """WCAG contrast ratio (1..21) of text colour ``fg`` on ``bg``; AA asks ≥ 4.5 for body text."""
    a, b = sorted((relative_luminance(fg), relative_luminance(bg)), reverse=True)
    return (a + 0.05) / (b + 0.05)


def _darken(hex_colour: str, factor: float) -> str:
    return "#" + "".join(f"{round(c * factor * 255):02X}" for c in _rgb(hex_colour))


def text_colour(name: str, bg: str = PAPER, minimum: float = 4.5) -> str:
    """A concept's colour for *text* on ``bg``: the colour itself when it meets the contrast ``minimum``, else the
    same hue darkened just enough (orange labels on white become a readable dark orange)."""
    c = colour(name)
    factor = 1.0
    while contrast_ratio(c, bg) < minimum and factor > 0.05:
        factor -= 0.02
        c = _darken(colour(name), factor)
    return c


def cvd_distance(a: str, b: str, deficiency: str | None = None, severity: float = 100) -> float:
    """Perceptual distance ΔE' (CAM02-UCS) between colours ``a`` and ``b`` as seen with ``deficiency``
    ("deuteranomaly", "protanomaly", "tritanomaly"; None: typical vision), simulated by ``colorspacious``
    (Machado et al. 2009) at ``severity`` (100 = the full dichromacy)."""
    import numpy as np
    from colorspacious import cspace_convert, deltaE

    kinds = (None, "deuteranomaly", "protanomaly", "tritanomaly")
    if deficiency not in kinds:
        raise ValueError(f"deficiency must be one of {kinds}, got {deficiency!r}")
    pair = [np.array(_rgb(x)) for x in (a, b)]
    if deficiency is not None:
        cvd = {"name": "sRGB1+CVD", "cvd_type": deficiency, "severity": severity}
        pair = [np.clip(cspace_convert(x, cvd, "sRGB1"), 0, 1) for x in pair]
    return float(deltaE(pair[0], pair[1], input_space="sRGB1", uniform_space="CAM02-UCS"))


# ---------------------------------------------------------------------------------------- matplotlib
def apply_matplotlib(scale: float = 1.0) -> None:
    """matplotlib's defaults in the course's style (``scale`` > 1 for the classroom projector)."""
    import matplotlib as mpl
    from cycler import cycler

    mpl.rcParams.update({
        "figure.dpi": 100, "savefig.dpi": 100, "figure.figsize": (FIGURE_WIDTH, 3.6),
        "figure.facecolor": PAPER, "savefig.facecolor": PAPER, "axes.facecolor": PAPER,
        "figure.constrained_layout.use": True,  # titles, labels and legends never overlap or get cut
        "font.size": FONT_SIZE * scale, "axes.titlesize": TITLE_SIZE * scale, "axes.labelsize": FONT_SIZE * scale,
        "xtick.labelsize": SMALL_SIZE * scale, "ytick.labelsize": SMALL_SIZE * scale,
        "legend.fontsize": SMALL_SIZE * scale, "legend.title_fontsize": SMALL_SIZE * scale,
        "figure.titlesize": TITLE_SIZE * scale, "legend.frameon": False,
        "text.color": INK, "axes.labelcolor": INK, "axes.edgecolor": MUTED, "axes.titlecolor": INK,
        "xtick.color": MUTED, "ytick.color": MUTED, "xtick.labelcolor": INK, "ytick.labelcolor": INK,
        "grid.color": GRID, "axes.spines.top": False, "axes.spines.right": False,
        "axes.prop_cycle": cycler(color=CATEGORICAL),
        "image.cmap": SEQUENTIAL, "hatch.color": INK, "hatch.linewidth": 0.6,
    })


# -------------------------------------------------------------------------------------------- plotly
_SCALE = 1.0  # the type scale ``apply`` last installed (1 in a notebook, ``classroom_scale()`` on a projector)


def plotly_template(scale: float | None = None):
    """The ``kvlab`` plotly template: the palette, the fonts, a white card, legends above the plot (never on it),
    titles left-aligned with room under them, and no fixed width (a figure takes its cell's width). ``scale``
    multiplies every font size and the margins that hold text (the classroom view passes ``classroom_scale()``);
    None: the scale ``apply`` last installed."""
    import plotly.graph_objects as go

    k = _SCALE if scale is None else _checked_scale(scale)
    def px(size):  # a whole size stays an int (a stored figure's template is unchanged at scale 1)
        v = round(size * k, 1)
        return int(v) if v == int(v) else v
    axis = dict(gridcolor=GRID, linecolor=MUTED, zerolinecolor=GRID, tickfont=dict(size=px(SMALL_SIZE + 2)),
                title=dict(font=dict(size=px(FONT_SIZE + 2))), automargin=True)
    return go.layout.Template(layout=dict(
        colorway=CATEGORICAL, font=dict(size=px(FONT_SIZE + 2), color=INK),
        paper_bgcolor=PAPER, plot_bgcolor=PAPER, autosize=True,
        title=dict(x=0, xanchor="left", font=dict(size=px(TITLE_SIZE + 3))),
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left",
                    font=dict(size=px(SMALL_SIZE + 2))),
        margin=dict(l=round(60 * k), r=20, t=round(80 * k), b=round(50 * k)), xaxis=axis, yaxis=axis,
        colorscale=dict(sequential="Viridis", diverging="PuOr"),
    ))


def _checked_scale(scale) -> float:
    """``scale`` as a float, or a clear error: a type scale is a finite number from 0.5 to 4."""
    from ..checks import number

    return number(scale, "scale", 0.5, 4)


_PLOTLY_PATTERNS = {"": "", "//": "/", "xx": "x", "oo": ".", "..": ".", "--": "-", "\\\\": "\\"}
_PLOTLY_SYMBOLS = {"o": "circle", "s": "square", "X": "x", "P": "cross", "^": "triangle-up", "v": "triangle-down",
                   "D": "diamond", ".": "circle-open", "|": "line-ns-open", "x": "x-thin-open"}


def plotly_pattern(name: str) -> str:
    """A concept's hatch as a plotly bar ``marker.pattern.shape`` (plotly draws one stroke where matplotlib
    doubles it: "//" -> "/", "xx" -> "x"; "oo" and ".." -> ".")."""
    return _PLOTLY_PATTERNS[concept(name).hatch]


def plotly_symbol(name: str) -> str:
    """A concept's marker as a plotly ``marker.symbol`` ("o" -> "circle", "s" -> "square", "X" -> "x", ...)."""
    return _PLOTLY_SYMBOLS[concept(name).marker]


# --------------------------------------------------------------------------------------- ipywidgets
def control_style() -> dict:
    """``style=`` for an ipywidgets control: the description takes the room it needs (never "temperat…")."""
    return {"description_width": "initial"}


def control_layout(width: str = "auto") -> dict:
    """``layout=`` for a control in a ``grid``: it fills its grid cell."""
    return {"width": width, "min_width": "0"}


def grid(*controls, columns: int = 3, gap: str = "4px 16px"):
    """Controls laid out in a predictable grid (``columns`` per row, each cell as wide as the widest needs)."""
    import ipywidgets as W

    return W.GridBox(list(controls), layout=W.Layout(
        grid_template_columns=f"repeat({columns}, minmax(max-content, 1fr))", grid_gap=gap, width="100%"))


def css(role: str) -> str:
    """A CSS colour for widget HTML that follows JupyterLab's theme: ``"ink"`` (text), ``"muted"`` (secondary
    text), ``"paper"`` (background), ``"border"``; this module's light colours outside JupyterLab."""
    roles = {"ink": f"var(--jp-ui-font-color1, {INK})", "muted": f"var(--jp-ui-font-color2, {MUTED})",
             "paper": f"var(--jp-layout-color1, {PAPER})", "border": f"var(--jp-border-color2, {GRID})"}
    if role not in roles:
        raise ValueError(f"unknown CSS role {role!r}; the roles are: {', '.join(roles)}")
    return roles[role]


# Plotly draws its figures with fixed colours (the white card of ``plotly_template``); a live widget's figure sits
# inside the widget's own themed box, where a white card reads as a hole in JupyterLab's dark theme. These rules,
# scoped to a widget made ``themed`` and to a dark JupyterLab (``data-jp-theme-light="false"``; VS Code's
# ``vscode-dark``), repaint exactly the card's colours in the theme's: the white paper and plot area, INK text,
# MUTED text and lines, GRID lines. Every other colour (the concepts, a heat-map's cells, the FREE "not yet"
# fill) is left as drawn. Plotly writes its colours as inline ``fill`` / ``stroke`` styles, so the rules match
# them by value and win with ``!important``.
def _rgb_css(hex_colour: str) -> str:
    return "rgb(" + ", ".join(str(round(c * 255)) for c in _rgb(hex_colour)) + ")"


def themed_plotly_css() -> str:
    """The CSS that puts a ``themed`` widget's plotly figure into the dark theme's colours (nothing in light)."""
    scopes = ('body[data-jp-theme-light="false"] .kvlab-themed .js-plotly-plot',
              'body.vscode-dark .kvlab-themed .js-plotly-plot')
    paper, ink, muted, grid = (_rgb_css(c) for c in (PAPER, INK, MUTED, GRID))
    rules = [
        (f'.main-svg[style*="background: {paper}"]', "background: transparent"),
        (f'.bg[style*="fill: {paper}"]', f"fill: {css('paper')}"),
        (f'text[style*="fill: {ink}"]', f"fill: {css('ink')}"),
        (f'text[style*="fill: {muted}"]', f"fill: {css('muted')}"),
        (f'path[style*="stroke: {muted}"]', f"stroke: {css('muted')}"),
        (f'path[style*="stroke: {grid}"]', f"stroke: {css('border')}"),
        (".modebar", "background: transparent"),  # its half-white strip over the figure's corner
    ]
    return "\n".join(", ".join(f"{scope} {sel}" for scope in scopes) + f" {{ {decl} !important; }}"
                      for sel, decl in rules)


def themed(box):
    """Make the ipywidgets ``box`` (a live widget holding a plotly figure) follow the theme: it gets the class
    ``kvlab-themed`` and, as its last child, a hidden HTML that carries ``themed_plotly_css`` (a ``<style>``
    applies wherever it sits; core widgets only, so it works in JupyterLab, VS Code and Voilà; last, so the
    widget's stored text form, which starts with its first children, stays as it was). Returns ``box``."""
    import ipywidgets as W

    carrier = W.HTML(f"<style>{themed_plotly_css()}</style>", layout=W.Layout(display="none"))
    box.add_class("kvlab-themed")
    box.children = (*box.children, carrier)
    return box


def classroom_scale() -> float:
    """How much larger type is in the classroom view (projector) than in a notebook."""
    return 1.4


def apply(scale: float = 1.0) -> None:
    """Install the style at type ``scale``: matplotlib's defaults and plotly's default template (``kvlab`` over
    ``plotly_white``), both at that scale."""
    global _SCALE
    apply_matplotlib(scale)
    import plotly.io as pio

    _SCALE = _checked_scale(scale)
    pio.templates["kvlab"] = plotly_template(_SCALE)
    pio.templates.default = "plotly_white+kvlab"
