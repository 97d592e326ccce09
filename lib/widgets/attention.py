"""Attention heat-map over cached keys: which earlier tokens the newest query looks at, step by step, drawn as a cache.

Row s is decode step s (the newest query of that step), column j is key position j in the cache. The grid
has a fixed size (every step and every key of the run) and keys that did not exist yet at a step are NaN,
so the picture grows one row per step without ever re-laying out. At step s:

- row s, the query of this step, is the bright one; the rows above it are faded: they were computed at earlier
  steps and are never computed again (the cache keeps K and V, not the rows);
- the cells of keys that do not exist yet (right of the row, and the rows still to come) are a quiet neutral,
  never the brightest thing on a light or a dark card;
- only the K/V this step appended is outlined as new (one cell at a decode step, the prompt's keys at the
  prefill), not a whole column;
- under the key axis, each position's K/V state as the player draws it (``lib.widgets.player.kv_status``:
  computed / computed again / read from the cache / none yet), and a bracket that sets the prompt's keys
  (written by the prefill in one pass) apart from the decode appends (one per step).

Everything is read from a ``Trace`` (``Trace.attention_grid``); only the live explorer runs the model, and only
when its prompt changes. The explorer draws the cache tensor of one layer beside the heat-map
(``lib.widgets.cache_tensor.cache_tensor_html``), following the step; ``induction_explorer`` opens it on a
passage written twice, at the head that measures as the model's induction head (``lib.heads``).

Three tiers (CONTRIBUTING.md):

    attention_view(trace, tokenizer, layer, head) -> AttentionView     the data every tier draws
    plot_attention(...), plot_attention_heads(...)                      1. static matplotlib
    attention_figure(trace, tokenizer, layer, head | "all", layers=None) 2. plotly, frames + slider + picker
    AttentionExplorer(model, tokenizer, prompt)                         3. live ipywidgets (prompt, layer,
                                                                           head / all heads, step)
"""
from __future__ import annotations

import html
import math
import time
from dataclasses import dataclass

import torch

from .. import checks
from . import style
from ..text import token_label
from ..trace import Trace, check_trace
from ..i18n import t
from . import figure_and_axes, frame_slider, play_buttons, prompt_problem
from .live import LiveWidget, problem_html, show_plotly
from .player import _draw_cells, KV_COLORS, KV_GLYPH_SIZE, KV_HATCH, KV_MARKS, kv_chip_look, kv_status

MAX_ANIMATED_KEYS = 64  # plotly payload grows as layers x heads x keys^2: cap the animated length
DECIMALS = 4  # weights going into plotly figures are rounded so stored outputs are identical run to run
COLORSCALE = style.SEQUENTIAL  # uniform and colour-blind safe: dark for 0, light for 1
# The K/V a step appended: an outline, not a hue alone: the "newest" concept's colour drawn over a dark halo, so
# it stands out on the dark and on the light end of the colour scale alike.
HIGHLIGHT, HALO = style.colour("newest"), style.INK
FUTURE = style.FREE  # keys and steps that do not exist yet (static figures: on the white card)
PAST_ALPHA = 0.35  # earlier steps' rows, faded: computed then and never again (the cache keeps K/V, not rows)


def _quiet(fill: str = style.FREE, ink: str = style.MUTED) -> str:
    """The grey ``fill`` written as the grey ``ink`` made translucent: on the white card it is ``fill`` itself, on a
    dark theme's card a dark grey just above it, so the cells still to come stay quiet in both themes (plotly)."""
    f, i = int(fill[1:3], 16), int(ink[1:3], 16)
    return f"rgba({i}, {i}, {i}, {(255 - f) / (255 - i):.3f})"


FUTURE_PLOTLY = _quiet()  # FUTURE in plotly figures, which a dark JupyterLab shows on its own dark card


# ------------------------------------------------------------------------------------------- checks

def check_layer_head(trace: Trace, layer, head, batch: int = 0, allow_all: bool = False):
    """Raise a ValueError that says what is allowed unless layer / head / batch index this trace."""
    check_trace(trace)
    checks.index(layer, "layer", trace.n_layers, f"the model has {trace.n_layers} layers")
    checks.index(head, "head", trace.n_heads, f"the model has {trace.n_heads} query heads",
                 allow_all=allow_all)
    B = trace.prompt_ids.shape[0]
    checks.index(batch, "batch", B, f"the trace holds {B} sequence(s)")


def _check_step(step, n_steps: int) -> int:
    if step is None:
        return n_steps - 1
    return checks.index(step, "step", n_steps, f"the trace has {n_steps} steps")


def _token_strings(ids, tokenizer) -> list[str]:
    if tokenizer is None:
        return [str(i) for i in ids]
    return [token_label(t) for t in tokenizer.tokens(ids)]




# --------------------------------------------------------------------------------------------- data

