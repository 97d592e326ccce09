"""Where inference memory goes (claims C10, C13): weights vs KV cache, for real model shapes.

All numbers come from ``lib.costs`` (``param_count``, ``weight_bytes``, ``kv_bytes_per_token``,
``kv_cache_bytes``, ``kv_memory_crossover_tokens``); this module only arranges them:

* ``memory_budget(model, dtype, context, batch, kv_dtype)``: weights in memory, KV cache, total, the memory
  crossover (KV cache memory = weight memory), and how many requests fit next to the weights on GPUs of 24,
  40, 80 and 141 GiB; the cache may be stored in another number format than the weights (``kv_dtype``: fp16,
  bf16, fp8, int8, int4 ...). The analytic cache counts the K and V numbers only, at the format's bytes per
  number (int4: half a byte): the per-vector scales that an int8 or int4 cache also stores are left out here
  (4 bytes per head_dim numbers in ``lib.QuantizedKVCache``, whose ``.nbytes`` counts them: about 3% of the
  cache at head_dim 128);
* ``kv_per_token_rows``: KV bytes per token of MHA, GQA, MQA and MLA models side by side.

What a decode step *reads* (weights read per step, KV reads, FLOPs) is ``lib.costs.step_cost``, shown by
``lib.widgets.roofline``. Three views of the budget: ``memory_table`` / ``plot_memory`` (static),
``memory_figure`` (plotly, a slider over the batch size; survives export) and ``MemoryExplorer`` (ipywidgets,
Python API testable without a browser). Memory is in binary units (1 GiB = 2**30 bytes): GPU memory comes in
binary sizes, and the published per-token figures (512 KiB for Llama-2-7B) are binary too.
"""
from __future__ import annotations

import dataclasses
import html
import math
import time
from dataclasses import dataclass

from .. import checks
from . import style
from ..config import ModelConfig
from ..costs import (GiB, kv_bytes_per_token, kv_cache_bytes, kv_memory_crossover_tokens, kv_values_per_token,
                     param_count, weight_bytes)
from ..device import DTYPES, dtype_name
from ..presets import MLA_PRESETS, PRESETS, resolve_model
from ..i18n import say, t
from ..text import fmt_bytes, sig, text_table
from . import YOUR_MODEL, frame_slider, picker_models, picker_options
from .live import LiveWidget

GPU_GIB = (24, 40, 80, 141)  # e.g. RTX 4090 / L4, A100-40GB, A100/H100-80GB, H200
KV_DTYPES = tuple(n for n in DTYPES if n != "fp64")  # the explorer's KV-cache formats: fp32 down to int4


# ------------------------------------------------------------------------------------------ the budget

