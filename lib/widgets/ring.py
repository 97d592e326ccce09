"""The ring buffer (notebook 12): a windowed cache fed token by token, with 0 to 4 attention sinks.

Everything comes from lib: the slots, the positions they hold and the slot the next token overwrites from a
``KVCache(..., window=W, sinks=n)`` itself (``held_positions``, ``slot``), the newest query's weights from the
model's own attention as it runs on that cache (``ForwardRecord.attention``), and the running perplexity of the
window-only, window + sinks and full caches from ``lib.sinks.drift_sweep`` (its ``nll_by_position``) on the
same text. This module only arranges them, in three tiers:

* ``ring_table`` / ``plot_ring`` (static);
* ``ring_figure`` (plotly, one frame per token and a slider; survives export);
* ``RingStepper`` (ipywidgets: window, sinks, layer, head; Step / Back; Python API without a browser).
"""
from __future__ import annotations

import html
import math
import time
from dataclasses import dataclass

import torch

from .. import checks
from ..cache import KVCache
from ..model import ForwardRecord
from ..sinks import drift_sweep
from ..text import sig, text_table
from . import check_controls, frame_slider, play_buttons, style
from .live import FrameStepping, RecentRuns
from ..i18n import colon, parens, t

MAX_TOKENS = 64  # one frame per token: capped as every animation of the course
MAX_SINKS = 4
WINDOWS = (4, 8, 12, 16, 24, 32)
CACHES = ("window only", "window + sinks", "full cache")
CACHE_CONCEPT = {"window only": "recomputed", "window + sinks": "sink", "full cache": "cached"}

# A slot's look (style.Look): a concept of lib.widgets.style, a glyph, a word (the legend's)
SLOT_LOOK = {
    "sink": style.Look("sink", "S", "sink: kept for good"),
    "held": style.Look("held", "", "held (the window)"),
    "newest": style.Look("newest", "", "the newest token"),
    "empty": style.Look("free", "", "empty"),
}


@dataclass
class RingFrame:
    """The cache right after the token at ``position`` went in."""
    position: int
    token: str
    slots: list  # per slot: the position it holds (None: empty)
    tokens: list  # per slot: that position's token text ("" when empty)
    kinds: list  # per slot: sink / held / newest / empty
    next_slot: int | None  # the slot the next token overwrites (None after the last token)
    evicts: int | None  # the position held there, which the next token throws away (None: an empty slot)
    weights: list  # per slot: the newest query's weight on the key there (layer, head of the stepper); None: empty
    perplexity: dict  # cache name -> running perplexity of the text so far (None at the first position)
    sinks: int = 0  # how many of the slots are sinks

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _text(tokenizer, i: int) -> str:
    s = tokenizer.decode([i])
    return {"\n": "↵", " ": "␣"}.get(s, s)


def running_perplexity(model, ids: torch.Tensor, window: int, sinks: int) -> dict:
    """Per cache of ``CACHES``: the perplexity of the predictions made up to each position, exp(mean NLL) over
    positions 0..p (``lib.sinks.drift_sweep``'s ``nll_by_position``, one pass per cache on the same text)."""
    full, only, with_sinks = drift_sweep(model, ids, [(None, 0), (window, 0), (window, sinks)])
    out = {}
    for name, d in zip(CACHES[::-1], (full, with_sinks, only)):
        nll = torch.tensor(d["nll_by_position"])
        out[name] = [sig(math.exp(float(x)), 5) for x in nll.cumsum(0) / torch.arange(1, len(nll) + 1)]
    return {name: out[name] for name in CACHES}


@dataclass
class RingRun:
    """What the model computed on one text with one ring (``window``, ``sinks``), for every layer and head: per
    position, the slots' positions after it went in, and the newest query's weights (a (layers, heads, p + 1)
    tensor); the running perplexities. A layer or head is only a choice among these (``ring_frames_of``)."""
    ids: list
    window: int
    sinks: int
    words: list  # per position: its token's text
    slots: list  # per position: per slot, the position it holds (None: empty)
    next_slot: list  # per position: the slot the next token overwrites (None after the last token)
    attention: list  # per position: (n_layers, n_heads, p + 1) float tensor, the newest query's weights
    perplexity: dict  # cache name -> running perplexities (CACHES)