@dataclass(frozen=True)
class AttentionView:
    """What a heat-map of one layer and head draws, all read from a Trace.

    grid[s, j] is the weight step s's newest query gave key position j; NaN where key j did not exist yet.
    Every row sums to 1 over the keys that existed at that step. ``kv[s]`` is the K/V state of every position
    after step s, as the player draws it (``player.kv_status``); the first ``prompt_len`` keys are
    the prompt's, written by the first pass (the prefill), the others were appended one per decode step.
    """

    layer: int
    head: int
    batch: int
    grid: torch.Tensor  # (n_steps, n_keys) float32
    query_positions: list  # per step: position of the newest query (= the newest key, written this step)
    query_tokens: list  # per step: that query's token
    key_tokens: list  # per key position: its token
    prompt_len: int = 0  # keys 0..prompt_len-1 came with the prompt
    kv: tuple = ()  # per step: "new" / "recomputed" / "cached" / "none" for positions 0..query + 1

    @property
    def n_steps(self) -> int:
        return self.grid.shape[0]

    @property
    def n_keys(self) -> int:
        return self.grid.shape[1]

    @property
    def newest_key(self) -> list:
        """Per step, the key the step has just written into the cache at the query's own position."""
        return list(self.query_positions)

    def keys_at(self, step: int) -> int:
        """How many keys existed at this step (the query's own key included)."""
        return self.query_positions[_check_step(step, self.n_steps)] + 1

    def appended(self, step: int) -> tuple[int, int]:
        """(first, last) key whose K/V this step computed for the first time, the cells outlined as new: the query's
        own key at a decode step, every key of the prompt at the prefill."""
        step = _check_step(step, self.n_steps)
        new = [j for j, k in enumerate(self.kv[step]) if k == "new"] if self.kv else []
        return (new[0], new[-1]) if new else (self.query_positions[step],) * 2

    def chips(self, step: int) -> list[str]:
        """The K/V state of each key column after ``step`` (the player's chips, drawn under the key axis); ""
        where the position is not in the sequence yet."""
        states = list(self.kv[_check_step(step, self.n_steps)][:self.n_keys]) if self.kv else []
        return states + [""] * (self.n_keys - len(states))

    def row_label(self, step: int) -> str:
        """A query row's label: its position and token, "3 智", as a key column's (one scheme for every heat-map)."""
        return self.col_label(self.query_positions[step])

    def col_label(self, key: int) -> str:
        """A key column's label: its position and token, "3 智"."""
        return f"{key} {self.key_tokens[key]}"

    def hover(self, step: int, key: int) -> str:
        """The text shown when pointing at a cell: query token, key token, weight."""
        _check_step(step, self.n_steps)
        checks.index(key, "key", self.n_keys, f"the grid has {self.n_keys} key positions")
        w = float(self.grid[step, key])
        weight = t("not in the cache yet") if math.isnan(w) else f"{w:.{DECIMALS}f}"
        return t("step {step}: query {query} (pos {qpos}) -> key {key} (pos {kpos}): weight {weight}", step=step,
                 query=self.query_tokens[step], qpos=self.query_positions[step], key=self.key_tokens[key], kpos=key,
                 weight=weight)

    def grid_at(self, step: int | None = None) -> torch.Tensor:
        """The grid as it stood after ``step``: later rows are NaN (same shape, so nothing re-lays out)."""
        step = _check_step(step, self.n_steps)
        g = self.grid.clone()
        g[step + 1:] = float("nan")
        return g


def attention_view(trace: Trace, tokenizer=None, layer: int = 0, head: int = 0, batch: int = 0) -> AttentionView:
    """Heat-map data of one layer and query head: ``trace.attention_grid`` plus the tokens for its labels and the
    K/V state of every position per step. ``tokenizer=None`` labels tokens by id."""
    check_layer_head(trace, layer, head, batch)
    grid = trace.attention_grid(layer, head, batch)  # (n_steps, n_keys), NaN for future keys
    tokens = trace.tokens(batch)
    qpos = [s.positions[-1] for s in trace.steps]  # the newest query sits at the last fed position
    key_tokens = _token_strings(tokens[:grid.shape[1]], tokenizer)
    return AttentionView(layer=layer, head=head, batch=batch, grid=grid, query_positions=qpos,
                         query_tokens=[key_tokens[p] for p in qpos], key_tokens=key_tokens,
                         prompt_len=trace.prompt_ids.shape[1], kv=tuple(map(tuple, kv_status(trace, layer))))


def _rounded(values) -> list:
    """Floats for plotly: rounded, NaN as None (JSON null, drawn empty)."""
    return [None if math.isnan(v) else round(v, DECIMALS) for v in values]


def _spans(view: AttentionView) -> list[tuple[int, int, str]]:
    """The key axis's brackets: (first key, last key, words) for the prompt's keys (the prefill, one pass) and,
    when there are any in the grid, the decode appends (one per step)."""
    P, W = min(view.prompt_len, view.n_keys), view.n_keys
    out = [(0, P - 1, t("prefill: {n} prompt key(s), one pass", n=P))] if P else []
    return out + ([(P, W - 1, t("decode: one key appended per step"))] if W > P else [])


# --------------------------------------------------------------------------- tier 1: static matplotlib

def _draw(ax, view: AttentionView, step: int, labels: bool = True, annotate: bool | None = None):
    """Draw one heat-map onto a matplotlib Axes as it stood after ``step``; returns the image. Earlier rows are
    faded, the cells still to come grey; ``labels``: tick labels, axis titles and, under the key axis, the K/V
    chips and the prefill / decode brackets."""
    import numpy as np

    g = view.grid_at(step).numpy()  # (n_steps, n_keys), NaN: not in the cache yet
    rows = np.arange(view.n_steps)[:, None]  # (n_steps, 1)
    alpha = np.where((rows < step) & ~np.isnan(g), PAST_ALPHA, 1.0)  # (n_steps, n_keys)
    im = ax.imshow(np.ma.masked_invalid(g), cmap=_matplotlib_cmap(), vmin=0.0, vmax=1.0, aspect="auto",
                   interpolation="nearest", alpha=alpha)
    _draw_marks(ax, view, step)
    if annotate is None:
        annotate = view.n_keys <= 12
    if annotate:
        _annotate(ax, g, view, step)
    ax.set_xticks(range(view.n_keys))
    if labels:
        _draw_key_axis(ax, view, step)
        ax.set_xticklabels([view.col_label(j) for j in range(view.n_keys)],
                           rotation=0 if view.n_keys <= 12 else 90)
        _thin_key_labels(ax, view.n_keys)
        ax.set_yticks(list(range(view.n_steps)) + [view.n_steps + 0.25],
                      [view.row_label(s) for s in range(view.n_steps)] + ["K/V"])
        ax.set_xlabel(t("key in the cache: position and token"))
        ax.set_ylabel(t("newest query: position and token"))
    else:
        ax.set_yticks(range(view.n_steps))
        ax.set_xticklabels([])
        ax.set_yticklabels([])
    ax.tick_params(length=0)
    return im


def _thin_key_labels(ax, n_keys: int) -> None:
    """Where the columns are narrower than a (turned) key label is tall, label every 2nd, 3rd, ... key only, so the
    labels never print over each other (the plotly twin and the explorer name every key on hover)."""
    labels = ax.get_xticklabels()
    if n_keys <= 12 or not labels:
        return
    fig = ax.figure
    column_pt = 0.8 * fig.get_figwidth() * ax.get_position().width * 72 / n_keys  # 0.8: the colour bar's share
    every = max(1, math.ceil(1.3 * labels[0].get_fontsize() / column_pt))
    if every > 1:
        ax.set_xticklabels([tx.get_text() if j % every == 0 else "" for j, tx in enumerate(labels)], rotation=90)


