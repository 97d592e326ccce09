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
from typing import NamedTuple

__all__ = ["OKABE_ITO", "Concept", "CONCEPTS", "CATEGORICAL", "PAPER", "INK", "MUTED", "GRID", "FREE",
           "SEQUENTIAL", "DIVERGING", "FONT_SIZE", "SMALL_SIZE", "TITLE_SIZE", "FIGURE_WIDTH", "concept",
           "PLOTLY_SMALL", "PLOTLY_CONFIG", "KVState", "KV_STATES", "kv_state",
           "Category", "CATEGORY_LOOKS", "category", "categories", "graphic_colour", "lightness",
           "no_minor_log_labels", "plotly_log_axis", "text_sizes", "MIN_LIGHTNESS_STEP", "Series", "series_of", "told_apart", "legibility",
           "colour", "text_colour", "contrast_ratio", "relative_luminance", "cvd_distance", "apply",
           "apply_matplotlib", "plotly_template", "control_style", "control_layout", "grid", "css",
           "classroom_scale", "hatch_css", "plotly_pattern", "plotly_symbol", "themed", "themed_plotly_css"]

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

# Type for a projector: SMALL_SIZE is the floor of every text in a figure (ticks, legends, numbers in heat-map
# cells). matplotlib reads these as points; plotly (pixels) as the size + 2 (the template: 13.5, 13, 15.5 px).
FONT_SIZE = 11.5  # axis labels and body text
SMALL_SIZE = 11  # the floor: tick labels, annotations, legends, cell numbers
TITLE_SIZE = 12.5
PLOTLY_SMALL = SMALL_SIZE + 2  # the floor in plotly (px): what the template gives ticks and legends
PLOTLY_CONFIG = {"displayModeBar": False, "displaylogo": False}  # no toolbar over the figure, no link off the machine
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


# ----------------------------------------------------------------------------- the K/V state of a position
@dataclass(frozen=True)
class KVState:
    """What happened to one position's K/V in one step: THE drawing of the course's central picture, the same in
    every tier (the player's chips): a cell filled with the concept's colour, its hatch (stripes in HTML), its
    glyph written in the cell, and its words in the key. "none yet" is an empty cell with a dashed edge."""
    name: str  # "new", "recomputed", "cached", "none"
    concept: str  # the concept of CONCEPTS whose colour and hatch it takes
    glyph: str  # one character written in the cell (and in text tables)
    label: str  # the key's words (pass through lib.i18n.t)
    meaning: str  # a sentence for hovers

    @property
    def colour(self) -> str:
        return PAPER if self.name == "none" else CONCEPTS[self.concept].colour

    @property
    def hatch(self) -> str:
        return CONCEPTS[self.concept].hatch

    @property
    def edge(self) -> str:  # matplotlib linestyle of the cell's edge
        return "--" if self.name == "none" else "-"


KV_STATES = {k.name: k for k in [
    KVState("new", "computed", "+", "computed (first time)", "K/V computed for the first time in this step"),
    KVState("recomputed", "recomputed", "!", "computed again (wasted)",
            "K/V computed again although an earlier step already had them (no cache: waste)"),
    KVState("cached", "cached", "=", "read from the cache", "K/V read from the cache, not computed"),
    KVState("none", "free", ".", "none yet (newest)", "no K/V yet: the newest token is fed in the next step"),
]}


def kv_state(name: str) -> KVState:
    """The drawing of a K/V state (``KV_STATES``: "new", "recomputed", "cached", "none")."""
    if name not in KV_STATES:
        raise ValueError(f"unknown K/V state {name!r}; the states are: {', '.join(KV_STATES)}")
    return KV_STATES[name]


# ------------------------------------------------------------------ a widget's own states
class Look(NamedTuple):
    """How a widget draws one state of its own picture (a ring slot, a FlashAttention tile): the concept of
    CONCEPTS whose colour and hatch it takes, the glyph written in its cell ("" for none) and the legend's words
    (pass through lib.i18n.t)."""
    concept: str
    glyph: str
    label: str


