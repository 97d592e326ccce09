"""Roofline plots: where prefill and decode sit, how the batch moves decode, when KV reads beat weight reads.

Every cost is ``lib.costs.step_cost`` (per operator, the one convention for "context": the positions the
newest token attends to, itself included); every machine is a ``lib.roofline.Machine`` (``DEFAULT_GPU``
unless told otherwise). Nothing here runs a model. Three tiers (CONTRIBUTING.md):
1. ``plot_roofline`` / ``plot_bytes_split`` / ``plot_operator_roofline`` (static matplotlib) and ``cost_table`` /
   ``operator_table`` / ``crossover_table`` / ``ridge_table`` / ``capacity_table`` / ``operator_group_table`` /
   ``quantized_weight_table`` (text tables).
2. ``plotly_batch_roofline``: a plotly figure with one precomputed frame per batch size and a slider.
3. ``RooflineExplorer``: live ipywidgets (model, dtype, machine, batch, context), drivable from Python
   through ``set(...)``; ``state``, ``drawn`` and ``summary`` say what is shown. Core widgets only: the figure
   is redrawn into an ``ipywidgets.Output`` (``lib.widgets.live``), no ``FigureWidget``.

A "point" is one costed pass: {"model", "phase", "batch", "context", "cost"} (+ "label"), from ``step_point``.
"""
from __future__ import annotations

import html
import math
import re
import time

from .. import costs
from . import style
from ..device import DTYPES as _DTYPE_TABLE
from ..device import dtype_name
from ..i18n import say, t
from ..text import SIG_DIGITS, display_width, fmt_bytes, fmt_sig, pad, sig
from ..trace import check_trace
from ..vllm_bridge import max_sequences
from .live import LiveWidget, plotly_output, show_plotly
from ..presets import MODEL_NAMES, resolve_model
from ..roofline import DEFAULT_GPU, REFERENCE_MACHINES, Machine, operator_groups, weight_products_ridge_batch
from . import YOUR_MODEL, check_controls, figure_and_axes, frame_slider, picker_models, picker_options

DEFAULT_MODELS = ("chat", "llama-2-7b", "llama-3-8b")  # the demo model, a 7B with MHA and an 8B with GQA
BATCHES = tuple(2 ** i for i in range(11))  # 1 .. 1024
CONTEXTS = tuple(2 ** i for i in range(18))  # 1 .. 131072
DTYPES = tuple(_DTYPE_TABLE)  # every number format of lib.device.DTYPES
# Colours and second cues from lib.widgets.style: prefill and decode are the course's "prefill" (computed) and "decode" (read
# from the cache) concepts, each with its marker, in every roofline; models are not concepts: they get no colour of
# their own, each point is labelled with its model instead; the roof and the ridge are reference lines.
PHASE_COLOURS = {ph: style.colour(ph) for ph in ("prefill", "decode")}
PHASE_MARKERS = {ph: style.concept(ph).marker for ph in ("prefill", "decode")}
PLOTLY_PHASE_SYMBOLS = {"prefill": "square", "decode": "circle"}  # the same shapes as PHASE_MARKERS
ROOF_COLOUR = style.concept("reference").colour
DIGITS = SIG_DIGITS  # significant digits of every float that goes into a figure or a table (lib.text.sig)
fmt = fmt_sig  # a number for a table: ints as they are, floats to DIGITS significant digits, no exponent



_MEASURED = re.compile(r"this machine \((\w+)\)\Z")  # lib.roofline.measure_machine's name for what it measured


def machine_label(machine) -> str:
    """A machine's name as a figure or control shows it: a reference GPU's name stays; "this machine (cpu)",
    which ``measure_machine`` names what it measured, in the notebook's language."""
    m = _MEASURED.match(machine.name)
    return t("this machine ({device})", device=m.group(1)) if m else machine.name

def human_bytes(n: float) -> str:
    """Bytes in decimal units (kB, MB, GB, TB = 10³ ...) with DIGITS significant digits (``lib.text.fmt_bytes``)."""
    return fmt_bytes(n, DIGITS, si=True)


