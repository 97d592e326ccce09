"""Cost curves: what the KV cache saves, O(n²) vs O(n), analytic (``lib.costs``) and measured (``lib.measure``).

Per generation step at context length t (the step attends to t keys), one layer does
    without a cache: K/V for all t tokens, projections + FFN for t tokens (∝ t·d²), attention over t² pairs
    with a cache:    K/V for 1 token,      projections + FFN for 1 token (∝ d²),   attention over t pairs
so per step the linear layers go from O(t) to O(1) and attention from O(t²) to O(t); summed over n steps,
K/V computations and linear FLOPs go from O(n²) to O(n), attention FLOPs from O(n³) to O(n²). Every number
drawn here comes from ``lib.costs`` (``kv_computations``, ``generation_steps``, ``kv_cache_bytes``,
``weight_bytes``, ``kv_memory_crossover_tokens``); measured times come from ``lib.measure``. Models are
resolved by ``lib.presets.resolve_model``, which here also knows "larger" (``lib.measure.larger_config()``).

Data (plain dicts):
    MODEL_CHOICES                                   ("chat", "lm", "larger", *lib.PRESETS): the picker's names
    resolve(model) -> (name, ModelConfig)           lib.presets.resolve_model, "larger" included
    analytic_curves(model, n, prompt_len=1) -> dict
        {"name", "config", "prompt_len", "n", "positions": [prompt_len .. prompt_len+n-1] (keys attended per step),
         "kv" / "kv_cumulative": {"cache": [...], "no cache": [...]}   K/V vectors computed (per layer, per seq),
         "flops" / "flops_cumulative": {"cache" | "no cache": {"linear": [...], "attention": [...], "total": [...]}},
             linear = q/k/v/o projections + FFN + lm_head, attention = scores + weighted sum (lib.costs terms),
         "slopes": {"per_step" | "cumulative": {"cache" | "no cache": {"kv", "linear", "attention", "total"}}}}
             (log-log slopes over the last half; None when n < 3)
    memory_curves(model, n=None, dtype=torch.float16, batch_size=1) -> dict
        {"name", "dtype", "batch_size", "positions": [1..n], "kv_bytes": [...], "weight_bytes": int (weights in
         memory), "memory_crossover_context": float (context length per sequence at which KV cache memory
         equals weight memory)}

Tier 1, static matplotlib (each returns the Figure; ``ax=`` draws into an existing axes):
    plot_kv_counts(n=16, prompt_len=1)
    plot_flops(model="chat", n=64, prompt_len=1, cumulative=False, loglog=False, ax=None)
    plot_measured(measurements, cumulative=False, loglog=False, ax=None)  from lib.measure.measure_*
    plot_memory(model="chat", n=None, dtype=torch.float16, batch_size=1, ax=None)
    plot_cost_curves(model="chat", n=64, measurements=None, loglog=False, prompt_len=1, batch_size=1)  all panels

Tier 2, plotly that survives export (go.Figure with buttons: per step / cumulative, linear / log-log):
    plotly_cost_curves(model="chat", n=64, prompt_len=1, points=None)   K/V, FLOPs split, memory
    plotly_measured(measurements)

Tier 3, live ipywidgets (core widgets only: the figure is redrawn into an ``ipywidgets.Output``, ``lib.widgets.live``):
    CostCurvesExplorer(model="chat", n=64, show="both", view="per step", loglog=False)
        .widget (display it, or display the explorer itself), .set(n=, model=, show=, view=, loglog=) drives it
        from Python, .state (control values), .drawn ({trace name: (xs, ys)} of what is visible),
        .summary (the text shown under the controls), .figure (the plotly Figure shown in .output),
        .last_update_seconds (Python time of the last redraw)
"""
from __future__ import annotations

import functools
import html
import time

import torch

from .. import checks
from . import style
from ..checks import new_tokens_fit
from ..config import ModelConfig
from ..costs import generation_steps, kv_cache_bytes, kv_computations, kv_memory_crossover_tokens, weight_bytes
from ..device import dtype_name
from ..presets import PRESETS, resolve_model
from ..text import fmt_bytes, fmt_si
from ..i18n import t
from .live import LiveWidget, plotly_output, show_plotly
from ..measure import cumulative, fit_loglog_slope, larger_config
from . import figure_and_axes, picker_models

MODEL_CHOICES = ("chat", "lm", "larger", *PRESETS)
MODEL_LABELS = {"chat": "chat (demo model, d_model 64)", "lm": "lm (real small language model, d_model 256)",
                "larger": "larger (random weights, d_model 256)"}
CACHES = ("cache", "no cache")
FIGSIZE = (style.FIGURE_WIDTH, 3.6)  # the static figures: the cell's width
PARTS = ("linear", "attention", "total")
PART_LABELS = {"linear": "projections + FFN", "attention": "attention", "total": "total"}
SHOWS = ("both", "with cache", "without cache")
VIEWS = ("per step", "cumulative")
N_MAX = 4096  # the live slider stops here (presets allow 32k; the curves' shape is clear long before)
MAX_POINTS = 400  # a live trace draws at most about this many (+ MAX_POINTS/2) points; slopes use every point
TAIL = 0.5  # slopes are fitted over the last half of each curve
# lib.widgets.style's concepts, as the player counts them: with a cache each K/V is "computed (first time)", without
# most are "computed again (wasted)"; the cache's bytes are the cache ("read from the KV cache"). Both ways of keeping
# a cache (static, concat) take the with-cache colour, told apart by marker and line style (and the legend). Lines
# take the concept's colour darkened to the 3:1 that graphics need (style.graphic_colour).
CONCEPT = {"cache": "computed", "no cache": "recomputed", "static": "computed", "concat": "computed", "kv": "cached",
           "weights": "weights"}