# ------------------------------------------------------------------ categories that are not concepts
@dataclass(frozen=True)
class Category:
    """The look of the i-th member of a set of things that are *not* concepts of the course (block owners, serving
    strategies, models, batch sizes): neutral greys, never a concept's hue, told apart by a marker, a line style
    and a hatch, and in a figure by a direct label next to the line or in the cell."""
    colour: str  # lines and markers: a grey with ≥ 3:1 contrast on PAPER
    fill: str  # bars and blocks: a light grey on which INK text keeps ≥ 4.5:1
    hatch: str
    marker: str
    linestyle: object


# Greys from ink to mid-grey (lines: all ≥ 3:1 on white), light fills two steps apart in lightness, and hatches,
# markers and dashes that no concept uses as its own cue where it matters (a hatch shared with a concept never sits
# beside it: categories fill blocks and bars, concepts fill K/V cells).
CATEGORY_LOOKS = [
    Category("#1A1A1A", "#B8B8B8", "", "o", "-"),
    Category("#555555", "#C4C4C4", "||", "s", "--"),
    Category("#808080", "#E4E4E4", "++", "^", ":"),
    Category("#3A3A3A", "#FFFFFF", "..", "D", "-."),
    Category("#6A6A6A", "#F2F2F2", "**", "v", (0, (6, 2, 1, 2, 1, 2))),
    Category("#262626", "#D4D4D4", "oo", "P", (0, (1, 3))),
]


def category(i: int) -> Category:
    """The look of the ``i``-th category of a set (cycling after ``len(CATEGORY_LOOKS)``)."""
    return CATEGORY_LOOKS[int(i) % len(CATEGORY_LOOKS)]


def categories(names) -> dict:
    """A fixed look per name, in the order given: the same name keeps its look in every panel of a figure."""
    out = {}
    for n in names:
        if n not in out:
            out[n] = category(len(out))
    return out


def graphic_colour(name: str, bg: str = PAPER) -> str:
    """A concept's colour for a *line or a small marker* on ``bg``: itself where it has the 3:1 contrast that
    graphics need (WCAG 1.4.11), else the same hue darkened just enough (orange lines become a darker orange)."""
    return text_colour(name, bg, minimum=3.0)


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


def lightness(hex_colour: str) -> float:
    """CIE L* (0 black .. 100 white) of an sRGB colour: how light it looks once printed in grey-scale."""
    y = relative_luminance(hex_colour)
    return 116 * y ** (1 / 3) - 16 if y > 216 / 24389 else y * 24389 / 27


# ---------------------------------------------------------------------- legibility: series of a figure
# Two series of one legend (or one panel) stay apart in grey-scale when their lightness differs by at least this
# many L* units or they differ in a second cue (hatch, line dash, marker). 15 L* is about the step between two
# adjacent swatches of a 7-step grey ramp: apart at a glance, side by side.
MIN_LIGHTNESS_STEP = 15.0
MIN_GRAPHIC_CONTRAST = 3.0  # WCAG 1.4.11: graphics (lines, markers, bar edges) against their background
BACKGROUNDS = {"light": PAPER, "dark": PAPER}  # every figure is drawn on a white card, in either JupyterLab theme


@dataclass(frozen=True)
class Series:
    """One drawn series as grey-scale sees it: its fill / line colour, the colours that draw its outline or
    pattern, and the cues that are not colour."""
    label: str
    colour: str  # the fill of a bar / cell / marker, or a line's colour (#RRGGBB)
    ink: tuple = ()  # other colours that outline it (edges, hatches): what makes a light fill visible
    hatch: str = ""
    dash: str = ""
    marker: str = ""
    heavy: bool = False  # a heavy dark edge (the newest token's chip)
    glyph: str = ""  # a character written in the cell (the K/V chips' + ! = .)

    def contrast(self, bg: str) -> float:
        """Its best contrast against ``bg``: a light bar with a dark edge is visible by its edge."""
        return max(contrast_ratio(c, bg) for c in (self.colour, *self.ink))


