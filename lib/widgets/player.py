"""Generation player: the autoregressive loop, one step at a time, read from real Traces.

At every step of ``lib.generate(..., trace=True)`` the player shows

- the sequence as **token chips**: the prompt, the tokens generated earlier, and the newest token (the one
  chosen at this step);
- the **next-token probabilities** of the top candidates, with the chosen token marked (the distribution the
  token was drawn from: after temperature / top-k / top-p; at temperature 0 the model's own softmax);
- for every position, what happened to its **K/V** in this step: computed for the first time, *recomputed*
  (no cache: pure waste), read from the cache, or not computed yet (the newest token is fed next step);
- the **running count** of K/V vectors computed so far (per layer) with and without a cache.

Where the numbers come from: the displayed Trace gives the tokens, probabilities and its own K/V counts
(counted by the attention layers, not by formula). The other count comes from a second real Trace of the same
run with the cache switched the other way (``generate_pair`` makes both), checked to hold the same tokens;
without one, from the analytic ``lib.costs.kv_computations`` (``PlayerFrame.count_source`` says which).

Public API (three render tiers over one data layer):

- ``generate_pair(model, tokenizer, prompt, ...)`` -> ``(cached_trace, uncached_trace)`` of one run.
- ``player_frames(trace, tokenizer, other=None, ...)`` -> ``list[PlayerFrame]``: what is drawn at each step.
- Tier 1 (static): ``player_table(...)`` -> ``str``; ``plot_step(...)`` (one step) and ``plot_strip(...)``
  (every step, one row each) -> matplotlib ``Figure``.
- Tier 2 (survives export): ``player_figure(...)`` -> plotly ``go.Figure`` with one frame per step, a step
  slider and Play / Pause buttons.
- Tier 3 (live kernel): ``GenerationPlayer(model, tokenizer, prompt="<s>", ...)``, a live widget
  (``lib.widgets.live.FrameStepping``) whose ipywidgets box holds prompt, temperature, top-k, top-p, seed, cache
  on/off and max-new-tokens controls, a Play widget linked to the step slider, Step and Back buttons. Drive it
  from Python with ``.step``, ``.next()``, ``.back()``, ``.set_prompt()``, ``.set()`` and ``.state()``.
"""
from __future__ import annotations

import html
from itertools import accumulate
import time
from dataclasses import asdict, dataclass

import ipywidgets as widgets

from .. import checks
from . import style
from ..costs import kv_computations
from ..generate import generate
from ..i18n import t
from ..text import display_width, pad, token_label
from ..tokenizer import UnknownCharacterError
from ..trace import check_trace
from . import check_controls, frame_slider, play_buttons
from .live import FrameStepping, RecentRuns

# -- colours and words, shared by every tier --------------------------------------------------------------

# Each K/V state is a concept of lib.widgets.style (one colour per idea across the course) with a second cue: a hatch on
# matplotlib cells, a marker symbol in plotly, a one-character mark in text and HTML, and a label in every legend.
# The drawing itself is style.KV_STATES (colour, hatch, glyph, words): these tables are its views for this module.
KV_CONCEPT = {k: s.concept for k, s in style.KV_STATES.items()}
KV_COLORS = {k: s.colour for k, s in style.KV_STATES.items()}  # "none": an empty cell with a dashed edge
KV_HATCH = {k: s.hatch for k, s in style.KV_STATES.items()}
KV_SYMBOL = {k: style.plotly_symbol(c) for k, c in KV_CONCEPT.items()}  # plotly markers
KV_SYMBOL["none"] = "square-open"
# plotly draws the K/V cells as the player's chips: squares the size of the token chips, the glyph written in them
KV_CELL_SYMBOL = {k: "square-open" if k == "none" else "square" for k in style.KV_STATES}
KV_GLYPH_SIZE = 19  # px, bold: large text, whose ink keeps the 3:1 large text needs on every K/V colour
# the chips: prompt a grey tile, generated a white one, the newest token the "newest" concept (and a heavy edge)
CHIP_COLORS = {"prompt": "#CCCCCC", "generated": style.PAPER, "newest": style.colour("newest")}  # 18 L* apart
KV_MEANING = {k: s.meaning for k, s in style.KV_STATES.items()}
KV_SHORT = {k: s.label for k, s in style.KV_STATES.items()}
KV_MARKS = {k: s.glyph for k, s in style.KV_STATES.items()}  # the glyph in each cell, and the text table's code
CHOSEN_COLOR, BAR_COLOR = style.colour("newest"), style.colour("kept")  # the chosen token becomes the newest
CHOSEN_HATCH = style.concept("newest").hatch
MAX_POSITIONS = 64  # animations are capped at ~64 tokens (CONTRIBUTING.md)


@dataclass
class Chip:
    text: str  # the token as text, e.g. "<s>", "人"
    kind: str  # "prompt", "generated" or "newest"


@dataclass
class Bar:
    token: str
    token_id: int
    prob: float  # probability under the sampling distribution, rounded to 4 decimals
    chosen: bool


@dataclass
class PlayerFrame:
    """Everything the player draws for one step (plain data, rounded, identical run to run)."""

    step: int
    n_steps: int
    phase: str  # "prefill" / "decode" (cache) or "recompute" (no cache)
    use_cache: bool
    fed: str  # the tokens fed in this step, as text
    positions: list  # their positions
    chips: list  # list[Chip]: the sequence after this step (prompt + generated + newest)
    kv: list  # status per chip: "new" / "recomputed" / "cached" / "none"
    bars: list  # list[Bar]: top candidates of the sampling distribution (+ the chosen one if outside them)
    chosen: str
    chosen_prob: float
    kv_computed: int  # K/V vectors computed in this step (per layer), from the Trace
    kv_read: int  # K/V vectors read from the cache in this step (per layer), from the Trace
    with_cache: int  # K/V vectors computed so far with a cache (per layer)
    without_cache: int  # ... and without one
    count_source: str  # where the count of the *other* setting comes from: "trace" or "lib.costs"
    layer: int
    n_layers: int
    caption: str

    def as_dict(self) -> dict:
        return asdict(self)


# -- the data layer ------------------------------------------------------------------------------------------