COLORS = {k: style.graphic_colour(c) for k, c in CONCEPT.items()}
LINESTYLE = {"cache": "-", "no cache": ":"}  # with / without a cache: a second cue besides the colour
PLOTLY_SYMBOL = {"cache": "circle", "no cache": "x"}
MARKERS = {"cache": "o", "no cache": style.concept("recomputed").marker, "static": "o", "concat": "s"}
MODE_DASH = {"static": "solid", "concat": "dash", "no cache": "dot", "cache": "solid"}  # plotly names
DASH = {"linear": "solid", "attention": "dash", "total": "dot"}  # the FLOPs parts (the cache: colour + label)
MPL_STYLE = {"solid": "-", "dash": "--", "dot": ":"}
_PLOTLY_MARKER = {"o": "circle", "s": "square", "X": "x"}
MARKER_SIZE = 6  # ● with a cache, ✖ without: big enough to read as shapes, not dots
SLOPE_DIGITS = 2
MS_DIGITS = 4  # measured milliseconds go into figures rounded to 0.1 µs


# ---------------------------------------------------------------------------------------------- data

@functools.lru_cache(maxsize=None)
def _larger() -> dict:
    return {"larger": larger_config()}


def resolve(model) -> tuple[str, ModelConfig]:
    """(name, config) of a model: ``lib.presets.resolve_model``, which here also knows "larger" (random weights,
    ``lib.measure.larger_config()``)."""
    return resolve_model(model, extra=_larger())


def _check_n(n, prompt_len: int, config: ModelConfig, name: str) -> int:
    return new_tokens_fit(config, prompt_len, n, "n (tokens to generate)")


