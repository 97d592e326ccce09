"""RoPE as a picture (notebook 03): one pair of a key's numbers, the same key written at positions 0, 1, 2, ...,
turned by ``lib.model.apply_rope`` (the model's own rotation, not a second formula). A fast pair turns a lot per
position, a slow one hardly; the angle between a query and a key, and so their score, depends only on how far
apart their positions are.

    fig = rope_figure(head_dim=64, theta=10000.0, positions=range(6), pairs=(0, 8))
"""
from __future__ import annotations

import math

import matplotlib.pyplot as plt
import torch

from .. import checks
from ..model import apply_rope, rope_tables
from . import style
from ..i18n import t


def rotated_pairs(head_dim: int, theta: float, positions, pair: int) -> list[tuple[float, float]]:
    """The (x_i, x_{i+d/2}) pair ``pair`` of the vector (1, 0, ..., 0 in that pair) rotated by ``apply_rope`` at
    each of ``positions``: points on the unit circle, one per position."""
    head_dim = checks.integer(head_dim, "head_dim", 2)
    if head_dim % 2:
        raise ValueError(f"head_dim must be even (RoPE turns pairs of numbers), got {head_dim}")
    pair = checks.index(pair, "pair", head_dim // 2, f"a head of head_dim={head_dim} has {head_dim // 2} pairs")
    pos = torch.tensor([list(positions)], dtype=torch.long)
    if pos.numel() == 0:
        raise ValueError("positions must hold at least one position")
    x = torch.zeros(1, 1, pos.shape[1], head_dim)
    x[..., pair] = 1.0
    cos, sin = rope_tables(head_dim, pos, theta)
    out = apply_rope(x, cos, sin)[0, 0]
    return [(float(r[pair]), float(r[pair + head_dim // 2])) for r in out]


def rope_figure(head_dim: int = 64, theta: float = 10000.0, positions=range(6), pairs=(0, 8)):
    """One panel per pair: the key's pair at each position as an arrow on the unit circle, labelled with its
    position and its angle."""
    positions = list(positions)
    fig, axes = plt.subplots(1, len(pairs), figsize=(style.FIGURE_WIDTH, 4.0), squeeze=False)
    look = style.concept("cached")
    for ax, pair in zip(axes[0], pairs):
        pts = rotated_pairs(head_dim, theta, positions, pair)
        step = 1.0 / theta ** (2 * pair / head_dim)  # radians per position of this pair
        circle = [(math.cos(a), math.sin(a)) for a in torch.linspace(0, 2 * math.pi, 121).tolist()]
        ax.plot(*zip(*circle), color=style.GRID, lw=0.8)
        for p, (x, y) in zip(positions, pts):
            shade = 0.35 + 0.65 * (p - positions[0]) / max(1, positions[-1] - positions[0])
            ax.annotate("", xy=(x, y), xytext=(0, 0),
                        arrowprops=dict(arrowstyle="-|>", color=look.colour, alpha=shade, lw=1.6))
            ax.text(1.16 * x, 1.16 * y, str(p), ha="center", va="center", fontsize=style.FONT_SIZE)
        ax.set_title(t("pair {pair}: {deg:.1f}° per position", pair=pair, deg=math.degrees(step)), loc="left")
        ax.set_aspect("equal")
        ax.set_xlim(-1.35, 1.35)
        ax.set_ylim(-1.35, 1.35)
        ax.axis("off")
    fig.suptitle(t("one key written at positions {a}..{b}: each pair of its numbers turned by position × angle",
                   a=positions[0], b=positions[-1]), x=0.01, ha="left", fontsize=style.TITLE_SIZE)
    return fig
