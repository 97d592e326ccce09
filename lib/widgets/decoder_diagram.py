"""One decoder block of a model as a picture (notebook 01), drawn from its ``ModelConfig``: the boxes are the
modules ``lib.model`` builds (norms, Q/K/V projections, causal attention, ``o_proj``, the FFN, the residual
adds), and every arrow carries the shape of the tensor on it, from the config. Left: one block in detail, with
the KV cache beside attention (K and V are written there, and every key and value so far is read back); right:
the whole model, the block repeated ``n_layers`` times between the embeddings and the LM head.

    fig = decoder_diagram(model.config)      # the real model's own diagram
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

from ..config import ModelConfig
from . import style
from ..i18n import t

NORM_NAMES = {"layernorm": "LayerNorm", "rmsnorm": "RMSNorm"}
ACTIVATION_NAMES = {"gelu": "GELU", "gelu_tanh": "GELU (tanh)", "silu": "SiLU", "swiglu": "SiLU(gate) × up"}


def block_parts(config: ModelConfig) -> dict:
    """The texts of the diagram, from ``config``: each module's name and the shape of each arrow (``B`` and ``T``
    stay letters, every width is the config's number). Also what the tests check."""
    if not isinstance(config, ModelConfig):
        raise TypeError(f"decoder_diagram takes a ModelConfig (model.config), got {type(config).__name__}")
    c = config
    norm = NORM_NAMES[c.norm]
    qd, kvd = c.n_heads * c.head_dim, c.n_kv_heads * c.head_dim
    if c.activation == "swiglu":
        ffn = f"gate_proj, up_proj {c.d_model}→{c.d_ff}\nSiLU(gate) × up\ndown_proj {c.d_ff}→{c.d_model}"
    else:
        ffn = f"up_proj {c.d_model}→{c.d_ff}\n{ACTIVATION_NAMES[c.activation]}\ndown_proj {c.d_ff}→{c.d_model}"
    return {
        "stream": f"(B, T, {c.d_model})",
        "q": f"Q (B, {c.n_heads}, T, {c.head_dim})",
        "kv": f"K, V (B, {c.n_kv_heads}, T, {c.head_dim})",
        "cache": f"K, V (B, {c.n_kv_heads}, S, {c.head_dim})",
        "mix": f"(B, T, {qd})",
        "hidden": f"(B, T, {c.d_ff})",
        "logits": f"(B, T, {c.vocab_size})",
        "ids": "(B, T)",
        "norm1": f"{norm} (norm1)", "norm2": f"{norm} (norm2)", "norm_f": f"{norm} (norm_f)",
        "qkv": (f"q_proj {c.d_model}→{qd}", f"k_proj {c.d_model}→{kvd}", f"v_proj {c.d_model}→{kvd}"),
        "ffn": ffn,
        "o_proj": f"o_proj {qd}→{c.d_model}",
        "head": f"lm_head {c.d_model}→{c.vocab_size}",
        "embed": (t("tok_emb ({n} rows)", n=c.vocab_size) + "\n+ " + t("pos_emb ({n} rows)", n=c.max_seq_len)
                  if c.positions == "learned" else t("tok_emb ({n} rows)", n=c.vocab_size)),
        "rope": c.positions == "rope",
        "heads": c.n_heads, "kv_heads": c.n_kv_heads, "head_dim": c.head_dim, "n_layers": c.n_layers,
    }


def _box(ax, x, y, w, h, text, *, kind="plain", size=None):
    looks = {"plain": (style.PAPER, style.INK, ""), "weights": ("#E5F5EF", style.graphic_colour("weights"), "--"),
             "cache": ("#E0EEF7", style.graphic_colour("cached"), ""), "attention": ("#FFF7DB", style.INK, "")}
    face, edge, dash = looks[kind]
    box = FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.12",
                         facecolor=face, edgecolor=edge, lw=1.6, linestyle=dash or "-", zorder=2)
    ax.add_patch(box)
    ax.text(x, y, text, ha="center", va="center", fontsize=size or style.SMALL_SIZE, color=style.INK, zorder=3,
            linespacing=1.25)
    return box


def _arrow(ax, a, b, *, colour=style.INK, label="", side="right", dashed=False, rad=0.0):
    ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=13, lw=1.3, color=colour, zorder=1,
                                 linestyle="--" if dashed else "-", connectionstyle=f"arc3,rad={rad}",
                                 shrinkA=0, shrinkB=0))
    if label:
        x, y = (a[0] + b[0]) / 2, (a[1] + b[1]) / 2
        dx = 0.12 if side == "right" else -0.12
        ax.text(x + dx, y, label, ha="left" if side == "right" else "right", va="center",
                fontsize=style.SMALL_SIZE, color=style.MUTED, zorder=3)