def _hex(c) -> str | None:
    """Any matplotlib / plotly colour as #RRGGBB (None where it is transparent or missing)."""
    if c is None or (isinstance(c, str) and c in ("", "none", "transparent")):
        return None
    from matplotlib.colors import to_rgba

    if isinstance(c, str) and c.startswith("rgb"):
        nums = [float(x) for x in c[c.index("(") + 1:c.index(")")].split(",")]
        c = tuple(v / 255 for v in nums[:3]) + (nums[3] if len(nums) > 3 else 1.0,)
    r, g, b, a = to_rgba(c)
    if a < 0.2:
        return None
    return "#" + "".join(f"{round(v * 255):02X}" for v in (r, g, b))


def _mpl_series(handle, label: str) -> Series | None:
    from matplotlib.collections import Collection
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    if isinstance(handle, Line2D):
        colour = _hex(handle.get_color())
        marker = str(handle.get_marker()) if handle.get_marker() not in (None, "None", "none", "", " ") else ""
        if marker:
            face = _hex(handle.get_markerfacecolor())
            edge = _hex(handle.get_markeredgecolor())
            ink = tuple(c for c in (edge, colour) if c)
            colour = face or edge or colour
        else:
            ink = ()
        dash = str(handle.get_linestyle()) if handle.get_linestyle() not in ("None", "none", "", " ") else ""
        if colour is None:
            return None
        return Series(label, colour, ink, "", dash if handle.get_linewidth() > 0 else "", marker)
    if isinstance(handle, Patch):
        face = _hex(handle.get_facecolor()) if handle.get_fill() else None
        edge = _hex(handle.get_edgecolor()) if handle.get_linewidth() > 0 else None
        hatch = handle.get_hatch() or ""
        hatch_ink = _hex(handle._hatch_color) if hatch else None
        colour = face or edge
        if colour is None:
            return None
        pattern = getattr(handle, "_unscaled_dash_pattern", (0, None))[1]  # what is drawn (a legend's copy of a
        dash = "" if not pattern else str(tuple(pattern))  # patch keeps the dashes, not the linestyle's name)
        return Series(label, colour, tuple(c for c in (edge, hatch_ink) if c), hatch, dash, "",
                      heavy=handle.get_linewidth() >= 2)
    if isinstance(handle, Collection):
        faces = handle.get_facecolor()
        edges = handle.get_edgecolor()
        face = _hex(tuple(faces[0])) if len(faces) else None
        edge = _hex(tuple(edges[0])) if len(edges) and handle.get_linewidths()[0] > 0 else None
        paths = handle.get_paths()
        marker = str(len(paths[0].vertices)) + ":" + str(paths[0].codes) if paths else ""
        colour = face or edge
        return Series(label, colour, tuple(c for c in (edge,) if c), handle.get_hatch() or "", "", marker) \
            if colour else None
    return None


def series_of(fig) -> list[tuple[str, list[Series]]]:
    """Every set of series a figure asks a reader to tell apart: each legend's entries, and each panel's plotted
    lines (a panel whose lines carry direct labels has no legend). ``fig`` is a matplotlib Figure or a plotly
    figure (a ``go.Figure`` or its dict). Returns ``[(where, [Series, ...]), ...]``."""
    if hasattr(fig, "legends") and hasattr(fig, "axes"):  # matplotlib
        sets = []
        for i, leg in enumerate(fig.legends):
            sets.append((f"figure legend {i}", [s for h, tx in zip(leg.legend_handles, leg.get_texts())
                                               if (s := _mpl_series(h, tx.get_text()))]))
        for j, ax in enumerate(fig.axes):
            leg = ax.get_legend()
            if leg is not None:
                sets.append((f"axes {j} legend", [s for h, tx in zip(leg.legend_handles, leg.get_texts())
                                                 if (s := _mpl_series(h, tx.get_text()))]))
            lines = [ln for ln in ax.get_lines() if len(ln.get_xdata()) > 2 and ln.get_visible()]
            if len(lines) > 1:
                sets.append((f"axes {j} lines", [s for ln in lines if (s := _mpl_series(ln, ln.get_label()))]))
        return [(w, ss) for w, ss in sets if ss]
    return _plotly_series(fig)


