"""The cache tensor as a picture (notebook 03): one layer's K and V as ``lib.KVCache`` holds them, each a
``(B, n_kv_heads, T, head_dim)`` tensor, drawn as blocks with the cache's real sizes: one row per KV head, one
cell per position (a cell is one vector of ``head_dim`` numbers), the positions written so far filled, the
preallocated rest empty, the other layers stacked behind. The position the last pass wrote is the slice a decode
step appends: one ``(B, n_kv_heads, 1, head_dim)`` slice to K and one to V, in every layer, which is
``lib.costs.kv_bytes_per_token`` bytes per sequence (the function every notebook uses for bytes per token).

    cache = lib.KVCache(lm.config, batch_size=1, max_len=32)
    ...                                   # a prefill, then one decode step
    fig = cache_tensor_figure(cache)      # its numbers: cache_layout(cache)

The live attention explorer draws the same slab beside its heat-map as HTML, step by step, from the sizes alone:
``cache_tensor_html(layout_for(config, T, filled), states)``, each position in its K/V state as the player's chips.
"""
from __future__ import annotations

import html
from dataclasses import dataclass

import matplotlib.pyplot as plt
from matplotlib.patches import Patch, Rectangle

from .. import costs
from ..cache import KVCache
from . import style
from ..i18n import t

MAX_POSITIONS = 64  # columns a figure can draw legibly at the cell's width (900 px)


@dataclass(frozen=True)
class CacheLayout:
    """The numbers the picture draws, read from a ``lib.KVCache`` (and ``lib.costs``)."""
    batch_size: int
    n_layers: int
    n_kv_heads: int
    positions: int  # T: the positions each K and V tensor has room for (max_len)
    filled: int  # positions written so far (cache.seq_len)
    head_dim: int
    dtype: str  # e.g. "float32"
    element_bytes: int
    bytes_per_token: int  # lib.costs.kv_bytes_per_token: one token's K and V in every layer, one sequence
    reserved_bytes: int  # cache.nbytes: every layer's K and V, allocated up front
    held_bytes: int  # cache.used_bytes: the filled positions

    @property
    def shape(self) -> tuple:
        return (self.batch_size, self.n_kv_heads, self.positions, self.head_dim)

    @property
    def slice_shape(self) -> tuple:  # what one decode step appends to K (and to V) of one layer
        return (self.batch_size, self.n_kv_heads, 1, self.head_dim)

    @property
    def step_bytes(self) -> int:  # one decode step, all sequences of the batch
        return self.bytes_per_token * self.batch_size


def layout_for(config, positions: int, filled: int, batch_size: int = 1, dtype=None) -> CacheLayout:
    """The sizes of a ``lib.KVCache`` for ``config`` with room for ``positions`` and ``filled`` of them written
    (``dtype`` None: torch's default float dtype), all from ``lib.costs``: what the live attention explorer draws
    beside its heat-map, step by step, without holding the cache."""
    import torch

    dtype = dtype or torch.get_default_dtype()
    element = torch.empty(0, dtype=dtype).element_size()
    per_token = costs.kv_bytes_per_token(config, dtype=dtype)
    return CacheLayout(batch_size, config.n_layers, config.n_kv_heads, positions, filled, config.head_dim,
                       str(dtype).replace("torch.", ""), element, per_token,
                       costs.kv_cache_bytes(config, positions, batch_size, dtype=dtype), filled * per_token * batch_size)


def cache_layout(cache) -> CacheLayout:
    """The sizes of ``cache`` (a ``lib.KVCache`` without a ring buffer), checked against ``lib.costs``."""
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a lib.KVCache (the preallocated cache), got {type(cache).__name__}")
    if cache.ring:
        raise ValueError("cache is a ring buffer (a sliding window): this picture draws a cache that keeps every "
                         "position; notebook 12 draws the ring")
    c = cache.config
    lay = layout_for(c, cache.max_len, cache.seq_len, cache.batch_size, cache.dtype)
    assert lay.reserved_bytes == cache.nbytes and lay.held_bytes == cache.used_bytes
    assert lay.element_bytes == cache.k[0].element_size()
    assert lay.bytes_per_token == 2 * c.n_layers * c.n_kv_heads * c.head_dim * lay.element_bytes
    return lay