def generate_pair(model, tokenizer, prompt: str = "<s>", max_new_tokens: int = 12, temperature: float = 0.0,
                  top_k: int | None = None, top_p: float | None = None, seed: int | None = 0):
    """Run the same generation twice, with and without the KV cache: ``(cached_trace, uncached_trace)``.

    ``prompt`` is text (``"<s>人工"``); generation stops at the tokenizer's <eos> or after max_new_tokens.
    Errors of the tokenizer (``UnknownCharacterError``) and of ``generate`` (prompt longer than the context
    window, ...) pass through.
    """
    ids = tokenizer.encode(prompt)
    kw = dict(eos_id=tokenizer.eos_id, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed, trace=True)
    cached = generate(model, ids, max_new_tokens, use_cache=True, **kw).trace
    uncached = generate(model, ids, max_new_tokens, use_cache=False, **kw).trace
    return cached, uncached


def kv_status(trace, layer: int) -> list[list[str]]:
    """Per step, the status of every position 0..(sequence length after the step - 1), read from the Trace:
    the fed positions were computed (first time or again), the positions before them were read from the
    cache, the newest token has no K/V yet. The player's chips and the heat-map's key axis draw these."""
    out, seen = [], 0  # seen: positions whose K/V some earlier step already computed
    for s in trace.steps:
        n_comp, n_read = s.kv_computed[layer], s.kv_read[layer]
        if n_comp != len(s.positions) or n_read != s.positions[0]:
            raise ValueError(f"step {s.step}: the Trace says {n_comp} K/V computed and {n_read} read, which does not "
                             f"match the fed positions {s.positions}; was it made by lib.generate?")
        status = ["cached"] * n_read + ["recomputed" if p < seen else "new" for p in s.positions] + ["none"]
        out.append(status)
        seen = max(seen, s.positions[-1] + 1)
    return out


_kv_status = kv_status  # the name the player's tests know


def player_frames(trace, tokenizer, other=None, layer: int = 0, top_k: int = 5, batch: int = 0,
                  digits: int = 4) -> list[PlayerFrame]:
    """What the player draws at every step of ``trace``.

    ``other``: a Trace of the same run with the cache switched the other way (see ``generate_pair``); it gives
    the other side of the running count. Without it that side comes from ``lib.costs.kv_computations``.
    ``top_k``: how many candidates get a bar (the chosen token always gets one).
    """
    check_trace(trace)
    layer = checks.trace_at(trace, layer)[0]
    recorded = trace.steps[0].sample_top_ids.shape[1]  # candidates per step that generate() kept
    top_k = checks.integer(top_k, "top_k", 1, recorded,
                           allowed=f"an integer from 1 to {recorded} (the candidates the Trace recorded)")
    tokens = trace.tokens(batch)
    if len(tokens) > MAX_POSITIONS + 1:
        raise ValueError(f"the trace's sequence has {len(tokens)} tokens; the player shows at most {MAX_POSITIONS + 1}")
    n = len(trace)
    own = trace.kv_computed(layer)
    if other is not None:
        check_trace(other, "other")
        if other.use_cache == trace.use_cache:
            raise ValueError(f"other must be the same run with the cache {'off' if trace.use_cache else 'on'}, "
                             f"but both traces have use_cache={trace.use_cache}")
        if other.tokens(batch) != tokens:
            raise ValueError(
                f"the two traces hold different tokens ({tokenizer.decode(tokens)!r} vs "
                f"{tokenizer.decode(other.tokens(batch))!r}); pass traces of the same run (same prompt, sampling "
                f"settings and seed, e.g. from generate_pair), or other=None to count with lib.costs")
        theirs, source = other.kv_computed(layer), "trace"
    else:
        theirs, source = kv_computations(trace.prompt_len, n, not trace.use_cache), "lib.costs"
    cum_own, cum_theirs = list(accumulate(own)), list(accumulate(theirs))
    statuses = kv_status(trace, layer)  # K/V counts are per sequence: the same for every batch row
    words = tokenizer.tokens(tokens)
    frames = []
    for i, s in enumerate(trace.steps):
        length = trace.prompt_len + i  # tokens before this step's choice
        chips = [Chip(words[p], "prompt" if p < trace.prompt_len else "generated") for p in range(length)]
        chips.append(Chip(words[length], "newest"))
        chosen_id = int(s.chosen[batch])
        ids = s.sample_top_ids[batch, :top_k].tolist()
        probs = s.sample_top_probs[batch, :top_k].tolist()
        bars = [Bar(_word(tokenizer, t), t, round(p, digits), t == chosen_id) for t, p in zip(ids, probs)]
        if chosen_id not in ids:  # sampled from outside the shown candidates: give it a bar of its own
            bars.append(Bar(_word(tokenizer, chosen_id), chosen_id, round(float(s.chosen_prob[batch]), digits), True))
        fed = tokenizer.decode(s.input_ids[batch].tolist())
        with_c, without_c = (cum_own[i], cum_theirs[i]) if trace.use_cache else (cum_theirs[i], cum_own[i])
        first, last = s.positions[0], s.positions[-1]
        pos = t("position {p}", p=first) if first == last else t("positions {a}..{b}", a=first, b=last)
        caption = t("step {i} ({phase}): fed {fed} at {pos} → chose {chosen} (p={p})", i=i, phase=t(s.phase),
                    fed=fed, pos=pos, chosen=words[length], p=f"{float(s.chosen_prob[batch]):.{digits}f}")
        frames.append(PlayerFrame(
            step=i, n_steps=n, phase=s.phase, use_cache=trace.use_cache, fed=fed, positions=list(s.positions),
            chips=chips, kv=statuses[i], bars=bars, chosen=words[length],
            chosen_prob=round(float(s.chosen_prob[batch]), digits), kv_computed=s.kv_computed[layer],
            kv_read=s.kv_read[layer], with_cache=with_c, without_cache=without_c, count_source=source,
            layer=layer, n_layers=trace.n_layers, caption=caption))
    return frames


def _word(tokenizer, token_id: int) -> str:
    return tokenizer.tokens([token_id])[0]


# -- tier 1: text table and matplotlib ---------------------------------------------------------------------