@torch.no_grad()
def ring_run(model, tokenizer, ids, window: int = 8, sinks: int = 0) -> RingRun:
    """Feed ``ids`` (one sequence) one token at a time through ``KVCache(..., window=window, sinks=sinks)`` and keep
    what every layer and head saw (``RingRun``)."""
    ids = torch.as_tensor(ids).reshape(-1).tolist()
    checks.token_ids(ids, "ids", model.config.vocab_size)
    if not 2 <= len(ids) <= MAX_TOKENS:
        raise ValueError(f"the ring stepper takes 2 to {MAX_TOKENS} tokens, got {len(ids)}")
    window = checks.integer(window, "window", 2, len(ids), allowed=f"an integer from 2 to {len(ids)} (the text's length)")
    sinks = checks.integer(sinks, "sinks", 0, min(MAX_SINKS, window - 1),
                           allowed=f"an integer from 0 to {min(MAX_SINKS, window - 1)} (fewer than the window)")
    T = len(ids)
    x = torch.tensor([ids], device=model.device)
    cache = KVCache(model.config, 1, T, device=model.device, dtype=model.dtype, window=window, sinks=sinks)
    slots, next_slot, attention = [], [], []
    model.eval()
    for p in range(T):
        record = ForwardRecord()
        model(x[:, p:p + 1], cache=cache, record=record)
        row = [None] * cache.slots
        for pos in cache.held_positions().tolist():  # the keys the newest query saw
            row[int(cache.slot(torch.tensor(pos)))] = pos
        slots.append(row)
        next_slot.append(int(cache.slot(torch.tensor(p + 1))) if p + 1 < T else None)
        attention.append(torch.stack([record.attention[layer][0] for layer in range(model.config.n_layers)])
                         .float().cpu())  # (layers, heads, p + 1)
    return RingRun(ids, window, sinks, [_text(tokenizer, i) for i in ids], slots, next_slot, attention,
                   running_perplexity(model, x, window, sinks))


def ring_frames_of(run: RingRun, layer: int = 0, head: int = 0) -> list[RingFrame]:
    """One ``RingFrame`` per token of ``run``, the newest query's attention from ``layer`` and ``head`` (no model
    run)."""
    n_layers, n_heads = run.attention[0].shape[:2]
    layer = checks.integer(layer, "layer", 0, n_layers - 1)
    head = checks.integer(head, "head", 0, n_heads - 1)
    frames = []
    for p, (row, nxt) in enumerate(zip(run.slots, run.next_slot)):
        w = run.attention[p][layer, head].tolist()  # (p + 1,): its weight per position (0: not seen)
        weights = [None if q is None else sig(w[q], 4) for q in row]
        kinds = ["empty" if q is None else "newest" if q == p else "sink" if q < run.sinks else "held" for q in row]
        frames.append(RingFrame(p, run.words[p], row, [run.words[q] if q is not None else "" for q in row], kinds,
                                nxt, None if nxt is None else row[nxt], weights,
                                {n: (run.perplexity[n][p - 1] if p >= 1 else None) for n in CACHES}, run.sinks))
    return frames


def ring_frames(model, tokenizer, ids, window: int = 8, sinks: int = 0, layer: int = 0, head: int = 0) -> list[RingFrame]:
    """Feed ``ids`` (one sequence) one token at a time through ``KVCache(..., window=window, sinks=sinks)``: one
    ``RingFrame`` per token, the newest query's attention from the model's ``layer`` and ``head``."""
    checks.integer(layer, "layer", 0, model.config.n_layers - 1)  # refused before the model runs
    checks.integer(head, "head", 0, model.config.n_heads - 1)
    return ring_frames_of(ring_run(model, tokenizer, ids, window, sinks), layer, head)