def _states(layout: CacheLayout) -> list[str]:
    """The K/V state of each position: read from the cache (written by earlier passes), the newest (written by the
    last pass: the appended slice), none yet (preallocated, empty)."""
    n = layout.filled
    return ["cached"] * max(0, n - 1) + ["new"] * min(n, 1) + ["none"] * (layout.positions - n)


def cache_tensor_figure(cache, batch: int = 0):
    """K above V of layer 0 of ``cache`` (the first sequence of the batch, or ``batch``), one cell per (KV head,
    position), the other layers as outlines behind, and the appended slice called out with its bytes."""
    lay = cache_layout(cache)
    if lay.positions > MAX_POSITIONS:
        raise ValueError(f"this cache has room for {lay.positions} positions; the picture draws at most "
                         f"{MAX_POSITIONS} (make a cache with max_len <= {MAX_POSITIONS} to draw it)")
    if not 0 <= batch < lay.batch_size:
        raise ValueError(f"batch must be a sequence of the cache, 0..{lay.batch_size - 1}, got {batch!r}")
    T, H, L = lay.positions, lay.n_kv_heads, lay.n_layers
    behind = min(L - 1, 3)  # outlines drawn behind the front layer (the rest are said in words)
    gap = H + behind * 0.45 + 2.2  # from the top of V's block to the top of K's
    fig, ax = plt.subplots(figsize=(style.FIGURE_WIDTH, 2.2 + 0.62 * 2 * H), layout="constrained")
    for name, y0 in (("K", gap), ("V", 0.0)):
        _draw_block(ax, lay, _states(lay), name, y0, behind)
    if lay.filled:
        _draw_appended(ax, lay, gap)
    ticks = sorted({0, *range(0, T, 8), lay.filled - 1 if lay.filled else 0, T - 1})
    ax.set_xticks([x + 0.5 for x in ticks], [str(x) for x in ticks])
    ax.set_xlabel(t("position (the T axis): {filled} of {T} written, the rest reserved up front", filled=lay.filled,
                    T=T))
    ax.set_yticks([])
    ax.set_xlim(-0.2, T + behind * 0.55 + 4.5)
    ax.set_ylim(-0.3, gap + H + behind * 0.45 + 0.9)
    ax.set_aspect("auto")
    ax.spines[:].set_visible(False)
    ax.tick_params(length=0)
    ax.set_title(t("one layer's KV cache as lib.KVCache holds it: K and V, each (B, n_kv_heads, T, head_dim) = "
                   "{shape}\none cell = one head's vector of {D} numbers; all {L} layers reserve {reserved:,} bytes, "
                   "the written positions hold {held:,}", shape=lay.shape, D=lay.head_dim, L=L,
                   reserved=lay.reserved_bytes, held=lay.held_bytes), loc="left")
    labels = {"cached": t("written by an earlier pass"), "new": t("appended by the last decode step"),
              "none": t("reserved, not written yet")}
    fig.legend(handles=[Patch(facecolor=style.kv_state(s).colour, hatch=style.kv_state(s).hatch or None,
                              edgecolor=style.INK if s == "new" else style.MUTED, linestyle=style.kv_state(s).edge,
                              lw=2.2 if s == "new" else 0.8, label=labels[s])
                        for s in ("cached", "new", "none")], loc="outside lower center", ncol=3)
    return fig


