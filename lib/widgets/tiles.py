"""The tile stepper (notebook 11): FlashAttention on a real layer of the real model, one tile at a time, and
FlashDecoding's split-K merge, one chunk at a time.

Every number comes from ``lib.flash``: the tiles and their running state from ``flash_tiles`` (the loop
``flash_attention`` runs, not a copy of it), the bytes from its ``Traffic`` counts and ``attention_bytes``, the
chunks from ``split_k_partials`` / ``merge_partials``. This module only arranges them, in three tiers:

* ``tile_table`` / ``plot_tiles`` (static), ``split_k_table``;
* ``tile_figure`` (plotly, one frame per tile and a slider; survives export);
* ``TileStepper`` (ipywidgets: layer, head, tile size, query row, view; Step / Back; Python API without a browser).

A step shows: the query tile in SRAM, the key/value tile being loaded (or skipped: wholly above the causal
diagonal), the tiles done so far; the running max m, sum l and output acc / l of one query row; and the bytes moved
from HBM so far against plain attention's whole call (which writes and reads back the T × T scores and
probabilities). The FlashDecoding view steps through the chunks of one decode query: each chunk's partial output
and log-sum-exp, and the merge of the chunks so far, which ends at the model's own attention output.
"""
from __future__ import annotations

import html
import math
import time
from dataclasses import dataclass, field

import torch

from .. import checks, flash
from ..model import ForwardRecord
from ..text import fmt_bytes, sig, text_table
from . import check_controls, frame_slider, play_buttons, style
from .live import FrameStepping
from ..i18n import colon, t

MAX_TOKENS = 64  # the stepper's window: a 64-token grid stays readable and its frames small (CONTRIBUTING.md)
BLOCK_SIZES = (4, 8, 16, 32)
VIEWS = ("FlashAttention tiles", "FlashDecoding split-K")
SHOWN_DIMS = 4  # the output's first few dimensions shown for the query row

# A tile's look (style.Look): a concept of lib.widgets.style, a glyph, a word (the legend's).
TILE_LOOK = {
    "full": style.Look("tile computed", "F", "computed (all keys visible)"),
    "mask": style.Look("tile computed", "M", "computed with the causal mask"),
    "skip": style.Look("tile skipped", "·", "skipped (above the diagonal)"),
    "loading": style.Look("tile loading", "▶", "loaded now"),
    "pending": style.Look("free", "", "not reached yet"),
}


@dataclass
class TileFrame:
    """One step of the walk: the tile (q0..q1-1 × k0..k1-1) and what the stepper draws after it."""
    step: int
    q_tile: int
    k_tile: int
    q0: int
    q1: int
    k0: int
    k1: int
    kind: str  # full / mask / skip
    grid: list  # per query tile, per key tile: "full" / "mask" / "skip" (done) / "pending" / "loading" (this step)
    row: int  # the query row followed
    row_here: bool  # this step's query tile holds the row
    m: float | None  # the row's running max (None: its tile not reached yet; -inf stays None too)
    l: float | None
    out: list | None  # the row's acc / l so far, first SHOWN_DIMS dimensions
    rescale: float | None  # exp(m_old - m_new) of this step, for the row
    final: list = field(default_factory=list)  # the row's exact output (plain attention), first SHOWN_DIMS dims
    flash_bytes: int = 0  # moved so far by the tiled loop
    plain_bytes: int = 0  # plain attention's whole call (S and P through HBM)
    history: list = field(default_factory=list)  # [(step, m, l)] of the row's tile so far

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def layer_qkv(model, ids: torch.Tensor, layer: int):
    """q (1, H, T, D), k and v (1, H_kv, T, D) of ``layer`` on ``ids`` (1, T), after rotary: the model's own
    tensors from one forward pass (``ForwardRecord(capture=True)``)."""
    layer = checks.integer(layer, "layer", 0, model.config.n_layers - 1)
    record = ForwardRecord(capture=True)
    with torch.no_grad():
        model(ids, record=record)
    tensors = record.tensors[layer]
    return tensors["q"], tensors["k"], tensors["v"], tensors["mix"]