def _plotly_series(fig) -> list[tuple[str, list[Series]]]:
    d = fig if isinstance(fig, dict) else fig.to_dict()
    groups: dict = {}
    for i, tr in enumerate(d.get("data", [])):
        kind = tr.get("type", "scatter")
        if kind not in ("scatter", "bar", "scattergl"):
            continue
        mode = tr.get("mode", "lines+markers" if kind == "scatter" else "")
        line, marker = tr.get("line") or {}, tr.get("marker") or {}
        colour = line.get("color") if kind != "bar" and "lines" in mode else marker.get("color")
        colours = colour if isinstance(colour, (list, tuple)) else [colour]
        symbols = marker.get("symbol")
        symbols = symbols if isinstance(symbols, (list, tuple)) else [symbols] * len(colours)
        pattern = (marker.get("pattern") or {}).get("shape")
        patterns = pattern if isinstance(pattern, (list, tuple)) else [pattern] * len(colours)
        edges = (marker.get("line") or {}).get("color")
        edges = edges if isinstance(edges, (list, tuple)) else [edges] * len(colours)
        dash = line.get("dash", "") if "lines" in mode else ""
        texts = tr.get("text") if "text" in mode and isinstance(tr.get("text"), (list, tuple)) else []
        texts = list(texts) + [""] * (len(colours) - len(texts))
        where = f"plotly {tr.get('xaxis', 'x')}/{tr.get('yaxis', 'y')}"
        seen = set()
        for c, sym, pat, glyph, edge in zip(colours, symbols, patterns, texts, edges):
            h, edge = _hex(c), _hex(edge) if edge is not None else None
            glyph = glyph.replace("<b>", "").replace("</b>", "") if isinstance(glyph, str) else ""
            glyph = glyph if len(glyph) == 1 else ""
            if h is None or (h, sym, pat, glyph) in seen:
                continue
            seen.add((h, sym, pat, glyph))
            groups.setdefault(where, []).append(Series(
                str(tr.get("name") or i), h, (edge,) if edge else (), pat or "", dash or "",
                (sym or "") if "markers" in mode or kind == "scatter" and "lines" not in mode else "", glyph=glyph))
    return [(w, ss) for w, ss in groups.items() if len(ss) > 0]


def told_apart(a: Series, b: Series) -> tuple[bool, float]:
    """Whether two series stay apart in grey-scale: a second cue differs (hatch, dash, marker), or their
    lightness differs by ``MIN_LIGHTNESS_STEP``. Returns (apart, lightness difference)."""
    step = abs(lightness(a.colour) - lightness(b.colour))
    cue = (a.hatch, a.dash, a.marker, a.heavy, a.glyph) != (b.hatch, b.dash, b.marker, b.heavy, b.glyph)
    return cue or step >= MIN_LIGHTNESS_STEP, step


def legibility(fig) -> dict:
    """What ``series_of(fig)`` measures: the pairs that grey-scale merges (``merged``), the series under 3:1
    against the background in either theme (``faint``), the smallest contrast met, and the smallest lightness
    step of a pair told apart by lightness alone (``min_step``, None where every pair has a second cue)."""
    merged, faint, steps, contrasts = [], [], [], []
    for where, ss in series_of(fig):
        unique = list({(s.colour, s.ink, s.hatch, s.dash, s.marker, s.heavy, s.glyph): s for s in ss}.values())
        for i, a in enumerate(unique):
            for theme, bg in BACKGROUNDS.items():
                c = a.contrast(bg)
                contrasts.append(c)
                if c < MIN_GRAPHIC_CONTRAST:
                    faint.append(f"{where}: {a.label!r} {c:.2f}:1 on {theme} ({a.colour})")
            for b in unique[i + 1:]:
                if a.label == b.label:
                    continue
                apart, step = told_apart(a, b)
                if not apart:
                    merged.append(f"{where}: {a.label!r} vs {b.label!r} (ΔL* {step:.1f}, same cues)")
                elif (a.hatch, a.dash, a.marker, a.heavy, a.glyph) == (b.hatch, b.dash, b.marker, b.heavy, b.glyph):
                    steps.append(step)
    return {"merged": merged, "faint": faint, "min_contrast": min(contrasts) if contrasts else None,
            "min_step": min(steps) if steps else None}


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
        "savefig.bbox": "tight", "savefig.pad_inches": 0.08,  # a figure is cropped to its content
    })