def default_length(model) -> int:
    """Prompt length and decode context used when none is given: min(2048, max_seq_len // 2)."""
    return min(2048, costs.model_config(model).max_seq_len // 2)


def _name(model) -> str:
    return resolve_model(model)[0]


# ---------------------------------------------------------------------------------------------- the data

def step_point(model, cost: costs.StepCost, label: str | None = None) -> dict:
    """One costed pass as a point for the tables and plots: {"model", "phase", "batch", "context", "cost"}
    (+ "label"); ``model`` a name or a config (named as ``lib.presets.resolve_model`` names it)."""
    if not isinstance(cost, costs.StepCost):
        raise TypeError(f"step_point needs a lib.costs.StepCost (from step_cost, decode_cost, ...), got "
                        f"{type(cost).__name__}")
    point = {"model": model if isinstance(model, str) else _name(model), "phase": cost.phase, "batch": cost.batch,
             "context": cost.context, "cost": cost}
    if label is not None:
        point["label"] = label
    return point


def _models_and_batches(models, batches, fn: str) -> tuple[tuple, list]:
    """One model name or several, and the batch sizes, as (models, batches); neither may be empty."""
    models, batches = ((models,) if isinstance(models, str) else tuple(models)), list(batches)
    if not models or not batches:
        raise ValueError(f"{fn} needs at least one model and one batch size, got models={models!r}, "
                         f"batches={batches!r}")
    return models, batches


def roofline_points(models=DEFAULT_MODELS, dtype="bf16", batches=(1,), length: int | None = None) -> list[dict]:
    """For each model and batch size: its prefill of ``length`` tokens and one decode step at context
    ``length`` (None: ``default_length(model)``); points as ``step_point`` makes them."""
    models, batches = _models_and_batches(models, batches, "roofline_points")
    points = []
    for model in models:
        n = default_length(model) if length is None else length
        for b in batches:
            points.append(step_point(model, costs.prefill_cost(model, n, b, dtype)))
            points.append(step_point(model, costs.decode_cost(model, n, b, dtype)))
    return points


def trace_points(trace, model, dtype="fp32", name: str | None = None) -> list[dict]:
    """One point per step of a ``lib.generate(..., trace=True)`` run: each step costed from the tokens it fed
    and the positions its attention layers found already cached (both as the model counted them), so its
    context is the cache length after the step. "label" is "step N"."""
    check_trace(trace, steps=False)
    if not trace.use_cache:
        raise ValueError("trace_points needs a run with the KV cache (generate(..., use_cache=True)): "
                         "without one no step reads or writes a cache, and every step is a full recompute")
    return [step_point(name or model, costs.pass_cost(model, s.n_fed, s.kv_read[0], s.input_ids.shape[0], dtype),
                       label=f"step {s.step}") for s in trace]


def _text_table(rows: list[dict]) -> str:
    cols = [say(c) for c in rows[0]]  # the header and the words in the notebook's language (English rows: say)
    rows = [[say(v) if isinstance(v, str) else fmt(v) for v in r.values()] for r in rows]
    width = [max(display_width(c), *(display_width(r[j]) for r in rows)) for j, c in enumerate(cols)]
    line = lambda vals: "  ".join(pad(v, w, "right") for v, w in zip(vals, width)).rstrip()
    return "\n".join([line(cols), line("-" * w for w in width)] + [line(r) for r in rows])


def cost_rows(points: list[dict], machine: Machine | None = None, raw: bool = False) -> list[dict]:
    """Table rows: FLOPs, bytes split (weights read per step, KV read, KV write), intensity; with a machine
    also the bound, the attainable speed (TFLOP/s, or GFLOP/s for a machine under 10 TFLOP/s) and the
    roofline's lower bound on the pass's time. ``raw``: FLOPs and bytes as exact integers (for the demo
    models) instead of GFLOP and MB (10⁶ bytes)."""
    if not points:
        raise ValueError("cost_rows needs at least one point (see roofline_points, trace_points or step_point)")
    rows = []
    for p in points:
        c = p["cost"]
        row = {"model": p["model"], "phase": p["phase"], "batch": p["batch"], "context": p["context"]}
        if raw:
            row.update({"FLOPs": c.flops, "weights read B": c.streamed_weight_bytes, "KV read B": c.kv_read_bytes,
                        "KV write B": c.kv_write_bytes})
        else:
            row.update({"GFLOP": sig(c.flops / 1e9), "weights read MB": sig(c.streamed_weight_bytes / 1e6),
                        "KV read MB": sig(c.kv_read_bytes / 1e6), "KV write MB": sig(c.kv_write_bytes / 1e6)})
        row["FLOP/byte"] = sig(c.intensity)
        if machine is not None:
            scale, unit = _y_unit(machine)
            row.update({"bound": machine.bound(c.intensity), unit: sig(machine.attainable(c.intensity) / scale),
                        "time ms": sig(machine.seconds(c) * 1e3)})
        rows.append(row)
    return rows


def cost_table(points: list[dict], machine: Machine | None = None, raw: bool = False) -> str:
    """``cost_rows`` as an aligned text table ("context": the positions the newest token attends to)."""
    return _text_table(cost_rows(points, machine, raw))


def operator_rows(cost: costs.StepCost) -> list[dict]:
    """One row per operator of a pass (``lib.costs.OPERATORS``), then their total: FLOPs and the bytes each
    operator reads and writes, exact integers."""
    if not isinstance(cost, costs.StepCost):
        raise TypeError(f"operator_rows needs a lib.costs.StepCost, got {type(cost).__name__}")
    rows = [{"operator": name, "FLOPs": op.flops, "weights read B": op.streamed_weight_bytes,
             "KV read B": op.kv_read_bytes, "KV write B": op.kv_write_bytes}
            for name, op in cost.by_operator.items()]
    rows.append({"operator": "total", "FLOPs": cost.flops, "weights read B": cost.streamed_weight_bytes,
                 "KV read B": cost.kv_read_bytes, "KV write B": cost.kv_write_bytes})
    return rows


def operator_table(cost: costs.StepCost) -> str:
    """``operator_rows`` as an aligned text table."""
    return _text_table(operator_rows(cost))


def crossover_rows(models=DEFAULT_MODELS, dtype="bf16", batches=(1, 8, 64)) -> list[dict]:
    """Per model: weights read per step, KV bytes per token, and where a decode step reads as many KV bytes
    as weight bytes (``lib.costs.kv_read_crossover_tokens``): in cached tokens over the batch (batch ×
    context), then as the context per sequence for each batch size, in whole tokens (">max": past max_seq_len)."""
    rows = []
    for model in models:
        c = costs.model_config(model)
        n = costs.kv_read_crossover_tokens(c, dtype)
        row = {"model": _name(model), "max_seq_len": c.max_seq_len,
               "weights read MB": sig(costs.streamed_weight_bytes(c, dtype) / 1e6),
               "KV/token kB": sig(costs.kv_bytes_per_token(c, dtype) / 1e3),
               "KV read = weights read at batch×ctx": round(n)}
        for b in batches:
            t = round(n / b)
            row[f"ctx @B={b}"] = f"{t}{' >max' if t > c.max_seq_len else ''}"
        rows.append(row)
    return rows


def crossover_table(models=DEFAULT_MODELS, dtype="bf16", batches=(1, 8, 64)) -> str:
    return _text_table(crossover_rows(models, dtype, batches))


def ridge_rows(models, machine: Machine = DEFAULT_GPU, contexts=(128, 2048, 8192), dtype="bf16") -> list[dict]:
    """Per model and context: decode intensity at batch 1, its limit as batch → ∞, and the smallest batch
    that reaches the machine's ridge point ('never' when the limit is below it)."""
    rows = []
    for model in models:
        for t in contexts:
            b = costs.decode_batch_for_intensity(model, t, machine.ridge, dtype)
            rows.append({"model": _name(model), "context": t,
                         "FLOP/byte @B=1": sig(costs.decode_cost(model, t, 1, dtype).intensity),
                         "limit B→∞": sig(costs.decode_intensity_limit(model, t, dtype)),
                         "ridge": sig(machine.ridge), "batch to ridge": "never" if b is None else b})
    return rows


def ridge_table(models, machine: Machine = DEFAULT_GPU, contexts=(128, 2048, 8192), dtype="bf16") -> str:
    return _text_table(ridge_rows(models, machine, contexts, dtype))


def batch_that_fits(model, context: int, machine: Machine, dtype="bf16") -> int | None:
    """The most sequences of ``context`` tokens whose KV cache fits on ``machine``: vLLM's pool over the blocks one
    sequence needs (``lib.vllm_bridge.max_sequences``, weights in ``dtype``); None when it cannot be judged (a
    machine of unknown memory, a measured CPU; a dtype or model vLLM's arithmetic does not cover)."""
    if not machine.memory_gib:
        return None
    try:
        return max_sequences(model, context, int(machine.memory_gib * costs.GiB), dtype=dtype)
    except (ValueError, KeyError):
        return None


def capacity_rows(models, machine: Machine = DEFAULT_GPU, contexts=(512, 2048, 4096), dtype="bf16") -> list[dict]:
    """Per model and context, the largest decode batch whose KV cache fits on ``machine`` (``batch_that_fits``), the
    step's intensity at that batch against the ridge, and the batch the ridge would need ('never' when the
    batch → ∞ limit is below it): capacity caps the batch before the compute roof does."""
    if not machine.memory_gib:
        raise ValueError(f"capacity_rows needs a machine whose memory is known (a reference GPU: "
                         f"{', '.join(k for k, m in REFERENCE_MACHINES.items() if m.memory_gib)}), got {machine.name!r}")
    rows = []
    for model in models:
        for t in contexts:
            fits = batch_that_fits(model, t, machine, dtype)
            if fits is None:
                raise ValueError(f"capacity_rows cannot judge {_name(model)!r} in {dtype!r}: vLLM's arithmetic "
                                 f"(lib.vllm_bridge.kv_capacity) covers 16- and 32-bit weights")
            x = costs.decode_cost(model, t, fits, dtype).intensity if fits else 0.0
            ridge = costs.decode_batch_for_intensity(model, t, machine.ridge, dtype)
            rows.append({"model": _name(model), "context": t, "sequences that fit": fits,
                         "step FLOP/B at that batch": sig(x), "ridge": sig(machine.ridge),
                         "batch to ridge": "never" if ridge is None else ridge,
                         "bound": machine.bound(x).removesuffix("-bound") if fits else "does not start"})
    return rows


def capacity_table(models, machine: Machine = DEFAULT_GPU, contexts=(512, 2048, 4096), dtype="bf16") -> str:
    """``capacity_rows`` as an aligned text table."""
    return _text_table(capacity_rows(models, machine, contexts, dtype))


WEIGHT_DTYPES = ("bf16", "int8", "int4")  # 16-bit weights and the two weight-only quantizations the course counts


def quantized_weight_rows(model="llama-2-7b", machine: Machine = DEFAULT_GPU, context: int = 2048, batch: int = 1,
                          weight_dtypes=WEIGHT_DTYPES, kv_dtype="bf16") -> list[dict]:
    """One decode step per weight format (``weight_dtypes``; the first is the baseline), the KV cache kept in
    ``kv_dtype``: weights read, KV read, intensity, bound, the roofline's lower bound on the step's time and its
    speedup over the first row. Fewer bytes per weight move the decode point right and cut a memory-bound step's
    time, but only the weights shrink: the KV bytes stay, so the gain is below 2x (int8) and 4x (int4) of 16 bits.
    The FLOPs are the same in every row (the weights are dequantized and multiplied in 16 bits; that work and the
    kernels' real efficiency are not counted: an ideal bound)."""
    weight_dtypes = tuple(weight_dtypes)
    if not weight_dtypes:
        raise ValueError(f"weight_dtypes needs at least one number format, e.g. {WEIGHT_DTYPES}")
    steps = [costs.decode_cost(model, context, batch, w, kv_dtype=kv_dtype) for w in weight_dtypes]
    base = machine.seconds(steps[0])
    return [{"weights": dtype_name(w), "KV cache": dtype_name(kv_dtype),
             "weights read MB": sig(c.streamed_weight_bytes / 1e6), "KV read MB": sig(c.kv_read_bytes / 1e6),
             "FLOP/byte": sig(c.intensity), "bound": machine.bound(c.intensity),
             "time ms": sig(machine.seconds(c) * 1e3), "speedup": sig(base / machine.seconds(c))}
            for w, c in zip(weight_dtypes, steps)]


def quantized_weight_table(model="llama-2-7b", machine: Machine = DEFAULT_GPU, context: int = 2048, batch: int = 1,
                           weight_dtypes=WEIGHT_DTYPES, kv_dtype="bf16") -> str:
    """``quantized_weight_rows`` as an aligned text table."""
    return _text_table(quantized_weight_rows(model, machine, context, batch, weight_dtypes, kv_dtype))


def operator_group_rows(model, machine: Machine = DEFAULT_GPU, batches=(1, 16, 64, 256, 512), contexts=(128, 2048, 32768),
                        dtype="bf16") -> list[dict]:
    """One row per context and batch of a decode step of ``model``: the intensity of its weight products, of its
    attention and of the whole step (``lib.roofline.operator_groups``), each with its bound on ``machine``, and
    whether the batch's KV cache fits on it ("fits?", ``batch_that_fits``; no column when that cannot be judged)."""
    _, batches = _models_and_batches(model, batches, "operator_group_rows")
    if not list(contexts):
        raise ValueError("operator_group_rows needs at least one context")
    rows = []
    short = {"memory-bound": "memory", "compute-bound": "compute"}
    for t in contexts:
        for b in batches:
            cost = costs.decode_cost(model, t, b, dtype)
            g = {name: op.flops / op.bytes for name, op in operator_groups(cost).items()}
            rows.append({"model": _name(model), "context": t, "batch": b,
                         "weights FLOP/B": sig(g["weight products"]),
                         "weights": short[machine.bound(g["weight products"])],
                         "attention FLOP/B": sig(g["attention"]), "attention": short[machine.bound(g["attention"])],
                         "step FLOP/B": sig(cost.intensity), "step": short[machine.bound(cost.intensity)]})
            fits = batch_that_fits(model, t, machine, dtype)
            if fits is not None:  # the KV cache of this batch on the machine (vLLM's pool): yes / no
                rows[-1]["fits?"] = "yes" if b <= fits else "no"
    return rows


def operator_group_table(model, machine: Machine = DEFAULT_GPU, batches=(1, 16, 64, 256, 512),
                         contexts=(128, 2048, 32768), dtype="bf16") -> str:
    """``operator_group_rows`` as an aligned text table."""
    return _text_table(operator_group_rows(model, machine, batches, contexts, dtype))


GROUP_COLOURS = {g: style.colour(g) for g in ("weight products", "attention")}  # weights vs read-from-cache
GROUP_MARKERS = {g: style.concept(g).marker for g in ("weight products", "attention")}


def plot_operator_roofline(model="llama-2-7b", machine: Machine = DEFAULT_GPU, batches=(1, 4, 16, 64, 256, 1024),
                           contexts=(128, 2048, 32768), dtype="bf16", ax=None, title: str | None = None):
    """The roofline per operator group of a decode step of ``model``: the weight products (the weights' colour and
    plus marker, one per batch: they move right as the batch grows, whatever the context), the attention (the
    cache's blue circles, one per context: the same at every batch) and, faint, the whole step at each context
    (grey, joined over the batches: it stalls where the attention's bytes take over). Returns the figure."""
    _, batches = _models_and_batches(model, batches, "plot_operator_roofline")
    contexts = list(contexts)
    if not contexts:
        raise ValueError("plot_operator_roofline needs at least one context")
    fig, ax = figure_and_axes(ax, (style.FIGURE_WIDTH * 0.8, 4.5))
    scale, unit = _y_unit(machine)
    groups = {(t, b): operator_groups(costs.decode_cost(model, t, b, dtype)) for t in contexts for b in batches}
    steps = {(t, b): costs.decode_cost(model, t, b, dtype).intensity for t in contexts for b in batches}
    xw = [g["weight products"].flops / g["weight products"].bytes for (t, b), g in groups.items() if t == contexts[0]]
    xa = [groups[(t, batches[0])]["attention"].flops / groups[(t, batches[0])]["attention"].bytes for t in contexts]
    _roof_axes(ax, machine, [*xw, *xa, *steps.values()], t(" ridge {ridge}", ridge=f"{machine.ridge:.4g}"))
    ref = style.concept("reference")
    small = style.SMALL_SIZE
    for i, ctx in enumerate(contexts):
        x = [steps[(ctx, b)] for b in batches]
        ax.plot(x, [machine.attainable(v) / scale for v in x], color=ref.colour, lw=1, ls=ref.linestyle,
                marker=ref.marker, ms=5, alpha=0.7, label=t("whole step, per context") if i == 0 else None)
        ax.annotate(t("step, ctx {ctx}", ctx=ctx), (x[-1], machine.attainable(x[-1]) / scale), fontsize=small,
                    color=style.MUTED, xytext=(6, -2), textcoords="offset points", ha="left", va="top",
                    bbox=dict(fc=style.PAPER, ec="none", pad=0.5), zorder=4)  # on a card: no line strikes it
    weights, attention = "weight products", "attention"
    ax.scatter(xw, [machine.attainable(v) / scale for v in xw], color=GROUP_COLOURS[weights],
               marker=GROUP_MARKERS[weights], s=60, edgecolor=style.INK, linewidth=0.5, zorder=3,
               label=t("weight products (any context)"))
    for b, x in zip(batches, xw):
        ax.annotate(f"B={b}", (x, machine.attainable(x) / scale), fontsize=small, color=style.text_colour(weights),
                    xytext=(-4, 6), textcoords="offset points", ha="right")
    ax.scatter(xa, [machine.attainable(v) / scale for v in xa], color=GROUP_COLOURS[attention],
               marker=GROUP_MARKERS[attention], s=40, edgecolor=style.INK, linewidth=0.5, zorder=3,
               label=t("attention (any batch)"))
    ax.annotate(t("attention, ctx {contexts}", contexts=" / ".join(map(str, contexts))), (xa[-1], machine.attainable(xa[-1]) / scale),
                fontsize=small, color=style.text_colour(attention), xytext=(0, -12), textcoords="offset points",
                ha="left", va="top")  # under the slope: clear of the batch labels above it
    ax.legend(loc="upper left")
    c = costs.model_config(model)
    ax.set_title(title if title is not None else
                 t("{model} ({kind}, {q} query / {kv} KV heads), decode in {dtype} on {machine}\nweight products "
                   "compute-bound from batch {b}", model=_name(model), kind=c.attention_kind, q=c.n_heads,
                   kv=c.n_kv_heads, dtype=dtype_name(dtype), machine=machine_label(machine),
                   b=weight_products_ridge_batch(model, machine, dtype)))
    return fig


def roof_line(machine: Machine, x_min: float, x_max: float) -> tuple[list[float], list[float]]:
    """The roof as a polyline from intensity x_min to x_max (GFLOP/s): exact, since it is straight in log-log."""
    xs = [x_min] + ([machine.ridge] if x_min < machine.ridge < x_max else []) + [x_max]
    return xs, [machine.attainable(x) for x in xs]


def _x_range(intensities, machine) -> tuple[float, float]:
    lo = min([*intensities, machine.ridge]) / 4
    hi = max([*intensities, machine.ridge]) * 4
    return sig(lo, 2), sig(hi, 2)


def _log10(x: float) -> float:
    return round(math.log10(x), 4)


def _y_unit(machine) -> tuple[float, str]:
    return (1e3, "TFLOP/s") if machine.peak_gflops >= 1e4 else (1.0, "GFLOP/s")


def _roof_axes(ax, machine: Machine, intensities, ridge_label: str) -> None:
    """What every matplotlib roofline shares: the roof over ``intensities`` (reference colour, thick), the ridge
    (reference colour, dotted, labelled at the foot), log-log axes with room above the peak, and the axis titles."""
    scale, unit = _y_unit(machine)
    xs, ys = roof_line(machine, *_x_range(intensities, machine))
    ax.plot(xs, [y / scale for y in ys], color=ROOF_COLOUR, lw=2)
    ax.axvline(machine.ridge, color=ROOF_COLOUR, ls=":", lw=1)
    ax.text(machine.ridge, 0.02, ridge_label, fontsize=style.SMALL_SIZE, color=style.MUTED,
            transform=ax.get_xaxis_transform())
    ax.set_xscale("log")
    ax.set_yscale("log")
    style.no_minor_log_labels(ax)
    ax.set_ylim(top=machine.peak_gflops / scale * 20)  # room for the labels over the roof
    ax.set_xlabel(t("arithmetic intensity (FLOP / byte)"))
    ax.set_ylabel(t("attainable {unit}", unit=unit))


# --------------------------------------------------------------------------------- tier 1: matplotlib

def _clusters(points: list[dict], scale: float, machine: Machine) -> list[list[dict]]:
    """Points of one phase and batch that sit on (nearly) one spot, grouped: they get one label that names every
    model, not five "B=1" on top of each other. Points within 0.12 of a decade in intensity are one spot."""
    groups: list[list[dict]] = []
    for p in sorted(points, key=lambda p: (p["phase"], p["batch"], p["cost"].intensity)):
        last = groups[-1][-1] if groups else None
        if (last is not None and (last["phase"], last["batch"]) == (p["phase"], p["batch"])
                and abs(math.log10(p["cost"].intensity) - math.log10(last["cost"].intensity)) < 0.12):
            groups[-1].append(p)
        else:
            groups.append([p])
    return groups


def _cluster_label(group: list[dict]) -> str:
    """ "B=1: chat" or, for several models on one spot, "B=1: llama-2-7b, mistral-7b, …" (two names a line)."""
    if "label" in group[0]:
        return group[0]["label"]
    names = list(dict.fromkeys(_name(p["model"]) for p in group))
    lines = [", ".join(names[i:i + 2]) for i in range(0, len(names), 2)]
    return f"B={group[0]['batch']}: " + ",\n".join(lines)


def points_that_do_not_fit(points: list[dict], machine: Machine) -> set:
    """The ids of ``points`` whose batch of sequences at their context needs more KV cache than vLLM's pool on
    ``machine`` holds (``lib.vllm_bridge.max_sequences``); none when the machine's memory is not known (a measured
    CPU) or a point's model is not one lib knows the weights of."""
    out, limits = set(), {}
    for p in points:
        key = (p["model"], p["context"], p["cost"].dtype)
        if key not in limits:
            limits[key] = batch_that_fits(p["model"], p["context"], machine, p["cost"].dtype)
        if limits[key] is not None and p["batch"] > limits[key]:
            out.add(id(p))
    return out


def plot_roofline(points: list[dict], machine: Machine = DEFAULT_GPU, ax=None, title: str | None = None,
                  annotate: bool = True):
    """Log-log roofline of ``machine`` with each point at (intensity, attainable): prefill the course's "prefill"
    concept (orange squares), decode its "decode" concept (blue circles), the same in every panel; models are not
    concepts, so they get no colour: each point is labelled with its models and batch ("B=64: llama-2-7b"), points
    on one spot share one label (or a point's own "label"). Returns the figure."""
    from matplotlib.lines import Line2D

    if not points:
        raise ValueError("plot_roofline needs at least one point (see roofline_points)")
    fig, ax = figure_and_axes(ax, (style.FIGURE_WIDTH * 0.9, 4.5))
    scale, unit = _y_unit(machine)
    _roof_axes(ax, machine, [p["cost"].intensity for p in points], t(" ridge {ridge} FLOP/byte", ridge=f"{machine.ridge:.4g}"))
    too_big = points_that_do_not_fit(points, machine)
    for p in points:
        x = p["cost"].intensity
        hollow = id(p) in too_big  # its batch's KV cache does not fit in the machine's memory: drawn open
        ax.scatter([x], [machine.attainable(x) / scale], marker=PHASE_MARKERS[p["phase"]], s=46, zorder=3,
                   color=style.PAPER if hollow else PHASE_COLOURS[p["phase"]],
                   edgecolor=PHASE_COLOURS[p["phase"]] if hollow else style.INK, linewidth=1.4 if hollow else 0.6)
    if annotate:  # on the slope: below-right (decode) or above-left (prefill); on the flat roof: above, centred;
        # neighbours along the roof take three heights in turn, so their labels never overprint
        groups = sorted(_clusters(points, scale, machine), key=lambda g: g[0]["cost"].intensity)
        below: dict = {}  # per row of labels (roof / slope-decode / slope-prefill): the lines stacked so far
        for group in groups:
            x = 10 ** (sum(math.log10(p["cost"].intensity) for p in group) / len(group))
            y = machine.attainable(x) / scale
            row = "roof" if x > machine.ridge * 1.3 else group[0]["phase"]
            label = _cluster_label(group)
            k, lines = below.get(row, (0, 0))
            lines = 0 if k % 3 == 0 else lines  # every third label starts next to its point again
            below[row] = (k + 1, lines + label.count("\n") + 1)
            lift = 6 + 1.2 * style.SMALL_SIZE * lines
            if row == "roof":
                xy, ha, va = (0, lift), "center", "bottom"
            elif row == "decode":
                xy, ha, va = (7, -lift), "left", "top"
            else:
                xy, ha, va = (-7, lift), "right", "bottom"
            ax.annotate(label, (x, y), fontsize=style.SMALL_SIZE, color=style.INK, xytext=xy,
                        textcoords="offset points", ha=ha, va=va, linespacing=1.0)
    phases = list(dict.fromkeys(p["phase"] for p in points))
    handles = [Line2D([], [], ls="", marker=PHASE_MARKERS[ph], color=PHASE_COLOURS[ph], markeredgecolor=style.INK,
                      ms=8, label=t(ph)) for ph in phases]
    if too_big:
        handles.append(Line2D([], [], ls="", marker="o", color=style.PAPER, markeredgecolor=style.MUTED, ms=8,
                              markeredgewidth=1.4, label=t("open: its KV cache does not fit")))
    ax.legend(handles=handles, loc="best")  # where no line or point is: below the roof on a GPU, above it on a CPU
    lengths = sorted({p["context"] for p in points})
    ax.set_title(title if title is not None else
                 t("{machine}: peak {peak} {unit} ({mdtype}), {bw} GB/s; points in {dtype}, prompt = context = "
                   "{lengths}", machine=machine_label(machine), peak=f"{machine.peak_gflops / scale:.4g}", unit=unit,
                   mdtype=machine.dtype, bw=f"{machine.bandwidth_gbs:.4g}", dtype=points[0]['cost'].dtype,
                   lengths=", ".join(map(str, lengths))), loc="left")
    return fig


def plot_bytes_split(model="llama-2-7b", dtype="bf16", batches=(1, 8, 64), contexts=None, ax=None):
    """Bytes one decode step reads, against its context: the weights read per step (flat) and the KV cache for
    each batch size (rising, ``lib.costs.decode_cost``), with a dot where KV reads equal the weights read
    (``lib.costs.kv_read_crossover_tokens`` / batch) and a dotted line at max_seq_len."""
    c = costs.model_config(model)
    contexts = [t for t in CONTEXTS if t <= 4 * c.max_seq_len] if contexts is None else list(contexts)
    if not contexts:
        raise ValueError("plot_bytes_split needs at least one context length")
    fig, ax = figure_and_axes(ax, (style.FIGURE_WIDTH, 4))
    w = costs.streamed_weight_bytes(c, dtype) / 1e9
    weights, ref = style.concept("weights"), style.concept("reference")
    ax.plot(contexts, [w] * len(contexts), color=weights.colour, ls=weights.linestyle, lw=2,
            label=t("weights read per step ({size} GB)", size=f"{w:.4g}"))
    n = costs.kv_read_crossover_tokens(c, dtype)
    # every KV line is the cache's colour; the batches are told apart by line style, marker and label
    kv = style.concept("cached")
    styles = [("-", "o"), ("--", "s"), (":", "D"), ("-.", "^"), ((0, (5, 1)), "v")]
    for i, b in enumerate(batches):
        ls, marker = styles[i % len(styles)]
        ys = [costs.decode_cost(c, t, b, dtype).kv_read_bytes / 1e9 for t in contexts]
        ax.plot(contexts, ys, color=kv.colour, ls=ls, marker=marker, ms=4, markevery=max(len(contexts) // 6, 1),
                label=t("KV read, batch {b}", b=b))
        ax.annotate(t("batch {b}", b=b), (contexts[-1], ys[-1]), fontsize=style.SMALL_SIZE,
                    color=style.text_colour("cached"), xytext=(4, 0), textcoords="offset points", va="center")
        ctx = n / b  # the context per sequence at which KV reads equal the weights read
        if contexts[0] <= ctx <= contexts[-1]:
            ax.scatter([ctx], [w], color=kv.colour, marker=marker, edgecolor=style.INK, linewidth=0.5, zorder=3)
            ax.annotate(f"{ctx:,.0f}", (ctx, w), fontsize=style.SMALL_SIZE, xytext=(4, -10), textcoords="offset points")
    ax.axvline(c.max_seq_len, color=ref.colour, ls=":", lw=1)
    ax.text(c.max_seq_len, 0.98, f"max_seq_len {c.max_seq_len} ", fontsize=style.SMALL_SIZE, color=style.MUTED,
            transform=ax.get_xaxis_transform(), va="top", ha="right")  # top left of it: the lower right is the legend's
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    style.no_minor_log_labels(ax)
    ax.set_xlabel(t("context per sequence (positions the new token attends to)"))
    ax.set_ylabel(t("GB read per decode step"))
    ax.set_title(t("{model} in {dtype}: weights read vs KV-cache reads per decode step", model=_name(model),
                   dtype=dtype_name(dtype)))
    style.place_legend(ax, loc="lower right")  # under the lines' ends, clear of them
    return fig


# ------------------------------------------------------------------------------------- tier 2: plotly

def _contexts_per_model(models, contexts) -> dict:
    """{model: [contexts]} from ``contexts``: None (``default_length`` of each model), one list for every model,
    or {model: list}; every model needs at least one."""
    if contexts is None:
        ctx = {m: [default_length(m)] for m in models}
    elif isinstance(contexts, dict):
        missing = [m for m in models if m not in contexts]
        if missing:
            raise ValueError(f"contexts has no entry for {missing}; give a list of contexts per model")
        ctx = {m: list(contexts[m]) for m in models}
    else:
        ctx = {m: list(contexts) for m in models}
    if not all(ctx.values()):
        raise ValueError(f"every model needs at least one context, got {ctx}")
    return ctx


def _y(machine: Machine, x: float) -> float:
    """The roof's height at intensity ``x`` in the unit of the y axis (``_y_unit``)."""
    return sig(machine.attainable(x) / _y_unit(machine)[0])


def _spot_labels(ctx: dict, b: int, dtype) -> dict:
    """(model, context) -> the text by that decode point at batch ``b``: points on one spot (within 0.15 of a
    decade) share one label, written by the first of them, that names every model and context there."""
    spots: list = []
    for m, contexts in ctx.items():
        for n in contexts:
            x = costs.decode_cost(m, n, b, dtype).intensity
            spot = next((s for s in spots if abs(math.log10(s[0]) - math.log10(x)) < 0.15), None)
            if spot is None:
                spots.append((x, [(m, n)]))
            else:
                spot[1].append((m, n))
    out = {}
    for _, members in spots:
        text = "<br>".join(f"{_name(m)}, " + t("ctx {n}", n=n) for m, n in members)
        out.update({key: (text if k == 0 else "") for k, key in enumerate(members)})
    return out


def _decode_trace(go, m, contexts, b: int, machine: Machine, dtype, named: dict):
    """Model ``m``'s decode points at batch ``b``, one per context, labelled by ``named`` (``_spot_labels``)."""
    cs = [costs.decode_cost(m, n, b, dtype) for n in contexts]
    xs = [sig(c.intensity) for c in cs]
    return go.Scatter(x=xs, y=[_y(machine, x) for x in xs], mode="markers+text",
                      name=t("{model} decode", model=_name(m)),
                      marker=dict(size=11, color=PHASE_COLOURS["decode"],
                                  symbol=PLOTLY_PHASE_SYMBOLS["decode"], line=dict(color=style.INK, width=0.8)),
                      # each spot names its models and contexts once, under and right of it
                      text=[named[(m, n)] for n in contexts], textposition="bottom right",
                      hovertext=[t("{model} decode, batch {b}, context {n}: {x} FLOP/B, {bound}, KV reads {share}% "
                                   "of bytes", model=_name(m), b=b, n=n, x=x, bound=t(machine.bound(x)),
                                   share=sig(100 * c.kv_read_share, 3))
                                 for n, x, c in zip(contexts, xs, cs)], hoverinfo="text")


def _still_traces(go, ctx: dict, machine: Machine, dtype) -> tuple[list, list, list]:
    """``(limits, prefills, xs)``: each model's batch → ∞ decode points (open circles) and its prefill point
    (batch 1, prompt = its first context), which no batch moves, and the intensities the x axis must show."""
    limits, prefills, every_x = [], [], []
    for m, contexts in ctx.items():
        lx = [sig(costs.decode_intensity_limit(m, n, dtype)) for n in contexts]
        limits.append(go.Scatter(x=lx, y=[_y(machine, x) for x in lx], mode="markers",
                                 name=t("{model} batch→∞", model=_name(m)),
                                 marker=dict(size=11, symbol="circle-open", color=PHASE_COLOURS["decode"],
                                             line=dict(width=2)), hoverinfo="text",
                                 hovertext=[t("{model} decode at context {n}, batch → ∞: {x} FLOP/B", model=_name(m),
                                              n=n, x=x) for n, x in zip(contexts, lx)]))
        px = sig(costs.prefill_cost(m, contexts[0], 1, dtype).intensity)
        prefills.append(go.Scatter(x=[px], y=[_y(machine, px)], mode="markers",
                                   name=t("{model} prefill", model=_name(m)),
                                   marker=dict(size=12, symbol=PLOTLY_PHASE_SYMBOLS["prefill"],
                                               color=PHASE_COLOURS["prefill"], line=dict(color=style.INK, width=0.8)),
                                   hoverinfo="text",
                                   hovertext=[t("{model} prefill of {n} tokens: {x} FLOP/B, {bound}", model=_name(m),
                                                n=contexts[0], x=px, bound=t(machine.bound(px)))]))
        every_x += lx + [px, costs.decode_cost(m, contexts[-1], 1, dtype).intensity]
    return limits, prefills, every_x


def _batch_title(machine: Machine, dtype, b: int) -> str:
    """The title at batch ``b``, with the key in its second line: no legend to sit over the title or the points."""
    key = (f'<span style="color:{style.text_colour("decode")}">●</span> ' + t("decode") + "   "
           f'<span style="color:{style.text_colour("decode")}">○</span> ' + t("decode, batch → ∞") + "   "
           f'<span style="color:{style.text_colour("prefill")}">■</span> ' + t("prefill (batch 1)"))
    return t("{machine} roofline ({dtype}): decode with batch {b}", machine=machine_label(machine), dtype=dtype,
             b=b) + "<br><span style='font-size:" + str(style.PLOTLY_SMALL) + "px'>" + key + "</span>"


def plotly_batch_roofline(models=DEFAULT_MODELS, machine: Machine = DEFAULT_GPU, dtype="bf16",
                          contexts=None, batches=BATCHES, start: int = 1):
    """A plotly roofline with a slider over the batch size: each model's decode steps (one point per
    context) slide up the bandwidth slope as the batch grows, toward their batch → ∞ limits (open
    circles); prefill points (batch 1, prompt = the first context) stay put. One frame per batch size.
    ``contexts``: None (``default_length`` of each model), one list for every model, or {model: list}."""
    import plotly.graph_objects as go

    models, batches = _models_and_batches(models, batches, "plotly_batch_roofline")
    if start not in batches:
        raise ValueError(f"start={start!r} is not one of the batch sizes {batches}")
    ctx = _contexts_per_model(models, contexts)
    scale, unit = _y_unit(machine)
    limits, prefills, every_x = _still_traces(go, ctx, machine, dtype)
    x_lo, x_hi = _x_range(every_x, machine)
    rx, ry = roof_line(machine, x_lo, x_hi)
    roof = go.Scatter(x=[sig(x) for x in rx], y=[sig(v / scale) for v in ry], mode="lines", name=t("roof"),
                      line=dict(color=ROOF_COLOUR, width=3), hoverinfo="skip")

    def decode(b):  # the traces a batch size moves: every model's decode points
        named = _spot_labels(ctx, b, dtype)
        return [_decode_trace(go, m, ctx[m], b, machine, dtype, named) for m in models]

    fig = go.Figure(data=[*decode(start), roof, *limits, *prefills])
    fig.frames = [go.Frame(name=str(b), data=decode(b), traces=list(range(len(models))),
                           layout=dict(title_text=_batch_title(machine, dtype, b))) for b in batches]
    fig.add_vline(x=sig(machine.ridge), line=dict(color=ROOF_COLOUR, dash="dot", width=1))
    fig.update_layout(
        title_text=_batch_title(machine, dtype, start), height=540, showlegend=False, margin=dict(t=100),
        xaxis=style.plotly_log_axis(title=t("arithmetic intensity (FLOP / byte)"), range=[_log10(x_lo), _log10(x_hi)]),
        yaxis=style.plotly_log_axis(title=t("attainable {unit}", unit=unit),
                                    range=[_log10(_y(machine, x_lo) / 2), _log10(machine.peak_gflops / scale * 3)]),
        sliders=[frame_slider(batches, t("batch: "), batches.index(start), pad=dict(t=40))])
    return fig


# ------------------------------------------------------------------------------- tier 3: live widgets

class RooflineExplorer(LiveWidget):
    """Tier 3: pick a model, dtype, machine, batch size and context; see where prefill and decode sit.

    Drive it from Python with ``set(model=..., dtype=..., machine=..., batch=..., context=...)``, which
    changes the controls as a user would and redraws once. ``state`` holds the controls and the computed
    numbers, ``drawn`` the plotted points ({trace name: (xs, ys)}), ``summary`` the text under the plot,
    ``last_update_seconds`` the Python time of the last redraw. ``figure`` is a plain plotly ``Figure`` changed
    in place; every redraw shows a fresh copy of it in ``output``, an ``ipywidgets.Output``.
    """

    CONTROLS = ("model", "dtype", "machine", "batch", "context")
    X_RANGE = (0.1, 1e6)  # FLOP/byte, fixed so the axes never jump while sliding

    def __init__(self, model="llama-3-8b", dtype="bf16", batch=1, context=2048, machine=DEFAULT_GPU.name,
                 machines=()):
        import ipywidgets as W
        import plotly.graph_objects as go

        self.machines = dict(REFERENCE_MACHINES)
        for m in machines:
            if not isinstance(m, Machine):
                raise TypeError(f"machines must hold lib.roofline.Machine objects (e.g. from measure_machine()), "
                                f"got {type(m).__name__}")
            self.machines[m.name] = m
        # name -> config; a model of your own (a lib.ModelConfig or lib.from_hf's model) joins as "your model"
        self._models, model = picker_models(model, {n: costs.model_config(n) for n in MODEL_NAMES})
        self._options = {"model": tuple(self._models), "dtype": DTYPES, "machine": tuple(self.machines),
                         "batch": BATCHES, "context": CONTEXTS}
        values = self._check(model=model, dtype=dtype, machine=machine, batch=batch, context=context)
        ctl = dict(style=style.control_style(), layout=style.control_layout())
        self.controls = {
            "model": W.Dropdown(options=picker_options(self._models),
                                value=values["model"], description=t("model"), **ctl),
            "dtype": W.Dropdown(options=DTYPES, value=values["dtype"], description="dtype", **ctl),
            "machine": W.Dropdown(options=[(machine_label(m), k) for k, m in self.machines.items()],
                                  value=values["machine"], description=t("machine"),
                                  **ctl),
            "batch": W.SelectionSlider(options=BATCHES, value=values["batch"], description=t("batch"), **ctl),
            "context": W.SelectionSlider(options=CONTEXTS, value=values["context"], description=t("context"), **ctl),
        }
        names = (t("roof"), t("prefill"), t("decode"), t("decode batch→∞"))
        self.figure = go.Figure(
            data=[go.Scatter(name=names[0], mode="lines", line=dict(color=ROOF_COLOUR, width=3), hoverinfo="skip"),
                  go.Scatter(name=names[1], mode="markers", marker=dict(size=12, symbol="square",
                                                                         color=PHASE_COLOURS["prefill"])),
                  go.Scatter(name=names[2], mode="markers", marker=dict(size=12, color=PHASE_COLOURS["decode"])),
                  go.Scatter(name=names[3], mode="markers", marker=dict(size=12, symbol="circle-open",
                                                                         color=PHASE_COLOURS["decode"]))],
            layout=dict(height=400, margin=dict(t=50),
                        xaxis=style.plotly_log_axis(title=t("arithmetic intensity (FLOP / byte)"),
                                                    range=[_log10(x) for x in self.X_RANGE]),
                        yaxis=style.plotly_log_axis()))  # decades only: no minor "2 5" labels
        self.output = plotly_output(self.figure.layout.height)
        self.summary_box = W.HTML()
        self.state: dict = {}
        self.summary = ""
        self.last_update_seconds = 0.0
        self._holding = False
        self.redraw()
        for w in self.controls.values():
            w.observe(self._on_change, names="value")
        c = self.controls
        self.widget = self.box(style.grid(c["model"], c["dtype"], c["machine"], c["batch"], c["context"], columns=3),
                               self.output, self.summary_box, themed=True)

    # -- the Python API ------------------------------------------------------------------------------------
    def _check(self, **values) -> dict:
        check_controls(values, self.CONTROLS)
        for key, value in values.items():
            if key in ("batch", "context") and (isinstance(value, bool) or not isinstance(value, int)):
                raise TypeError(f"{key} must be an integer, got {type(value).__name__} {value!r}")
            if value not in self._options[key]:
                allowed = ", ".join(map(str, self._options[key]))
                raise ValueError(f"{key}={value!r} is not one of the explorer's choices: {allowed}")
        return values

    def set(self, **values) -> "RooflineExplorer":
        """Change some controls (keys: model, dtype, machine, batch, context) and redraw once.
        A value the controls do not offer raises a ValueError listing the choices."""
        self._check(**values)
        self._holding = True
        try:
            for key, value in values.items():
                self.controls[key].value = value
        finally:
            self._holding = False
        self.redraw()
        return self

    @property
    def drawn(self) -> dict:
        """{trace name: (xs, ys)} of what the figure shows now."""
        return {t.name: (list(t.x), list(t.y)) for t in self.figure.data}

    # -- computing and drawing -------------------------------------------------------------------------------
    def _on_change(self, change=None):
        if not self._holding:
            self.redraw()

    def _compute(self) -> dict:
        v = {k: w.value for k, w in self.controls.items()}
        machine, model, dtype, b, t = (self.machines[v["machine"]], self._models[v["model"]], v["dtype"], v["batch"],
                                       v["context"])
        cfg = costs.model_config(model)
        pre, dec = costs.prefill_cost(model, t, b, dtype), costs.decode_cost(model, t, b, dtype)
        limit = costs.decode_intensity_limit(model, t, dtype)
        return {**v, "max_seq_len": cfg.max_seq_len, "ridge": sig(machine.ridge),
                "prefill_intensity": sig(pre.intensity), "prefill_bound": machine.bound(pre.intensity),
                "decode_intensity": sig(dec.intensity), "decode_bound": machine.bound(dec.intensity),
                "decode_limit": sig(limit), "decode_ms": sig(machine.seconds(dec) * 1e3),
                "decode_tokens_per_s": sig(machine.tokens_per_second(dec)),
                "streamed_weight_bytes": dec.streamed_weight_bytes, "kv_read_bytes": dec.kv_read_bytes,
                "kv_write_bytes": dec.kv_write_bytes, "kv_read_share": sig(dec.kv_read_share),
                "read_crossover_context": round(costs.kv_read_crossover_tokens(model, dtype) / b),
                "batch_to_ridge": costs.decode_batch_for_intensity(model, t, machine.ridge, dtype)}

    def _summary(self, s: dict) -> str:
        m = self.machines[s["machine"]]
        scale, unit = _y_unit(m)
        roof_note = "" if m.dtype == s["dtype"] else t(" (the roof is its {mdtype} peak, not a {dtype} one)",
                                                       mdtype=m.dtype, dtype=s["dtype"])
        ridge = (t("never reaches the ridge at this context, at any batch") if s["batch_to_ridge"] is None
                 else t("reaches the ridge from batch {b}", b=s["batch_to_ridge"]))
        lines = [
            t("{model} in {dtype} on {machine}: peak {peak} {unit}, {bw} GB/s, ridge {ridge} FLOP/byte{note}",
              model=t(s["model"]) if s["model"] == YOUR_MODEL else s["model"], dtype=s["dtype"], machine=machine_label(m),
              peak=fmt(m.peak_gflops / scale), unit=unit,
              bw=fmt(m.bandwidth_gbs), ridge=fmt(s["ridge"]), note=roof_note),
            t("decode, batch {batch}, context {context}: {x} FLOP/byte, {bound}; at least {ms} ms per step, at most "
              "{tps} tokens/s", batch=s["batch"], context=s["context"], x=fmt(s["decode_intensity"]),
              bound=t(s["decode_bound"]), ms=fmt(s["decode_ms"]), tps=fmt(s["decode_tokens_per_s"])),
            t("bytes per decode step: weights read {w}, KV read {kv} ({share}% of all), KV write {kvw}; KV reads "
              "equal the weights read at context {ctx} per sequence at this batch",
              w=human_bytes(s["streamed_weight_bytes"]), kv=human_bytes(s["kv_read_bytes"]),
              share=fmt(100 * s["kv_read_share"]), kvw=human_bytes(s["kv_write_bytes"]),
              ctx=f"{s['read_crossover_context']:,}"),
            t("batching: as batch → ∞ decode tends to {x} FLOP/byte and {ridge}", x=fmt(s["decode_limit"]),
              ridge=ridge),
            t("prefill of {context} tokens, batch {batch}: {x} FLOP/byte, {bound}", context=s["context"],
              batch=s["batch"], x=fmt(s["prefill_intensity"]), bound=t(s["prefill_bound"])),
        ]
        if s["context"] > s["max_seq_len"]:
            lines.append(t("note: context {context} is longer than this model's max_seq_len {max} (the arithmetic "
                           "still holds; the model could not run it)", context=s["context"], max=s["max_seq_len"]))
        return "\n".join(lines)

    def redraw(self) -> None:
        """Recompute from the controls and redraw (the observe callbacks call this)."""
        t0 = time.perf_counter()
        s = self._compute()
        m = self.machines[s["machine"]]
        scale, unit = _y_unit(m)
        y = lambda x: sig(m.attainable(x) / scale)
        rx, ry = roof_line(m, *self.X_RANGE)
        with self.figure.batch_update():
            roof, pre, dec, lim = self.figure.data
            roof.x, roof.y = [sig(x) for x in rx], [sig(v / scale) for v in ry]
            pre.x, pre.y = [s["prefill_intensity"]], [y(s["prefill_intensity"])]
            dec.x, dec.y = [s["decode_intensity"]], [y(s["decode_intensity"])]
            lim.x, lim.y = [s["decode_limit"]], [y(s["decode_limit"])]
            self.figure.layout.yaxis.title.text = t("attainable {unit}", unit=unit)
            self.figure.layout.yaxis.range = [_log10(y(self.X_RANGE[0]) / 2), _log10(m.peak_gflops / scale * 3)]
        self.state = s
        self.summary = self._summary(s)
        self.summary_box.value = (f"<div style='color:{style.css('ink')}'>"
                                  + "<br>".join(html.escape(line) for line in self.summary.splitlines()) + "</div>")
        show_plotly(self.output, self.figure, self.summary)  # the summary: the plain-text form
        self.last_update_seconds = time.perf_counter() - t0