def _ids(model, ids) -> torch.Tensor:
    ids = torch.as_tensor(ids).reshape(1, -1)
    checks.token_ids(ids[0].tolist(), "ids", model.config.vocab_size)
    if not 2 <= ids.shape[1] <= MAX_TOKENS:
        raise ValueError(f"the tile stepper takes 2 to {MAX_TOKENS} tokens (a readable grid), got {ids.shape[1]}")
    return ids.to(model.device)


def tile_frames(q, k, v, head: int = 0, block_size: int = 16, row: int | None = None) -> list[TileFrame]:
    """One ``TileFrame`` per tile of ``flash.flash_tiles(q, k, v, block_size)`` (causal), following query ``row``
    (default: the last) of ``head``. The bytes are the whole layer's (every head), as ``flash.Traffic`` counts them."""
    B, H, T, D = q.shape
    head = checks.integer(head, "head", 0, H - 1)
    bs = checks.choice(block_size, "block_size", BLOCK_SIZES)
    row = T - 1 if row is None else checks.integer(row, "row", 0, T - 1)
    sched = flash.tile_schedule(T, k.shape[2], block_size=bs)
    plain = flash.attention_bytes("plain", B, H, T, k.shape[2], D, itemsize=q.element_size()).total
    final = flash.plain_attention(q, k, v)[0, head, row, :SHOWN_DIMS].tolist()
    traffic = flash.Traffic()
    grid = [["pending"] * len(sched[0]) for _ in sched]
    frames, history, prev_m, known = [], [], None, (None, None, None)  # known: the row's last (m, l, out)
    for i, s in enumerate(flash.flash_tiles(q, k, v, block_size=bs, traffic=traffic)):
        qi, ki = s.q0 // bs, s.k0 // bs
        here = s.q0 <= row < s.q1  # only one query tile holds the row
        now = [r[:] for r in grid]
        now[qi][ki] = "loading"
        rescale = None
        if here:
            r = row - s.q0
            m_t, l_t = float(s.m[0, head, r]), float(s.l[0, head, r])
            if math.isfinite(m_t):  # the row has seen at least one key
                if prev_m is not None and s.kind != "skip":
                    rescale = sig(math.exp(prev_m - m_t), 4)
                prev_m = m_t
                known = (sig(m_t, 5), sig(l_t, 5), [sig(float(x), 4) for x in s.acc[0, head, r, :SHOWN_DIMS] / l_t])
                if s.kind != "skip":
                    history = history + [(i, known[0], known[1])]
        frames.append(TileFrame(i, qi, ki, s.q0, s.q1, s.k0, s.k1, s.kind, now, row, here, *known, rescale,
                                [sig(x, 4) for x in final], traffic.total, plain, list(history)))
        grid[qi][ki] = s.kind
    return frames


def tile_caption(f: TileFrame, n: int) -> str:
    what = {"full": t("every key visible: computed"), "mask": t("crosses the diagonal: computed with the mask"),
            "skip": t("wholly above the diagonal: skipped, nothing loaded")}[f.kind]
    return t("step {i} of {n}: query tile {a} (rows {q0}..{q1}) × key tile {b} (keys {k0}..{k1}): {what}",
             i=f.step + 1, n=n, a=f.q_tile, q0=f.q0, q1=f.q1 - 1, b=f.k_tile, k0=f.k0, k1=f.k1 - 1, what=what)