def ring_table(frames: list[RingFrame]) -> str:
    """The ring as text, one row per token: the position each slot holds (S: a sink, *: the newest), the slot the
    next token overwrites, the running perplexities."""
    def cell(f, s):
        q = f.slots[s]
        return "" if q is None else f"{q}{'S' if f.kinds[s] == 'sink' else '*' if f.kinds[s] == 'newest' else ''}"

    n = len(frames[0].slots)
    rows = [[f.position, f.token, *(cell(f, s) for s in range(n)), "" if f.next_slot is None else f.next_slot,
             *("" if f.perplexity[c] is None else f"{f.perplexity[c]:.3f}" for c in CACHES)] for f in frames]
    return text_table(rows, [t("position"), t("token"), *(t("slot {s}", s=s) for s in range(n)),
                             t("next overwrites slot"), *(t(c) for c in CACHES)])


def plot_ring(frames: list[RingFrame], every: int = 1, title: str = ""):
    """Static: the slots (columns) after each token (rows, every ``every``-th), each cell the position it holds,
    sinks hatched, the newest heavy-edged; beside it the running perplexity of the three caches."""
    import matplotlib.pyplot as plt

    import numpy as np
    from matplotlib.colors import to_rgb

    shown = frames[::every]
    n = len(shown[0].slots)
    fig, (ax, ax_p) = plt.subplots(1, 2, figsize=(style.FIGURE_WIDTH, min(6.0, max(3.2, 0.16 * len(shown) + 1.2))),
                                   gridspec_kw=dict(width_ratios=[1.2, 1]), layout="constrained")
    fill = {k: to_rgb(style.PAPER if k == "empty" else style.concept(SLOT_LOOK[k].concept).colour) for k in SLOT_LOOK}
    ax.imshow(np.array([[fill[k] for k in f.kinds] for f in shown]), aspect="auto", interpolation="nearest",
              extent=(0, n, len(shown), 0))
    for i, f in enumerate(shown):  # the sinks: hatched as well as coloured (the second cue)
        sinks = f.kinds.count("sink")
        if sinks:
            ax.add_patch(plt.Rectangle((0, i), sinks, 1, fill=False, hatch=style.concept("sink").hatch,
                                       edgecolor=style.PAPER, lw=0))
    light = {"newest", "sink", "empty"}  # fills dark text reads on; white text on the held (blue) ones
    for i, f in enumerate(shown):
        s = f.kinds.index("newest")
        ax.add_patch(plt.Rectangle((s, i), 1, 1, fill=False, edgecolor=style.INK, lw=1.5))
        for s, (q, k) in enumerate(zip(f.slots, f.kinds)):
            if q is not None:
                ax.text(s + 0.5, i + 0.5, str(q), ha="center", va="center", fontsize=style.SMALL_SIZE,
                        color=style.INK if k in light else style.PAPER)
    ax.set_xticks([s + 0.5 for s in range(n)], [str(s) for s in range(n)])
    ticks = range(0, len(shown), max(1, len(shown) // 8))
    ax.set_yticks([i + 0.5 for i in ticks], [str(shown[i].position) for i in ticks])
    ax.set_xlabel(t("slot"))
    ax.set_ylabel(t("after the token at position"))
    ax.set_title(t("the position each slot holds"), fontsize=style.FONT_SIZE)
    for name in CACHES:
        c = style.concept(CACHE_CONCEPT[name])
        later = frames[max(1, len(frames[0].slots) // 2):]  # the first few positions' perplexity is off the scale
        ax_p.plot([f.position for f in later], [f.perplexity[name] for f in later], color=c.colour,
                  ls=c.linestyle, marker=c.marker, ms=3, markevery=8, label=t(name))
    ax_p.axvline(len(frames[0].slots), color=style.MUTED, ls=":")
    ax_p.set_xlabel(t("position (dotted: the window is full)"))
    ax_p.set_ylabel(t("running perplexity"))
    ax_p.legend(loc="best", fontsize=style.SMALL_SIZE)
    if title:
        fig.suptitle(title)
    return fig


# ------------------------------------------------------------------------------ tier 2: plotly step-through

def ring_caption(f: RingFrame) -> str:
    nxt = (t("the last token") if f.next_slot is None else
           t("next token overwrites slot {s} (empty)", s=f.next_slot) if f.evicts is None else
           t("next token overwrites slot {s} (position {p})", s=f.next_slot, p=f.evicts))
    return t("position {p} ({tok}) went in; {nxt}", p=f.position, tok=f.token, nxt=nxt)


def _ppl_line(f: RingFrame) -> str:
    if f.perplexity[CACHES[0]] is None:
        return t("running perplexity: from the next token on")
    return t("running perplexity") + colon() + " · ".join(f"{t(c)} {f.perplexity[c]:.3f}" for c in CACHES)


def first_eviction(frames: list[RingFrame]) -> int:
    """The frame the widgets open on: the first token that overwrites a slot (its position is the window W), so
    the ring is full, the sinks are marked and the overwritten slot is in view; the last frame of a shorter text."""
    return min(len(frames[0].slots), len(frames) - 1)


def ring_figure(frames: list[RingFrame], title: str = "", start: int | None = None):
    """One plotly frame per token: the slots (what each holds, sinks as triangles, the newest heavy-edged, the
    slot the next token overwrites ringed), the newest query's weight on each slot's key below them, the
    running perplexities in the title; a slider and a Play button. It opens on frame ``start`` (default
    ``first_eviction``: the first token that overwrites a slot)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    n = len(frames[0].slots)
    symbol = {"sink": "triangle-up", "held": "square", "newest": "diamond", "empty": "square-open"}

    def data(f, first=False):
        # an empty slot is an open symbol: its colour is its edge
        colours = [style.concept(SLOT_LOOK[k].concept).colour if k != "empty" else
                   style.colour("plain bytes") if s == f.next_slot else style.MUTED for s, k in enumerate(f.kinds)]
        edge = [style.colour("plain bytes") if s == f.next_slot else style.INK if k == "newest" else style.MUTED
                for s, k in enumerate(f.kinds)]
        slots = dict(type="scatter", text=["" if q is None else f"{q}<br>{html.escape(tok)}"
                                           for q, tok in zip(f.slots, f.tokens)],
                     marker=dict(symbol=[symbol[k] for k in f.kinds], color=colours, line=dict(color=edge)))
        bars = dict(type="bar", y=[0 if w is None else w for w in f.weights],
                    text=["" if w is None else f"{w:.2f}" for w in f.weights])
        if first:  # what stays the same in every frame goes in the figure's own traces only
            slots.update(x=list(range(n)), y=[0] * n, mode="markers+text", hoverinfo="skip", showlegend=False,
                         textfont=dict(color=style.INK, size=style.plotly_px(style.PLOTLY_SMALL)), textposition="middle center")
            slots["marker"].update(size=min(44, 560 // n), line=dict(color=edge, width=3))
            bars.update(x=list(range(n)), showlegend=False, textposition="outside", hoverinfo="skip",
                        marker=dict(color=style.colour("held")))
        return [go.Scatter(**slots), go.Bar(**bars)]

    def head(f):
        return f"{html.escape(ring_caption(f))}<br>{html.escape(_ppl_line(f))}"

    fig = make_subplots(rows=2, cols=1, row_heights=[0.35, 0.65], shared_xaxes=True, vertical_spacing=0.08,
                        subplot_titles=(t("the slots (position, token)"),
                                        t("the newest query's weight on each slot's key")))
    style.scale_subplot_titles(fig)
    start = first_eviction(frames) if start is None else checks.index(start, "start", len(frames),
                                                                       f"the text has {len(frames)} positions")
    for tr, r in zip(data(frames[start], first=True), (1, 2)):
        fig.add_trace(tr, row=r, col=1)
    fig.frames = [go.Frame(name=str(f.position), data=data(f), traces=[0, 1], layout=dict(title_text=head(f)))
                  for f in frames]
    fig.update_yaxes(visible=False, range=[-1, 1], row=1, col=1)
    fig.update_xaxes(showgrid=False, row=1, col=1)
    fig.update_yaxes(range=[0, 1.15], title_text=t("weight"), row=2, col=1)
    fig.update_xaxes(title_text=t("slot"), dtick=1, range=[-0.6, n - 0.4], row=2, col=1)
    fig.update_layout(title_text=(f"{title}<br>" if title else "") + head(frames[start]), height=500,
                      margin=dict(t=110, b=110),
                      sliders=[frame_slider([f.position for f in frames], t("position "), active=start, x=0.24,
                                            y=-0.1, len=0.76,
                                           xanchor="left", yanchor="top", pad=dict(t=0))],
                      updatemenus=[play_buttons(500, (t("▶ Play"), t("❚❚ Pause")), direction="left", x=0.0,
                                                y=-0.14, xanchor="left", yanchor="top", pad=dict(r=10, t=0))])
    return fig


# ------------------------------------------------------------------------------------ tier 3: live widget

def label_bg(kind: str) -> str:
    """The background of a slot's label: white on a filled chip (legible over its stripes), none on an empty one."""
    return "transparent" if kind == "empty" else style.PAPER


def _chip(kind: str, next_here: bool) -> str:
    edge = style.colour("plain bytes") if next_here else None
    chip = style.chip_css(SLOT_LOOK[kind].concept, bold=kind == "newest" or next_here,
                          dashed=kind == "empty" or next_here, edge=edge)
    return ("display:inline-block;min-width:2.4em;margin:2px;padding:2px 3px;text-align:center;border-radius:3px;"
            + chip)


def ring_setting(f: RingFrame) -> str:
    """What the cache is: W slots, how many of them sinks, how many the recent positions take turns in."""
    n, sinks = len(f.slots), f.sinks
    return t("W = {w} slots: {s} sink(s) kept for good, {r} for the most recent positions, in turn", w=n, s=sinks,
             r=n - sinks)


def ring_legend_html() -> str:
    items = [(_chip(k, False), SLOT_LOOK[k].glyph or "·", t(SLOT_LOOK[k].label), label_bg(k))
             for k in ("sink", "held", "newest", "empty")]
    items.append((_chip("held", True), "↻", t("the next token overwrites it"), label_bg("held")))
    return " · ".join(f'<span style="{css};min-width:1.4em"><span style="background:{bg};padding:0 2px">'
                      f"{html.escape(g)}</span></span> {html.escape(w)}" for css, g, w, bg in items)


def ring_html(f: RingFrame) -> str:
    """One token's step as HTML: the slots (slot number, position held, its token, the newest query's weight on it
    as a bar), the caption, and the three running perplexities as bars."""
    e = html.escape
    muted = style.css("muted")
    cells = []
    for s, (q, tok, k, w) in enumerate(zip(f.slots, f.tokens, f.kinds, f.weights)):
        nxt = s == f.next_slot
        glyph = ("↻ " if nxt else "") + (SLOT_LOOK[k].glyph + " " if SLOT_LOOK[k].glyph else "")
        body = "&nbsp;" if q is None else f"{e(glyph)}{q}<br><b>{e(tok)}</b>"
        bar = "" if w is None else (f'<div style="margin:2px auto 0 auto;width:1.2em;height:{round(40 * w) + 1}px;'
                                    f'{style.chip_css(SLOT_LOOK[k].concept)}"></div><div style="font-size:0.8em">'
                                    f'{w:.3f}</div>')
        cells.append(f'<div style="display:inline-block;vertical-align:bottom;text-align:center;margin:0 1px">'
                     f'<div style="font-size:0.75em;color:{muted}">{e(t("slot {s}", s=s))}</div>'
                     f'<div style="{_chip(k, nxt)}"><span style="background:{label_bg(k)};padding:0 2px">{body}'
                     f'</span></div><div style="height:58px;display:flex;flex-direction:column;justify-content:flex-end">'
                     f"{bar}</div></div>")
    ppl = f.perplexity
    if ppl[CACHES[0]] is None:
        bars = f"<div>{e(_ppl_line(f))}</div>"
    else:
        top = max(ppl.values())
        bars = "".join(
            f'<div style="white-space:nowrap;line-height:1.7em"><span style="display:inline-block;min-width:10em">'
            f'{e(t(c))}</span><span style="display:inline-block;vertical-align:middle;height:0.9em;'
            f'width:{round(200 * ppl[c] / top)}px;{style.chip_css(CACHE_CONCEPT[c])}"></span> {ppl[c]:.3f}</div>'
            for c in CACHES)
        bars = f"<div><b>{e(t('running perplexity'))}</b>{e(parens(t('positions 1..{p}', p=f.position)))}</div>{bars}"
    return (f'<div style="font-family:sans-serif;color:{style.css("ink")}"><div style="margin-bottom:4px"><b>'
            f"{e(ring_caption(f))}</b></div><div>{e(ring_setting(f))}</div>"
            f"<div>{e(t('the slots, and the newest query’s weight on each key'))}</div>"
            f'<div style="white-space:nowrap;overflow-x:auto">{"".join(cells)}</div>'
            f'<div style="font-size:0.85em;margin:4px 0 8px 0">{ring_legend_html()}</div>{bars}</div>')


class RingStepper(FrameStepping):
    """The live ring buffer: ``ids`` fed one token at a time through a windowed ``KVCache`` with 0..4 sinks.

    Python API (no browser needed): ``set(window=, sinks=, layer=, head=)`` (one re-run of the model on the text;
    bad values raise and change nothing), ``set_text(text)`` (the learner's own text: ``<s>`` and its first
    ``MAX_TOKENS - 1`` characters; the text box calls it), ``.step`` (get / set: the position shown), ``.next()``, ``.back()``,
    ``.state()`` (settings, the frame as a dict, the HTML), ``.frames``, ``.last_update_ms``; ``.widget`` is the
    ipywidgets box (display the stepper itself)."""

    CONTROLS = ("window", "sinks", "layer", "head")

    def __init__(self, model, tokenizer, ids, window: int = 8, sinks: int = 0, layer: int = 0, head: int = 0):
        import ipywidgets as W

        self.model, self.tokenizer = model, tokenizer
        self.ids = torch.as_tensor(ids).reshape(-1)
        self.values = dict(window=window, sinks=sinks, layer=layer, head=head)
        self._runs = RecentRuns()  # (ids, window, sinks) -> RingRun: a layer, head or ring seen before runs no model
        self.frames = self._frames(self.ids, self.values)  # refuses what set() refuses
        cfg = model.config
        look = dict(style=style.control_style(), layout=W.Layout(**style.control_layout()))
        self.window_box = W.SelectionSlider(options=[w for w in WINDOWS if w < len(self.ids)], value=window,
                                            description=t("window W"), continuous_update=False, **look)
        self.sinks_box = W.IntSlider(value=sinks, min=0, max=MAX_SINKS, description=t("sinks"),
                                     continuous_update=False, **look)
        self.layer_box = W.Dropdown(options=list(range(cfg.n_layers)), value=layer, description=t("layer"), **look)
        self.head_box = W.Dropdown(options=list(range(cfg.n_heads)), value=head, description=t("head"), **look)
        self.slider = W.IntSlider(value=first_eviction(self.frames), min=0, max=len(self.frames) - 1,  # a full ring
                                  description=t("position"),
                                  style=style.control_style(), layout=W.Layout(width="24em"))
        self.view = W.HTML()
        self._quiet = False  # True while set_text moves the boxes
        self.text_box = W.Text(value=tokenizer.decode(self.ids[1:].tolist()), description=t("your text"),
                               continuous_update=False, style=style.control_style(), layout=W.Layout(width="40em"))
        self.text_box.observe(lambda ch: self._from_text(ch["new"]), names="value")
        for box, key in ((self.window_box, "window"), (self.sinks_box, "sinks"), (self.layer_box, "layer"),
                         (self.head_box, "head")):
            box.observe(lambda ch, key=key: self._from_widget(key, ch["new"]), names="value")
        self.slider.observe(lambda _: self.redraw(), names="value")
        self.widget = self.box(self.text_box, style.grid(self.window_box, self.sinks_box, self.layer_box, self.head_box, columns=2),
                               self.playback(), self.view)
        self.last_update_ms = 0.0
        self.redraw()

    def _from_widget(self, key, value):
        if self.values[key] != value and not self._quiet:
            try:
                self.set(**{key: value})
            except ValueError as err:  # sinks >= window: say so, keep the last good setting
                self.view.value = (f'<div style="color:{style.css("ink")};border-left:6px solid '
                                   f'{style.colour("recomputed")};padding:4px">{html.escape(str(err))}</div>'
                                   + ring_html(self.frames[self.slider.value]))

    def _from_text(self, text: str):
        if self._quiet:
            return
        try:
            self.set_text(text)
        except ValueError as err:  # a character outside the vocabulary, a text too short: say so, keep the last
            self.view.value = (f'<div style="color:{style.css("ink")};border-left:6px solid '
                               f'{style.colour("recomputed")};padding:4px">{html.escape(str(err))}</div>'
                               + ring_html(self.frames[self.slider.value]))

    def set_text(self, text: str):
        """Step ``<s>`` + ``text`` instead (cut to ``MAX_TOKENS`` tokens), with the same settings; a window longer
        than the new text shrinks to the largest of ``WINDOWS`` that fits. Bad text raises and changes nothing."""
        ids = torch.tensor([self.tokenizer.bos_id] + self.tokenizer.encode(checks.text(text, "text")))[:MAX_TOKENS]
        fits = [w for w in WINDOWS if w < len(ids)]
        if not fits:
            raise ValueError(f"the text needs at least {WINDOWS[0]} characters for the smallest window, W = "
                             f"{WINDOWS[0]}; got {len(ids) - 1}")
        window = self.values["window"] if self.values["window"] in fits else fits[-1]
        values = {**self.values, "window": window, "sinks": min(self.values["sinks"], window - 1)}
        self.frames = self._frames(ids, values)
        self.ids, self.values = ids, values
        self._quiet = True  # the boxes follow; their callbacks must not run the model again
        try:
            self.window_box.options = fits
            self.window_box.value, self.sinks_box.value, self.text_box.value = window, values["sinks"], text
            self.slider.max = len(self.frames) - 1
        finally:
            self._quiet = False
        self.redraw()

    def set(self, **values):
        check_controls(values, self.CONTROLS)
        t0 = time.perf_counter()
        new = {**self.values, **values}
        self.frames = self._frames(self.ids, new)
        self.values = new
        for key, box in (("window", self.window_box), ("sinks", self.sinks_box), ("layer", self.layer_box),
                         ("head", self.head_box)):
            if box.value != new[key]:
                box.value = new[key]
        self.redraw()
        self.last_update_ms = (time.perf_counter() - t0) * 1e3

    def _frames(self, ids: torch.Tensor, values: dict) -> list[RingFrame]:
        """The frames of ``values`` on ``ids``: the model runs once per text and ring (window, sinks); a layer or
        head is read from that run (the last few runs are kept, so going back to a setting is instant too)."""
        checks.integer(values["layer"], "layer", 0, self.model.config.n_layers - 1)  # refused before any run
        checks.integer(values["head"], "head", 0, self.model.config.n_heads - 1)
        key = (tuple(torch.as_tensor(ids).reshape(-1).tolist()), values["window"], values["sinks"])
        run = self._runs.get(key, lambda: ring_run(self.model, self.tokenizer, ids, values["window"], values["sinks"]))
        return ring_frames_of(run, values["layer"], values["head"])

    def state(self) -> dict:
        return dict(settings=dict(self.values), step=self.slider.value, n_steps=len(self.frames),
                    frame=self.frames[self.slider.value].as_dict(), html=self.view.value)

    def redraw(self):
        self.view.value = ring_html(self.frames[self.slider.value])