def player_table(trace, tokenizer, other=None, layer: int = 0, top_k: int = 3, batch: int = 0) -> str:
    """Every step as a row of text: the sequence, each position's K/V (+ computed first time, ! recomputed,
    = read from the cache, . none yet), the top candidates, the chosen token, and the running K/V counts."""
    frames = player_frames(trace, tokenizer, other, layer, top_k, batch)
    f0 = frames[0]
    head = [t("step"), t("phase"), t("sequence (newest last)"), "K/V", t("top-{k} candidates (p)", k=top_k),
            t("chosen"), t("K/V so far: cache / no cache")]
    rows = []
    for f in frames:
        seq = "".join(c.text for c in f.chips)
        kv = "".join(KV_MARKS[k] * display_width(c.text) for k, c in zip(f.kv, f.chips))  # one mark under each column
        cands = ", ".join(f"{b.token}{'*' if b.chosen else ''} {b.prob:.4f}" for b in f.bars)
        rows.append([str(f.step), t(f.phase), seq, kv, cands, f.chosen, f"{f.with_cache} / {f.without_cache}"])
    widths = [max(display_width(r[j]) for r in [head] + rows) for j in range(len(head))]
    line = lambda r: "  ".join(pad(v, w) for v, w in zip(r, widths)).rstrip()
    legend = ("K/V: " + "   ".join(f"{KV_MARKS[k]} {t(KV_SHORT[k])}" for k in KV_MARKS)
              + "   |   " + t("* chosen") + "   |   "
              + t("counts per layer (layer {layer} of {n}); the {which} count comes from {src}", layer=layer,
                  n=f0.n_layers, which=t("uncached") if trace.use_cache else t("cached"), src=_source(f0)))
    return "\n".join([legend, line(head), line(["-" * w for w in widths])] + [line(r) for r in rows])


def _draw_cells(ax, texts, fills, y, edge=style.MUTED, dashed=None, hatches=None, bold=None):
    """Squares of width 1 at x = 0, 1, ..., centred on y, each with its text (on a paper label box where the
    cell is hatched, so the hatch never crosses the text); ``bold`` cells get a heavy ink edge (the CJK font has
    no bold weight, so the edge, not the text, carries the emphasis)."""
    from matplotlib.patches import Rectangle

    for x, (t, fc) in enumerate(zip(texts, fills)):
        ls = "--" if dashed and dashed[x] else "-"
        hatch = hatches[x] if hatches else ""
        heavy = bool(bold and bold[x])
        ax.add_patch(Rectangle((x - 0.45, y - 0.4), 0.9, 0.8, facecolor=fc, edgecolor=style.INK if heavy else edge,
                               linewidth=2.5 if heavy else 1, linestyle=ls, hatch=hatch or None))
        if t:
            plain = fc.startswith("#") and style.contrast_ratio(style.INK, fc) >= 4.5
            box = None if plain and not hatch else dict(boxstyle="square,pad=0.1", facecolor=style.PAPER,
                                                         edgecolor="none")  # on a paper label, as the chips
            ax.text(x, y, t, ha="center", va="center", color=style.INK, bbox=box,
                    fontsize=style.FONT_SIZE if len(t) == 1 else style.SMALL_SIZE)


def kv_handles(states=("new", "recomputed", "cached", "none")):
    """Legend entries of the K/V states ``states``: colour, hatch, glyph and the concept's words in the notebook's
    language (the key of every figure that draws K/V states)."""
    from matplotlib.patches import Patch

    return [Patch(facecolor=KV_COLORS[k], hatch=KV_HATCH[k] or None, edgecolor=style.MUTED,
                  linestyle="--" if k == "none" else "-", label=f"{KV_MARKS[k]}  K/V {t(KV_SHORT[k])}")
            for k in states]


def _source(f) -> str:
    """Where the other setting's count comes from, in words."""
    return t("a second Trace") if f.count_source == "trace" else "lib.costs"