def _display_index(n: int, max_points: int = MAX_POINTS) -> list[int]:
    """Which of n points a figure draws: all of them up to ``max_points``, else ``max_points`` indices spread
    evenly on a log axis (dense at the start, where log-log views need them), ``max_points / 2`` spread evenly
    on a linear one, and the last point."""
    if n <= max_points:
        return list(range(n))
    logs = {round((n - 1) ** (i / (max_points - 1))) for i in range(max_points)}
    lins = {round(i * (n - 1) / (max_points // 2 - 1)) for i in range(max_points // 2)}
    return sorted(logs | lins | {0, n - 1})


def _slope(xs, ys):
    return round(fit_loglog_slope(xs, ys, TAIL), SLOPE_DIGITS) if len(xs) >= 2 else None


def analytic_curves(model="chat", n: int = 64, prompt_len: int = 1) -> dict:
    """Per-step and cumulative K/V computations and FLOPs of generating n tokens, with and without a cache,
    straight from ``lib.costs.generation_steps`` (see the module docstring for the keys)."""
    name, config = resolve(model)
    prompt_len = checks.integer(prompt_len, "prompt_len", 1)
    n = _check_n(n, prompt_len, config, name)
    out = {"name": name, "config": config, "prompt_len": prompt_len, "n": n, "positions": None,
           "kv": {}, "kv_cumulative": {}, "flops": {}, "flops_cumulative": {},
           "slopes": {"per_step": {}, "cumulative": {}}}
    for cache in CACHES:
        rows = generation_steps(config, prompt_len, n, use_cache=(cache == "cache"))
        out["positions"] = [r["n_keys"] for r in rows]
        out["kv"][cache] = [r["kv_computed"] for r in rows]
        linear = [r["total"] - r["attention"] for r in rows]  # projections + FFN + lm_head
        out["flops"][cache] = {"linear": linear, "attention": [r["attention"] for r in rows],
                               "total": [r["total"] for r in rows]}
    pos = out["positions"]
    for cache in CACHES:
        out["kv_cumulative"][cache] = cumulative(out["kv"][cache])
        out["flops_cumulative"][cache] = {p: cumulative(v) for p, v in out["flops"][cache].items()}
        # per step: leave out step 0 (with a cache it is the prefill of the prompt, a different kind of step)
        out["slopes"]["per_step"][cache] = {
            "kv": _slope(pos[1:], out["kv"][cache][1:]),
            **{p: _slope(pos[1:], out["flops"][cache][p][1:]) for p in PARTS}}
        out["slopes"]["cumulative"][cache] = {
            "kv": _slope(pos, out["kv_cumulative"][cache]),
            **{p: _slope(pos, out["flops_cumulative"][cache][p]) for p in PARTS}}
    if n < 3:  # a per-step slope needs 2 steps after the first
        out["slopes"] = {v: {c: dict.fromkeys(("kv", *PARTS)) for c in CACHES} for v in out["slopes"]}
    return out


def memory_curves(model="chat", n: int | None = None, dtype=torch.float16, batch_size: int = 1) -> dict:
    """KV-cache bytes after 1..n tokens (``lib.costs.kv_cache_bytes``) next to the weights in memory
    (``lib.costs.weight_bytes``). n=None: the model's whole context window (at most N_MAX)."""
    name, config = resolve(model)
    batch_size = checks.integer(batch_size, "batch_size", 1)
    n = min(config.max_seq_len, N_MAX) if n is None else _check_n(n, 1, config, name)
    positions = list(range(1, n + 1))
    return {"name": name, "dtype": dtype_name(dtype), "batch_size": batch_size,
            "positions": positions,
            "kv_bytes": [kv_cache_bytes(config, t, batch_size, dtype) for t in positions],
            "weight_bytes": weight_bytes(config, dtype),
            "memory_crossover_context": round(kv_memory_crossover_tokens(config, dtype) / batch_size, 1)}


def _check_measurements(m) -> dict:
    """The dict of lib.measure.measure_generation / measure_positions, with consistent lengths."""
    need = ("positions", "seconds", "slopes", "modes")
    if not isinstance(m, dict) or any(k not in m for k in need):
        raise ValueError(f"measurements must be the dict returned by lib.measure.measure_generation or "
                         f"measure_positions (keys {', '.join(need)}, ...); got "
                         f"{sorted(m) if isinstance(m, dict) else type(m).__name__}")
    missing = [mode for mode in m["modes"] if mode not in m["seconds"] or mode not in m["slopes"]]
    if missing:
        raise ValueError(f"measurements list modes {missing} without times or slopes for them; pass the dict "
                         f"from lib.measure unchanged")
    n = len(m["positions"])
    for mode, secs in m["seconds"].items():
        if len(secs) != n:
            raise ValueError(f"mismatched lengths: {n} positions but {len(secs)} times for mode {mode!r}")
        if mode in m.get("cumulative", {}) and len(m["cumulative"][mode]) != n:
            raise ValueError(f"mismatched lengths: {n} positions but {len(m['cumulative'][mode])} cumulative "
                             f"times for mode {mode!r}")
    return m


def _measured_series(m, cumulative_view: bool) -> dict:
    """{mode: milliseconds} of the per-step or cumulative view, rounded."""
    if cumulative_view and "cumulative" not in m:
        raise ValueError("these measurements have no cumulative times: measure_positions times single steps at "
                         "chosen positions; use lib.measure.measure_generation for cumulative=True")
    src = m["cumulative"] if cumulative_view else m["seconds"]
    return {mode: [round(s * 1e3, MS_DIGITS) for s in src[mode]] for mode in m["modes"]}


def _mode_label(mode: str) -> str:
    return t({"no cache": "no cache", "static": "static cache (in place)", "concat": "concat cache (torch.cat)"}[mode])


def _with_cache(cache: str, what: str | None = None) -> str:
    """"with cache" / "without cache", after ``what`` when given ("attention, with cache"), in the notebook's
    language."""
    if what is None:
        return t("with cache") if cache == "cache" else t("without cache")
    return t("{what}, with cache", what=what) if cache == "cache" else t("{what}, without cache", what=what)


def _clock(m) -> str:
    return t("CPU time") if m.get("clock") == "cpu" else t("wall time")


# -------------------------------------------------------------------------------- tier 1: matplotlib

def _finish(ax, loglog: bool, xlabel: str, ylabel: str, title: str):
    if loglog:
        ax.set_xscale("log")
        ax.set_yscale("log")
        style.no_minor_log_labels(ax)  # decades as plain numbers, no minor "2 5"
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title, loc="left")
    ax.grid(alpha=0.5, which="both" if loglog else "major")
    style.place_legend(ax)  # never over the curves: room above them where the curves fill the panel


def _with_slope(label: str, slope, loglog: bool) -> str:
    return t("{label} (slope {slope})", label=label, slope=f"{slope:.2f}") if loglog and slope is not None else label


def plot_kv_counts(n: int = 16, prompt_len: int = 1):
    """K/V vectors computed per step and in total (per layer, per sequence), with and without a cache:
    n vs n(n+1)/2 for a 1-token prompt (``lib.costs.kv_computations``). Returns the Figure."""
    import matplotlib.pyplot as plt

    prompt_len = checks.integer(prompt_len, "prompt_len", 1)
    n = checks.integer(n, "n (tokens to generate)", 1)
    pos = list(range(prompt_len, prompt_len + n))
    fig, (a, b) = plt.subplots(1, 2, figsize=(style.FIGURE_WIDTH, 3.6), layout="constrained")
    for cache in CACHES:
        per = kv_computations(prompt_len, n, use_cache=(cache == "cache"))
        cum = cumulative(per)
        cue = dict(color=COLORS[cache], marker=MARKERS[cache], ms=MARKER_SIZE,
                   ls=style.concept(CONCEPT[cache]).linestyle)
        a.plot(pos, per, **cue, label=_with_cache(cache))
        b.plot(pos, cum, **cue, label=t("{which}: {n} in total", which=_with_cache(cache), n=f"{cum[-1]:,}"))
    from matplotlib.ticker import MaxNLocator

    for ax in (a, b):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    _finish(a, False, t("context length t (keys attended in the step)"), t("K/V computed in the step"),
            t("per step: t without a cache, 1 with it"))
    _finish(b, False, t("context length t"), t("K/V computed so far"),
            t("cumulative after {n} steps: O(n²) vs O(n)", n=n))
    return fig


def plot_flops(model="chat", n: int = 64, prompt_len: int = 1, cumulative: bool = False, loglog: bool = False,
               ax=None):
    """FLOPs per step (or cumulative) split into projections + FFN and attention, with and without a cache
    (``lib.costs.generation_steps``). With loglog=True the legend shows each curve's fitted slope."""
    c = analytic_curves(model, n, prompt_len)
    view = "cumulative" if cumulative else "per_step"
    series = c["flops_cumulative"] if cumulative else c["flops"]
    fig, ax = figure_and_axes(ax, FIGSIZE)
    for cache in CACHES:
        for part in ("linear", "attention"):
            label = _with_cache(cache, t(PART_LABELS[part]))
            ax.plot(c["positions"], series[cache][part], MPL_STYLE[DASH[part]], color=COLORS[cache],
                    marker=MARKERS[cache], ms=MARKER_SIZE, markevery=_mark_every(len(c["positions"]), loglog),
                    label=_with_slope(label, c["slopes"][view][cache][part], loglog))
    what = t("cumulative FLOPs") if cumulative else t("FLOPs per step")
    if not loglog:  # 4G, not 4 under a "1e9" the eye has to find
        from matplotlib.ticker import FuncFormatter

        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_si(v)))
    _finish(ax, loglog, t("context length t (tokens)"), what,
            f"{c['name']}: {what}" + (t(" (log-log, slopes fitted over the last half)") if loglog else ""))
    return fig