def _draw_marks(ax, view: AttentionView, step: int):
    """This step's row outlined thinly over the keys it read, and the K/V it appended boxed as new (a dark halo
    under a line in the "newest" colour)."""
    import matplotlib.patches as patches

    ax.add_patch(patches.Rectangle((-0.5, step - 0.5), view.keys_at(step), 1, fill=False, edgecolor=style.MUTED,
                                   linewidth=1.2))
    a, b = view.appended(step)
    for colour, width in ((HALO, 4.5), (HIGHLIGHT, 2)):
        ax.add_patch(patches.Rectangle((a - 0.5, step - 0.5), b - a + 1, 1, fill=False, edgecolor=colour,
                                       linewidth=width))


def _annotate(ax, g, view: AttentionView, step: int):
    """Each drawn cell's weight, in ink or paper, whichever reads on the cell as drawn (faded rows are lighter)."""
    cmap = _matplotlib_cmap()
    for s in range(step + 1):
        a = PAST_ALPHA if s < step else 1.0
        for j in range(view.keys_at(s)):
            w = g[s, j]
            shown = [a * c + (1 - a) for c in cmap(w)[:3]]  # the cell's colour over the white card
            ax.text(j, s, f"{w:.2f}", ha="center", va="center", fontsize=style.SMALL_SIZE,
                    color=style.INK if _light(shown) else style.PAPER)


def _draw_key_axis(ax, view: AttentionView, step: int):
    """Under the grid: the player's K/V chips of this step (one per position in the sequence), then a bracket
    under the prompt's keys and one under the decode appends, their words on two lines."""
    n = view.n_steps
    states = [k for k in view.chips(step) if k]
    glyphs = [KV_MARKS[k] if view.n_keys <= 24 else "" for k in states]  # narrow chips: fill and hatch alone
    _draw_cells(ax, glyphs, [KV_COLORS[k] for k in states], n + 0.25, dashed=[k == "none" for k in states],
                hatches=[KV_HATCH[k] for k in states])
    for i, (a, b, words) in enumerate(_spans(view)):  # prefill's words from its left end, decode's to its right
        y = n + 0.95
        ax.plot([a - 0.42, a - 0.42, b + 0.42, b + 0.42], [y - 0.2, y, y, y - 0.2], color=style.INK, lw=1.2,
                clip_on=False)
        ax.text(b + 0.42 if i else a - 0.42, y + 0.12 + 0.5 * i, words, ha="right" if i else "left", va="top",
                fontsize=style.SMALL_SIZE, color=style.INK, in_layout=False)  # within the axes' width: no squeeze
    ax.set_ylim(n + 2.1, -0.5)
    ax.set_xlim(-0.5, view.n_keys - 0.5)


def _light(rgba) -> bool:
    """Whether ink text reads better than paper text on this colour (relative luminance above ~0.18)."""
    return style.relative_luminance("#" + "".join(f"{round(c * 255):02X}" for c in rgba[:3])) > 0.18


def _matplotlib_cmap():
    import matplotlib

    return matplotlib.colormaps[COLORSCALE].with_extremes(bad=FUTURE)  # grey: keys that do not exist yet


def plot_attention(trace: Trace, tokenizer=None, layer: int = 0, head: int = 0, step: int | None = None,
                   batch: int = 0, ax=None):
    """Static heat-map of one layer and head as it stood after ``step`` (default: the last step): this step's row
    bright, earlier rows faded, grey cells not in the cache yet, the appended K/V outlined, and under the key
    axis each position's K/V state and the prefill / decode brackets. Returns the Figure."""
    view = attention_view(trace, tokenizer, layer, head, batch)
    step = _check_step(step, view.n_steps)
    fig, ax = figure_and_axes(ax, (min(max(5.6, 2.5 + 0.45 * view.n_keys), style.FIGURE_WIDTH),  # bracket words fit
                                   min(2.7 + 0.32 * view.n_steps, 10)))
    im = _draw(ax, view, step)
    fig.colorbar(im, ax=ax, fraction=0.04, pad=0.02, label=t("attention weight"))
    ax.set_title(t("layer {layer}, head {head}: step {step}'s query {query} over {n} cached keys\n"
                   "(bright: this step's row; outlined: the K/V it appended)", layer=layer, head=head, step=step,
                   query=view.query_tokens[step], n=view.keys_at(step)), loc="left",
                 pad=12)  # it runs on over the colour bar: clear of its top label
    return fig


def plot_attention_heads(trace: Trace, tokenizer=None, layer: int | None = 0, step: int | None = None,
                         batch: int = 0):
    """Small multiples: every head of one layer side by side (``layer=None``: every layer, one row each), each
    drawn as ``plot_attention`` draws one (without the K/V chips). Returns the Figure."""
    import matplotlib.pyplot as plt

    check_trace(trace)
    layers = list(range(trace.n_layers)) if layer is None else [layer]
    for l in layers:
        check_layer_head(trace, l, 0, batch)
    H = trace.n_heads
    views = [[attention_view(trace, tokenizer, l, h, batch) for h in range(H)] for l in layers]
    v0 = views[0][0]
    step = _check_step(step, v0.n_steps)
    side = max(1.5, min(2.6, 0.16 * v0.n_keys + 0.7))
    width, height = side * H + 1.4, side * len(layers) + 1.0
    fig, axes = plt.subplots(len(layers), H, figsize=(width, height), squeeze=False, layout="none")
    # fixed margins in inches (a constrained layout would take seconds for 16 panels)
    fig.subplots_adjust(left=0.5 / width, right=1 - 1.0 / width, bottom=0.35 / height, top=1 - 0.65 / height,
                        wspace=0.06, hspace=0.06)
    for i, l in enumerate(layers):
        for h in range(H):
            ax = axes[i][h]
            im = _draw(ax, views[i][h], step, labels=False, annotate=False)
            if i == 0:
                ax.set_title(t("head {h}", h=h), fontsize=style.FONT_SIZE)
            if h == 0:
                ax.set_ylabel(t("layer {l}", l=l), fontsize=style.FONT_SIZE)
            if i == len(layers) - 1 and v0.n_keys <= 24:  # token labels only along the edges
                ax.set_xticklabels([v0.col_label(j) for j in range(v0.n_keys)], fontsize=style.SMALL_SIZE,
                                   rotation=90)
    fig.suptitle(t("all heads, step {step}: query {query} over {n} keys (outlined: the K/V it appended)", step=step,
                   query=v0.query_tokens[step], n=v0.keys_at(step)), fontsize=style.TITLE_SIZE, y=1 - 0.12 / height,
                 va="top")
    cax = fig.add_axes([1 - 0.85 / width, 0.3, 0.12 / width, 0.4])
    fig.colorbar(im, cax=cax, label=t("attention weight"))
    return fig


