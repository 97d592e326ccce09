"""Where the KV cache sits in GPU memory while serving (notebook 05): a reference GPU's memory as vLLM divides it.

vLLM takes ``gpu_memory_utilization`` of the memory CUDA reports, subtracts the weights and what its profiling pass
measured (the activations reserve), and fills the rest with KV blocks *at start-up*, before any request arrives.
Requests then take blocks from that pool; what they do not hold stays allocated but empty. One bar per batch size
shows the split: weights, activations reserve, KV blocks holding the batch's tokens, empty KV blocks, and what vLLM
leaves free (the memory it did not request, plus less than one block of remainder).

Every number is ``lib.vllm_bridge.kv_capacity``'s (the one home of vLLM's formula), split into the bar's parts by
``lib.widgets.capacity.memory_parts``; the GPUs are ``lib.roofline.REFERENCE_MACHINES`` with their CUDA-reported
memory (79.22 GiB for the H100 SXM, 139.8 GiB for the H200 SXM). This module only arranges them:
``serving_memory`` (the numbers), ``serving_memory_table`` (text) and ``plot_serving_memory`` (the static bars).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from .. import checks
from ..costs import GiB
from ..text import fmt_bytes, text_table
from ..vllm_bridge import KVCapacity, kv_capacity
from . import style
from .capacity import memory_parts
from ..i18n import t

PARTS = ("weights", "activations reserve", "KV blocks holding tokens", "empty KV blocks", "free")
PART_CONCEPT = {"weights": "weights", "activations reserve": "activations", "KV blocks holding tokens": "kv blocks",
                "empty KV blocks": "free", "free": "free"}


@dataclass(frozen=True)
class ServingMemory:
    """The GPU's memory while ``batch`` requests of ``context`` tokens each are being served from vLLM's pool."""

    capacity: KVCapacity  # lib.kv_capacity: the pool vLLM allocates at start-up
    batch: int  # requests that want to run
    context: int  # tokens each request holds
    blocks_per_request: int  # ceil(context / block_size)
    running: int  # requests whose blocks fit in the pool (the rest wait)
    blocks_used: int  # running x blocks_per_request
    parts: dict  # bytes of each part of PARTS; they add up to the total

    @property
    def waiting(self) -> int:
        return self.batch - self.running

    @property
    def tokens_held(self) -> int:
        return self.running * self.context


def serving_memory(model="llama-3-8b", gpu="H100 SXM", batch: int = 1, context: int | None = None,
                   activation_gib: float = 2, gpu_memory_utilization: float = 0.92, block_size: int = 16,
                   kv_cache_dtype: str = "auto", dtype: str = "bf16") -> ServingMemory:
    """vLLM's split of ``gpu``'s memory for ``model`` (``lib.kv_capacity``), with ``batch`` requests of ``context``
    tokens (None: the model's window) holding blocks of the pool. ``activation_gib``: the activations reserve that
    vLLM measures at start-up (it depends on kernels and batch limits, not on shapes: here a setting, 2 GiB as in
    notebook 13). Requests that do not fit in the pool's usable blocks (all but vLLM's null block) wait."""
    batch = checks.integer(batch, "batch", 1)
    activation = checks.number(activation_gib, "activation_gib", minimum=0, maximum=1024,
                               allowed="GiB of activations reserve, from 0 to 1024")
    cap = kv_capacity(model, gpu, gpu_memory_utilization, block_size, kv_cache_dtype, dtype,
                      activation_peak=int(activation * GiB))
    context = cap.max_model_len if context is None else checks.integer(
        context, "context", 1, cap.max_model_len, allowed=f"tokens per request, from 1 to the window, "
                                                          f"{cap.max_model_len:,}")
    per_request = math.ceil(context / cap.block_size)
    running = min(batch, cap.usable_blocks // per_request)
    used = running * per_request
    bar = memory_parts(cap)  # weights, activations reserve, KV blocks, free: they add up to the total
    parts = {"weights": bar["weights"], "activations reserve": bar["activations reserve"],
             "KV blocks holding tokens": used * cap.block_bytes,
             "empty KV blocks": bar["KV blocks"] - used * cap.block_bytes, "free": bar["free"]}
    return ServingMemory(cap, batch, context, per_request, running, used, parts)


def serving_memory_table(memories: list[ServingMemory]) -> str:
    """One row per batch size: the bar's five parts, then the requests running and waiting."""
    rows = []
    for m in memories:
        rows.append([f"{m.batch:,}", *(fmt_bytes(m.parts[p]) for p in PARTS), f"{m.running:,}", f"{m.waiting:,}"])
    return text_table(rows, [t("requests"), *(t(p) for p in PARTS), t("running"), t("waiting")])