def no_minor_log_labels(*axes) -> None:
    """Log axes label their decades only, as plain numbers (1, 10, 100, 1000): matplotlib's minor labels on a
    short log axis ("2 5 2 5") read as values. Minor ticks stay, unlabelled."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    for ax in axes:
        for axis, scale in ((ax.xaxis, ax.get_xscale()), (ax.yaxis, ax.get_yscale())):
            if scale == "log":
                axis.set_minor_formatter(NullFormatter())
                axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.10g}"))


def plotly_log_axis(**axis) -> dict:
    """A plotly log axis that labels its decades only (``dtick=1``: 1, 10, 100; never the minor "2 5")."""
    return {"type": "log", "dtick": 1, **axis}


def text_sizes(fig, floor: float | None = None) -> list[tuple[str, float]]:
    """The texts of ``fig`` under ``floor`` (default: ``SMALL_SIZE`` points for matplotlib, ``PLOTLY_SMALL``
    pixels for plotly, less a half for rounding), as ``(text, size)``. matplotlib: every visible non-empty text
    (titles, ticks, legends, labels in cells); plotly: every font size the figure sets."""
    if hasattr(fig, "findobj"):
        from matplotlib.text import Text

        floor = SMALL_SIZE - 0.5 if floor is None else floor
        out = []
        for tx in fig.findobj(Text):
            if tx.get_visible() and tx.get_text().strip() and tx.get_fontsize() < floor:
                out.append((tx.get_text(), tx.get_fontsize()))
        return out
    floor = PLOTLY_SMALL - 0.5 if floor is None else floor
    d = fig if isinstance(fig, dict) else fig.to_dict()
    out = []

    def walk(node, path):
        if isinstance(node, dict):
            for k, v in node.items():
                if k == "template":
                    continue
                if k == "size" and path.endswith("font") and isinstance(v, (int, float)) and v < floor:
                    out.append((path, v))
                walk(v, f"{path}.{k}" if path else k)
        elif isinstance(node, list):
            for v in node:
                walk(v, path)
    walk({"data": d.get("data"), "layout": d.get("layout"), "frames": d.get("frames")}, "")
    import json
    import re

    text = json.dumps({"data": d.get("data"), "layout": {k: v for k, v in (d.get("layout") or {}).items()
                                                         if k != "template"}, "frames": d.get("frames")})
    out += [("<sub> / <sup> (plotly draws them at 70%)", 0.0)] * len(re.findall(r"<su[bp]>", text))
    out += [(f"font-size:{px}px", float(px)) for px in re.findall(r"font-size:\s*([0-9.]+)px", text)
            if float(px) < floor]
    return out


def text_collisions(fig, tolerance_px: float = 2.0) -> list[tuple[str, str, float]]:
    """Pairs of texts of the matplotlib figure ``fig`` drawn over each other: ``(text a, text b, overlap in px)``
    for every two visible, non-empty texts (tick labels, axis labels, titles, texts in the axes, legend entries,
    figure texts) whose drawn boxes overlap by more than ``tolerance_px`` in both directions. A text inside a
    table cell or a legend is compared with the texts outside its own container only (a legend lays its own
    entries out). What the legibility measures cannot see: "x1 … target" printed over each other, x labels that
    run into each other, a title over a panel label."""
    from matplotlib.legend import Legend
    from matplotlib.table import Table
    from matplotlib.text import Text

    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    owner = {id(tx): id(box) for box in fig.findobj(lambda o: isinstance(o, (Legend, Table)))
             for tx in box.findobj(Text)}  # a text inside a legend or a table: its container
    ticks, drawn = set(), set()  # every tick label; those of the ticks matplotlib draws (inside the view)
    for ax in fig.axes:
        for axis in ax._axis_map.values():
            for tick in axis.get_major_ticks() + axis.get_minor_ticks():
                ticks |= {id(tick.label1), id(tick.label2)}
            if ax.axison and axis.get_visible():  # an axis switched off draws no tick labels
                for tick in axis._update_ticks():
                    drawn |= {id(tick.label1), id(tick.label2)}
    boxes = []
    for tx in fig.findobj(Text):
        if not (tx.get_visible() and tx.get_text().strip()) or tx.get_alpha() == 0:
            continue
        if id(tx) in ticks and id(tx) not in drawn:
            continue
        if tx.axes is not None and not tx.axes.get_visible():
            continue
        bb = tx.get_window_extent(renderer)
        if bb.width > 0 and bb.height > 0:
            boxes.append((tx.get_text(), bb, owner.get(id(tx))))
    out = []
    for i, (ta, a, oa) in enumerate(boxes):
        for tb, b, ob in boxes[i + 1:]:
            if oa is not None and oa == ob:
                continue
            w = min(a.x1, b.x1) - max(a.x0, b.x0)
            h = min(a.y1, b.y1) - max(a.y0, b.y0)
            if w > tolerance_px and h > tolerance_px:
                out.append((ta, tb, round(min(w, h), 1)))
    return out


def _drawn_points(line, per_segment: int = 12):
    """The display-space points of a line: its vertices and ``per_segment`` points along each segment
    (a legend over a straight stretch between two markers covers data too), its markers as drawn."""
    import numpy as np

    xy = line.get_transform().transform(np.asarray(line.get_xydata(), dtype=float))  # (n, 2) px (axvline: blended)
    xy = xy[np.isfinite(xy).all(axis=1)]
    if line.get_linestyle() in ("None", "none", "", " ") or len(xy) < 2:
        return xy
    t = np.linspace(0.0, 1.0, per_segment, endpoint=False)[None, :, None]  # (1, k, 1)
    along = xy[:-1, None, :] + t * (xy[1:, None, :] - xy[:-1, None, :])  # (n - 1, k, 2)
    return np.concatenate([along.reshape(-1, 2), xy[-1:]])


def _legend_over_lines(ax, renderer, tolerance_px: float = 1.0) -> list[tuple[str, str, int]]:
    """``legend_collisions`` for the legend of one axes (drawn already)."""
    from matplotlib.legend import Legend

    legend = ax.get_legend()
    if not isinstance(legend, Legend) or not legend.get_visible() or not ax.get_visible():
        return []
    box, inside_axes = legend.get_window_extent(renderer), ax.get_window_extent(renderer)  # only drawn data counts
    x0, y0 = max(box.x0, inside_axes.x0) + tolerance_px, max(box.y0, inside_axes.y0) + tolerance_px
    x1, y1 = min(box.x1, inside_axes.x1) - tolerance_px, min(box.y1, inside_axes.y1) - tolerance_px
    first = next((tx.get_text() for tx in legend.get_texts()), "")
    out = []
    for line in ax.get_lines():
        if line.get_visible() and line.get_transform() == ax.transData:  # not axhline/axvline: a reference across
            pts = _drawn_points(line)  # (n, 2) px                           # the panel that a legend may cross
            inside = int(((pts[:, 0] > x0) & (pts[:, 0] < x1) & (pts[:, 1] > y0) & (pts[:, 1] < y1)).sum())
            if inside:
                out.append((first, line.get_label(), inside))
    return out


def legend_collisions(fig, tolerance_px: float = 1.0) -> list[tuple[str, str, int]]:
    """Legends of the matplotlib figure ``fig`` drawn over data: ``(the legend's first entry, the line's label,
    points of the line under the legend)`` for every visible line of a legend's axes that passes under the
    legend's box (shrunk by ``tolerance_px``), sampled along each segment; reference lines across the whole panel
    (``axhline`` / ``axvline``) are not counted. What ``text_collisions`` cannot see: a key laid over the very
    curves it names."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [c for ax in fig.axes for c in _legend_over_lines(ax, renderer, tolerance_px)]