def _draw_block(ax, lay: CacheLayout, states: list, name: str, y0: float, behind: int, dx: float = 0.55,
                dy: float = 0.45):
    """One of K and V at height ``y0``: the layers behind as outlines (offset ``dx``, ``dy`` each), the front layer
    one cell per (KV head, position) in its K/V state's drawing, and its words."""
    T, H, L = lay.positions, lay.n_kv_heads, lay.n_layers
    for i in range(behind, 0, -1):  # the layers behind, farthest first: outlines of the same shape
        ax.add_patch(Rectangle((i * dx, y0 + i * dy), T, H, facecolor=style.PAPER, edgecolor=style.MUTED, lw=0.9))
    for h in range(H):
        for p, s in enumerate(states):
            kv = style.kv_state(s)
            ax.add_patch(Rectangle((p, y0 + H - 1 - h), 1, 1, facecolor=kv.colour, hatch=kv.hatch or None,
                                   edgecolor=style.MUTED, lw=0.6, linestyle=kv.edge))
        ax.text(-0.3, y0 + H - 0.5 - h, t("head {h}", h=h), ha="right", va="center", fontsize=style.SMALL_SIZE)
    ax.text(-0.3, y0 + H + 0.35, t("{name} of layer 0", name=name), ha="right", va="bottom", fontsize=style.FONT_SIZE)
    if behind:
        ax.text(T + behind * dx + 0.3, y0 + H + behind * dy - 0.2, t("+ {n} more layers behind,\nthe same shape",
                n=L - 1), ha="left", va="top", fontsize=style.SMALL_SIZE, color=style.INK)


def _draw_appended(ax, lay: CacheLayout, gap: float):
    """The appended slice: one position, every head, boxed in K and in V, with its shape and bytes."""
    p, H = lay.filled - 1, lay.n_kv_heads
    for y0 in (gap, 0.0):
        ax.add_patch(Rectangle((p, y0), 1, H, facecolor="none", edgecolor=style.INK, lw=2.2))
    ax.annotate(t("one decode step appends this slice {shape} to K and to V\nin each of the {L} layers: "
                  "{bytes:,} bytes per token ({dtype})", shape=lay.slice_shape, L=lay.n_layers,
                  bytes=lay.bytes_per_token, dtype=lay.dtype),
                xy=(p + 0.5, gap - 0.05), xytext=(p + 0.5, gap - 1.1), ha="center", va="center",
                fontsize=style.SMALL_SIZE, arrowprops=dict(arrowstyle="-|>", color=style.INK, lw=1.2))


def cache_tensor_html(lay: CacheLayout, states: list, layer: int = 0) -> str:
    """One layer's K and V as HTML (the live attention explorer's slab, beside its heat-map): per KV head a row of
    cells, one per position of the T axis, each in the K/V state ``states[p]`` as the player draws it (the
    appended cells with a heavy edge, "none" empty and dashed), and the tensor's shape and bytes in words."""
    if len(states) != lay.positions:
        raise ValueError(f"states must give one K/V state per position of the cache ({lay.positions}), "
                         f"got {len(states)}")
    size = 9 if lay.positions <= 48 else 6  # px a cell: the slab stays narrower than the heat-map
    look = {s: style.chip_css(style.kv_state(s).concept, bold=s == "new", dashed=s == "none")
            for s in style.KV_STATES}

    def row(h: int) -> str:
        cells = "".join(f'<span title="{p}: {html.escape(t(style.kv_state(s).meaning))}" style="display:inline-block;'
                        f'box-sizing:border-box;width:{size}px;height:14px;margin:0 1px 0 0;{look[s]}"></span>'
                        for p, s in enumerate(states))
        return f'<div style="white-space:nowrap;line-height:15px">{cells} <small>{t("head {h}", h=h)}</small></div>'

    blocks = "".join(f'<div style="margin:6px 0 2px"><b>{t("{name} of layer {layer}", name=name, layer=layer)}</b>'
                     f'</div>' + "".join(row(h) for h in range(lay.n_kv_heads)) for name in ("K", "V"))
    words = t("each (B, n_kv_heads, T, head_dim) = {shape}: {filled} of {T} positions written; one position is "
              "{bytes:,} bytes in all {L} layers ({dtype})", shape=lay.shape, filled=lay.filled, T=lay.positions,
              bytes=lay.bytes_per_token, L=lay.n_layers, dtype=lay.dtype)
    return f'<div style="color:{style.css("ink")};font-size:12px;padding:4px 8px">{blocks}<div>{words}</div></div>'
