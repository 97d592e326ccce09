"""The capacity explorer (notebook 13): how much KV cache vLLM gets on a GPU, and how many requests that holds.

Every number comes from ``lib.vllm_bridge.kv_capacity`` (``lib.kv_capacity``), the one home of vLLM's formula
(requested = ceil(total × gpu_memory_utilization), available = requested − weights − activations, num_blocks =
available // one block's bytes); the GPUs are ``lib.roofline.REFERENCE_MACHINES`` with a memory size, the models
``lib.presets.PRESETS``. This module only arranges them, in three tiers:

* ``capacity_table`` / ``plot_capacity`` (static: the memory bar at several utilizations);
* ``capacity_figure`` (plotly: a slider over ``gpu_memory_utilization``; survives export);
* ``CapacityExplorer`` (ipywidgets: GPU, model, KV dtype, block size, utilization, max_model_len, activations).

The memory bar splits the GPU's total into the weights, the activations reserve (what vLLM's profiling pass
measures; here a setting), the KV blocks vLLM allocates, and what is left free: the part ``gpu_memory_utilization``
does not request, plus less than one block of remainder.
"""
from __future__ import annotations

import dataclasses
import html
import time

from .. import checks
from ..costs import GiB
from ..presets import PRESETS
from ..roofline import REFERENCE_MACHINES
from ..text import fmt_bytes, sig, text_table
from ..vllm_bridge import KV_CACHE_DTYPES, kv_capacity
from . import YOUR_MODEL, check_controls, frame_slider, picker_models, picker_options, style
from ..i18n import colon, t
from .live import LiveWidget

GPUS = tuple(name for name, m in REFERENCE_MACHINES.items() if m.memory_gib)
BLOCK_SIZES = (8, 16, 32, 64, 128)
UTILIZATIONS = tuple(round(0.5 + 0.05 * i, 2) for i in range(10)) + (0.92, 0.95)  # the step-through's frames
UTILIZATIONS = tuple(sorted(set(UTILIZATIONS)))
ACTIVATION_GIB = (0, 1, 2, 4, 8, 16)
PARTS = ("weights", "activations reserve", "KV blocks", "free")
PART_CONCEPT = {"weights": "weights", "activations reserve": "activations", "KV blocks": "kv blocks", "free": "free"}


def memory_parts(cap) -> dict:
    """The GPU's total memory in the bar's four parts (bytes, they add up to the total): weights, activations
    reserve, KV blocks, free. When the weights do not fit, they fill the bar and the rest is 0."""
    total = cap.total_memory
    weights = min(cap.weights, total)
    act = min(cap.activation_peak + cap.non_torch + cap.cudagraph, total - weights)
    kv = cap.kv_bytes
    return {"weights": weights, "activations reserve": act, "KV blocks": kv, "free": total - weights - act - kv}


def capacity_summary(cap) -> dict:
    """What the explorer prints: blocks, tokens, full-length requests (vLLM's "maximum concurrency") and the
    reported KV cache size, from a ``KVCapacity``."""
    return {"blocks": cap.num_blocks, "usable blocks": cap.usable_blocks, "tokens": cap.tokens,
            "full-length requests": sig(cap.max_concurrency, 4), "reported tokens": cap.reported_tokens,
            "fits": cap.available > 0 and cap.num_blocks > 0}


def capacity_table(caps: list, label=lambda c: f"{c.gpu_memory_utilization:.2f}") -> str:
    """One row per ``KVCapacity``: the four parts of the memory bar, blocks, tokens, full-length requests."""
    rows = []
    for c in caps:
        p = memory_parts(c)
        rows.append([label(c), *(fmt_bytes(p[k]) for k in PARTS), f"{c.num_blocks:,}", f"{c.tokens:,}",
                     f"{c.max_concurrency:.2f}"])
    return text_table(rows, ["gpu_memory_utilization", *(t(k) for k in PARTS), t("blocks"), t("tokens"),
                             t("requests of max_model_len")])


def sweep(model="llama-3-8b", gpu="H100 SXM", utilizations=UTILIZATIONS, **settings) -> list:
    """``kv_capacity`` at each utilization, the other settings the same."""
    return [kv_capacity(model, gpu, u, **settings) for u in utilizations]