# ------------------------------------------------------------------- tier 2: plotly frames + slider

STRIP_PX = 90  # the K/V chips and brackets under a single heat-map, in px


def _plotly_colorscale() -> list:
    """COLORSCALE spelled out as [[fraction, colour], ...], as plotly.py sends it (plotly.js reads some bare
    names the other way round), the same scale as the static figures' and the template's."""
    from plotly.colors import make_colorscale, sequential

    return make_colorscale(getattr(sequential, COLORSCALE.capitalize()))


def _plotly_safe(text: str) -> str:
    """plotly reads tags in labels (<s> would strike through): escape them."""
    return html.escape(text, quote=False)


def attention_figure(trace: Trace, tokenizer=None, layer: int = 0, head=0, batch: int = 0,
                     max_keys: int = MAX_ANIMATED_KEYS, layers=None):
    """Plotly heat-map stepped with a slider (one frame per step) and a picker for layer and head.

    ``head`` is a query head, or ``"all"`` for small multiples of every head of a layer (the picker then
    chooses the layer). The figure opens on the last step. Each panel is one heat-map of the whole run
    (row s holds only the keys that existed at step s); a frame moves shapes (a paper veil that fades the
    earlier rows, a quiet cover over the steps still to come, the outline of this step's row and of the K/V it
    appended) and, under a single heat-map, the K/V chips of the step, so the axes never change. The picker
    swaps the weights in (``restyle``): the payload grows as layers x heads x keys², hence ``max_keys``, and
    ``layers``: the layers the picker offers (default: every layer; it must include ``layer``), so that a
    long run of a real model stays small in a saved notebook.
    Hovering shows query, key and weight; under the cover it shows the later step it belongs to.
    """
    import plotly.graph_objects as go

    check_layer_head(trace, layer, head, batch, allow_all=True)
    layers = _picker_layers(trace, layer, layers)
    base = attention_view(trace, tokenizer, layer, 0 if head == "all" else head, batch)
    n, W = base.n_steps, base.n_keys
    max_keys = checks.integer(max_keys, "max_keys", 1, allowed="a positive int")
    if W > max_keys:
        raise ValueError(f"this trace has {W} key positions, more than max_keys={max_keys} for an animated "
                         f"heat-map (its size grows as layers x heads x keys²); generate fewer tokens, pass "
                         f"max_keys={W} knowingly, or use plot_attention for a static figure")
    heads = list(range(trace.n_heads)) if head == "all" else [head]
    single = head != "all"  # one heat-map: the K/V chips and the brackets go under its key axis
    fig = _heatmap_panels(trace, tokenizer, layer, heads, batch, base, small=not single)
    xs = [_plotly_safe(base.col_label(j)) for j in range(W)]
    if single:
        _add_key_strip(fig, base, xs)
    chips = (lambda s: dict(data=[_chip_trace(base, s, xs)], traces=[1])) if single else (lambda s: {})
    fig.frames = [go.Frame(name=str(s), layout=dict(shapes=_step_shapes(base, s, len(heads), strip=single),
                                                     title=dict(text=_step_title(base, s))), **chips(s))
                  for s in range(n)]
    _figure_controls(fig, trace, tokenizer, layers, layer, head, heads, batch, base, strip=single)
    return fig


def _figure_controls(fig, trace, tokenizer, layers, layer, head, heads, batch, base: AttentionView, strip: bool):
    """The slider, the picker, Play / Pause, the colour bar, the size, and the last step drawn as the first."""
    n = base.n_steps
    slider = frame_slider(range(n), active=n - 1, y=0, x=0, len=1.0, pad=dict(t=45),
                          currentvalue=dict(prefix=t("step "), xanchor="right"))
    # the right margin holds, top to bottom: the layer / head picker, Play and Pause, the colour bar
    picker = _layer_head_picker(trace, tokenizer, layers, layer, head, heads, batch)
    play = play_buttons(700, ("▶", "❚❚"), direction="right", x=1.02, xanchor="left", y=0.84, yanchor="top")
    plot_h = math.ceil(len(heads) / 4) * 210 if head == "all" else max(200, 28 * n)  # rows of up to 4 panels
    plot_h += STRIP_PX if strip else 0
    fig.update_layout(coloraxis=dict(colorscale=_plotly_colorscale(), cmin=0, cmax=1,
                                     colorbar=dict(title=dict(text=t("weight")), thickness=12, len=0.6, x=1.02,
                                                   xanchor="left", y=0, yanchor="bottom")),
                      title=dict(text=_step_title(base, n - 1), xref="paper"),  # fonts and colours: the template
                      shapes=_step_shapes(base, n - 1, len(heads), strip=strip), sliders=[slider],
                      updatemenus=[picker, play], height=int(min(950 + STRIP_PX, 80 + plot_h + 110)),  # no width
                      margin=dict(l=100, r=170, t=80, b=110), plot_bgcolor=FUTURE_PLOTLY)


def _key_strip_layout(view: AttentionView, plot_h: int, y_axis: str = "yaxis2") -> dict:
    """Layout of a single heat-map with its key strip: the heat-map on top, under it the chips' axis
    (``y_axis``: y 0 the chips, y -1 the brackets and their words), the key labels under both."""
    cut = STRIP_PX / (plot_h + STRIP_PX)
    return {"yaxis": {"domain": [cut, 1]}, "xaxis": {"anchor": "y" + y_axis[len("yaxis"):]},
            y_axis: {"domain": [0, cut * 0.92], "anchor": "x", "range": [-2.1, 0.6], "fixedrange": True,
                     "tickvals": [0], "ticktext": ["K/V"], "showgrid": False, "zeroline": False}}