def place_legend(ax, **kwargs):
    """``ax.legend(**kwargs)`` where it covers no line: where asked if the lines leave it free, else where
    matplotlib finds the best place if that one is free; otherwise the y axis grows room above the data, as tall as
    the legend (in decades on a log axis), and the legend goes to its upper left. Call it last, once the figure
    holds everything it draws (a later title, panel or text can move the axes under the legend). Returns the
    Legend."""
    for loc in dict.fromkeys([kwargs.get("loc", "best"), "best"]):
        legend = ax.legend(**{**kwargs, "loc": loc})
        ax.figure.canvas.draw()
        renderer = ax.figure.canvas.get_renderer()
        if not _legend_over_lines(ax, renderer):
            return legend
    share = min(0.6, legend.get_window_extent(renderer).height / ax.get_window_extent(renderer).height + 0.06)
    lo, hi = ax.get_ylim()
    if ax.get_yscale() == "log":
        import math

        ax.set_ylim(lo, 10 ** (math.log10(lo) + (math.log10(hi) - math.log10(lo)) / (1 - share)))
    else:
        ax.set_ylim(lo, lo + (hi - lo) / (1 - share))
    return ax.legend(**{**kwargs, "loc": "upper left"})


# -------------------------------------------------------------------------------------------- plotly
_SCALE = 1.0  # the type scale ``apply`` last installed (1 in a notebook, ``classroom_scale()`` on a projector)