def tile_table(frames: list[TileFrame]) -> str:
    """The walk as text: per tile its kind, the row's running m and l (where its tile is being worked), and the
    bytes moved so far against plain attention."""
    rows = [[f.step + 1, f"{f.q_tile} × {f.k_tile}", t(TILE_LOOK[f.kind].label),
             "" if not f.row_here or f.m is None else f"{f.m:.4f}", "" if not f.row_here or f.l is None else f"{f.l:.4f}",
             fmt_bytes(f.flash_bytes)] for f in frames]
    head = [t("step"), t("tile (query × key)"), t("what the loop does"), t("m of row {r}", r=frames[0].row),
            t("l of row {r}", r=frames[0].row), t("moved so far")]
    last = frames[-1]
    return text_table(rows, head) + "\n" + t("plain attention moves {plain} for the same call: {x}x the tiled loop",
                                              plain=fmt_bytes(last.plain_bytes),
                                              x=f"{last.plain_bytes / last.flash_bytes:.2f}")


def _concept(state: str) -> str:
    return TILE_LOOK[state].concept


def plot_tiles(frames: list[TileFrame], title: str = ""):
    """Static: the grid with the order the loop visits the tiles (skipped ones as ·), the row's running m and l
    step by step, and the bytes moved so far against plain attention's call."""
    import matplotlib.pyplot as plt

    last = frames[-1]
    grid = [[f.kind for f in frames if f.q_tile == i] for i in range(last.q_tile + 1)]
    fig, (ax, ax_m, ax_b) = plt.subplots(1, 3, figsize=(style.FIGURE_WIDTH, 3.6),
                                         gridspec_kw=dict(width_ratios=[1.1, 1, 1]), layout="constrained")
    order = {(f.q_tile, f.k_tile): f.step + 1 for f in frames}
    for i, row in enumerate(grid):
        for j, kind in enumerate(row):
            c = style.concept(_concept(kind))
            ax.add_patch(plt.Rectangle((j, i), 1, 1, facecolor=c.colour, edgecolor=style.MUTED, hatch=c.hatch or None
                                       if kind != "mask" else "xx"))
            mark = TILE_LOOK[kind].glyph if kind == "skip" else f"{TILE_LOOK[kind].glyph}{order[i, j]}"
            ax.text(j + 0.5, i + 0.5, mark, ha="center", va="center", color=style.INK,
                    fontsize=16 if kind == "skip" else style.SMALL_SIZE,
                    bbox=dict(boxstyle="square,pad=0.05", facecolor=c.colour, edgecolor="none"))
    ax.set_xlim(0, len(grid[0]))
    ax.set_ylim(len(grid), 0)
    ax.set_aspect("equal")
    ax.set_xticks([j + 0.5 for j in range(len(grid[0]))], [str(j) for j in range(len(grid[0]))])
    ax.set_yticks([i + 0.5 for i in range(len(grid))], [str(i) for i in range(len(grid))])
    ax.set_xlabel(t("key tile"))
    ax.set_ylabel(t("query tile"))
    ax.set_title(t("F/M + visit order, ·: skipped"), fontsize=style.FONT_SIZE)
    row_frames = [f for f in frames if f.row_here and f.m is not None]
    xs = [f.step + 1 for f in row_frames]
    cm, cl = style.concept("cached"), style.concept("computed")
    ax_m.plot(xs, [f.m for f in row_frames], color=cm.colour, marker=cm.marker, ls=cm.linestyle, label=t("running max m"))
    ax_m.plot(xs, [math.log(f.l) for f in row_frames], color=style.graphic_colour("computed"), marker=cl.marker,
              ls=cl.linestyle,
              label=t("log of running sum l"))
    ax_m.set_xlabel(t("step"))
    ax_m.set_title(t("query row {r}", r=last.row), fontsize=style.FONT_SIZE)
    style.place_legend(ax_m, loc="best", fontsize=style.SMALL_SIZE)
    fb, pb = style.concept("flash bytes"), style.concept("plain bytes")
    ax_b.plot([f.step + 1 for f in frames], [f.flash_bytes / 1024 for f in frames], color=fb.colour, marker=fb.marker,
              ms=3, ls=fb.linestyle, label=t("tiled loop, so far"))
    ax_b.axhline(last.plain_bytes / 1024, color=pb.colour, ls=pb.linestyle, label=t("plain attention (whole call)"))
    ax_b.set_xlabel(t("step"))
    ax_b.set_ylabel(t("KiB moved (HBM)"))
    ax_b.set_ylim(0, last.plain_bytes / 1024 * 1.15)
    style.place_legend(ax_b, loc="best", fontsize=style.SMALL_SIZE)
    if title:
        fig.suptitle(title)
    return fig