def plot_step(trace, tokenizer, step: int = -1, other=None, layer: int = 0, top_k: int = 5, batch: int = 0):
    """One step as a matplotlib Figure: token chips with each position's K/V status below them, the top
    candidates with the chosen token marked, and the running K/V counts with and without a cache."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    frames = player_frames(trace, tokenizer, other, layer, top_k, batch)
    step = checks.integer(step, "step", -len(frames), len(frames) - 1, allowed=(
        f"an integer from 0 to {len(frames) - 1} (or negative from the end)"))
    f, last = frames[step], frames[-1]
    width = len(last.chips)
    fig = plt.figure(figsize=(style.FIGURE_WIDTH, 5.0), layout="constrained")
    gs = fig.add_gridspec(2, 2, height_ratios=[1.0, 1.1], width_ratios=[1.3, 1.0])
    ax = fig.add_subplot(gs[0, :])
    _draw_cells(ax, [c.text for c in f.chips], [CHIP_COLORS[c.kind] for c in f.chips], 1.0,
                bold=[c.kind == "newest" for c in f.chips])
    _draw_cells(ax, [KV_MARKS[k] for k in f.kv], [KV_COLORS[k] for k in f.kv], 0.0,
                dashed=[k == "none" for k in f.kv], hatches=[KV_HATCH[k] for k in f.kv])  # the player's chips
    ax.set_xlim(-0.6, width - 0.4)
    ax.set_ylim(-0.6, 1.6)
    ax.set_yticks([0, 1], ["K/V", t("tokens")])
    ax.set_xticks(range(width))
    ax.set_xlabel(t("position"))
    ax.tick_params(length=0)
    ax.spines[:].set_visible(False)
    ax.set_title(f.caption, loc="left")
    handles = [Patch(facecolor=CHIP_COLORS[k], edgecolor=style.INK if k == "newest" else style.MUTED,
                     linewidth=2.5 if k == "newest" else 1, label=t(f"{k} token")) for k in CHIP_COLORS]
    handles += kv_handles(("new", "recomputed", "cached"))
    fig.legend(handles=handles, ncol=3, loc="outside lower center")

    _draw_bars(fig.add_subplot(gs[1, 0]), f, top_k)
    _draw_counts(fig.add_subplot(gs[1, 1]), f, last)
    return fig


def _draw_bars(axb, f: PlayerFrame, top_k: int):
    """The top candidates of one step as horizontal bars, the chosen token marked (colour, hatch, words)."""
    labels = [b.token for b in f.bars][::-1]
    probs = [b.prob for b in f.bars][::-1]
    colors = [CHOSEN_COLOR if b.chosen else BAR_COLOR for b in f.bars][::-1]
    hatches = [CHOSEN_HATCH if b.chosen else "" for b in f.bars][::-1]
    axb.barh(range(len(labels)), probs, color=colors, hatch=hatches, edgecolor=style.MUTED, linewidth=0.6)
    axb.set_yticks(range(len(labels)), labels)
    axb.set_xlim(0, 1)  # a probability axis ends at 1; a long bar carries its number inside
    for y, (p, b) in enumerate(zip(probs, f.bars[::-1])):
        label = f"{p:.4f}" + (t(" ← chosen") if b.chosen else "")
        inside = p > 0.55
        axb.text(p - 0.02 if inside else p + 0.02, y, label, va="center", ha="right" if inside else "left",
                 fontsize=style.SMALL_SIZE, color=style.INK,
                 bbox=dict(boxstyle="square,pad=0.1", facecolor=style.PAPER, edgecolor="none") if inside else None)
    axb.set_xlabel(t("probability (sampling distribution)"))
    axb.set_title(t("top-{k} next tokens", k=top_k), loc="left")
    axb.spines[["top", "right"]].set_visible(False)


def _draw_counts(axc, f: PlayerFrame, last: PlayerFrame):
    """The running K/V counts after one step, with a cache and without (the axis spans the whole run)."""
    vals = [f.with_cache, f.without_cache]
    # with a cache every K/V is computed once ("computed"); without, most are computed again ("wasted")
    axc.barh([1, 0], vals, color=[KV_COLORS["new"], KV_COLORS["recomputed"]],
             hatch=[KV_HATCH["new"], KV_HATCH["recomputed"]], edgecolor=style.MUTED, linewidth=0.6)
    axc.set_yticks([1, 0], [t("with cache"), t("count row\x04without")])
    axc.set_xlim(0, 1.25 * max(last.without_cache, 1))
    for y, v in zip([1, 0], vals):
        axc.text(v + 0.02 * last.without_cache, y, str(v), va="center", fontsize=style.SMALL_SIZE)
    axc.set_xlabel(t("K/V vectors computed so far (per layer)"))
    axc.set_title(t("running count after step {step}\n(steps 0–{last}: {n} in all)", step=f.step,
                    last=f.n_steps - 1, n=f.n_steps), loc="left")
    axc.spines[["top", "right"]].set_visible(False)


def plot_strip(trace, tokenizer, other=None, layer: int = 0, batch: int = 0):
    """Every step of ``trace`` as one row: the sequence fed (cell colour = what happened to its K/V), the
    newest token, and the running K/V counts; the whole run in one deterministic Figure."""
    import matplotlib.pyplot as plt

    frames = player_frames(trace, tokenizer, other, layer, 1, batch)
    width, n = len(frames[-1].chips), len(frames)
    fig, ax = plt.subplots(figsize=(style.FIGURE_WIDTH, 0.42 * n + 1.9), layout="constrained")
    for i, f in enumerate(frames):
        y = n - 1 - i
        _draw_cells(ax, [c.text for c in f.chips], [KV_COLORS[k] for k in f.kv], y,
                    dashed=[k == "none" for k in f.kv], hatches=[KV_HATCH[k] for k in f.kv])
        ax.text(width + 0.2, y, t("p={p}   K/V so far {a} / {b}", p=f"{f.chosen_prob:.4f}", a=f.with_cache, b=f.without_cache),
                va="center", fontsize=style.SMALL_SIZE)
    ax.set_xlim(-0.6, width + 5.0)
    ax.set_ylim(-0.6, n - 0.4)
    ax.set_yticks(range(n), [t("step {step}", step=f.step) for f in frames][::-1])
    ax.set_xticks(range(width))
    ax.set_xlabel(t("position"))
    ax.tick_params(length=0)
    ax.spines[:].set_visible(False)
    mode = t("with KV cache") if trace.use_cache else t("without cache")
    ax.set_title(t("{mode}: each row is one forward pass; right: K/V computed so far, cache / no cache "
                   "(per layer)", mode=mode), loc="left")
    fig.legend(handles=kv_handles(), ncol=2, loc="outside lower center")  # within the cell's width
    return fig


# -- tier 2: plotly figure with frames ---------------------------------------------------------------------

def _plotly_traces(f: PlayerFrame, width: int, n_bars: int) -> list[dict]:
    """The four traces of one frame, all of fixed length so a frame never re-lays-out the figure."""
    pad = width - len(f.chips)
    chip_color = [CHIP_COLORS[c.kind] for c in f.chips] + ["rgba(0,0,0,0)"] * pad
    e = html.escape  # plotly reads text as HTML: "<s>" would start strike-through
    chip_text = [e(c.text) for c in f.chips] + [""] * pad
    chip_hover = [t("position {p}: {text} ({kind})", p=p, text=e(c.text), kind=t(c.kind)) for p, c in enumerate(f.chips)] + [""] * pad
    kv = kv_chip_look(f.kv, pad)
    line_color = [style.INK if c.kind == "newest" else style.MUTED for c in f.chips] + ["rgba(0,0,0,0)"] * pad
    chip_edge = [2.5 if c.kind == "newest" else 1 for c in f.chips] + [1] * pad
    bars = f.bars + [None] * (n_bars - len(f.bars))
    bar_x = [b.prob if b else 0 for b in bars]
    bar_text = [(f"{e(b.token)}  {b.prob:.4f}" + (t("  ← chosen") if b.chosen else "")) if b else "" for b in bars]
    bar_color = [(CHOSEN_COLOR if b.chosen else BAR_COLOR) if b else "rgba(0,0,0,0)" for b in bars]
    bar_pattern = [style.plotly_pattern("newest") if b and b.chosen else "" for b in bars]
    return [
        dict(type="scatter", x=list(range(width)), y=[1] * width, text=chip_text, hovertext=chip_hover,
             marker=dict(color=chip_color, line=dict(color=line_color, width=chip_edge))),
        dict(type="scatter", x=list(range(width)), y=[0] * width, hovertext=kv["hovertext"], text=kv["text"],
             marker=kv["marker"]),
        dict(type="bar", x=bar_x, y=list(range(n_bars)), text=bar_text,
             marker=dict(color=bar_color, pattern=dict(shape=bar_pattern, fgcolor=style.INK),
                         line=dict(color=style.MUTED, width=1))),  # an edge: a light bar still stands out
        dict(type="bar", x=[f.with_cache, f.without_cache], y=[t("with cache"), t("without cache")],
             text=[str(f.with_cache), str(f.without_cache)],
             marker=dict(color=[KV_COLORS["new"], KV_COLORS["recomputed"]],
                         pattern=dict(shape=[style.plotly_pattern("computed"), style.plotly_pattern("recomputed")],
                                      fgcolor=style.INK), line=dict(color=style.MUTED, width=1))),
    ]


def kv_chip_look(kv: list, pad: int = 0) -> dict:
    """The plotly look of a row of K/V chips, one per state of ``kv`` and ``pad`` invisible ones after (positions
    still to come): ``text`` (the glyph), ``hovertext`` and ``marker`` (fill, square or open square, edge) of a
    scatter trace. The player's K/V row and the heat-map's key axis both draw with it."""
    clear = "rgba(0,0,0,0)"
    return dict(
        text=[f"<b>{KV_MARKS[k]}</b>" for k in kv] + [""] * pad,
        hovertext=[t("position {p}: {what}", p=p, what=t(KV_MEANING[k])) for p, k in enumerate(kv)] + [""] * pad,
        marker=dict(color=[KV_COLORS[k] if k != "none" else style.MUTED for k in kv] + [clear] * pad,
                    symbol=[KV_CELL_SYMBOL[k] for k in kv] + ["square"] * pad,
                    line=dict(color=[style.MUTED] * len(kv) + [clear] * pad, width=1)))  # to come: no outline


def kv_chip_size(width: int) -> tuple[int, int]:
    """(chip, glyph) sizes in px for a row of ``width`` K/V chips: a chip per position, as wide as the row allows."""
    cell = max(14, min(26, 820 // max(width, 1)))
    return cell, max(style.PLOTLY_SMALL, min(KV_GLYPH_SIZE, cell - 6))


def kv_key_html() -> str:
    """The K/V key as plotly / HTML text: each state's marker in its colour, then its words."""
    return "   ".join(f'<span style="color:{style.text_colour(KV_CONCEPT[k]) if k != "none" else style.MUTED}">'
                      f'{"□" if k == "none" else "■"}</span> <b>{html.escape(KV_MARKS[k])}</b> {t(KV_SHORT[k])}'
                      for k in ("new", "recomputed", "cached", "none"))