def _label(m: ServingMemory) -> str:
    if m.waiting:
        return t("{used} of {blocks} blocks: {running} requests run, {waiting} wait", used=f"{m.blocks_used:,}",
                 blocks=f"{m.capacity.num_blocks:,}", running=m.running, waiting=m.waiting)
    return t("{used} of {blocks} blocks hold {tokens} tokens", used=f"{m.blocks_used:,}",
             blocks=f"{m.capacity.num_blocks:,}", tokens=f"{m.tokens_held:,}")


def plot_serving_memory(model="llama-3-8b", gpu="H100 SXM", batches=(1, 16, 64), context: int | None = None,
                        activation_gib: float = 2, gpu_memory_utilization: float = 0.92, block_size: int = 16,
                        kv_cache_dtype: str = "auto", dtype: str = "bf16"):
    """Static: one horizontal bar of the GPU's memory (GiB) per batch size, split as vLLM splits it: weights
    (hatched), activations reserve (dotted), KV blocks holding the batch's tokens (blue), empty KV blocks and free
    memory (the light neutral; the pool's blocks have a heavy blue edge, the second cue, and a dashed line marks the
    ``gpu_memory_utilization`` share that vLLM requests). Each bar is labelled with the blocks it uses."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    batches = list(batches)
    if not batches:
        raise ValueError("batches must name at least one batch size, e.g. (1, 16, 64)")
    ms = [serving_memory(model, gpu, b, context, activation_gib, gpu_memory_utilization, block_size, kv_cache_dtype,
                         dtype) for b in batches]
    cap = ms[0].capacity
    total = cap.total_memory / GiB
    kv_colour = style.colour("kv blocks")
    fig, ax = plt.subplots(figsize=(style.FIGURE_WIDTH, 0.62 * len(ms) + 2.3), layout="constrained")
    labels = [t("batch {b}", b=m.batch) for m in ms]
    left = [0.0] * len(ms)
    for part in PARTS:
        c = style.concept(PART_CONCEPT[part])
        widths = [m.parts[part] / GiB for m in ms]
        edge = kv_colour if part in ("KV blocks holding tokens", "empty KV blocks") else style.INK
        ax.barh(labels, widths, left=left, height=0.6, color=c.colour, hatch=c.hatch or None, edgecolor=edge,
                linewidth=2 if edge == kv_colour else 0.5)
        left = [a + b for a, b in zip(left, widths)]
    ref = style.concept("reference")
    requested = cap.requested / GiB
    ax.axvline(requested, color=ref.colour, ls=ref.linestyle, lw=1)
    ax.text(requested, -0.4, t("{u} × {total} requested", u=f"{cap.gpu_memory_utilization:.2f}",
                                total=fmt_bytes(cap.total_memory)),
            ha="right", va="bottom", fontsize=style.SMALL_SIZE, color=style.MUTED)
    for i, m in enumerate(ms):
        ax.text(total * 1.01, i, _label(m), va="center", fontsize=style.SMALL_SIZE, color=style.INK)
    pool_start = (cap.weights + cap.activation_peak) / GiB
    ax.annotate("", xy=(pool_start, len(ms) - 0.55), xytext=(pool_start + cap.kv_bytes / GiB, len(ms) - 0.55),
                arrowprops=dict(arrowstyle="<->", color=kv_colour, lw=1.2))
    ax.text(pool_start + cap.kv_bytes / GiB / 2, len(ms) - 0.45,
            t("KV block pool, allocated at start-up: {blocks} blocks × {bs} tokens = {tokens} tokens",
              blocks=f"{cap.num_blocks:,}", bs=cap.block_size, tokens=f"{cap.tokens:,}"),
            ha="center", va="top", fontsize=style.SMALL_SIZE, color=style.text_colour("kv blocks"))
    ax.set_ylim(len(ms) + 0.05, -0.85)  # first batch on top; room for the pool's bracket under the bars
    ax.set_xlim(0, total * 1.52)  # room for the labels at the right
    ax.set_xticks([x for x in range(0, int(total) + 1, 20 if total > 100 else 10)])  # ticks under the bars only
    ax.set_xlabel(t("GiB of the {gpu}'s {total} (what CUDA reports)", gpu=gpu, total=fmt_bytes(cap.total_memory)))
    ax.set_title(t("{model} in {dtype}, {context} tokens per request: where the memory goes", model=cap.model,
                   dtype=dtype, context=f"{ms[0].context:,}"))
    handles = [Patch(facecolor=style.colour(PART_CONCEPT[p]), hatch=style.concept(PART_CONCEPT[p]).hatch or None,
                     edgecolor=kv_colour if p in ("KV blocks holding tokens", "empty KV blocks") else style.INK,
                     linewidth=2 if p in ("KV blocks holding tokens", "empty KV blocks") else 0.5, label=t(p))
               for p in PARTS if p != "free"]
    handles.append(Patch(facecolor=style.colour("free"), edgecolor=style.INK, linewidth=0.5,
                         label=t("free (not requested)")))
    fig.legend(handles=handles, loc="outside upper center", ncols=3)
    return fig