@dataclass(frozen=True)
class MemoryBudget:
    """Weights (in ``dtype``) + KV cache (in ``kv_dtype``) of ``batch`` concurrent requests of ``context`` tokens
    each."""

    model: str
    config: ModelConfig
    dtype: str
    context: int
    batch: int
    params: int  # lib.costs.param_count
    weight_bytes: int  # lib.costs.weight_bytes: weights in memory (stored), not what a step reads
    kv_bytes_per_token: int  # lib.costs.kv_bytes_per_token
    kv_bytes: int  # lib.costs.kv_cache_bytes(config, context, batch)
    memory_crossover_tokens: float  # lib.costs.kv_memory_crossover_tokens: batch x context where KV memory = weights
    kv_dtype: str  # the cache's number format (the weights': dtype)

    @property
    def total_bytes(self) -> int:
        return self.weight_bytes + self.kv_bytes

    @property
    def kv_share(self) -> float:
        """Fraction of the total that is KV cache."""
        return self.kv_bytes / self.total_bytes

    @property
    def memory_crossover_context(self) -> float:
        """Context length per request at which, with this batch, KV cache memory equals weight memory."""
        return self.memory_crossover_tokens / self.batch

    def max_requests(self, gpu_gib: float, context: int | None = None) -> int:
        """How many requests of ``context`` tokens (default: this budget's) fit next to the weights on a GPU
        of ``gpu_gib`` GiB. An upper bound: activations, the CUDA context and fragmentation are ignored."""
        context = self.context if context is None else checks.integer(context, "context", 1)
        free = gpu_gib * GiB - self.weight_bytes
        if free < 0:
            return 0
        return int(free // kv_cache_bytes(self.config, context, 1, self.kv_dtype))

    def gpu_rows(self, gpus=GPU_GIB) -> list[dict]:
        """Per GPU size: does this budget fit, what is left after the weights, how many requests fit."""
        return [{"gpu": f"{g} GiB", "fits": self.total_bytes <= g * GiB,
                 "free after weights": g * GiB - self.weight_bytes,
                 "requests that fit": self.max_requests(g)} for g in gpus]


def memory_budget(model="llama-2-7b", dtype="fp16", context: int = 4096, batch: int = 1,
                  kv_dtype=None) -> MemoryBudget:
    """The memory of serving ``batch`` requests of ``context`` tokens with ``model`` (a preset name or a
    ModelConfig; ``lib.presets.resolve_model``), weights in ``dtype`` and the KV cache in ``kv_dtype`` (names of
    ``lib.device.DTYPES``; None: the weights' dtype)."""
    name, config = resolve_model(model)
    dtype = dtype_name(dtype)
    kv_dtype = dtype if kv_dtype is None else dtype_name(kv_dtype)
    context = checks.integer(context, "context (tokens per request)", 1)
    batch = checks.integer(batch, "batch (concurrent requests)", 1)
    if context > config.max_seq_len:
        raise ValueError(f"context={context} is longer than {name}'s context window "
                         f"(max_seq_len={config.max_seq_len}); choose 1..{config.max_seq_len}")
    return MemoryBudget(model=name, config=config, dtype=dtype, context=context, batch=batch,
                        params=param_count(config), weight_bytes=weight_bytes(config, dtype),
                        kv_bytes_per_token=kv_bytes_per_token(config, kv_dtype),
                        kv_bytes=kv_cache_bytes(config, context, batch, kv_dtype),
                        memory_crossover_tokens=kv_memory_crossover_tokens(config, dtype, kv_dtype),
                        kv_dtype=kv_dtype)


def _formats(b: MemoryBudget) -> str:
    """"fp16", or "fp16 (KV cache in int8)" when the cache is stored in another format than the weights."""
    return b.dtype if b.kv_dtype == b.dtype else t("{dtype} (KV cache in {kv_dtype})", dtype=b.dtype, kv_dtype=b.kv_dtype)


def memory_table(b: MemoryBudget) -> str:
    """The budget as text: weights in memory, KV, total, the memory crossover, and the GPUs."""
    lines = [
        f"{b.model} in {_formats(b)}: {b.params:,} parameters; {b.batch} request(s) x {b.context:,} tokens",
        f"  weights in memory      {fmt_bytes(b.weight_bytes):>12}",
        f"  KV cache per token     {fmt_bytes(b.kv_bytes_per_token):>12}",
        f"  KV cache               {fmt_bytes(b.kv_bytes):>12}   ({b.kv_share:.1%} of the total)",
        f"  total                  {fmt_bytes(b.total_bytes):>12}",
        f"  KV cache memory = weight memory at batch x context = {b.memory_crossover_tokens:,.0f} tokens "
        f"(at batch {b.batch}: {b.memory_crossover_context:,.0f} tokens per request)",
        "",
    ]
    rows = [(r["gpu"], "yes" if r["fits"] else "no", fmt_bytes(r["free after weights"]) if r["free after weights"] >= 0
             else "weights do not fit", f"{r['requests that fit']:,}") for r in b.gpu_rows()]
    return say("\n".join(lines)) + text_table(rows, ["GPU", "fits?", "free after weights",
                                               f"requests of {b.context:,} tokens that fit"], translate=True)


# --------------------------------------------------------------------------------- KV bytes per token

def kv_per_token_rows(dtype="fp16", variants: bool = True, mla: bool = True) -> list[dict]:
    """KV-cache bytes per token for every preset: MHA, GQA, MLA (DeepSeek), and with ``variants`` the
    llama-2-7b shape turned into GQA-8 and MQA (hypothetical, to compare like with like)."""
    dtype = dtype_name(dtype)
    configs = [(name, c) for name, c in PRESETS.items()]
    if variants:
        base = PRESETS["llama-2-7b"]
        configs += [(t("llama-2-7b as GQA-8 (hypothetical)"), base.replace(n_kv_heads=8)),
                    (t("llama-2-7b as MQA (hypothetical)"), base.replace(n_kv_heads=1))]
    rows = []
    for name, c in configs:
        values = kv_values_per_token(c)
        rows.append({"model": name, "kind": c.attention_kind, "layers": c.n_layers,
                     "cached per layer": f"K,V x {c.n_kv_heads} of {c.n_heads} heads x {c.head_dim}",
                     "values": values, "bytes": kv_bytes_per_token(c, dtype),
                     "vs MHA": c.n_heads / c.n_kv_heads})
    if mla:
        for name, m in MLA_PRESETS.items():
            rows.append({"model": name, "kind": "MLA", "layers": m.n_layers,
                         "cached per layer": f"latent {m.kv_lora_rank} + rope key {m.qk_rope_head_dim}",
                         "values": kv_values_per_token(m), "bytes": kv_bytes_per_token(m, dtype),
                         "vs MHA": m.mha_values_per_layer / m.cached_values_per_layer})
    return rows


def kv_per_token_table(dtype="fp16", **kw) -> str:
    rows = kv_per_token_rows(dtype, **kw)
    return text_table([(r["model"], r["kind"], r["layers"], r["cached per layer"], f"{r['values']:,}", f"{r['bytes']:,}",
                        fmt_bytes(r["bytes"]), f"{r['vs MHA']:.1f}x") for r in rows],
                      ["model", "kind", "layers", "cached per token per layer", "values", f"bytes ({dtype_name(dtype)})",
                       "size", "smaller than MHA by"], translate=True)


KIND_HATCHES = {"MHA": "", "GQA": "//", "MQA": "xx", "MLA": ".."}  # every bar is KV cache; the hatch names the kind


def plot_kv_per_token(dtype="fp16", **kw):
    """Horizontal bars of KV bytes per token (a linear axis: a bar's length is the amount), in the KV-cache
    colour, hatched by attention kind and labelled with the amount and the kind."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows = kv_per_token_rows(dtype, **kw)[::-1]
    kv = style.colour("cached")
    fig, ax = plt.subplots(figsize=(style.FIGURE_WIDTH, 0.32 * len(rows) + 1.4))
    top = max(r["bytes"] for r in rows) / 1024
    bars = ax.barh([r["model"] for r in rows], [r["bytes"] / 1024 for r in rows], color=kv, edgecolor=style.INK,
                   linewidth=0.5)
    for bar, r in zip(bars, rows):
        bar.set_hatch(KIND_HATCHES[r["kind"]] or None)
        bar.set_hatchcolor(style.PAPER)
    for i, r in enumerate(rows):
        ax.text(r["bytes"] / 1024 + top * 0.01, i, f"{r['bytes'] / 1024:,.1f} KiB  {r['kind']}", va="center",
                fontsize=style.SMALL_SIZE)
    kinds = [k for k in KIND_HATCHES if any(r["kind"] == k for r in rows)]
    ax.legend(handles=[Patch(facecolor=kv, edgecolor=style.INK, linewidth=0.5, hatch=KIND_HATCHES[k] or None,
                             hatchcolor=style.PAPER, label=k) for k in kinds],
              title=t("KV cache of"), loc="lower right")
    ax.set_xlabel(t("KV cache per token, KiB ({dtype})", dtype=dtype_name(dtype)))
    ax.set_xlim(0, top * 1.3)  # room for the labels
    return fig


# ----------------------------------------------------------------------------- static view of a budget

def _contexts(config: ModelConfig, start: int = 128) -> list[int]:
    """Powers of two from ``start`` up to the context window (the window itself included)."""
    xs = [2 ** i for i in range(int(math.log2(start)), 30) if 2 ** i < config.max_seq_len]
    return xs + [config.max_seq_len]


def plot_memory(model="llama-2-7b", dtype="fp16", batches=(1, 8, 32), kv_dtype=None):
    """Total memory (weights + KV) against context length for a few batch sizes (batch sizes are not concepts: the
    neutral greys of ``style.category``, a marker and a line style each, and a direct label at the line's end), the
    weights as their own line (the "weights" concept), GPU sizes as reference lines (labelled at the left end,
    where the curves are low)."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    name, config = resolve_model(model)
    xs = _contexts(config)
    fig, ax = plt.subplots(figsize=(style.FIGURE_WIDTH, 3.8), layout="constrained")
    first = memory_budget(model, dtype, xs[0], 1, kv_dtype)
    w = first.weight_bytes / GiB
    weights, ref = style.concept("weights"), style.concept("reference")
    ax.axhline(w, color=weights.colour, ls=weights.linestyle, lw=2, label=t("weights in memory ({size} GiB)", size=f"{w:.2f}"))
    for i, b in enumerate(batches):
        ys = [memory_budget(model, dtype, x, b, kv_dtype).total_bytes / GiB for x in xs]
        look = style.category(i)
        ax.plot(xs, ys, color=look.colour, marker=look.marker, ls=look.linestyle, ms=5,
                label=t("weights + KV, batch {b}", b=b))
        ax.annotate(t("batch {b}", b=b), (xs[-1], ys[-1]), xytext=(6, 0), textcoords="offset points",
                    va="center", fontsize=style.SMALL_SIZE, color=style.INK)  # a direct label at the line's end
    for g in GPU_GIB:
        ax.axhline(g, color=ref.colour, ls=ref.linestyle, lw=0.8)
        ax.text(xs[0], g * 1.03, t("{g} GiB GPU", g=g), color=style.MUTED, fontsize=style.SMALL_SIZE, ha="left", va="bottom")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    from matplotlib.ticker import FixedLocator, NullFormatter

    plain = FuncFormatter(lambda v, _: f"{v:g}")  # 4096 and 40, not 2^12 and 4x10^1
    ax.xaxis.set_major_formatter(plain)
    ax.yaxis.set_major_locator(FixedLocator([5, 10, 20, 50, 100, 200, 500, 1000, 2000]))  # whole values only:
    ax.yaxis.set_major_formatter(plain)  # never the bare minor "2 5" of a short log axis
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(t("context length per request (tokens)"))
    ax.set_ylabel(t("GiB (log scale)"))
    ax.set_title(t("{name} in {formats}: weights + KV cache", name=name, formats=_formats(first)))
    ax.annotate(t("weights in memory ({size} GiB)", size=f"{w:.2f}"), (xs[-1], w), xytext=(0, -4),
                textcoords="offset points", ha="right", va="top", fontsize=style.SMALL_SIZE,
                color=style.text_colour("weights"))  # every line labelled where it is: no legend to look up
    ax.set_xlim(xs[0] / 1.15, xs[-1] * 1.6)  # room for the labels at the right ends
    ax.set_ylim(bottom=w / 1.4)  # and under the weights' line for its label
    return fig


# --------------------------------------------------------------------------- tier 2: plotly step-through

def memory_frames(model="llama-2-7b", dtype="fp16", batches=(1, 2, 4, 8, 16, 32, 64, 128)) -> list[dict]:
    """Per batch size: the KV and total GiB at each context length (5 significant digits) and the
    context per request where KV cache memory equals weight memory."""
    name, config = resolve_model(model)
    xs = _contexts(config)
    frames = []
    for b in batches:
        budgets = [memory_budget(model, dtype, x, b) for x in xs]
        frames.append({"batch": b, "contexts": xs, "kv_gib": [sig(m.kv_bytes / GiB, 5) for m in budgets],
                       "total_gib": [sig(m.total_bytes / GiB, 5) for m in budgets],
                       "weights_gib": sig(budgets[0].weight_bytes / GiB, 5),
                       "memory_crossover_context": sig(budgets[0].memory_crossover_context, 5)})
    return frames


def memory_figure(model="llama-2-7b", dtype="fp16", batches=(1, 2, 4, 8, 16, 32, 64, 128)):
    """Weights, KV cache and total against context length; a slider picks the batch size (number of
    concurrent requests); GPU sizes as dashed lines; a dotted line where KV cache memory equals weight memory."""
    import plotly.graph_objects as go

    name, config = resolve_model(model)
    frames = memory_frames(model, dtype, batches)
    xs = frames[0]["contexts"]
    lo = min(min(f["kv_gib"]) for f in frames) / 1.5
    hi = max(max(max(f["total_gib"]) for f in frames), max(GPU_GIB)) * 1.5

    kv, weights, ref = style.concept("cached"), style.concept("weights"), style.concept("reference")

    def moving(f):  # traces 0..2 change with the batch size
        x_cross = f["memory_crossover_context"]
        inside = xs[0] <= x_cross <= xs[-1]
        return [go.Scatter(x=xs, y=f["kv_gib"], name=t("KV cache"), mode="lines+markers",
                           line=dict(color=kv.colour), marker=dict(symbol="circle")),
                go.Scatter(x=xs, y=f["total_gib"], name=t("weights + KV"), mode="lines+markers",
                           line=dict(color=style.INK, width=3), marker=dict(symbol="diamond")),
                go.Scatter(x=[x_cross, x_cross] if inside else [], y=[lo, hi] if inside else [],
                           name=t("KV memory = weight memory"), mode="lines", line=dict(color=kv.colour, dash="dot"))]

    fixed = [go.Scatter(x=xs, y=[frames[0]["weights_gib"]] * len(xs), name=t("weights in memory"), mode="lines",
                        line=dict(color=weights.colour, width=3, dash="longdash"))]
    fixed += [go.Scatter(x=[xs[0], xs[-1]], y=[g, g], name=t("{g} GiB GPU", g=g), mode="lines+text",
                         text=[f"{g} GiB", ""], textposition="top right", showlegend=False,
                         textfont=dict(color=style.MUTED), line=dict(color=ref.colour, dash="dash", width=1))
              for g in GPU_GIB]
    def title(f):  # the crossover is named only where the axis reaches it
        if f["memory_crossover_context"] <= xs[-1]:
            return t("{name} in {dtype}, batch {batch}: KV cache memory = weight memory at {n} tokens per request",
                     name=name, dtype=dtype_name(dtype), batch=f['batch'], n=f"{f['memory_crossover_context']:,.0f}")
        return t("{name} in {dtype}, batch {batch}: at {n} tokens (the whole window) the KV cache is {share} of the "
                 "weights' memory", name=name, dtype=dtype_name(dtype), batch=f['batch'], n=f"{xs[-1]:,}",
                 share=f"{f['kv_gib'][-1] / f['weights_gib']:.0%}")
    fig = go.Figure(data=moving(frames[0]) + fixed,
                    frames=[go.Frame(name=str(f["batch"]), data=moving(f), traces=[0, 1, 2],
                                     layout=dict(title_text=title(f))) for f in frames])
    fig.update_layout(
        title_text=title(frames[0]), height=520, margin=dict(b=110),
        xaxis=dict(type="log", title=t("context length per request (tokens)"), tickvals=xs,
                   ticktext=[f"{x // 1024}k" if x >= 1024 else str(x) for x in xs]),
        yaxis=dict(type="log", title="GiB", range=[math.log10(lo), math.log10(hi)],
                   tickvals=[v for v in (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000)
                             if lo <= v <= hi]),  # whole values, never a bare minor "2 5"
        sliders=[frame_slider([f["batch"] for f in frames], t("concurrent requests: "), pad=dict(t=60))])
    return fig


# ------------------------------------------------------------------------------------ tier 3: live widget

def _bar_fill(concept: str) -> str:
    """CSS background of a budget bar's part: the concept's colour, striped for the weights (the second cue, so the
    two parts read apart without colour; the legend under the bars says the same in words)."""
    if concept == "over":  # what does not fit: the KV cache's colour, paled, past the GPU's box
        return f"repeating-linear-gradient(90deg,{style.colour('cached')} 0 4px,{style.PAPER} 4px 6px)"
    c = style.colour(concept)
    hatch = style.concept(concept).hatch  # the weights' level strokes, as the static bars draw them
    return f"{c};{style.hatch_css(hatch)}" if hatch else c


def _gpu_bar(b: MemoryBudget, row: dict, muted: str) -> str:
    """One GPU's bar: a box as wide as its memory holding the weights, then the KV cache; what does not fit runs
    on past the box, dashed, as long as it is (the bar is scaled to the larger of the GPU and the total)."""
    cap = float(row["gpu"].split()[0]) * GiB
    span = max(b.total_bytes, cap)
    w = min(b.weight_bytes, cap)
    kv = min(b.kv_bytes, cap - w)
    over = max(b.total_bytes - cap, 0.0)
    box = (f"<div style='width:{100 * cap / span:.1f}%;box-sizing:border-box;border:1px solid {muted};display:flex'>"
           f"<div style='width:{100 * w / cap:.1f}%;background:{_bar_fill('weights')}'></div>"
           f"<div style='width:{100 * kv / cap:.1f}%;background:{_bar_fill('cached')}'></div></div>")
    past = (f"<div style='width:{100 * over / span:.1f}%;box-sizing:border-box;background:{_bar_fill('over')};"
            f"border:1px dashed {style.colour('recomputed')};border-left:none'></div>" if over else "")
    return f"<div style='width:100%;min-width:160px;height:12px;display:flex'>{box}{past}</div>"


def budget_html(b: MemoryBudget) -> str:
    """The budget as HTML in one look: a table (proportional type, numbers right-aligned, colours from the
    JupyterLab theme), then one bar per GPU, scaled to the GPU: model weights (bluish green, striped) then
    KV cache (blue, solid), with a text legend."""
    ink, muted, border = style.css("ink"), style.css("muted"), style.css("border")
    cell = "padding:2px 10px 2px 0;border-bottom:1px solid " + border
    num = cell + ";text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap"
    rows = [(t("weights in memory"), fmt_bytes(b.weight_bytes)),
            (t("KV cache per token"), fmt_bytes(b.kv_bytes_per_token)),
            (t("KV cache ({batch} x {context} tokens)", batch=b.batch, context=f"{b.context:,}"),
             t("{size} ({share} of total)", size=fmt_bytes(b.kv_bytes), share=f"{b.kv_share:.1%}")),
            (t("total"), fmt_bytes(b.total_bytes)),
            (t("KV cache memory = weight memory at"),
             t("{tokens} tokens = {context} per request at batch {batch}", tokens=f"{b.memory_crossover_tokens:,.0f}",
               context=f"{b.memory_crossover_context:,.0f}", batch=b.batch))]
    model = t(b.model) if b.model == YOUR_MODEL else b.model  # a preset's name stays; "your model" is translated
    out = [f"<div style='color:{ink};font-size:1em;line-height:1.5'>"
           + t("<b>{model}</b> in {formats}, {params} parameters", model=html.escape(model),
               formats=html.escape(_formats(b)), params=f"{b.params:,}"),
           "<table style='border-collapse:collapse;margin:4px 0 8px 0'>"
           + "".join(f"<tr><td style='{cell}'>{html.escape(k)}</td><td style='{num}'>{html.escape(v)}</td></tr>"
                     for k, v in rows) + "</table>",
           f"<table style='border-collapse:collapse'><tr style='color:{muted}'><th style='{cell};text-align:left'>GPU"
           f"</th><th style='{cell};text-align:left'>{t('verdict')}</th><th style='{cell};text-align:right'>"
           f"{t('requests that fit')}</th><th style='{cell};text-align:left'>{t('memory: weights, KV cache, free')}"
           f"</th></tr>"]
    over_edge = style.colour("recomputed")
    for r in b.gpu_rows():
        out.append(f"<tr><td style='{num}'>{r['gpu']}</td><td style='{cell};white-space:nowrap'>"
                   f"{t('fits') if r['fits'] else t('does not fit')}</td><td style='{num}'>"
                   + t("{n} requests of {context} tokens fit next to the weights", n=f"{r['requests that fit']:,}",
                       context=f"{b.context:,}") + f"</td><td style='{cell};width:45%'>{_gpu_bar(b, r, muted)}</td></tr>")
    key = " ".join(f"<span style='display:inline-block;width:14px;height:10px;margin:0 4px 0 10px;"
                   f"border:1px {edge} {colour};background:{fill}'></span>{label}"
                   for fill, edge, colour, label in (
                       (_bar_fill("weights"), "solid", muted, t("model weights (striped)")),
                       (_bar_fill("cached"), "solid", muted, t("KV cache (solid)")),
                       ("transparent", "solid", muted, t("free")),
                       (_bar_fill("over"), "dashed", over_edge, t("past the GPU's memory (dashed)"))))
    out.append(f"</table><div style='color:{muted};font-size:0.92em;margin-top:4px'>{t('bars, left to right:')}{key}"
               f"</div></div>")
    return "".join(out)


class MemoryExplorer(LiveWidget):
    """Live memory calculator: model, weight dtype, KV-cache dtype, context length and batch size -> weights,
    KV, total, GPUs.

    Python API (no browser needed): ``set(model=..., dtype=..., kv_dtype=..., context=..., batch=...)`` (bad
    values raise a clear error and change nothing; ``kv_dtype`` None in the constructor: the weights' dtype), ``.budget`` (a MemoryBudget), ``.html`` (what the view shows),
    ``.last_update_ms``; display the explorer itself (``.widget`` is its ipywidgets box). Changing the model clamps the
    context to the new model's window; the constructor's ``context`` defaults to 4096 clamped so too. The
    constructor refuses what ``set`` refuses: a model the picker lacks, a batch past the slider (1..256)."""

    BATCH_MAX = 256  # the requests slider's range is 1..256

    def __init__(self, model="llama-2-7b", dtype="fp16", context: int | None = None, batch: int = 1,
                 kv_dtype=None):
        import ipywidgets as W

        self.models, model = picker_models(model, PRESETS)  # name -> ModelConfig; yours as "your model"
        if context is None:  # 4096, or the model's window when it is shorter (as set(model=...) clamps it)
            context = min(4096, self.models[model].max_seq_len)
        self.budget = self._fits_controls(self._budget(model, dtype, context, batch, kv_dtype))
        b = self.budget
        ctl = dict(style=style.control_style(), layout=style.control_layout())
        self.model_box = W.Dropdown(options=picker_options(self.models),
                                    value=b.model, description=t("model"), **ctl)
        self.dtype_box = W.Dropdown(options=list(DTYPES), value=b.dtype, description=t("weights"), **ctl)
        self.kv_dtype_box = W.Dropdown(options=list(KV_DTYPES), value=b.kv_dtype, description=t("KV cache"), **ctl)
        self.context_box = W.BoundedIntText(value=b.context, min=1, max=b.config.max_seq_len, description=t("context"),
                                            **ctl)
        self.batch_box = W.IntSlider(value=b.batch, min=1, max=self.BATCH_MAX, description=t("requests"), **ctl)
        self.view = W.HTML()
        for box, key in ((self.model_box, "model"), (self.dtype_box, "dtype"), (self.kv_dtype_box, "kv_dtype"),
                         (self.context_box, "context"), (self.batch_box, "batch")):
            box.observe(lambda ch, key=key: self._from_widget(key, ch["new"]), names="value")
        self.widget = self.box(style.grid(self.model_box, self.dtype_box, self.kv_dtype_box, self.context_box,
                                          self.batch_box, columns=3), self.view)
        self.last_update_ms = 0.0
        self.redraw()

    def _from_widget(self, key, value):
        if getattr(self.budget, key) != value:
            self.set(**{key: value})

    def set(self, model=None, dtype=None, context=None, batch=None, kv_dtype=None) -> MemoryBudget:
        t0 = time.perf_counter()
        b = self.budget
        model = b.model if model is None else model
        if not (isinstance(model, str) and model in self.models):
            models, model = picker_models(model, self.models)  # a name it lacks: picker_models says why
            if len(models) != len(self.models):
                raise ValueError(f"the picker holds {', '.join(self.models)}; a model of your own joins it when "
                                 f"the explorer is made: MemoryExplorer(model)")
        if context is None:  # a new model may have a shorter window: clamp the current context to it
            context = min(b.context, self.models[model].max_seq_len)
        nb = self._fits_controls(self._budget(model, b.dtype if dtype is None else dtype, context,
                                               b.batch if batch is None else batch,
                                               b.kv_dtype if kv_dtype is None else kv_dtype))
        self.budget = nb
        with self.context_box.hold_trait_notifications():
            self.context_box.max = nb.config.max_seq_len
        for box, v in ((self.model_box, nb.model), (self.dtype_box, nb.dtype), (self.kv_dtype_box, nb.kv_dtype),
                       (self.context_box, nb.context), (self.batch_box, nb.batch)):
            if box.value != v:
                box.value = v
        self.redraw()
        self.last_update_ms = (time.perf_counter() - t0) * 1e3
        return nb

    def _fits_controls(self, b: MemoryBudget) -> MemoryBudget:
        """``b`` if the controls can show it (a preset of the picker, a batch within the slider), else a
        ValueError: the explorer never shows other numbers than it computed (memory_budget takes any model
        and batch)."""
        if b.model not in self.models:
            raise ValueError(f"model={b.model!r} is not in the explorer's picker; choose one of: "
                             f"{', '.join(self.models)} (lib.widgets.memory.memory_budget takes any model)")
        checks.integer(b.batch, "batch (concurrent requests)", 1, self.BATCH_MAX,
                       allowed=f"an integer from 1 to {self.BATCH_MAX} (the requests slider's range)")
        checks.choice(b.kv_dtype, "kv_dtype (the KV cache's format)", KV_DTYPES)
        return b

    def _budget(self, name, dtype, context, batch, kv_dtype) -> MemoryBudget:
        """memory_budget of the picker's entry ``name`` (yours is named "your model", not "custom")."""
        b = memory_budget(self.models[name], dtype, context, batch, kv_dtype)
        return dataclasses.replace(b, model=name)

    def redraw(self):
        self.html = budget_html(self.budget)
        self.view.value = self.html