def _marker_sizes(n_points: int, size: int = 8) -> list:
    """plotly marker sizes for a line of ``n_points``: about eight markers spread along it (the others size 0)."""
    every = max(1, n_points // 8)
    return [size if i % every == every // 2 or i == n_points - 1 else 0 for i in range(n_points)]


def _mark_every(n_points: int, loglog: bool):
    """About eight markers per line (evenly spread on the axis the line is drawn on)."""
    if n_points <= 12:
        return None
    if loglog:
        import numpy as np

        return sorted(set(np.unique(np.geomspace(1, n_points, 8).astype(int) - 1).tolist()))
    return max(1, n_points // 8)


def plot_measured(measurements, cumulative: bool = False, loglog: bool = False, ax=None):
    """Measured milliseconds per step (or cumulative) vs context length, one line per mode, from
    ``lib.measure.measure_generation`` / ``measure_positions``; the legend shows fitted log-log slopes."""
    m = _check_measurements(measurements)
    series = _measured_series(m, cumulative)
    view = "cumulative" if cumulative else "per_step"
    fig, ax = figure_and_axes(ax, FIGSIZE)
    for mode, ys in series.items():
        ax.plot(m["positions"], ys, MPL_STYLE[MODE_DASH[mode]], marker=MARKERS[mode], ms=MARKER_SIZE,
                color=COLORS[mode],
                label=t("{label} (slope {slope})", label=_mode_label(mode), slope=f"{m['slopes'][mode][view]:.2f}"))
    cfg = m.get("config", {})
    what = t("cumulative ms") if cumulative else t("ms per step")
    _finish(ax, loglog, t("context length t (tokens)"), f"{what} ({_clock(m)})",
            t("measured: {layers} layers, d_model {d}; log-log slopes over the last half",
              layers=cfg.get('n_layers', '?'), d=cfg.get('d_model', '?')))
    if loglog:  # a short log axis of ms: whole values 1, 2, 5, 10, 20 as major ticks (never a bare minor "2 5")
        from matplotlib.ticker import LogLocator

        ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1, 2, 5)))
        style.no_minor_log_labels(ax)
    return fig


def plot_memory(model="chat", n: int | None = None, dtype=torch.float16, batch_size: int = 1, ax=None):
    """KV-cache bytes vs tokens (a straight line) next to the weights in memory (flat)."""
    mem = memory_curves(model, n, dtype, batch_size)
    fig, ax = figure_and_axes(ax, FIGSIZE)
    ax.plot(mem["positions"], mem["kv_bytes"], color=COLORS["kv"],
            label=t("KV cache, batch {batch}: {size} at {n} tokens", batch=mem['batch_size'],
                    size=fmt_bytes(mem['kv_bytes'][-1], 3), n=mem['positions'][-1]))
    ax.axhline(mem["weight_bytes"], color=COLORS["weights"], ls=style.concept("weights").linestyle,
               label=t("weights in memory: {size}", size=fmt_bytes(mem['weight_bytes'], 3)))
    from matplotlib.ticker import FixedLocator, FuncFormatter, MaxNLocator

    top = max(mem["weight_bytes"], mem["kv_bytes"][-1]) * 1.05
    unit = 1024 ** min(4, max(0, (len(str(int(top))) - 1) // 3))  # ticks at round numbers of KiB, MiB, ...
    unit = unit if top / unit >= 1 else unit // 1024
    ax.yaxis.set_major_locator(FixedLocator(MaxNLocator(nbins=6).tick_values(0, top / unit) * unit))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda b, _: fmt_bytes(b, 3)))
    ax.set_ylim(0, top)
    cross = mem["memory_crossover_context"]
    if cross <= mem["positions"][-1]:  # the title names the crossover only where the axis reaches it
        title = t("{name}: KV cache memory = weight memory\nat {n} tokens per sequence", name=mem['name'],
                  n=f"{cross:,.0f}")
    else:
        title = t("{name}: at {n} tokens per sequence the KV cache\nis {share} of the weights' memory",
                  name=mem['name'], n=mem['positions'][-1], share=f"{mem['kv_bytes'][-1] / mem['weight_bytes']:.0%}")
    _finish(ax, False, t("tokens per sequence"), t("bytes ({dtype})", dtype=mem['dtype']), title)
    return fig


def plot_cost_curves(model="chat", n: int = 64, measurements=None, loglog: bool = False, prompt_len: int = 1,
                     batch_size: int = 1):
    """All panels on one figure: K/V computed so far, FLOPs per step, cumulative FLOPs, memory (the KV cache of
    ``batch_size`` sequences), and (if given) the measured ms per step. Returns the Figure."""
    import matplotlib.pyplot as plt

    c = analytic_curves(model, n, prompt_len)
    cols = 3 if measurements is not None else 2
    fig, axes = plt.subplots(2, cols, figsize=(style.FIGURE_WIDTH * cols / 2, 7.6), layout="constrained")
    axes = axes.ravel()
    a = axes[0]
    for cache in CACHES:
        label = f"{_with_cache(cache)}: {c['kv_cumulative'][cache][-1]:,}"
        a.plot(c["positions"], c["kv_cumulative"][cache], color=COLORS[cache], ls=LINESTYLE[cache],
               marker=MARKERS[cache], ms=MARKER_SIZE, markevery=_mark_every(len(c["positions"]), loglog),
               label=_with_slope(label, c["slopes"]["cumulative"][cache]["kv"], loglog))
    if not loglog:  # 120k, not 120000
        from matplotlib.ticker import FuncFormatter

        a.yaxis.set_major_formatter(FuncFormatter(lambda v, _: fmt_si(v)))
    _finish(a, loglog, t("context length t"), t("K/V computed so far (per layer)"), t("K/V computations, cumulative"))
    plot_flops(model, n, prompt_len, cumulative=False, loglog=loglog, ax=axes[1])
    plot_flops(model, n, prompt_len, cumulative=True, loglog=loglog, ax=axes[2])
    plot_memory(model, c["positions"][-1], batch_size=batch_size, ax=axes[3])  # the same tokens as the other panels
    if measurements is not None:
        plot_measured(measurements, cumulative=False, loglog=loglog, ax=axes[4])
        axes[5].axis("off")
    return fig