def plotly_template(scale: float | None = None):
    """The ``kvlab`` plotly template: the palette, the fonts, a white card, legends above the plot (never on it),
    titles left-aligned with the plot (not the card's edge) with room under them, and no fixed width (a figure takes its cell's width). ``scale``
    multiplies every font size and the margins that hold text (the classroom view passes ``classroom_scale()``);
    None: the scale ``apply`` last installed."""
    import plotly.graph_objects as go

    k = _SCALE if scale is None else _checked_scale(scale)
    def px(size):
        return plotly_px(size, k)
    axis = dict(gridcolor=GRID, linecolor=MUTED, zerolinecolor=GRID, tickfont=dict(size=px(SMALL_SIZE + 2)),
                title=dict(font=dict(size=px(FONT_SIZE + 2))), automargin=True)
    return go.layout.Template(layout=dict(
        colorway=CATEGORICAL, font=dict(size=px(FONT_SIZE + 2), color=INK),
        paper_bgcolor=PAPER, plot_bgcolor=PAPER, autosize=True,
        title=dict(x=0, xref="paper", xanchor="left", font=dict(size=px(TITLE_SIZE + 3))),  # at the plot's left
        legend=dict(orientation="h", yanchor="bottom", y=1.02, x=0, xanchor="left",
                    font=dict(size=px(SMALL_SIZE + 2))),
        margin=dict(l=round(60 * k), r=round(24 * k), t=round(80 * k), b=round(50 * k)), xaxis=axis, yaxis=axis,
        colorscale=dict(sequential="Viridis", diverging="PuOr"),
    ))


def plotly_px(size: float, scale: float | None = None) -> float:
    """A plotly font size (px) at the type scale ``apply`` installed: ``size`` in a notebook (a whole size stays an
    int, so a stored figure is unchanged), ``size × classroom_scale()`` on a projector. Every size a figure sets
    itself (annotations, glyphs, table cells, subplot titles) goes through it, as the template's do (``scale``:
    another scale than the installed one)."""
    v = round(size * (_SCALE if scale is None else scale), 1)
    return int(v) if v == int(v) else v


def scale_subplot_titles(fig, size: float | None = None):
    """make_subplots writes its subplot titles at a fixed 16 px: set them to the course's small type (or ``size``)
    at the installed scale. Call it right after make_subplots, before any other annotation. Returns ``fig``."""
    return fig.update_annotations(font_size=plotly_px(SMALL_SIZE + 2 if size is None else size))


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