def _add(ax, x, y):
    ax.add_patch(plt.Circle((x, y), 0.2, facecolor=style.PAPER, edgecolor=style.INK, lw=1.4, zorder=2))
    ax.text(x, y, "+", ha="center", va="center", fontsize=style.FONT_SIZE + 2, color=style.INK, zorder=3)


def decoder_diagram(config: ModelConfig):
    """The decoder of ``config`` as a matplotlib figure: one block in detail (left) and the whole model (right),
    the shape of every arrow from the config, the KV cache where attention writes and reads K and V."""
    p = block_parts(config)
    fig, ax = plt.subplots(figsize=(style.FIGURE_WIDTH, 8.2))
    ax.set_xlim(0, 13)
    ax.set_ylim(-0.7, 12.4)
    ax.axis("off")
    _one_block(ax, p)
    _whole_model(ax, p)
    ax.text(0.1, -0.35, t("B: sequences in the batch, T: tokens fed in this pass, S: positions held in the cache"),
            ha="left", va="center", fontsize=style.SMALL_SIZE, color=style.MUTED)
    handles = [Patch(facecolor="#E5F5EF", edgecolor=style.graphic_colour("weights"), linestyle="--", lw=1.6,
                     label=t("learned weights (a matrix product)")),
               Patch(facecolor="#E0EEF7", edgecolor=style.graphic_colour("cached"), lw=1.6,
                     label=t("KV cache (notebook 03)"))]
    ax.legend(handles=handles, loc="lower right", bbox_to_anchor=(1.0, 0.02), frameon=False,
              fontsize=style.SMALL_SIZE)
    return fig


def _one_block(ax, p: dict) -> None:
    """One decoder block in detail (left), top to bottom, with the residual stream beside it."""
    X, W = 3.6, 4.4  # the block's column: centre and box width
    rx = 0.5  # the residual stream's line, left of the boxes
    ax.text(0.1, 12.15, t("one decoder block (layer ℓ)"), fontsize=style.TITLE_SIZE,
            color=style.INK, ha="left", va="center")
    y_in, y_n1, y_qkv, y_att, y_o, y_add1 = 11.5, 10.7, 9.3, 7.75, 6.45, 5.65
    y_n2, y_ffn, y_add2, y_out = 4.85, 3.3, 1.75, 0.9
    _arrow(ax, (X, y_in + 0.5), (X, y_n1 + 0.3), label=t("h {shape}", shape=p["stream"]))
    _box(ax, X, y_n1, W, 0.6, p["norm1"])
    xs = (X - 1.5, X, X + 1.5)
    for x, text in zip(xs, p["qkv"]):
        _box(ax, x, y_qkv, 1.45, 0.75, text.replace(" ", "\n", 1), kind="weights")
        _arrow(ax, (X, y_n1 - 0.3), (x, y_qkv + 0.375))
    att_text = t("causal attention, {h} heads\nsoftmax(QKᵀ/√{d} + mask) · V", h=p["heads"], d=p["head_dim"])
    if p["rope"]:
        att_text = t("RoPE turns Q and K by position") + "\n" + att_text
    _box(ax, X, y_att, W - 0.5, 1.2 if p["rope"] else 0.95, att_text, kind="attention")
    _arrow(ax, (xs[0], y_qkv - 0.375), (xs[0], y_att + (0.6 if p["rope"] else 0.475)))
    ax.text(xs[0] + 0.12, (y_qkv + y_att) / 2 + 0.12, p["q"], ha="left", va="center",
            fontsize=style.SMALL_SIZE, color=style.MUTED)
    _cache_beside(ax, p, X + 3.55, X + W / 2, xs, y_qkv, y_att)
    _arrow(ax, (X, y_att - (0.6 if p["rope"] else 0.475)), (X, y_o + 0.3), label=p["mix"])
    _box(ax, X, y_o, W, 0.6, p["o_proj"], kind="weights")
    _arrow(ax, (X, y_o - 0.3), (X, y_add1 + 0.2))
    _add(ax, X, y_add1)
    _arrow(ax, (X, y_add1 - 0.2), (X, y_n2 + 0.3), label=p["stream"])
    _box(ax, X, y_n2, W, 0.6, p["norm2"])
    _arrow(ax, (X, y_n2 - 0.3), (X, y_ffn + 0.6))
    _box(ax, X, y_ffn, W, 1.2, t("FFN, each position alone") + "\n" + p["ffn"], kind="weights")
    ax.text(X + W / 2 + 0.12, y_ffn, t("inside:\n{shape}", shape=p["hidden"]), ha="left", va="center",
            fontsize=style.SMALL_SIZE, color=style.MUTED)
    _arrow(ax, (X, y_ffn - 0.6), (X, y_add2 + 0.2))
    _add(ax, X, y_add2)
    _arrow(ax, (X, y_add2 - 0.2), (X, y_out - 0.35), label=t("to the next block {shape}", shape=p["stream"]))
    # the residual stream: the block's input skips each sub-block and is added back
    for top, add in ((y_in + 0.1, y_add1), (y_add1, y_add2)):
        ax.plot([X, rx, rx], [top, top, add], color=style.MUTED, lw=1.6, zorder=1, solid_capstyle="butt")
        _arrow(ax, (rx, add), (X - 0.2, add), colour=style.MUTED)
    ax.text(rx - 0.05, (y_add1 + y_add2) / 2, t("residual"), rotation=90, ha="right", va="center",
            fontsize=style.SMALL_SIZE, color=style.MUTED)