# --------------------------------------------------------------------------------------- tier 2: plotly

def _plotly_name(cache: str, part: str, slope, what: str | None = None) -> str:
    label = _with_cache(cache, t(PART_LABELS[part]) if what is None else what)
    return t("{label} (slope {slope})", label=label, slope=f"{slope:.2f}") if slope is not None else label


def _three_panels(fig, dtype: str, title: str, top: int = 200):
    """The layout shared by the analytic plotly figure and the live explorer: each panel named by its y axis
    (no titles above the panels to run together), the legend above the plots (the kvlab template's place),
    ``top`` pixels above them for the title, the buttons (if any) and the legend, and no fixed width."""
    for col, name in ((1, t("K/V computed (per layer)")), (2, t("FLOPs (solid: proj. + FFN, dashed: attention)")),
                      (3, t("memory, bytes ({dtype})", dtype=dtype))):
        fig.update_yaxes(title_text=name, row=1, col=col)
    fig.update_xaxes(title_text=t("context length t"))
    fig.update_layout(height=360 + top, margin=dict(l=70, r=20, t=top, b=60), showlegend=True,
                      title=dict(text=title, yref="container", y=0.98, yanchor="top"),
                      legend=dict(orientation="h", x=0, xanchor="left", y=1.03, yanchor="bottom"))


def plotly_cost_curves(model="chat", n: int = 64, prompt_len: int = 1, points: int | None = None):
    """K/V computations, FLOPs (projections + FFN vs attention) and memory as one plotly figure; buttons switch
    per step / cumulative and linear / log-log axes, all data precomputed. ``points``: draw about that many of
    the n steps (spread on a log and a linear axis, as the live explorer does; None: every step), which keeps a
    saved notebook small; the slopes in the legend are fitted over every step."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    c = analytic_curves(model, n, prompt_len)
    mem = memory_curves(model, c["positions"][-1])  # the same tokens as the other panels
    if points is not None:
        c, mem = _thinned(c, mem, n, checks.integer(points, "points", 4))
    fig = make_subplots(rows=1, cols=3, horizontal_spacing=0.1)
    specs, ys, names = _view_series(c)
    for k, (cache, part, col) in enumerate(specs):
        # with / without a cache: colour, and a marker on each line (a few); in the K/V panel also the dash and a
        # direct label at the line's end (it moves with the data when the buttons switch view or axes)
        end = [""] * (len(c["positions"]) - 1) + [_with_cache(cache)] if col == 1 else None
        fig.add_trace(go.Scatter(x=c["positions"], y=ys["per_step"][k], name=names["per_step"][k],
                                 mode="lines+markers+text" if col == 1 else "lines+markers", text=end,
                                 textposition="top left", textfont=dict(color=COLORS[cache]),
                                 marker=dict(symbol=PLOTLY_SYMBOL[cache], size=_marker_sizes(len(c["positions"]))),
                                 line=dict(color=COLORS[cache], dash=DASH[part] if col == 2 else MODE_DASH[cache])),
                      row=1, col=col)
    fig.add_trace(go.Scatter(x=mem["positions"], y=mem["kv_bytes"], name=t("KV cache bytes"), mode="lines+text",
                             text=[""] * (len(mem["positions"]) - 1) + [t("KV cache bytes")], textposition="top left",
                             textfont=dict(color=COLORS["kv"]), line=dict(color=COLORS["kv"])), row=1, col=3)
    fig.add_trace(go.Scatter(x=[1, mem["positions"][-1]], y=[mem["weight_bytes"]] * 2, name=t("weights in memory"),
                             mode="lines+text", text=["", t("weights in memory")], textposition="bottom left",
                             textfont=dict(color=COLORS["weights"]),
                             line=dict(color=COLORS["weights"], dash="longdash")), row=1, col=3)
    _three_panels(fig, mem["dtype"], t("{name}: generating {n} tokens with and without a KV cache "
                                       "(slopes: log-log fit over the last half)", name=c['name'], n=n))
    fig.update_layout(updatemenus=_view_and_scale_menus(ys, names, len(specs)))
    return fig


def _thinned(c: dict, mem: dict, n: int, points: int) -> tuple[dict, dict]:
    """``analytic_curves`` and ``memory_curves`` at about ``points`` of their steps (``_display_index``)."""
    idx = _display_index(n, points)
    pick = lambda ys: [ys[i] for i in idx]
    c = {**c, "positions": pick(c["positions"]),
         **{k: {cache: pick(v) for cache, v in c[k].items()} for k in ("kv", "kv_cumulative")},
         **{k: {cache: {p: pick(v) for p, v in parts.items()} for cache, parts in c[k].items()}
            for k in ("flops", "flops_cumulative")}}
    keep = _display_index(len(mem["positions"]), points)  # memory starts at 1 token, whatever the prompt
    return c, {**mem, "positions": [mem["positions"][i] for i in keep],
               "kv_bytes": [mem["kv_bytes"][i] for i in keep]}


def _view_series(c: dict) -> tuple[list, dict, dict]:
    """``(specs, ys, names)`` of the K/V and FLOPs traces: (cache, part, panel) per trace (0, 1: K/V; 2..5: FLOPs),
    and per view ("per_step", "cumulative") each trace's y values and legend name (with its fitted slope)."""
    ys = {"per_step": [], "cumulative": []}
    names = {"per_step": [], "cumulative": []}
    for cache in CACHES:
        for view, src in (("per_step", c["kv"]), ("cumulative", c["kv_cumulative"])):
            ys[view].append(src[cache])
            names[view].append(_plotly_name(cache, "total", c["slopes"][view][cache]["kv"], what="K/V"))
    for cache in CACHES:
        for part in ("linear", "attention"):
            for view, src in (("per_step", c["flops"]), ("cumulative", c["flops_cumulative"])):
                ys[view].append(src[cache][part])
                names[view].append(_plotly_name(cache, part, c["slopes"][view][cache][part]))
    specs = [(cache, "total", 1) for cache in CACHES] + [(cache, part, 2) for cache in CACHES
                                                          for part in ("linear", "attention")]
    return specs, ys, names