# --------------------------------------------------------------------------------- FlashDecoding: split-K

@dataclass
class ChunkFrame:
    """Chunks 0..step of one decode query merged: each chunk's weight in the merge so far, the merged output's
    first dimensions, and the bytes so far."""
    step: int
    chunks: list  # [(k0, k1)] of every chunk
    weights: list  # exp(lse_i - lse) over the chunks merged so far (the rest: None)
    out: list  # merged output so far, first SHOWN_DIMS dims (head ``head``)
    final: list  # the model's own attention output, first SHOWN_DIMS dims
    bytes: int  # split-K so far (its partials' writes and the merge's reads included)
    plain_bytes: int  # plain attention, one query against the whole cache

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def split_k_frames(q, k, v, mix=None, head: int = 0, chunk_size: int = 16) -> list[ChunkFrame]:
    """The last query of ``q`` (1, H, T, D) against every key, split into chunks of ``chunk_size``: one frame per
    chunk, merging chunks 0..i (``flash.split_k_partials``, ``flash.merge_partials``). The merged output after the
    last chunk is the attention output (``mix``, the model's, when given: its head ``head``)."""
    B, H, T, D = q.shape
    head = checks.integer(head, "head", 0, H - 1)
    cs = checks.choice(chunk_size, "chunk_size", BLOCK_SIZES)
    q1 = q[:, :, -1:]  # (1, H, 1, D): the newest query, which sees every cached position
    partials = flash.split_k_partials(q1, k, v, chunk_size=cs)
    chunks = [(k0, min(k0 + cs, T)) for k0 in range(0, T, cs)]
    final = (mix[0, -1].reshape(H, D)[head] if mix is not None else flash.plain_attention(q1, k, v)[0, head, 0])
    plain = flash.attention_bytes("plain", B, H, 1, T, D, itemsize=q.element_size()).total
    frames = []
    for i in range(len(chunks)):
        some = partials[:i + 1]
        lses = torch.stack([s for _, s in some])[:, 0, head, 0]  # (chunks so far,)
        w = torch.exp(lses - torch.logsumexp(lses, 0))
        traffic = flash.Traffic()
        end = chunks[i][1]
        flash.merge_partials(flash.split_k_partials(q1, k[:, :, :end], v[:, :, :end], cs, traffic=traffic),
                             traffic=traffic)
        out = flash.merge_partials(some)[0, head, 0, :SHOWN_DIMS]
        frames.append(ChunkFrame(i, chunks, [sig(float(x), 4) for x in w] + [None] * (len(chunks) - i - 1),
                                 [sig(float(x), 4) for x in out], [sig(float(x), 4) for x in final[:SHOWN_DIMS]],
                                 traffic.total, plain))
    return frames


def split_k_table(frames: list[ChunkFrame]) -> str:
    """Each merge step as text: the chunks merged, each one's weight, the merged output's first dimensions."""
    rows = [[f.step + 1, f"0..{f.chunks[f.step][1] - 1}", " ".join(f"{w:.4f}" for w in f.weights if w is not None),
             " ".join(f"{x:+.4f}" for x in f.out)] for f in frames]
    return text_table(rows, [t("chunks merged"), t("keys covered"), t("weight of each chunk, exp(lse_i − lse)"),
                             t("merged output, first {n} dims", n=SHOWN_DIMS)]) + "\n" + \
        t("the model's own output: {out}", out=" ".join(f"{x:+.4f}" for x in frames[-1].final))


# ------------------------------------------------------------------------------ tier 2: plotly step-through