def _cache_beside(ax, p: dict, cx: float, right: float, xs, y_qkv: float, y_att: float) -> None:
    """The KV cache at ``cx`` beside the attention box (its right edge at ``right``): K and V go in, every K and
    V so far comes back out."""
    _box(ax, cx, y_att, 2.4, 1.2, t("KV cache, layer ℓ") + "\n" + p["cache"].replace(" (", "\n(", 1), kind="cache")
    for x in xs[1:]:
        _arrow(ax, (x, y_qkv - 0.375), (cx - 0.4 + (x - xs[1]) * 0.5, y_att + 0.6),
               colour=style.graphic_colour("cached"))
    ax.text(cx + 0.15, (y_qkv + y_att) / 2 + 0.25, t("write {kv}", kv=p["kv"]), ha="left", va="center",
            fontsize=style.SMALL_SIZE, color=style.text_colour("cached"))
    _arrow(ax, (cx - 1.2, y_att - 0.15), (right - 0.25, y_att - 0.15), colour=style.graphic_colour("cached"))
    ax.text(cx - 1.2, y_att - 0.85, t("read all S so far"), ha="left", va="center", fontsize=style.SMALL_SIZE,
            color=style.text_colour("cached"))


def _whole_model(ax, p: dict) -> None:
    """The whole model (right): token ids, embedding, the blocks, the final norm, the head, the logits."""
    MX, MW = 11.2, 3.2
    ax.text(MX - MW / 2, 12.15, t("the whole model"), fontsize=style.TITLE_SIZE,
            color=style.INK, ha="left", va="center")
    y_ids, y_emb, y_blk, y_nf, y_head, y_logits = 11.4, 10.0, 7.0, 4.4, 3.1, 1.9
    ax.text(MX, y_ids, t("token ids {shape}", shape=p["ids"]), ha="center", va="center",
            fontsize=style.SMALL_SIZE, color=style.INK)
    _arrow(ax, (MX, y_ids - 0.25), (MX, y_emb + 0.45))
    _box(ax, MX, y_emb, MW, 0.9, p["embed"], kind="weights")
    _arrow(ax, (MX, y_emb - 0.45), (MX, y_blk + 0.9), label=p["stream"], side="right")
    blk = _box(ax, MX, y_blk, MW, 1.8, t("decoder block (left)\n× {n} layers", n=p["n_layers"]), size=style.FONT_SIZE)
    blk.set_linewidth(2.2)
    _arrow(ax, (MX, y_blk - 0.9), (MX, y_nf + 0.3), label=p["stream"])
    _box(ax, MX, y_nf, MW, 0.6, p["norm_f"])
    _arrow(ax, (MX, y_nf - 0.3), (MX, y_head + 0.3))
    _box(ax, MX, y_head, MW, 0.6, p["head"], kind="weights")
    _arrow(ax, (MX, y_head - 0.3), (MX, y_logits + 0.25))
    ax.text(MX, y_logits, t("logits {shape}", shape=p["logits"]), ha="center", va="center",
            fontsize=style.SMALL_SIZE, color=style.INK)