def _view_and_scale_menus(ys: dict, names: dict, n_traces: int) -> list:
    """The two rows of buttons above the legend: per step / cumulative (restyles the first ``n_traces``) and
    linear / log-log axes. From the top, the figure holds: the title, the buttons, the legend, the plots."""
    idx = list(range(n_traces))
    view_menu = dict(type="buttons", direction="right", x=0.0, y=1.3, xanchor="left", yanchor="bottom",
                     showactive=True,
                     buttons=[dict(label=t(label), method="restyle", args=[{"y": ys[view], "name": names[view]}, idx])
                              for label, view in (("per step", "per_step"), ("cumulative", "cumulative"))])
    axes_names = [f"{a}axis{'' if i == 1 else i}" for i in (1, 2, 3) for a in "xy"]
    scale_menu = dict(type="buttons", direction="right", x=0.35, y=1.3, xanchor="left", yanchor="bottom",
                      showactive=True,
                      buttons=[dict(label=t(label), method="relayout",  # log: decades only, no minor "2 5"
                                    args=[{**{f"{a}.type": kind for a in axes_names},
                                           **{f"{a}.dtick": 1 if kind == "log" else None for a in axes_names}}])
                               for label, kind in (("linear", "linear"), ("log-log", "log"))])
    return [view_menu, scale_menu]


def plotly_measured(measurements):
    """Measured ms per step vs context length (one line per mode) with linear / log-log buttons, and
    per step / cumulative buttons when the measurements have cumulative times."""
    import plotly.graph_objects as go

    m = _check_measurements(measurements)
    views = ("per_step", "cumulative") if "cumulative" in m else ("per_step",)
    ys = {v: _measured_series(m, v == "cumulative") for v in views}
    names = {v: [t("{label} (slope {slope})", label=_mode_label(mode), slope=f"{m['slopes'][mode][v]:.2f}")
                 for mode in m["modes"]] for v in views}
    fig = go.Figure()
    for k, mode in enumerate(m["modes"]):
        fig.add_trace(go.Scatter(x=m["positions"], y=ys["per_step"][mode], name=names["per_step"][k],
                                 mode="lines+markers", marker=dict(size=6, symbol=_PLOTLY_MARKER[MARKERS[mode]]),
                                 line=dict(color=COLORS[mode], dash=MODE_DASH[mode])))
    menus = [dict(type="buttons", direction="right", x=0.0, y=1.25, xanchor="left", yanchor="bottom",
                  buttons=[dict(label=t(label), method="relayout",
                                args=[{"xaxis.type": kind, "yaxis.type": kind, "xaxis.dtick": 1 if kind == "log" else None,
                                       "yaxis.dtick": 1 if kind == "log" else None}])
                           for label, kind in (("linear", "linear"), ("log-log", "log"))])]
    if len(views) == 2:
        menus.append(dict(type="buttons", direction="right", x=0.3, y=1.25, xanchor="left", yanchor="bottom", buttons=[
            dict(label=t(label), method="restyle",
                 args=[{"y": [ys[v][mode] for mode in m["modes"]], "name": names[v]}])
            for label, v in (("per step", "per_step"), ("cumulative", "cumulative"))]))
    cfg = m.get("config", {})
    fig.update_layout(updatemenus=menus, height=460, margin=dict(l=60, r=20, t=150, b=50),
                      xaxis_title=t("context length t (tokens)"), yaxis_title=f"ms ({_clock(m)})",
                      title=dict(text=t("measured: {layers} layers, d_model {d} (slopes: log-log fit over the last "
                                        "half)", layers=cfg.get('n_layers', '?'), d=cfg.get('d_model', '?')),
                                 yref="container", y=0.98, yanchor="top"),
                      legend=dict(orientation="h", x=0, xanchor="left", y=1.03, yanchor="bottom"))
    return fig


# -------------------------------------------------------------------------------- tier 3: ipywidgets

