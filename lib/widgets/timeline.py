"""The request timeline of a serving run (notebook 09): one row per request, one column per forward pass, what the
request was doing in each pass: waiting in the queue, prefilling (its first pass), decoding, or (static batching
only) holding its batch slot after it finished, until the whole batch is done.

    segments = timeline_segments(run)     # per request: [(state, first pass, last pass), ...]  (a ServeResult)
    fig = timeline_figure({"static": static_run, "continuous": continuous_run})

The segments come from the run's own records (``Sequence.admitted_step`` / ``finish_step``), so the idle
slot-passes the figure draws add up to the run's ``idle_slots`` counter (tests/test_widget_timeline.py).
"""
from __future__ import annotations

import matplotlib.pyplot as plt
from matplotlib.patches import Patch

from . import style
from ..i18n import t

STATES = ("waiting", "prefill", "decode", "idle")
# a policy's name in a title, keyed by its context: a bare "static" is a static cache elsewhere (静态, not 静态批处理)
POLICY_WORDS = {"static": "batching policy\x04static", "continuous": "batching policy\x04continuous"}
_LOOK = {"waiting": "free", "prefill": "prefill", "decode": "decode", "idle": "wasted"}  # state -> concept
_LABEL = {"waiting": "waiting in the queue", "prefill": "prefill (its first pass)", "decode": "decoding",
          "idle": "finished, slot still held (static batching)"}


def _check_run(run):
    from ..serving import ServeResult
    if not isinstance(run, ServeResult):
        raise TypeError(f"a timeline is drawn from a lib.serving.serve result, got {type(run).__name__}")
    return run


def timeline_segments(run) -> list[list[tuple[str, int, int]]]:
    """Per request (in the run's record order): (state, first pass, last pass) segments, both ends included,
    covering passes 0 .. run.steps - 1 until the request is done. Static batching holds a finished request's slot
    until the last request admitted with it finishes ("idle"); continuous batching frees it at once."""
    run = _check_run(run)
    batch_end = {}
    for r in run.records:
        batch_end[r.admitted_step] = max(batch_end.get(r.admitted_step, -1), r.finish_step)
    out = []
    for r in run.records:
        seg = []
        if r.admitted_step > 0:
            seg.append(("waiting", 0, r.admitted_step - 1))
        seg.append(("prefill", r.admitted_step, r.admitted_step))
        if r.finish_step > r.admitted_step:
            seg.append(("decode", r.admitted_step + 1, r.finish_step))
        if run.policy == "static" and batch_end[r.admitted_step] > r.finish_step:
            seg.append(("idle", r.finish_step + 1, batch_end[r.admitted_step]))
        out.append(seg)
    return out


def plot_timeline(run, ax=None, title: str | None = None):
    """One run's timeline on ``ax``: a row per request (request 0 on top), passes along x."""
    run = _check_run(run)
    if ax is None:
        _, ax = plt.subplots(figsize=(style.FIGURE_WIDTH, 0.28 * len(run.records) + 1.2))
    for row, segments in enumerate(timeline_segments(run)):
        for state, a, b in segments:
            look = style.concept(_LOOK[state])
            ax.broken_barh([(a - 0.5, b - a + 1)], (row - 0.4, 0.8), facecolors=look.colour, hatch=look.hatch,
                           edgecolor=style.INK if state != "waiting" else style.GRID, linewidth=0.4)
    ax.set_ylim(len(run.records) - 0.5, -0.5)
    ax.set_xlim(-0.5, run.steps - 0.5)
    ax.set_yticks(range(len(run.records)), [str(r.rid) for r in run.records])
    ax.set_ylabel(t("request"))
    ax.set_xlabel(t("forward pass"))
    ax.set_title(title if title is not None else t("{policy}: {steps} passes", policy=t(POLICY_WORDS[run.policy]),
                                                   steps=run.steps), loc="left")
    return ax


def timeline_figure(runs: dict):
    """The timelines of several runs of the same requests, one above the other, on one pass axis, with one
    legend of the four states."""
    if not isinstance(runs, dict) or not runs:
        raise ValueError("timeline_figure takes a dict {name: lib.serving.serve result}, at least one")
    runs = {name: _check_run(r) for name, r in runs.items()}
    n = max(len(r.records) for r in runs.values())
    fig, axes = plt.subplots(len(runs), 1, sharex=True, squeeze=False,
                             figsize=(style.FIGURE_WIDTH, len(runs) * (0.22 * n + 0.9) + 0.6))
    steps = max(r.steps for r in runs.values())
    for ax, (name, run) in zip(axes[:, 0], runs.items()):
        plot_timeline(run, ax, title=t("{policy}: {steps} passes", policy=t(name), steps=run.steps))
        ax.set_xlim(-0.5, steps - 0.5)
    for ax in axes[:-1, 0]:
        ax.set_xlabel("")
    handles = [Patch(facecolor=style.concept(_LOOK[s]).colour, hatch=style.concept(_LOOK[s]).hatch,
                     edgecolor=style.INK, linewidth=0.4, label=t(_LABEL[s])) for s in STATES]
    fig.legend(handles=handles, loc="outside lower center", ncols=2, frameon=False)
    return fig