def tile_figure(frames: list[TileFrame], title: str = ""):
    """One plotly frame per tile: the grid (current tile heavy-edged, glyphs F / M / · / ▶), the bytes moved so far
    against plain attention, and the row's m and l in the title; a slider and a Play button."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    n_q, n_k = frames[-1].q_tile + 1, len(frames[0].grid[0])
    cells = [(i, j) for i in range(n_q) for j in range(n_k)]
    symbol = {"full": "square", "mask": "square-x", "skip": "square-open", "loading": "square", "pending": "square-open"}

    def data(f):
        states = [f.grid[i][j] for i, j in cells]
        grid = go.Scatter(
            x=[j for _, j in cells], y=[i for i, _ in cells], mode="markers+text",
            text=[TILE_LOOK[s].glyph for s in states], textfont=dict(color=style.INK, size=style.plotly_px(14)),
            hovertext=[t(TILE_LOOK[s].label) for s in states], hoverinfo="text",
            marker=dict(symbol=[symbol[s] for s in states], size=min(34, 300 // max(n_q, n_k)),
                        color=[style.concept(_concept(s)).colour if s not in ("pending", "skip") else style.MUTED
                               for s in states],
                        line=dict(color=[style.INK if s == "loading" else style.MUTED for s in states],
                                  width=[3 if s == "loading" else 1 for s in states])),
            showlegend=False)
        bars = go.Bar(x=[t("tiled loop, so far"), t("plain attention")],
                      y=[sig(f.flash_bytes / 1024, 5), sig(f.plain_bytes / 1024, 5)],
                      marker=dict(color=[style.colour("flash bytes"), style.colour("plain bytes")],
                                  pattern=dict(shape=["", style.plotly_pattern("plain bytes")])),
                      text=[fmt_bytes(f.flash_bytes), fmt_bytes(f.plain_bytes)], textposition="outside",
                      showlegend=False)
        return [grid, bars]

    def head(f):
        row = (t("row {r}: m = {m}, l = {l}", r=f.row, m=f"{f.m:.4f}", l=f"{f.l:.4f}") if f.m is not None
               else t("row {r}: its tile not reached yet", r=f.row))
        return f"{tile_caption(f, len(frames))}<br>{row}"

    fig = make_subplots(rows=1, cols=2, column_widths=[0.6, 0.4], horizontal_spacing=0.12,
                        subplot_titles=(t("query tile × key tile"), t("KiB moved from HBM")))
    style.scale_subplot_titles(fig)
    for tr, col in zip(data(frames[0]), (1, 2)):
        fig.add_trace(tr, row=1, col=col)
    fig.frames = [go.Frame(name=str(f.step), data=data(f), traces=[0, 1], layout=dict(title_text=head(f)))
                  for f in frames]
    fig.update_xaxes(title_text=t("key tile"), range=[-0.6, n_k - 0.4], dtick=1, showgrid=False, zeroline=False,
                     row=1, col=1)
    fig.update_yaxes(title_text=t("query tile"), range=[n_q - 0.4, -0.6], dtick=1, showgrid=False, zeroline=False,
                     row=1, col=1)
    fig.update_yaxes(range=[0, sig(frames[-1].plain_bytes / 1024 * 1.25, 5)], row=1, col=2)
    fig.update_layout(title_text=head(frames[0]), height=480, margin=dict(t=110, b=110),
                      sliders=[frame_slider([f.step for f in frames], t("step "), labels=[f.step + 1 for f in frames],
                                            x=0.24, y=-0.1, len=0.76, xanchor="left", yanchor="top", pad=dict(t=0))],
                      updatemenus=[play_buttons(600, (t("▶ Play"), t("❚❚ Pause")), direction="left", x=0.0,
                                                y=-0.14, xanchor="left", yanchor="top", pad=dict(r=10, t=0))])
    if title:
        fig.update_layout(title_text=f"{title}<br>{head(frames[0])}")
    return fig


# ------------------------------------------------------------------------------------ tier 3: live widget

def _cell(state: str, bold: bool = False) -> str:
    look = _concept(state)
    return (f"display:inline-block;width:1.8em;height:1.8em;line-height:1.8em;margin:1px;text-align:center;"
            f"font-weight:bold;border-radius:2px;{style.chip_css(look, bold=bold, dashed=state == 'pending')}")


def _glyph(state: str) -> str:
    g = TILE_LOOK[state].glyph
    return f'<span style="background:{style.PAPER};padding:0 2px">{html.escape(g)}</span>' if g else "&nbsp;"


def tile_legend_html() -> str:
    return " · ".join(f'<span style="{_cell(s, s == "loading")};width:1.4em;height:1.4em;line-height:1.4em">'
                      f'{_glyph(s)}</span> {html.escape(t(TILE_LOOK[s].label))}'
                      for s in ("loading", "full", "mask", "skip", "pending"))


def _bar(value: float, top: float, concept: str, label: str, text: str) -> str:
    c = style.concept(concept)
    return (f'<div style="white-space:nowrap;line-height:1.7em"><span style="display:inline-block;min-width:14em">'
            f'{html.escape(label)}</span><span style="display:inline-block;vertical-align:middle;height:0.9em;'
            f'width:{round(220 * value / top) if top else 0}px;{style.chip_css(concept)}"></span> '
            f'{html.escape(text)}</div>')


def tile_html(f: TileFrame, n: int) -> str:
    """One step as HTML: the caption, the grid (query tiles down, key tiles across; the query tile in SRAM and the
    key tile being loaded named at the edges), the row's running state, and the bytes so far."""
    e = html.escape
    ink, muted = style.css("ink"), style.css("muted")
    head = "".join(f'<td style="text-align:center;font-size:0.8em;{"font-weight:bold" if j == f.k_tile else ""}">'
                   f'{"K/V ▼" if j == f.k_tile else j}</td>' for j in range(len(f.grid[0])))
    rows = "".join(
        f'<tr><td style="font-size:0.8em;text-align:right;padding-right:4px;{"font-weight:bold" if i == f.q_tile else ""}">'
        f'{"Q ▶ " if i == f.q_tile else ""}{i}</td>'
        + "".join(f'<td><span style="{_cell(s, s == "loading")}">{_glyph(s)}</span></td>' for s in r) + "</tr>"
        for i, r in enumerate(f.grid))
    grid = f'<table style="border-collapse:collapse"><tr><td></td>{head}</tr>{rows}</table>'
    if f.m is None:
        state = t("row {r} lives in query tile {a}: not reached yet", r=f.row, a=f.row // (f.q1 - f.q0 or 1))
    else:
        where = t("this step works on its tile") if f.row_here else t("its tile is done: the state it ended with")
        state = (t("<b>row {r}</b> ({where})", r=f.row, where=e(where))
                 + f'<br>m = {f.m:.4f} · l = {f.l:.4f}'
                 + (f' · {e(t("old sums × {x}", x=f"{f.rescale:.4f}"))}' if f.rescale is not None and f.row_here else "")
                 + "<br>" + e(t("acc / l so far") + colon()) + " ".join(f"{x:+.4f}" for x in f.out)
                 + "<br>" + e(t("exact output") + colon()) + " ".join(f"{x:+.4f}" for x in f.final))
    hist = "".join(f"<tr><td>{s + 1}</td><td>{m:.4f}</td><td>{l:.4f}</td></tr>" for s, m, l in f.history[-6:])
    hist = (f'<table style="font-size:0.85em;color:{muted}"><tr><td>{e(t("step"))}</td><td>m</td><td>l</td></tr>'
            f"{hist}</table>" if hist else "")
    top = max(f.plain_bytes, f.flash_bytes)
    bytes_ = (_bar(f.flash_bytes, top, "flash bytes", t("tiled loop, so far"), fmt_bytes(f.flash_bytes))
              + _bar(f.plain_bytes, top, "plain bytes", t("plain attention (whole call)"), fmt_bytes(f.plain_bytes)))
    return (f'<div style="font-family:sans-serif;color:{ink}"><div style="margin-bottom:4px"><b>{e(tile_caption(f, n))}'
            f'</b></div><div style="display:flex;flex-wrap:wrap;gap:1em 2.5em"><div>{grid}</div>'
            f'<div style="min-width:18em"><div>{state}</div>{hist}<div style="margin-top:6px">'
            f'<b>{e(t("bytes moved from HBM"))}</b>{bytes_}</div></div></div>'
            f'<div style="font-size:0.85em;margin-top:4px">{tile_legend_html()}</div></div>')


def chunk_html(f: ChunkFrame) -> str:
    """One merge step of FlashDecoding as HTML: a chip per chunk (merged: its weight; not yet: dashed), the merged
    output against the model's, and the bytes."""
    e = html.escape
    chips = "".join(
        f'<span title="{e(t("keys {a}..{b}", a=a, b=b - 1))}" style="display:inline-block;min-width:4.2em;margin:1px;'
        f'padding:2px 4px;text-align:center;{style.chip_css("tile loading" if i == f.step else "tile computed" if w is not None else "free", bold=i == f.step, dashed=w is None)}">'
        f'<span style="background:{style.PAPER};padding:0 2px">{a}..{b - 1}<br>{"" if w is None else f"{w:.4f}"}</span></span>'
        for i, ((a, b), w) in enumerate(zip(f.chunks, f.weights)))
    top = max(f.plain_bytes, f.bytes)
    done = f.step == len(f.chunks) - 1
    return (f'<div style="font-family:sans-serif;color:{style.css("ink")}"><div style="margin-bottom:4px"><b>'
            + e(t("FlashDecoding, one decode query: chunk {i} of {n} merged (keys 0..{end})", i=f.step + 1,
                  n=len(f.chunks), end=f.chunks[f.step][1] - 1))
            + f"</b></div><div>{e(t('each chunk: its keys and its weight in the merge, exp(lse_i − lse)'))}</div>"
            + f"<div>{chips}</div><div style='margin-top:6px'>{e(t('merged output so far') + colon())}"
            + " ".join(f"{x:+.4f}" for x in f.out) + f"<br>{e(t('the model’s attention output') + colon())}"
            + " ".join(f"{x:+.4f}" for x in f.final)
            + (f" <b>{e(t('= the merge of every chunk'))}</b>" if done else "") + "</div><div style='margin-top:6px'>"
            + _bar(f.bytes, top, "flash bytes", t("split-K so far"), fmt_bytes(f.bytes))
            + _bar(f.plain_bytes, top, "plain bytes", t("plain attention (whole call)"), fmt_bytes(f.plain_bytes))
            + "</div></div>")


class TileStepper(FrameStepping):
    """The live tile stepper: FlashAttention (or FlashDecoding) on a real layer of ``model``, one tile at a time.

    Python API (no browser needed): ``set(layer=, head=, block_size=, row=, view=)`` (one re-run; bad values raise
    and change nothing), ``.step`` (get / set), ``.next()``, ``.back()``, ``.state()`` (what is drawn: the frame as
    a dict, the caption, the HTML), ``.frames``, ``.last_update_ms``; ``.widget`` is the ipywidgets box (display the
    stepper itself).
    A change of layer or head runs the model again on the text (``layer_qkv``)."""

    CONTROLS = ("layer", "head", "block_size", "row", "view")

    def __init__(self, model, ids, layer: int = 0, head: int = 0, block_size: int = 16, row: int | None = None,
                 view: str = VIEWS[0]):
        import ipywidgets as W

        self.model, self.ids = model, _ids(model, ids)
        T = self.ids.shape[1]
        self.values = self._checked(dict(layer=layer, head=head, block_size=block_size,
                                         row=T - 1 if row is None else row, view=view))
        cfg = model.config
        look = dict(style=style.control_style(), layout=W.Layout(**style.control_layout()))
        self.layer_box = W.Dropdown(options=list(range(cfg.n_layers)), value=self.values["layer"],
                                    description=t("layer"), **look)
        self.head_box = W.Dropdown(options=list(range(cfg.n_heads)), value=self.values["head"], description=t("head"),
                                   **look)
        self.block_box = W.Dropdown(options=list(BLOCK_SIZES), value=self.values["block_size"],
                                    description=t("tile size"), **look)
        self.view_box = W.Dropdown(options=[(t(v), v) for v in VIEWS], value=self.values["view"],
                                   description=t("view"), **look)
        self.row_box = W.IntSlider(value=self.values["row"], min=0, max=T - 1, description=t("query row"),
                                   continuous_update=False, **look)
        self.slider = W.IntSlider(value=0, min=0, max=0, description=t("step"), style=style.control_style(),
                                  layout=W.Layout(width="24em"))
        self.view = W.HTML()
        for box, key in ((self.layer_box, "layer"), (self.head_box, "head"), (self.block_box, "block_size"),
                         (self.row_box, "row"), (self.view_box, "view")):
            box.observe(lambda ch, key=key: self._from_widget(key, ch["new"]), names="value")
        self.slider.observe(lambda _: self.redraw(), names="value")
        self.widget = self.box(style.grid(self.view_box, self.layer_box, self.head_box, self.block_box, self.row_box,
                                          columns=3), self.playback(), self.view)
        self._qkv_key = None
        self.last_update_ms = 0.0
        self._rerun()

    def _checked(self, v: dict) -> dict:
        cfg = self.model.config
        checks.integer(v["layer"], "layer", 0, cfg.n_layers - 1)
        checks.integer(v["head"], "head", 0, cfg.n_heads - 1)
        checks.choice(v["block_size"], "block_size", BLOCK_SIZES)
        checks.integer(v["row"], "row", 0, self.ids.shape[1] - 1)
        checks.choice(v["view"], "view", VIEWS)
        return v

    def _from_widget(self, key, value):
        if self.values[key] != value:
            self.set(**{key: value})

    def set(self, **values):
        check_controls(values, self.CONTROLS)
        new = self._checked({**self.values, **values})
        self.values = new
        boxes = {"layer": self.layer_box, "head": self.head_box, "block_size": self.block_box, "row": self.row_box,
                 "view": self.view_box}
        self._quiet = True
        try:
            for k, box in boxes.items():
                if box.value != new[k]:
                    box.value = new[k]
        finally:
            self._quiet = False
        self._rerun()

    _quiet = False

    def state(self) -> dict:
        f = self.frames[self.slider.value]
        return dict(settings=dict(self.values), step=self.slider.value, n_steps=len(self.frames), frame=f.as_dict(),
                    html=self.view.value)

    def _rerun(self):
        if self._quiet:
            return
        t0 = time.perf_counter()
        v = self.values
        if self._qkv_key != v["layer"]:  # the model runs again for another layer
            self._qkv = layer_qkv(self.model, self.ids, v["layer"])
            self._qkv_key = v["layer"]
        q, k, vv, mix = self._qkv
        if v["view"] == VIEWS[0]:
            self.frames = tile_frames(q, k, vv, v["head"], v["block_size"], v["row"])
        else:
            self.frames = split_k_frames(q, k, vv, mix, v["head"], v["block_size"])
        self.row_box.disabled = v["view"] != VIEWS[0]
        with self.slider.hold_trait_notifications():
            self.slider.max = len(self.frames) - 1
            self.slider.value = min(self.slider.value, len(self.frames) - 1)
        self.redraw()
        self.last_update_ms = (time.perf_counter() - t0) * 1e3

    def redraw(self):
        f = self.frames[min(self.slider.value, len(self.frames) - 1)]
        self.view.value = tile_html(f, len(self.frames)) if isinstance(f, TileFrame) else chunk_html(f)