def _key_strip_notes(view: AttentionView, yref: str = "y2") -> list:
    """The brackets' words: prefill's on the upper line from its bracket's left end, decode's on the lower line
    to its bracket's right end."""
    return [dict(text=words, x=b + 0.45 if i else a - 0.45, y=-1.05 - 0.45 * i, xref="x", yref=yref,
                 xanchor="right" if i else "left", yanchor="top", showarrow=False,
                 font=dict(size=style.plotly_px(style.PLOTLY_SMALL)))
            for i, (a, b, words) in enumerate(_spans(view))]


def _add_key_strip(fig, view: AttentionView, xs: list):
    """Under the single heat-map of ``fig``: the chips of the last step (a scatter on their own y axis, which the
    frames restyle) and the brackets' words."""
    plot_h = max(200, 28 * view.n_steps)
    fig.add_trace(_chip_trace(view, view.n_steps - 1, xs))
    fig.update_layout(_key_strip_layout(view, plot_h))
    for note in _key_strip_notes(view):
        fig.add_annotation(note)


def _chip_trace(view: AttentionView, step: int, xs: list, yaxis: str = "y2") -> dict:
    """The player's K/V chips of ``step`` under the key axis (``kv_chip_look``), one per key column: positions not
    in the sequence yet are invisible; the glyph is written in the chip where the columns are wide enough."""
    states = [k for k in view.chips(step) if k]
    look = kv_chip_look(states, view.n_keys - len(states))
    size = max(8, min(24, 700 // max(view.n_keys, 1)))  # px: a chip per key column, as the columns allow
    glyph = size >= 22  # the player's bold glyph (large text on every K/V colour); else fill, shape and hover
    return dict(type="scatter", x=xs, y=[0] * view.n_keys, xaxis="x", yaxis=yaxis, mode="markers+text",
                text=look["text"] if glyph else [""] * view.n_keys, hovertext=look["hovertext"], hoverinfo="text",
                marker=dict(look["marker"], size=size), showlegend=False, cliponaxis=False,
                textfont=dict(size=style.plotly_px(KV_GLYPH_SIZE), color=style.INK))


def _heatmap_panels(trace: Trace, tokenizer, layer: int, heads: list, batch: int, base: AttentionView,
                    small: bool):
    """A figure with one heat-map of ``layer`` per head of ``heads`` (up to 4 a row) on category axes, so the
    hover reads the query and key straight from the axis labels; ``small``: small multiples, token-only tick
    labels and only when they fit."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    n, W = base.n_steps, base.n_keys
    ncols = min(len(heads), 4)
    fig = make_subplots(rows=math.ceil(len(heads) / ncols), cols=ncols,
                        subplot_titles=[t("head {h}", h=h) for h in heads] if small else None,
                        horizontal_spacing=0.04, vertical_spacing=0.12)
    style.scale_subplot_titles(fig)
    x_labels = [_plotly_safe(base.col_label(j)) for j in range(W)]
    y_labels = [_plotly_safe(base.row_label(s)) for s in range(n)]  # "3 智", as the key columns
    for k, h in enumerate(heads):
        fig.add_trace(go.Heatmap(
            z=heatmap_rows(attention_view(trace, tokenizer, layer, h, batch)), x=x_labels, y=y_labels,
            coloraxis="coloraxis", hoverongaps=False,  # one colour scale for every panel, defined by the caller
            hovertemplate=t("query at %{y}<br>key at position %{x}<br>weight %{z:.4f}") + "<extra></extra>",
            name=t("head {h}", h=h)), row=k // ncols + 1, col=k % ncols + 1)
        suffix = "" if k == 0 else str(k + 1)
        fig.layout["xaxis" + suffix].update(type="category", range=[-0.5, W - 0.5], fixedrange=True, showgrid=False,
                                            showticklabels=not small or W <= 16, tickangle=0 if W <= 16 else -90,
                                            tickvals=x_labels if small else None,
                                            tickfont=dict(size=style.plotly_px(style.PLOTLY_SMALL)),
                                            ticktext=x_labels if small else None)
        fig.layout["yaxis" + suffix].update(type="category", range=[n - 0.5, -0.5], fixedrange=True, showgrid=False,
                                            showticklabels=k % ncols == 0)
    return fig


def _step_shapes(view: AttentionView, step: int, panels: int, strip: bool = False) -> list:
    """What a frame moves, in each of ``panels``: a paper veil over the earlier rows (faded), the steps still to come
    covered (paper, then the quiet FUTURE_PLOTLY over it), a thin outline of this step's row over the keys it read,
    and the K/V it appended outlined as new (halo + line); with the key ``strip``, a bracket line under the prompt's
    keys and one under the decode appends. Every frame holds the same shapes (only their places change)."""
    n, W, keys = view.n_steps, view.n_keys, view.keys_at(step)
    a, b = view.appended(step)
    out = []
    for k in range(panels):
        ref = dict(xref=f"x{'' if k == 0 else k + 1}", yref=f"y{'' if k == 0 else k + 1}", layer="above")
        flat = dict(type="rect", **ref, line=dict(width=0))
        out += [dict(flat, name="earlier rows", x0=-0.5, x1=W - 0.5, y0=-0.5, y1=step - 0.5, fillcolor=style.PAPER,
                     opacity=round(1 - PAST_ALPHA, 3)),
                dict(flat, name="steps to come", x0=-0.5, x1=W - 0.5, y0=step + 0.5, y1=n - 0.5, fillcolor=style.PAPER),
                dict(flat, name="steps to come (quiet)", x0=-0.5, x1=W - 0.5, y0=step + 0.5, y1=n - 0.5,
                     fillcolor=FUTURE_PLOTLY),
                dict(type="rect", **ref, name="this step's row", x0=-0.5, x1=keys - 0.5, y0=step - 0.5,
                     y1=step + 0.5, line=dict(color=style.MUTED, width=1))]
        out += appended_outline(a, b, step, **ref)
    if strip:
        out += [dict(type="line", xref="x", yref=f"y{panels + 1}", name="bracket", x0=p - 0.42, x1=q + 0.42, y0=-0.9,
                     y1=-0.9, line=dict(color=style.MUTED, width=2)) for p, q, _ in _spans(view)]  # themed
    return out


def appended_outline(first: int, last: int, row: int, **ref) -> list:
    """The two plotly shapes that outline the K/V a step appended, keys ``first``..``last`` of ``row`` (``ref``: xref /
    yref / layer of the panel): a dark halo under a line in the "newest" colour, visible on either end of the scale."""
    box = dict(type="rect", **{"layer": "above", **ref}, x0=first - 0.5, x1=last + 0.5, y0=row - 0.5, y1=row + 0.5)
    return [dict(box, name="appended K/V (halo)", line=dict(color=HALO, width=5)),
            dict(box, name="appended K/V", line=dict(color=HIGHLIGHT, width=2))]


def _step_title(base: AttentionView, step: int) -> str:
    """A step's title (layer and head are not named: the picker shows them, and it may change them)."""
    return t("step {step}: query {query} reads {n} cached key(s); outlined = the K/V it appended", step=step,
             query=_plotly_safe(base.query_tokens[step]), n=base.keys_at(step))


def _layer_head_picker(trace: Trace, tokenizer, layers: list, layer: int, head, heads: list, batch: int) -> dict:
    """The dropdown that swaps the weights in: one option per (layer, head) of ``layers`` (per layer for "all"),
    each the z of every panel; it opens on ``layer`` / ``head``."""
    options = ([(l, None) for l in layers] if head == "all"
               else [(l, h) for l in layers for h in range(trace.n_heads)])
    buttons = []
    for l, h in options:
        z = [heatmap_rows(attention_view(trace, tokenizer, l, hh, batch)) for hh in (heads if h is None else [h])]
        buttons.append(dict(label=t("layer {l}", l=l) + ("" if h is None else " · " + t("head {h}", h=h)),
                            method="restyle", args=[{"z": z}, list(range(len(heads)))]))
    return dict(type="dropdown", direction="down", x=1.02, xanchor="left", y=1.0, yanchor="top",
                active=options.index((layer, None if head == "all" else head)), buttons=buttons)


def _picker_layers(trace: Trace, layer: int, layers) -> list:
    """The layers a figure's picker offers: every layer (None), or the given ones, which must include ``layer``."""
    if layers is None:
        return list(range(trace.n_layers))
    if isinstance(layers, (str, bytes)) or not hasattr(layers, "__iter__"):
        raise ValueError(f"layers must be None (every layer) or a list of layer indices, got {layers!r}")
    picked = sorted({checks.index(l, "each of layers", trace.n_layers, f"the model has {trace.n_layers} layers")
                     for l in layers})
    if layer not in picked:
        raise ValueError(f"layers={list(layers)} must include the layer the figure opens on (layer={layer})")
    return picked


def heatmap_rows(view: AttentionView) -> list:
    """The grid as plotly z: row s holds only the keys that existed at step s (ragged rows, rounded), so
    the empty upper triangle costs nothing in the file."""
    return [[round(w, DECIMALS) for w in view.grid[s, :view.keys_at(s)].tolist()] for s in range(view.n_steps)]


# ------------------------------------------------------------------------- tier 3: live ipywidgets

def _template() -> dict:
    """The kvlab template as a plain dict, for figures written out as dicts (built once per type scale: the
    classroom view installs a larger one)."""
    scale = style._SCALE
    if scale not in _TEMPLATE:
        _TEMPLATE[scale] = {"layout": style.plotly_template(scale).layout.to_plotly_json()}
    return _TEMPLATE[scale]


_TEMPLATE: dict = {}


def _explorer_panels(view: AttentionView, panels: int) -> tuple[list, dict]:
    """The explorer's empty heat-maps (no z yet) and their axes, up to 4 panels a row, numeric axes labelled as
    every heat-map ("3 智"); a panel's hover is its cells' text."""
    W_, n = view.n_keys, view.n_steps
    ncols = min(panels, 4)
    nrows = math.ceil(panels / ncols)
    gap_x, gap_y = 0.04, 0.12
    w, h = (1 - (ncols - 1) * gap_x) / ncols, (1 - (nrows - 1) * gap_y) / nrows
    key_text = [_plotly_safe(view.col_label(j)) for j in range(W_)]
    row_text = [_plotly_safe(view.row_label(s)) for s in range(n)]
    data, layout = [], {}
    for k in range(panels):
        r, c = divmod(k, ncols)
        x0, y1 = c * (w + gap_x), 1 - r * (h + gap_y)
        sx = "" if k == 0 else str(k + 1)
        data.append({"type": "heatmap", "x": list(range(W_)), "y": list(range(n)), "xaxis": f"x{sx}",
                     "yaxis": f"y{sx}", "coloraxis": "coloraxis", "hoverongaps": False,
                     "hovertemplate": "%{text}<extra></extra>"})
        layout[f"xaxis{sx}"] = {"domain": [x0, x0 + w], "anchor": f"y{sx}", "range": [-0.5, W_ - 0.5],
                                "tickvals": list(range(W_)), "ticktext": key_text, "fixedrange": True,
                                "showgrid": False, "zeroline": False, "showticklabels": panels == 1 or W_ <= 16}
        layout[f"yaxis{sx}"] = {"domain": [y1 - h, y1], "anchor": f"x{sx}", "range": [n - 0.5, -0.5],
                                "tickvals": list(range(n)), "ticktext": row_text, "fixedrange": True,
                                "showgrid": False, "zeroline": False, "showticklabels": c == 0}
        if panels > 1:
            layout.setdefault("annotations", []).append(
                {"text": f"head {k}", "x": x0 + w / 2, "y": y1, "xref": "paper", "yref": "paper",
                 "xanchor": "center", "yanchor": "bottom", "showarrow": False})
    return data, layout


class AttentionExplorer(LiveWidget):
    """Live heat-map: a prompt box that re-runs the model, layer and head pickers (or all heads), a step
    slider, and beside the heat-map the layer's cache tensor at that step (``cache_tensor_html``). Drive it from
    Python with ``set(...)``; ``figure`` is the plotly figure shown now (a plain dict) and ``drawn`` sums it up;
    display the explorer itself (``.widget`` is its ipywidgets box). ``last_update_seconds`` is the Python time
    of the last redraw.

    The figure lives in an ``ipywidgets.Output`` whose ``outputs`` are replaced on every redraw: that state is
    the widget's own, so the browser shows exactly the last drawing, however early or late it connects."""

    def __init__(self, model, tokenizer, prompt: str = "<s>", max_new_tokens: int = 24, layer: int = 0,
                 head=0, step: int | None = None):
        import ipywidgets as W

        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens = checks.integer(max_new_tokens, "max_new_tokens", 1)
        c = model.config
        layer = checks.index(layer, "layer", c.n_layers, f"the model has {c.n_layers} layers")
        head = checks.index(head, "head", c.n_heads, f"the model has {c.n_heads} query heads", allow_all=True)
        checks.text(prompt, "prompt")
        self.trace = None
        self.error = None  # plain text of the last problem with the prompt (None when the last run worked)
        self.figure = None  # the plotly figure shown now: {"data": [...], "layout": {...}}
        self.message = W.HTML(style={"text_color": style.css("ink")})
        look = dict(style=style.control_style(), layout=W.Layout(**style.control_layout()))
        self.prompt = W.Text(value=prompt, description=t("prompt"), continuous_update=False, **look)
        self.layer = W.Dropdown(options=list(range(c.n_layers)), value=layer, description=t("layer"), **look)
        self.head = W.Dropdown(options=[(str(h), h) for h in range(c.n_heads)] + [(t("all"), "all")], value=head,
                               description=t("head"), **look)
        self.step = W.IntSlider(value=0, min=0, max=0, description=t("step"), continuous_update=True, **look)
        self.output = W.Output(layout=W.Layout(flex="1 1 560px", min_width="0"))
        self.slab = W.HTML(layout=W.Layout(flex="0 1 auto", overflow="auto"))  # the cache tensor, this step
        self.last_update_seconds = 0.0
        self._quiet = False
        self._run(prompt)
        if self.trace is None:  # the first prompt was not usable: say so and fall back to <s>
            self._run("<s>", keep_message=True)
        self._rebuild(step)
        self.prompt.observe(lambda ch: self._on_prompt(ch["new"]), names="value")
        for w in (self.layer, self.head, self.step):
            w.observe(lambda ch: self.redraw(), names="value")
        side = W.HBox([self.output, self.slab], layout=W.Layout(flex_flow="row wrap", align_items="flex-start"))
        self.widget = self.box(style.grid(self.prompt, self.layer, self.head, self.step, columns=4), self.message,
                               side, themed=True)

    # -- model runs (only when the prompt changes) ---------------------------------------------------
    def _run(self, text: str, keep_message: bool = False) -> bool:
        from ..generate import generate

        added = bool(text.strip()) and not text.startswith("<s>")  # every text the model learnt from starts with it
        try:
            ids = self.tokenizer.encode("<s>" + text if added else text)
            n = min(self.max_new_tokens, self.model.config.max_seq_len - len(ids) + 1)
            if n < 1:
                raise ValueError(t("the prompt has {n} tokens; the model's context window holds {limit}",
                                   n=len(ids), limit=self.model.config.max_seq_len))
            out = generate(self.model, ids, n, eos_id=self.tokenizer.eos_id, trace=True)
        except ValueError as e:  # UnknownCharacterError is a ValueError, and so is an empty prompt
            self.error = prompt_problem(e)
            kept = None if self.trace is None else self.tokenizer.decode(self.trace.prompt_ids[0])
            self.message.value = problem_html(self.error if kept is None else t(
                "{problem} The heat-map still shows the last prompt that worked, {kept}.", problem=self.error,
                kept=repr(kept)))
            return False
        self.error = None
        self.trace = out.trace
        self._reserved = len(ids) + n  # the positions this run's cache holds room for
        self._views = {}  # (layer, head) -> (AttentionView, hover texts), computed once per trace
        self._bases = {}  # number of panels -> the figure without weights, built once per trace
        if not keep_message:
            self.message.value = t("generated <b>{text}</b> in {n} steps",
                                   text=html.escape(self.tokenizer.decode(out.new_tokens[0])), n=len(self.trace)) + (
                html.escape(t(" (<s> added in front: every text the model learnt from starts with it)")) if added else "")
        return True

    def _on_prompt(self, text: str):
        if self._run(text):
            self._rebuild()

    def _rebuild(self, step: int | None = None):
        """A new trace: the step slider spans it and goes to ``step`` (default: the last step)."""
        n = len(self.trace)
        step = _check_step(step, n)
        self._quiet = True
        self.step.max = max(n - 1, self.step.max)  # widen first so the value is never clamped on the way
        self.step.value = step
        self.step.max = n - 1
        self._quiet = False
        self.redraw()

    # -- drawing ----------------------------------------------------------------------------------------
    def _view(self, layer: int, head: int):
        """The view of one layer and head and its hover texts (query token, key token, weight per cell;
        empty where the key did not exist yet), cached until the prompt changes."""
        if (layer, head) not in self._views:
            view = attention_view(self.trace, self.tokenizer, layer, head)
            hover = [[view.hover(s, j) if j < view.keys_at(s) else "" for j in range(view.n_keys)]
                     for s in range(view.n_steps)]
            self._views[(layer, head)] = (view, hover)
        return self._views[(layer, head)]

    def _base(self, panels: int) -> dict:
        """Axes, sizes and empty heat-maps for 1 or n_heads panels, as a plain plotly dict (written out
        rather than built with make_subplots, which takes ~100 ms), once per trace; one panel gets the key strip."""
        if panels not in self._bases:
            view = self._view(0, 0)[0]
            data, layout = _explorer_panels(view, panels)
            plot_h = math.ceil(panels / 4) * 210 if panels > 1 else max(200, 28 * view.n_steps)
            if panels == 1:  # the chips' axis under the heat-map, the brackets' words
                layout = {**layout, **{k: {**layout.get(k, {}), **v}
                                       for k, v in _key_strip_layout(view, plot_h).items()}}
                layout["annotations"] = _key_strip_notes(view)
                plot_h += STRIP_PX
            layout.update(coloraxis={"colorscale": _plotly_colorscale(), "cmin": 0, "cmax": 1,
                                     "colorbar": {"title": {"text": "weight"}, "thickness": 12}},
                          plot_bgcolor=FUTURE_PLOTLY, margin={"l": 100, "r": 40, "t": 70, "b": 50},
                          height=int(min(950 + STRIP_PX, 120 + plot_h)),  # no width: the figure takes its cell's
                          template=_template())  # written out: this dict does not go through plotly.py
            self._bases[panels] = {"data": data, "layout": layout}
        return self._bases[panels]

    def redraw(self):
        """Draw the current layer / head / step: a new figure into the output, the cache tensor beside it."""
        if self._quiet or self.trace is None:
            return
        t0 = time.perf_counter()
        layer, head, step = self.layer.value, self.head.value, self.step.value
        heads = list(range(self.trace.n_heads)) if head == "all" else [head]
        base = self._base(len(heads))
        views = [self._view(layer, h) for h in heads]
        v0 = views[0][0]
        data = [{**trace, "z": [_rounded(r) for r in view.grid_at(step).tolist()], "text": hover}  # later: None
                for trace, (view, hover) in zip(base["data"], views)]
        if len(heads) == 1:
            data.append(_chip_trace(v0, step, list(range(v0.n_keys))))
        who = t("layer {layer}, all heads", layer=layer) if head == "all" else t("layer {layer}, head {head}",
                                                                                   layer=layer, head=head)
        title = who + " · " + _step_title(v0, step)
        shapes = _step_shapes(v0, step, len(heads), strip=len(heads) == 1)
        self.figure = {"data": data, "layout": {**base["layout"], "shapes": shapes, "title": dict(text=title)}}
        show_plotly(self.output, self.figure, t("attention heat-map: {title}", title=html.unescape(title)))
        self.slab.value = self._slab_html(v0, layer, step)
        self.last_update_seconds = time.perf_counter() - t0

    def _slab_html(self, view: AttentionView, layer: int, step: int) -> str:
        """The layer's K and V after ``step`` as lib.KVCache holds them (each position's state as the chips')."""
        from .cache_tensor import cache_tensor_html, layout_for

        states = list(view.kv[step]) + ["none"] * (self._reserved - len(view.kv[step]))
        filled = sum(k != "none" for k in states)
        lay = layout_for(self.model.config, self._reserved, filled, dtype=self.model.dtype)
        return cache_tensor_html(lay, states[:self._reserved], layer=layer)

    @property
    def drawn(self) -> dict:
        """What the figure shows now: layer, head, step, the z grid of each panel, the highlighted key (the last
        appended) and the appended span, the K/V chips (one head), the title, the key labels and the hover texts
        of the first panel."""
        f = self.figure
        heat = [tr for tr in f["data"] if tr["type"] == "heatmap"]
        box = next(sh for sh in f["layout"]["shapes"] if sh.get("name") == "appended K/V")
        chips = [tr for tr in f["data"] if tr["type"] == "scatter"]
        return {"layer": self.layer.value, "head": self.head.value, "step": self.step.value,
                "figure": "all heads" if len(heat) > 1 else "one head", "z": [tr["z"] for tr in heat],
                "highlight": box["x1"] - 0.5, "appended": (box["x0"] + 0.5, box["x1"] - 0.5),
                "chips": chips[0]["hovertext"] if chips else None,
                "title": f["layout"]["title"]["text"], "key_labels": list(f["layout"]["xaxis"]["ticktext"]),
                "hover": f["data"][0]["text"]}

    def set(self, prompt: str | None = None, layer=None, head=None, step=None):
        """Change controls from Python (as a user would); bad values raise a ValueError saying what is allowed,
        and change nothing (a step is checked against the run of the new prompt, when one is given)."""
        c = self.model.config
        if layer is not None:
            layer = checks.index(layer, "layer", c.n_layers, f"the model has {c.n_layers} layers")
        if head is not None:
            head = checks.index(head, "head", c.n_heads, f"the model has {c.n_heads} query heads", allow_all=True)
        if step is not None and prompt is None:
            _check_step(step, len(self.trace))
        if prompt is not None:
            self.prompt.value = checks.text(prompt, "prompt")
        if layer is not None:
            self.layer.value = layer
        if head is not None:
            self.head.value = head
        if step is not None:
            self.step.value = _check_step(step, len(self.trace))
        return self


# ------------------------------------------------------------- the induction head: why the cache keeps every key

def _written_twice(tokenizer, lang: str, n: int, count: int) -> list[list[int]]:
    """``count`` sequences <s> + x + x of ``n`` tokens each: held-out passages of ``lang`` ("en", "zh":
    ``lib.heads.passages_twice``), or random strings of the whole vocabulary ("random": ``lib.heads.repeated_random``,
    seeds 0, 1, ..., the toy check a model copies first)."""
    from ..heads import passages_twice, repeated_random

    if lang == "random":
        return [repeated_random(tokenizer, n, seed=i) for i in range(checks.integer(count, "count", 1))]
    return passages_twice(tokenizer, lang, n, count)


def induction_prompt(tokenizer, lang: str = "en", n: int = 40, which: int = 0) -> str:
    """A held-out passage of ``lang`` (its first ``n`` characters; ``lang="random"``: a random string) written once
    and then begun again, half of it: ``<s> + p + p[:n // 2]``. Generating on, a model with an induction head
    continues the second copy, each new query attending to the token after its own earlier occurrence, ``n - 1``
    positions back: the picture of why a cache keeps every key, however old."""
    n = checks.integer(n, "n", 4)
    ids = _written_twice(tokenizer, lang, n, which + 1)[which]  # <s> + p + p
    return tokenizer.decode(ids[:1 + n + n // 2])


def induction_head(model, tokenizer, lang: str = "en", n: int = 40, count: int = 4) -> tuple[int, int, float]:
    """(layer, head, share) of the head that measures as the model's induction head: the largest mean weight, over
    ``count`` sequences written twice (``_written_twice``), on the token after the query's earlier occurrence
    (``lib.heads.induction_share``, ``lib.heads.strongest``), measured, never assumed."""
    from ..heads import induction_share, strongest

    shares = [induction_share(model, torch.tensor(ids), n) for ids in _written_twice(tokenizer, lang, n, count)]
    return strongest(torch.stack(shares).mean(0))  # (n_layers, n_heads) averaged over the sequences


def induction_explorer(model, tokenizer, lang: str = "en", n: int = 40,
                       max_new_tokens: int | None = None) -> AttentionExplorer:
    """The live explorer opened on ``induction_prompt`` at the head ``induction_head`` measures, on the last step:
    the query in the second copy lights the key right after its earlier occurrence. Returns the explorer; its
    ``induction`` attribute holds (layer, head, share)."""
    layer, head, share = induction_head(model, tokenizer, lang, n)
    explorer = AttentionExplorer(model, tokenizer, induction_prompt(tokenizer, lang, n),
                                 max_new_tokens=max_new_tokens or n // 2, layer=layer, head=head)
    explorer.induction = (layer, head, share)
    return explorer