def plot_capacity(caps: list, title: str = ""):
    """Static: one horizontal memory bar per ``KVCapacity`` (e.g. per utilization), in GiB: weights (hatched),
    activations reserve (dotted), KV blocks, free; each labelled with its blocks and full-length requests."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(style.FIGURE_WIDTH, 0.34 * len(caps) + 1.6), layout="constrained")
    labels = [f"{c.gpu_memory_utilization:.2f}" for c in caps]
    left = [0.0] * len(caps)
    for part in PARTS:
        c = style.concept(PART_CONCEPT[part])
        widths = [memory_parts(cap)[part] / GiB for cap in caps]
        ax.barh(labels, widths, left=left, color=c.colour, hatch=c.hatch or None, edgecolor=style.INK, linewidth=0.5,
                label=t(part))
        left = [a + b for a, b in zip(left, widths)]
    for i, cap in enumerate(caps):
        ax.text(cap.total_memory / GiB * 1.01, i, t("{blocks} blocks, {r} requests", blocks=f"{cap.num_blocks:,}",
                                                   r=f"{cap.max_concurrency:.1f}"),
                va="center", fontsize=style.SMALL_SIZE)
    ax.set_xlim(0, caps[0].total_memory / GiB * 1.32)
    ax.set_xlabel(t("GiB of the GPU's {total}", total=fmt_bytes(caps[0].total_memory)))
    ax.set_ylabel("gpu_memory_utilization")
    ax.invert_yaxis()
    fig.legend(loc="outside upper center", ncols=4)
    if title:
        ax.set_title(title)
    return fig


# ------------------------------------------------------------------------------ tier 2: plotly step-through

def _bar_traces(cap) -> list:
    import plotly.graph_objects as go

    parts = memory_parts(cap)
    out = []
    for part in PARTS:
        c = style.concept(PART_CONCEPT[part])
        out.append(go.Bar(y=[""], x=[sig(parts[part] / GiB, 5)], orientation="h", name=t(part),
                          marker=dict(color=c.colour, line=dict(color=style.INK, width=0.5),
                                      pattern=dict(shape=style.plotly_pattern(PART_CONCEPT[part]))),
                          text=[fmt_bytes(parts[part]) if parts[part] >= 0.08 * cap.total_memory else ""],
                          textposition="inside", insidetextanchor="middle", textangle=0,
                          hovertext=[t(part) + colon() + fmt_bytes(parts[part])], hoverinfo="text"))
    return out


def capacity_headline(cap) -> str:
    return t("{model} on {total}, gpu_memory_utilization {u}: {blocks} blocks of {bs} tokens = {tokens} tokens; "
             "{r} requests of {len} tokens", model=cap.model, total=fmt_bytes(cap.total_memory),
             u=f"{cap.gpu_memory_utilization:.2f}", blocks=f"{cap.num_blocks:,}", bs=cap.block_size,
             tokens=f"{cap.tokens:,}", r=f"{cap.max_concurrency:.2f}", len=f"{cap.max_model_len:,}")


def capacity_figure(caps: list):
    """The memory bar, one plotly frame per ``KVCapacity`` (a slider over gpu_memory_utilization), the blocks,
    tokens and full-length requests in the title."""
    import plotly.graph_objects as go

    fig = go.Figure(data=_bar_traces(caps[0]),
                    frames=[go.Frame(name=f"{c.gpu_memory_utilization:.2f}", data=_bar_traces(c), traces=[0, 1, 2, 3],
                                     layout=dict(title_text=capacity_headline(c))) for c in caps])
    fig.update_layout(barmode="stack", title_text=capacity_headline(caps[0]), height=300, margin=dict(t=120, b=90),
                      legend=dict(traceorder="normal"),
                      xaxis=dict(title="GiB", range=[0, sig(caps[0].total_memory / GiB, 5)]),
                      sliders=[frame_slider([f"{c.gpu_memory_utilization:.2f}" for c in caps],
                                            "gpu_memory_utilization: ", pad=dict(t=40))])
    return fig


# ------------------------------------------------------------------------------------ tier 3: live widget

def capacity_html(cap) -> str:
    """The explorer's view: the headline numbers, the memory bar (four parts, each a fill + pattern + word), and
    the arithmetic from the total down to the blocks."""
    e = html.escape
    ink, muted = style.css("ink"), style.css("muted")
    parts = memory_parts(cap)
    bar = "".join(f'<div title="{e(t(p) + colon() + fmt_bytes(parts[p]))}" style="width:{100 * parts[p] / cap.total_memory:.2f}%;'
                  f'{style.chip_css(PART_CONCEPT[p])};border-width:0 1px 0 0"></div>' for p in PARTS if parts[p] > 0)
    key = " ".join(f'<span style="display:inline-block;width:1.4em;height:0.9em;margin:0 4px 0 10px;vertical-align:middle;'
                   f'{style.chip_css(PART_CONCEPT[p])}"></span>{e(t(p))} {e(fmt_bytes(parts[p]))}' for p in PARTS)
    big = "font-size:1.5em;font-weight:bold;font-variant-numeric:tabular-nums"
    if cap.num_blocks == 0:
        verdict = (f'<div style="border-left:6px solid {style.colour("recomputed")};padding:4px">'
                   + e(t("no KV block fits: the weights and the activations reserve take more than the {req} requested",
                         req=fmt_bytes(cap.requested))) + "</div>")
    else:
        verdict = ""
    numbers = "".join(f'<div style="min-width:9em"><div style="{big}">{v}</div><div style="color:{muted}">{e(k)}</div></div>'
                      for k, v in ((t("KV blocks"), f"{cap.num_blocks:,}"), (t("tokens"), f"{cap.tokens:,}"),
                                   (t("requests of {len} tokens", len=f"{cap.max_model_len:,}"),
                                    f"{cap.max_concurrency:.2f}")))
    cell = "padding:1px 10px 1px 0"
    num = cell + ";text-align:right;font-variant-numeric:tabular-nums"
    steps = [(t("total memory"), fmt_bytes(cap.total_memory)),
             (t("× {u} = requested", u=f"{cap.gpu_memory_utilization:.2f}"), fmt_bytes(cap.requested)),
             (t("− weights ({dtype})", dtype="bf16"), fmt_bytes(cap.weights)),
             (t("− activations reserve"), fmt_bytes(cap.activation_peak)),
             (t("= available for KV"), fmt_bytes(max(cap.available, 0))),
             (t("÷ one block ({bs} tokens, {dtype})", bs=cap.block_size, dtype=cap.kv_dtype), fmt_bytes(cap.block_bytes)),
             (t("= blocks (vLLM logs {n} tokens)", n=f"{cap.reported_tokens:,}"), f"{cap.num_blocks:,}")]
    arith = "".join(f"<tr><td style='{cell}'>{e(k)}</td><td style='{num}'>{e(v)}</td></tr>" for k, v in steps)
    return (f'<div style="font-family:sans-serif;color:{ink}"><div style="margin-bottom:6px"><b>'
            f"{e(cap.model)}</b> · {e(fmt_bytes(cap.total_memory))}</div>{verdict}"
            f'<div style="display:flex;gap:1em 2em;flex-wrap:wrap;margin-bottom:8px">{numbers}</div>'
            f'<div style="display:flex;width:100%;height:1.6em;border:1px solid {style.MUTED}">{bar}</div>'
            f'<div style="font-size:0.9em;margin:4px 0 8px 0">{key}</div>'
            f'<table style="border-collapse:collapse;font-size:0.9em">{arith}</table></div>')


class CapacityExplorer(LiveWidget):
    """Live: GPU, model, KV dtype, block size, gpu_memory_utilization, max_model_len and the activations reserve ->
    blocks, tokens, full-length requests and the memory bar, from ``lib.kv_capacity``.

    Python API (no browser needed): ``set(gpu=, model=, kv_cache_dtype=, block_size=, gpu_memory_utilization=,
    max_model_len=, activation_gib=)`` (bad values raise and change nothing; a new model clamps max_model_len to its
    window), ``.capacity`` (the ``KVCapacity`` shown), ``.html``, ``.last_update_ms``; display the explorer itself
    (``.widget`` is its ipywidgets box).
    ``model``: a ``PRESETS`` name, or a ``lib.ModelConfig`` / ``lib.MiniTransformer`` of your own (``lib.from_hf``),
    which joins the picker as "your model" (``lib.widgets.picker_models``)."""

    CONTROLS = ("gpu", "model", "kv_cache_dtype", "block_size", "gpu_memory_utilization", "max_model_len",
                "activation_gib")

    def __init__(self, model="llama-3-8b", gpu="H100 SXM", kv_cache_dtype="auto", block_size=16,
                 gpu_memory_utilization=0.92, max_model_len=None, activation_gib=2):
        import ipywidgets as W

        self.values = {}
        self.models, model = picker_models(model, PRESETS)  # name -> ModelConfig; yours as "your model"
        self.capacity = self._compute(dict(gpu=gpu, model=model, kv_cache_dtype=kv_cache_dtype, block_size=block_size,
                                           gpu_memory_utilization=gpu_memory_utilization,
                                           max_model_len=max_model_len, activation_gib=activation_gib))
        v = self.values
        look = dict(style=style.control_style(), layout=W.Layout(**style.control_layout()))
        self.boxes = {
            "gpu": W.Dropdown(options=list(GPUS), value=v["gpu"], description="GPU", **look),
            "model": W.Dropdown(options=picker_options(self.models),
                                value=v["model"], description=t("model"), **look),
            "kv_cache_dtype": W.Dropdown(options=list(KV_CACHE_DTYPES), value=v["kv_cache_dtype"],
                                         description=t("KV dtype"), **look),
            "block_size": W.Dropdown(options=list(BLOCK_SIZES), value=v["block_size"], description=t("block size"),
                                     **look),
            "gpu_memory_utilization": W.FloatSlider(value=v["gpu_memory_utilization"], min=0.3, max=0.98, step=0.01,
                                                    description="gpu_memory_utilization", readout_format=".2f",
                                                    continuous_update=False, **look),
            "max_model_len": W.BoundedIntText(value=v["max_model_len"], min=1, max=self._window(v["model"]),
                                              description="max_model_len", **look),
            "activation_gib": W.SelectionSlider(options=list(ACTIVATION_GIB), value=v["activation_gib"],
                                                description=t("activations reserve (GiB)"), continuous_update=False,
                                                **look),
        }
        self.view = W.HTML()
        for key, box in self.boxes.items():
            box.observe(lambda ch, key=key: self._from_widget(key, ch["new"]), names="value")
        self.widget = self.box(style.grid(*self.boxes.values(), columns=3), self.view)
        self.last_update_ms = 0.0
        self.redraw()

    def _window(self, model) -> int:
        return self.models[model].max_seq_len

    def _compute(self, v: dict):
        checks.choice(v["gpu"], "gpu", GPUS)
        checks.choice(v["model"], "model", tuple(self.models))
        checks.choice(v["block_size"], "block_size", BLOCK_SIZES)
        checks.choice(v["activation_gib"], "activation_gib", ACTIVATION_GIB)
        checks.number(v["gpu_memory_utilization"], "gpu_memory_utilization", 0.3, 0.98,
                      allowed="a fraction from 0.30 to 0.98 (the slider's range)")
        window = self._window(v["model"])
        length = window if v["max_model_len"] is None else v["max_model_len"]
        length = checks.integer(length, "max_model_len", 1, window,
                                allowed=f"an integer from 1 to {window:,} ({v['model']}'s context window)")
        v = {**v, "gpu_memory_utilization": round(float(v["gpu_memory_utilization"]), 2), "max_model_len": length}
        cap = kv_capacity(self.models[v["model"]], v["gpu"], v["gpu_memory_utilization"], v["block_size"],
                          v["kv_cache_dtype"],
                          dtype="bf16", activation_peak=v["activation_gib"] * GiB, max_model_len=length)
        if v["model"] == YOUR_MODEL:  # kv_capacity names an unnamed config "custom"; the picker says "your model"
            cap = dataclasses.replace(cap, model=t(YOUR_MODEL))
        self.values = v
        return cap

    def _from_widget(self, key, value):
        if self._quiet:
            return
        v = value if key != "gpu_memory_utilization" else round(value, 2)
        if self.values.get(key) != v:
            self.set(**{key: v})

    _quiet = False

    def set(self, **values):
        check_controls(values, self.CONTROLS)
        t0 = time.perf_counter()
        new = {**self.values, **values}
        if "model" in values and "max_model_len" not in values:  # a new model: its own window, or what fits in it
            new["max_model_len"] = min(self.values["max_model_len"], self._window(new["model"])) \
                if values["model"] == self.values["model"] else self._window(new["model"])
        self.capacity = self._compute(new)
        self._quiet = True
        try:
            self.boxes["max_model_len"].max = max(self._window(self.values["model"]), self.boxes["max_model_len"].value)
            for key, box in self.boxes.items():
                if box.value != self.values[key]:
                    box.value = self.values[key]
            self.boxes["max_model_len"].max = self._window(self.values["model"])
        finally:
            self._quiet = False
        self.redraw()
        self.last_update_ms = (time.perf_counter() - t0) * 1e3
        return self.capacity

    def state(self) -> dict:
        return dict(settings=dict(self.values), summary=capacity_summary(self.capacity),
                    parts=memory_parts(self.capacity), html=self.html)

    def redraw(self):
        self.html = capacity_html(self.capacity)
        self.view.value = self.html