class CostCurvesExplorer(LiveWidget):
    """Live cost curves: sequence-length slider, model picker, with / without cache overlay, per step /
    cumulative, log-log toggle. Only analytic numbers (cheap), so every change redraws at once.

    Drive it from Python with ``set(...)``; ``drawn`` is what the figure shows, ``summary`` the text.
    ``figure`` is a plain plotly ``Figure`` changed in place; every redraw shows a fresh copy of it in
    ``output``, an ``ipywidgets.Output`` (core widgets only: it works in JupyterLab, VS Code and Voilà alike)."""

    def __init__(self, model="chat", n: int = 64, show: str = "both", view: str = "per step",
                 loglog: bool = False):
        import ipywidgets as W
        import plotly.graph_objects as go
        from plotly.subplots import make_subplots

        # name -> config of the picker; a model of your own (lib.ModelConfig, lib.from_hf's model): "your model"
        self._models, name = picker_models(model, {k: resolve(k)[1] for k in MODEL_CHOICES})
        self._check_choice(show, SHOWS, "show")
        self._check_choice(view, VIEWS, "view")
        self._curves = {}  # model name -> analytic_curves at the slider's maximum n (sliced on redraw)
        look = dict(style=style.control_style(), layout=W.Layout(**style.control_layout()))
        self.model = W.Dropdown(options=[(t(MODEL_LABELS.get(k, k)), k) for k in self._models], value=name,
                                description=t("model"), **look)
        self.n = W.IntSlider(value=2, min=2, max=self._n_max(name), description="n", continuous_update=True, **look)
        self.n.value = self._check_n_value(n, name)
        self.show = W.ToggleButtons(options=[(t(s), s) for s in SHOWS], value=show, description=t("show"),
                                    style={**style.control_style(), "button_width": "auto"})
        self.view = W.ToggleButtons(options=[(t(v), v) for v in VIEWS], value=view, style={"button_width": "auto"})
        self.loglog = W.Checkbox(value=checks.flag(loglog, "loglog"), description=t("log-log"), indent=False, **look)
        self.text = W.HTML(style={"text_color": style.css("ink")})
        self.figure = make_subplots(rows=1, cols=3, horizontal_spacing=0.1)
        self._names = []  # the traces' names in English (the keys of drawn and _series)
        self._shown = {}  # ... and as the legend shows them, in the notebook's language
        for cache in CACHES:
            self._add(go, f"K/V, {self._with(cache)} cache", COLORS[cache], "solid", 1, _with_cache(cache, "K/V"))
        for cache in CACHES:
            for part in ("linear", "attention"):
                self._add(go, f"{PART_LABELS[part]}, {self._with(cache)} cache", COLORS[cache], DASH[part], 2,
                          _with_cache(cache, t(PART_LABELS[part])))
        self._add(go, "KV cache bytes", COLORS["kv"], "solid", 3, t("KV cache bytes"))
        self._add(go, "weights in memory", COLORS["weights"], "longdash", 3, t("weights in memory"))
        _three_panels(self.figure, dtype_name(torch.float16), "", top=110)
        self.output = plotly_output(self.figure.layout.height)
        self.last_update_seconds = 0.0
        self._quiet = False
        self.redraw()
        self.model.observe(self._on_model, names="value")
        for w in (self.n, self.show, self.view, self.loglog):
            w.observe(lambda ch: self.redraw(), names="value")
        self.controls = style.grid(self.model, self.n, self.loglog, self.show, self.view, columns=3)
        self.widget = self.box(self.controls, self.text, self.output, themed=True)

    # -- helpers -------------------------------------------------------------------------------------
    @staticmethod
    def _with(cache):
        return "with" if cache == "cache" else "without"

    @staticmethod
    def _check_choice(value, allowed, what):
        if value not in allowed:
            raise ValueError(f"{what}={value!r} is not known; allowed: {', '.join(map(repr, allowed))}")

    def _add(self, go, name, color, dash, col, shown):
        self.figure.add_trace(go.Scatter(x=[], y=[], name=shown, mode="lines", line=dict(color=color, dash=dash)),
                              row=1, col=col)
        self._names.append(name)
        self._shown[name] = shown

    def _n_max(self, name) -> int:
        return min(self._models[name].max_seq_len, N_MAX)

    def _check_n_value(self, n, name) -> int:
        n = checks.integer(n, "n (tokens to generate)", 1)
        if not 2 <= n <= self._n_max(name):
            raise ValueError(f"n={n} is outside the slider for {name}: allowed 2..{self._n_max(name)} "
                             f"(the model's context window, at most {N_MAX})")
        return n

    def _full(self, name) -> tuple[dict, dict]:
        """analytic_curves and memory_curves at the slider's maximum n, computed once per model."""
        if name not in self._curves:
            config = self._models[name]
            self._curves[name] = (analytic_curves(config, self._n_max(name)), memory_curves(config, None))
        return self._curves[name]

    def _arrays(self, name) -> dict:
        """The full curves as numpy arrays (plotly takes them without checking every element)."""
        import numpy as np

        key = ("arrays", name)
        if key not in self._curves:
            full, mem = self._full(name)
            arr = {"positions": np.asarray(full["positions"]), "kv_bytes": np.asarray(mem["kv_bytes"])}
            for view, kv, flops in (("per step", "kv", "flops"), ("cumulative", "kv_cumulative", "flops_cumulative")):
                for cache in CACHES:
                    arr[view, "kv", cache] = np.asarray(full[kv][cache], dtype=np.int64)
                    for part in ("linear", "attention"):
                        arr[view, part, cache] = np.asarray(full[flops][cache][part], dtype=np.int64)
            self._curves[key] = arr
        return self._curves[key]

    def _on_model(self, change):
        """A new model: its context window sets the slider's range (n is clamped into it)."""
        name = change["new"]
        self._quiet = True
        top = self._n_max(name)
        if top >= self.n.max:
            self.n.max = top
        self.n.value = min(self.n.value, top)
        self.n.max = top
        self._quiet = False
        self.redraw()

    # -- drawing -------------------------------------------------------------------------------------
    def _series(self) -> dict:
        """{trace name: (xs, ys, visible)} for the current controls: at most MAX_POINTS points of the cached
        full curves (every point up to MAX_POINTS, then evenly spread on a log axis plus the last one)."""
        arr = self._arrays(self.model.value)
        full, mem = self._full(self.model.value)
        n = self.n.value
        idx = _display_index(n)
        view = self.view.value
        visible = {"cache": self.show.value in ("both", "with cache"),
                   "no cache": self.show.value in ("both", "without cache")}
        pos = arr["positions"][idx]
        out = {}
        for cache in CACHES:
            out[f"K/V, {self._with(cache)} cache"] = (pos, arr[view, "kv", cache][idx], visible[cache])
        for cache in CACHES:
            for part in ("linear", "attention"):
                out[f"{PART_LABELS[part]}, {self._with(cache)} cache"] = (pos, arr[view, part, cache][idx],
                                                                          visible[cache])
        out["KV cache bytes"] = (pos - arr["positions"][0] + 1, arr["kv_bytes"][idx], True)
        out["weights in memory"] = ([1, n], [mem["weight_bytes"]] * 2, True)
        return out

    def _slopes(self) -> dict:
        """Log-log slopes (last half, every point) of the visible K/V and FLOPs curves up to n, from the
        cached analytic_curves lists; per step leaves out step 0 (the prefill)."""
        full, _ = self._full(self.model.value)
        n = self.n.value
        cum = self.view.value == "cumulative"
        skip = 0 if cum else 1
        pos = full["positions"][skip:n]
        out = {}
        for cache in CACHES:
            if self.show.value in ("both", "with cache" if cache == "cache" else "without cache"):
                kv = (full["kv_cumulative"] if cum else full["kv"])[cache]
                out[f"K/V, {self._with(cache)} cache"] = _slope(pos, kv[skip:n])
                for part in ("linear", "attention"):
                    ys = (full["flops_cumulative"] if cum else full["flops"])[cache][part]
                    out[f"{PART_LABELS[part]}, {self._with(cache)} cache"] = _slope(pos, ys[skip:n])
        return out

    def redraw(self):
        if self._quiet:
            return
        t0 = time.perf_counter()
        series = self._series()
        slopes = self._slopes() if self.loglog.value else {}
        kind = "log" if self.loglog.value else "linear"
        with self.figure.batch_update():
            for trace, name in zip(self.figure.data, self._names):
                xs, ys, vis = series[name]
                trace.x, trace.y, trace.visible = xs, ys, vis
                slope = slopes.get(name)
                shown = self._shown[name]
                trace.name = shown if slope is None else t("{label} (slope {slope})", label=shown, slope=f"{slope:.2f}")
            dtick = 1 if kind == "log" else None  # a log axis labels its decades only, never the minor "2 5"
            self.figure.update_xaxes(type=kind, dtick=dtick)
            self.figure.update_yaxes(type=kind, dtick=dtick)
        summary = self.summary
        self.text.value = html.escape(summary)
        show_plotly(self.output, self.figure, summary)  # the summary: the plain-text form
        self.last_update_seconds = time.perf_counter() - t0

    @property
    def summary(self) -> str:
        """One line of totals for the current n, all from lib.costs."""
        full, mem = self._full(self.model.value)
        n = self.n.value
        kv_c, kv_n = full["kv_cumulative"]["cache"][n - 1], full["kv_cumulative"]["no cache"][n - 1]
        flops = full["flops_cumulative"]
        f_c, f_n = flops["cache"]["total"][n - 1], flops["no cache"]["total"][n - 1]
        return t("{model}, n = {n}: K/V computed {kv_c} with cache vs {kv_n} without ({kv_x}x); FLOPs {f_c} vs "
                 "{f_n} ({f_x}x); KV cache {kv_bytes} vs weights in memory {w_bytes}", model=self.model.value, n=n,
                 kv_c=f"{kv_c:,}", kv_n=f"{kv_n:,}", kv_x=f"{kv_n / kv_c:.1f}", f_c=f"{f_c:.3g}", f_n=f"{f_n:.3g}",
                 f_x=f"{f_n / f_c:.1f}", kv_bytes=fmt_bytes(mem['kv_bytes'][n - 1], 3),
                 w_bytes=fmt_bytes(mem['weight_bytes'], 3))

    @property
    def state(self) -> dict:
        return {"model": self.model.value, "n": self.n.value, "show": self.show.value, "view": self.view.value,
                "loglog": self.loglog.value}

    @property
    def drawn(self) -> dict:
        """What the figure shows now: {"traces": {trace name: (xs, ys)} of the visible traces, "labels": {trace
        name: legend text (with the fitted slope in log-log)}, "axes": (x axis type, y axis type)}."""
        visible = [(name, t) for name, t in zip(self._names, self.figure.data) if t.visible is not False]
        return {"traces": {name: (list(t.x), list(t.y)) for name, t in visible},
                "labels": {name: t.name for name, t in visible},
                "axes": (self.figure.layout.xaxis.type, self.figure.layout.yaxis.type)}

    def set(self, n=None, model=None, show=None, view=None, loglog=None):
        """Change controls from Python (as a user would); bad values raise a ValueError saying what is allowed,
        and change nothing."""
        name = self.model.value
        if model is not None:
            models, name = picker_models(model, self._models)
            if len(models) != len(self._models):
                raise ValueError(f"the picker holds {', '.join(self._models)}; a model of your own joins it when "
                                 f"the explorer is made: CostCurvesExplorer(model)")
        n = None if n is None else self._check_n_value(n, name)
        if show is not None:
            self._check_choice(show, SHOWS, "show")
        if view is not None:
            self._check_choice(view, VIEWS, "view")
        if loglog is not None:
            checks.flag(loglog, "loglog")
        for control, value in ((self.model, None if model is None else name), (self.n, n), (self.show, show),
                               (self.view, view), (self.loglog, loglog)):
            if value is not None:
                control.value = value
        return self