def player_figure(trace, tokenizer, other=None, layer: int = 0, top_k: int = 5, batch: int = 0, digits: int = 4):
    """A plotly ``go.Figure`` with one frame per step, a step slider and Play / Pause buttons: the player
    precomputed from a Trace, so it steps in a saved notebook without a kernel. ``digits``: the probabilities'
    rounding (fewer for a long run of the real model, whose stored figure must not hinge on a 4th decimal)."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    frames = player_frames(trace, tokenizer, other, layer, top_k, batch, digits)
    last = frames[-1]
    width = len(last.chips)
    n_bars = max(len(f.bars) for f in frames)
    max_count = max(last.with_cache, last.without_cache)
    fig = make_subplots(rows=2, cols=2, specs=[[{"colspan": 2}, None], [{}, {}]], row_heights=[0.42, 0.58],
                        column_widths=[0.55, 0.45], vertical_spacing=0.3, horizontal_spacing=0.2,
                        subplot_titles=(t("tokens (grey: prompt, white: generated, yellow with a heavy edge: newest) "
                                          "and their K/V:") + "<br>" + kv_key_html(),
                                        t("top-{k} next tokens (sampling distribution)", k=top_k),
                                        t("K/V computed so far (per layer)")))
    first = _plotly_traces(frames[0], width, n_bars)
    fig.add_trace(go.Scatter(mode="markers+text", marker_symbol="square", marker_size=26, hoverinfo="text",
                             textfont=dict(size=style.plotly_px(style.FONT_SIZE + 3), color=style.INK),
                             **{k: v for k, v in first[0].items() if k != "type"}), 1, 1)
    cell, glyph = kv_chip_size(width)
    fig.add_trace(go.Scatter(mode="markers+text", marker_size=cell, hoverinfo="text",
                             textfont=dict(size=style.plotly_px(glyph), color=style.INK),
                             **{k: v for k, v in first[1].items() if k != "type"}), 1, 1)
    fig.add_trace(go.Bar(orientation="h", textposition="outside", hoverinfo="skip", cliponaxis=False,
                         **{k: v for k, v in first[2].items() if k != "type"}), 2, 1)
    fig.add_trace(go.Bar(orientation="h", textposition="outside", hoverinfo="skip", cliponaxis=False,
                         **{k: v for k, v in first[3].items() if k != "type"}), 2, 2)
    fig.frames = [go.Frame(name=str(f.step), data=_plotly_traces(f, width, n_bars), traces=[0, 1, 2, 3],
                           layout=dict(title_text=html.escape(f.caption))) for f in frames]
    fig.update_xaxes(range=[-0.6, width - 0.4], dtick=1, title_text=t("position"), row=1, col=1)
    fig.update_yaxes(range=[-0.6, 1.6], tickvals=[0, 1], ticktext=["K/V", t("token")], row=1, col=1)
    fig.update_xaxes(range=[0, 1], row=2, col=1)  # a probability axis ends at 1
    fig.update_yaxes(range=[n_bars - 0.5, -0.5], showticklabels=False, row=2, col=1)
    fig.update_xaxes(range=[0, 1.35 * max(max_count, 1)], row=2, col=2)
    fig.update_yaxes(autorange="reversed", row=2, col=2)
    for a, axis in zip(fig.layout.annotations, ("xaxis", "xaxis2", "xaxis3")):  # each title left-aligned over its
        a.update(x=fig.layout[axis].domain[0], xanchor="left", align="left",  # no overlap
                 font_size=style.plotly_px(style.FONT_SIZE + 2))
    fig.update_layout(
        title_text=html.escape(frames[0].caption), showlegend=False, height=520,
        margin=dict(l=60, r=30, t=110, b=110),
        # no tween: plotly.js cannot tween bars that carry a pattern (the chosen bar's hatch): "e.classed is not a function"
        updatemenus=[play_buttons(900, (t("▶ Play"), t("❚❚ Pause")), tween_ms=0, direction="left", x=0.0, y=-0.14,
                                  xanchor="left", yanchor="top", pad=dict(r=10, t=0))],
        sliders=[frame_slider([f.step for f in frames], t("step "), x=0.24, y=-0.1, len=0.76, xanchor="left",
                              yanchor="top", pad=dict(t=0))])
    return fig


# -- tier 3: live ipywidgets player --------------------------------------------------------------------------

TEMPERATURES = (("0 (greedy)", 0.0), ("0.5", 0.5), ("0.7", 0.7), ("1.0", 1.0), ("1.5", 1.5), ("2.0", 2.0))
TOP_KS = (("off", 0), ("1", 1), ("2", 2), ("3", 3), ("5", 5), ("10", 10), ("20", 20), ("50", 50))
TOP_PS = (("off", 1.0), ("0.95", 0.95), ("0.9", 0.9), ("0.8", 0.8), ("0.5", 0.5), ("0.2", 0.2))



def _shown(options):
    """A control's (label, value) options with the labels in the notebook's language ("off" → "关")."""
    return [(t(label), value) for label, value in options]


def _swatch(fill: str, hatch: str = "") -> str:
    """CSS for a coloured cell: its fill, and its concept's hatch as the figures draw it (the second cue)."""
    return f"background-color:{fill};{style.hatch_css(hatch)}"