def hatch_css(hatch: str, ink: str | None = None) -> str:
    """A matplotlib hatch as inline CSS (``background-image``) that draws the same strokes in the same direction, so a
    concept looks alike in a static figure and in an HTML widget: "//" -> "/" stripes, "\\\\" -> "\\", "--" -> level,
    "||" -> upright, "xx" / "++" -> crossed, ".." -> dots, "oo" -> rings; "" -> "" (no hatch). The strokes are ``ink`` (default PAPER: pale
    strokes over the fill, as the figures' hatches over a coloured bar)."""
    ink = ink or PAPER
    stripes = f"{ink} 0 1.5px,transparent 1.5px 5px"
    images = {"": "",
              "//": f"repeating-linear-gradient(135deg,{stripes})",  # the gradient runs down-right: "/" strokes
              "\\\\": f"repeating-linear-gradient(45deg,{stripes})",
              "--": f"repeating-linear-gradient(0deg,{stripes})",
              "||": f"repeating-linear-gradient(90deg,{stripes})",
              "++": f"repeating-linear-gradient(0deg,{stripes}),repeating-linear-gradient(90deg,{stripes})",
              "xx": f"repeating-linear-gradient(135deg,{stripes}),repeating-linear-gradient(45deg,{stripes})",
              "..": f"radial-gradient(circle,{ink} 0 1px,transparent 1.3px)",
              "oo": f"radial-gradient(circle,transparent 0 1.2px,{ink} 1.3px 2px,transparent 2.3px)",
              "**": f"radial-gradient(circle,{ink} 0 1.6px,transparent 1.9px)"}
    if hatch not in images:
        raise ValueError(f"hatch {hatch!r} has no CSS drawing; allowed: {', '.join(map(repr, images))}")
    if not hatch:
        return ""
    size = "background-size:5px 5px;" if hatch in ("..", "**") else "background-size:7px 7px;" if hatch == "oo" else ""
    return f"background-image:{images[hatch]};{size}"


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
# MUTED text and lines, GRID lines, and shapes filled with the paper (a heat-map's veil over its earlier rows). Every
# other colour (the concepts, a heat-map's cells, the FREE "not yet"
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
        (f'.shapelayer path[style*="fill: {paper}"]', f"fill: {css('paper')}"),  # a veil or cover of paper
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


# ------------------------------------------------------------------------ notebooks 11-11's widgets (issue 25)
# The tile stepper (09), the ring buffer (10) and the capacity explorer (11) draw with the concepts above; the two
# ideas they add get their own entries here, each with every cue (colour, hatch, marker, line, label):
# * a sink (10): a position a windowed cache keeps for good. It is pinned as a shared prefix is pinned, so it takes
#   that colour, with its own hatch and label;
# * the activations reserve (11): memory a serving engine keeps for a step's activations. A neutral, as "free" is,
#   but dark and dotted, so it never reads as a category of the palette.
CONCEPTS.update({c.name: c for c in [
    Concept("sink", OKABE_ITO["reddish purple"], "\\\\", "^", "-.", "attention sink (kept for good)"),
    Concept("activations", MUTED, "..", "P", (0, (1, 2)), "activations reserve"),
]})
CONCEPTS.update({  # the widgets' words for ideas that already have a concept
    "tile computed": CONCEPTS["computed"], "tile skipped": CONCEPTS["free"], "tile loading": CONCEPTS["newest"],
    "flash bytes": CONCEPTS["cached"], "plain bytes": CONCEPTS["recomputed"], "held": CONCEPTS["cached"],
    "kv blocks": CONCEPTS["cached"],
})


def chip_css(concept_name: str, *, bold: bool = False, dashed: bool = False, edge: str | None = None) -> str:
    """Inline CSS of an HTML chip (a cell of a tile grid, a slot of a ring) in a concept's cues: its fill, its
    hatch drawn as the figures draw it (``hatch_css``) where the concept has one (the second cue), a heavy edge for the current one, a dashed edge for an
    empty one. Text on a chip is INK (the fill is fixed, so it reads in light and dark themes alike); an empty chip
    has no fill (the theme's background shows: no white box glowing in the dark theme) and its text, like the heavy
    edge, is the theme's ink (``css("ink")``: black on white, light on JupyterLab's dark), so neither vanishes into
    the page."""
    c = concept(concept_name)
    fill = "transparent" if c.name == "free" and dashed else c.colour
    stripes = hatch_css(c.hatch)
    border = f"{'3px' if bold else '1px'} {'dashed' if dashed else 'solid'} {edge or (css('ink') if bold else MUTED)}"
    ink = css("ink") if fill == "transparent" else INK  # on no fill, the text is on the page: the theme's ink
    return f"background-color:{fill};{stripes}color:{ink};border:{border}"