def frame_html(f: PlayerFrame) -> str:
    """One frame as self-contained HTML (inline styles, no scripts): what the live player shows. Sizes are in em
    (they follow the page: larger in the classroom view); text colours follow JupyterLab's theme (``style.css``),
    and text on a coloured cell is ``style.INK``, readable on that fixed fill in light and dark themes alike."""
    e = html.escape
    ink, muted, border = style.INK, style.css("muted"), style.MUTED
    # cell edges in the theme's secondary ink (MUTED on light, a light grey on dark: they read on both)
    cell = ("display:inline-block;vertical-align:top;min-width:1.9em;height:1.9em;line-height:1.9em;margin:1px;"
            "text-align:center;"
            f"border:1px solid {muted};border-radius:3px;padding:0 2px;color:{ink}")
    # a generated chip and an empty K/V cell are the page itself (white on light, dark on dark), with the theme's
    # ink; the prompt's grey and the newest token's yellow are fixed fills with INK on them. The newest token's
    # heavy edge is INK ringed by the theme's ink: a dark edge on light, a light ring around it on dark.
    page = f"background:{style.css('paper')};color:{style.css('ink')}"
    fills = {"prompt": f"background:{CHIP_COLORS['prompt']}", "generated": page,
             "newest": f"background:{CHIP_COLORS['newest']};font-weight:bold;border:2px solid {ink};"
                       f"box-shadow:0 0 0 2px {style.css('ink')}"}
    chips = "".join(f'<span title="{e(t("position {p}: {kind}", p=p, kind=t(c.kind)))}" style="{cell};font-size:1.08em;'
                    f'{fills[c.kind]}">{e(token_label(c.text))}</span>' for p, c in enumerate(f.chips))

    def kv_cell(k: str, extra: str = "") -> str:
        if k == "none":  # no K/V yet: the page's own colours inside a dashed edge
            return (f'{extra}{page};border-style:dashed">'
                    f'<span style="padding:0 2px">{e(KV_MARKS[k])}</span></span>')
        return (f'{extra}{_swatch(KV_COLORS[k], KV_HATCH[k])}">'
                f'<span style="background:{style.PAPER};padding:0 2px">{e(KV_MARKS[k])}</span></span>')

    kvs = "".join(kv_cell(k, f'<span title="{e(t("position {p}: {what}", p=p, what=t(KV_MEANING[k])))}" '
                             f'style="{cell};font-weight:bold;') for p, k in enumerate(f.kv))
    bars = "".join(
        f'<div style="white-space:nowrap;line-height:1.6em"><span style="display:inline-block;min-width:3.5em">'
        f'{e(token_label(b.token))}</span>'
        f'<span style="display:inline-block;vertical-align:middle;height:0.9em;width:{round(200 * b.prob)}px;'
        f'border:1px solid {border};{_swatch(CHOSEN_COLOR if b.chosen else BAR_COLOR, style.concept("newest").hatch if b.chosen else "")}"></span> '
        f'{b.prob:.4f}{" <b>" + t("← chosen") + "</b>" if b.chosen else ""}</div>' for b in f.bars)
    top = max(f.without_cache, f.with_cache, 1)
    counts = "".join(
        f'<div style="white-space:nowrap;line-height:1.6em"><span style="display:inline-block;min-width:7.5em">'
        f'{lab}</span><span style="display:inline-block;vertical-align:middle;height:0.9em;'
        f'width:{round(160 * v / top)}px;border:1px solid {border};{_swatch(KV_COLORS[k], KV_HATCH[k])}">'
        f'</span> {v}</div>'
        for lab, v, k in ((t("with cache"), f.with_cache, "new"),
                          (t("without cache"), f.without_cache, "recomputed")))
    legend = " · ".join(kv_cell(k, f'<span style="{cell};min-width:1.4em;height:1.3em;line-height:1.3em;'
                                   f'vertical-align:middle;font-weight:bold;') + f' {t(KV_SHORT[k])}'
                        for k in ("new", "recomputed", "cached", "none"))
    top_head = t("<b>top candidates</b> (sampling distribution)")
    count_head = t("<b>K/V computed so far</b> (layer {layer}, per layer; this step: {computed} computed, "
                   "{read} read)", layer=f.layer, computed=f.kv_computed, read=f.kv_read)
    source = t("the {which} count comes from {src}", which=t("uncached") if f.use_cache else t("cached"),
               src=_source(f))
    return (f'<div style="font-family:sans-serif;color:{style.css("ink")}">'
            f'<div style="margin-bottom:4px"><b>{e(f.caption)}</b></div>'
            f'<div>{chips}</div><div>{kvs}</div><div style="font-size:0.9em;margin:2px 0 8px 0">K/V: {legend}</div>'
            f'<div style="display:flex;flex-wrap:wrap;gap:1em 3em">'
            f'<div><div>{top_head}</div>{bars}</div><div><div>{count_head}</div>{counts}'
            f'<div style="font-size:0.9em;color:{muted}">{source}</div></div></div></div>')


def message_html(text: str) -> str:
    """An error or a note under the player: theme-coloured text in a box edged in the "wasted" colour."""
    return (f'<div style="font-family:sans-serif;color:{style.css("ink")};background:{style.css("paper")};'
            f'border:1px solid {style.colour("recomputed")};border-left-width:6px;'
            f'padding:6px;white-space:pre-wrap">{html.escape(text)}</div>')


class GenerationPlayer(FrameStepping):
    """The live player: change an input and the model runs again (both with and without the cache).

    Python API (what a test or a notebook cell can drive without a browser; display the player itself, or
    ``.widget``, its ipywidgets box):
    ``.step`` (get / set), ``.next()``, ``.back()``, ``.play()``, ``.pause()``, ``.set_prompt(text)``,
    ``.set(temperature=..., top_k=..., top_p=..., seed=..., use_cache=..., max_new_tokens=...)``,
    ``.state()`` (what is drawn now: chips, K/V statuses, bars, counts, caption, message),
    ``.frames`` (every step's ``PlayerFrame``), ``.traces`` (cached, uncached), ``.message`` (error text or ""),
    ``.last_run_seconds`` / ``.last_update_seconds`` (the last re-run of the model / redraw of one step).
    """

    def __init__(self, model, tokenizer, prompt: str = "<s>", max_new_tokens: int = 12, temperature: float = 0.0,
                 top_k: int | None = None, top_p: float | None = None, seed: int = 0, use_cache: bool = True,
                 layer: int = 0, bar_k: int = 5, interval_ms: int = 900, step: int | None = None):
        w = widgets
        limit = min(MAX_POSITIONS, model.config.max_seq_len)
        # the constructor refuses exactly what set() refuses (never a silent clamp to a control's range)
        v = _checked_settings(limit, prompt=prompt, temperature=temperature, top_k=top_k, top_p=top_p, seed=seed,
                              use_cache=use_cache, max_new_tokens=max_new_tokens)
        self.layer = checks.integer(layer, "layer", 0, model.config.n_layers - 1)
        self.bar_k = checks.integer(bar_k, "bar_k", 1, 10, allowed="an integer from 1 to 10 (the candidates a "
                                                                  "Trace records)")
        self.model, self.tokenizer = model, tokenizer
        self.frames, self.traces, self.message = [], (None, None), ""
        self._pairs = RecentRuns()  # settings -> (cached, uncached) traces, the last runs (_pair)
        self.last_run_seconds = self.last_update_seconds = 0.0  # the last model re-run / step redraw, in seconds
        # every description shown whole (style.control_style), every control filling its grid cell
        look = dict(style=style.control_style(), layout=w.Layout(**style.control_layout()))
        self.prompt_box = w.Text(value=v["prompt"], description=t("prompt"), continuous_update=False, **look)
        self.temperature = w.SelectionSlider(options=_shown(TEMPERATURES), description=t("temperature"), value=v["temperature"],
                                             **look)
        self.top_k = w.Dropdown(options=_shown(TOP_KS), value=v["top_k"], description="top-k", **look)
        self.top_p = w.SelectionSlider(options=_shown(TOP_PS), value=v["top_p"], description="top-p", **look)
        self.seed = w.BoundedIntText(value=v["seed"], min=0, max=MAX_SEED, description=t("seed"), **look)
        self.use_cache = w.Checkbox(value=use_cache, description=t("KV cache"), indent=False, **look)
        self.max_new = w.IntSlider(value=v["max_new_tokens"], min=1, max=limit, description=t("max new tokens"),
                                   continuous_update=False, **look)
        # the step slider takes the rest of the playback row, and never less than a track one can aim at (in a
        # wrapping row an "auto" width would shrink it to its handle and readout: a slider with no visible track)
        self.slider = w.IntSlider(value=0, min=0, max=0, description=t("step"), continuous_update=True,
                                  style=style.control_style(), layout=w.Layout(flex="1 1 24em", min_width="18em"))
        self.player = w.Play(value=0, min=0, max=0, interval=checks.integer(interval_ms, "interval_ms", 1),
                             show_repeat=False, description=t("play"), style=style.control_style())
        w.jslink((self.player, "value"), (self.slider, "value"))  # the browser moves the slider while playing
        self.view = w.HTML()
        inputs = (self.prompt_box, self.temperature, self.top_k, self.top_p, self.seed, self.use_cache, self.max_new)
        for control in inputs:
            control.observe(self._on_input, names="value")
        self.slider.observe(self._on_step, names="value")
        self.controls = style.grid(self.prompt_box, self.use_cache, self.seed, self.temperature, self.top_k,
                                   self.top_p, self.max_new, columns=3)
        self.widget = self.box(self.controls, self.playback(self.player), self.view)
        self._rerun()
        if self.frames and step is not None:  # (without it: the first view, FIRST_STEP, chosen by _rerun)
            self.step = step
            self.player.value = self.step  # the browser's jslink starts the slider from the Play widget's value

    # -- Python API (step, next() and back(): FrameStepping) -----------------------------------------------------
    def play(self):
        self.player.playing = True

    def pause(self):
        self.player.playing = False

    def set_prompt(self, text: str):
        """Change the prompt (the model runs again, or the widget shows why it cannot)."""
        self.prompt_box.value = text

    def set(self, **settings):
        """Change several inputs at once (one re-run): temperature, top_k, top_p, seed, use_cache, max_new_tokens."""
        controls = {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p, "seed": self.seed,
                    "use_cache": self.use_cache, "max_new_tokens": self.max_new, "prompt": self.prompt_box}
        values = _checked_settings(self.max_new.max, **settings)
        self._quiet = True  # one re-run at the end, not one per control
        try:
            for k, v in values.items():
                controls[k].value = v
        finally:
            self._quiet = False
        self._rerun()

    def settings(self) -> dict:
        """The generation settings now in the controls, as lib.generate takes them."""
        return dict(prompt=self.prompt_box.value, max_new_tokens=self.max_new.value,
                    temperature=self.temperature.value, top_k=self.top_k.value or None,
                    top_p=None if self.top_p.value >= 1.0 else self.top_p.value, seed=self.seed.value,
                    use_cache=self.use_cache.value)

    def state(self) -> dict:
        """What the widget draws now: settings, step, message, and the current frame (chips, kv, bars, counts)."""
        frame = self.frames[self.slider.value].as_dict() if self.frames else None
        return dict(settings=self.settings(), step=self.slider.value, n_steps=len(self.frames),
                    message=self.message, frame=frame, html=self.view.value)

    # -- callbacks -------------------------------------------------------------------------------------------
    _quiet = False

    def _on_input(self, change):
        if not self._quiet:
            self._rerun()

    def _on_step(self, change):
        self.redraw()

    def _rerun(self):
        """Run the model with the current settings (with and without the cache) and redraw."""
        s = self.settings()
        fresh = not self.frames  # the first run, or the first after a failed one: open on the first view again
        t0 = time.perf_counter()
        try:
            n_prompt = len(self.tokenizer.encode(s["prompt"]))
            n = n_prompt + s["max_new_tokens"]  # generate's own limit, max_seq_len + 1, speaks first (its message)
            if MAX_POSITIONS + 1 < n <= self.model.config.max_seq_len + 1:  # the frames': every position drawn
                return self._fail(t("The player draws at most {m} positions after <s>: this prompt has {n} tokens, so "
                                    "'max new tokens' can be at most {k} (it is {v}). Lower it or shorten the prompt.",
                                    m=MAX_POSITIONS, n=n_prompt, k=max(0, MAX_POSITIONS + 1 - n_prompt),
                                    v=s["max_new_tokens"]))
            cached, uncached = self._pair(s)
        except UnknownCharacterError as err:
            shown = ", ".join(f"{c!r} (U+{ord(c):04X})" for c in err.chars)
            return self._fail(t("The prompt has {n} character(s) that are not in the model's vocabulary: "
                                "{shown}. Allowed: printable ASCII, the Chinese characters of the training corpus "
                                "(tokenizer.chars) and the special tokens <s>, <eos>, <pad>, <unk>. "
                                "Remove or replace them, e.g. try <s>人 or <s>深.", n=len(err.chars), shown=shown))
        except ValueError as err:
            return self._fail(t("Cannot generate from this prompt: {err}", err=err))
        shown, other = (cached, uncached) if s["use_cache"] else (uncached, cached)
        note = ""
        if shown.tokens() != other.tokens():  # sampling on a near-tie can differ in the last bits; say so
            other = None
            note = t("the run without the cache chose different tokens; its count comes from lib.costs")
        self.traces = (cached, uncached)
        self.frames = player_frames(shown, self.tokenizer, other, self.layer, self.bar_k)
        self.last_run_seconds = time.perf_counter() - t0
        self.message = note
        n = len(self.frames)
        with self.slider.hold_trait_notifications():
            step = min(FIRST_STEP, n - 1) if fresh else min(self.slider.value, n - 1)
            self.player.max = self.slider.max = n - 1
            self.slider.value = step
        self.player.value = step
        self.redraw()

    def _pair(self, s: dict) -> tuple:
        """``generate_pair`` for the settings ``s``: the model runs once per prompt and sampling settings; the
        cache checkbox only chooses which of the two traces is shown, and settings seen before come back from the
        player's last runs (a learner who toggles a control back and forth waits once)."""
        key = (s["prompt"], s["max_new_tokens"], s["temperature"], s["top_k"], s["top_p"], s["seed"])
        return self._pairs.get(key, lambda: generate_pair(self.model, self.tokenizer, *key))

    def _fail(self, text: str):
        self.frames, self.traces, self.message = [], (None, None), text
        self.player.playing = False
        self.slider.value = 0
        self.player.max = self.slider.max = 0
        self.view.value = message_html(text)

    def redraw(self):
        """Redraw the current step (no model run): ``last_update_seconds`` times it."""
        if not self.frames:
            return
        t0 = time.perf_counter()
        body = frame_html(self.frames[self.slider.value])
        self.view.value = body + (message_html(self.message) if self.message else "")
        self.last_update_seconds = time.perf_counter() - t0


MAX_SEED = 2 ** 31 - 1  # the seed box's range
# The live player opens on this step (or the last, for a shorter run), not on the prefill: three decode steps in,
# the cache already holds the prompt and three tokens, each step reads them ("=") and computes one, and the counts
# with and without the cache have parted. Back reaches step 0.
FIRST_STEP = 3


def _checked_settings(limit: int, **values) -> dict:
    """The player's inputs as its controls hold them, each checked (the constructor and ``set`` share this):
    a value a control would clamp or refuse is a ValueError / TypeError that names it and says what is allowed."""
    allowed = ("temperature", "top_k", "top_p", "seed", "use_cache", "max_new_tokens", "prompt")
    check_controls(values, allowed)
    check = {"temperature": lambda v: _option(TEMPERATURES, v, "temperature"),
             "top_k": lambda v: _option(TOP_KS, 0 if v is None else v, "top_k"),
             "top_p": lambda v: _option(TOP_PS, 1.0 if v is None else v, "top_p"),
             "seed": lambda v: checks.integer(v, "seed", 0, MAX_SEED),
             "use_cache": lambda v: checks.flag(v, "use_cache"),
             "max_new_tokens": lambda v: checks.integer(v, "max_new_tokens", 1, limit, allowed=(
                 f"an integer from 1 to {limit} (the range of the max new slider)")),
             "prompt": lambda v: checks.text(v, "prompt")}
    return {k: check[k](v) for k, v in values.items()}


def _option(options, value, name):
    """The option value equal to ``value`` (so 1 == 1.0 finds "1.0"), or a clear error listing the choices."""
    for _, v in options:
        if v == checks.as_number(value):
            return v
    raise ValueError(f"{name}={value!r} is not one of the player's steps: "
                     f"{', '.join(str(v) for _, v in options)} (0 / 1.0 mean off where that applies)")
