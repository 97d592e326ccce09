"""The serving engine you can watch (notebook 10): requests arrive over time, wait, are admitted, share a prefix,
get preempted, stream their tokens and free their blocks, on the real model and one shared paged pool.

Everything comes from lib.serving: an ``Engine`` (continuous batching, prefix caching, chunked prefill under a
token budget, preemption by recompute) stepped on a clock of *ticks* (one engine step each), with requests arriving
as a seeded Poisson process at ``rate`` requests per tick (``lib.serving.arrivals``) — or typed by the learner. Each
tick is one ``EngineFrame``: the engine's ``snapshot()`` (queues, blocks by owner, texts) and the step's events
(arrived, admitted, preempted, finished, each row's prefill chunk or decode token). This module only draws them,
in three tiers from the same frames:

* ``engine_table`` / ``plot_engine`` (static: the events, and the pool, the batch and the queues over time);
* ``engine_figure`` (plotly, one frame per tick and a slider; survives export);
* ``ServingDashboard`` (ipywidgets: Play / Step / Back, sliders for the arrival rate, the pool, the block size
  and the token budget, a prompt box; Python API without a browser).

A ``Watcher`` keeps the same frames of the engine behind the OpenAI-compatible endpoint
(``lib.serving.start_server(model, tokenizer, on_step=watcher)``), drawn by the same functions.
"""
from __future__ import annotations

import html
import time
from collections import deque
from dataclasses import dataclass, field

from .. import checks
from ..blocks import blocks_for
from ..serving.arrivals import arrivals
from ..serving.engine import Engine
from ..i18n import colon, t
from ..text import text_table
from . import check_controls, frame_slider, play_buttons, prompt_problem, style
from .blocks import CACHED_COLOR, FREE_COLOR, HATCH_INK, SEQ_COLORS, SEQ_HATCHES, SHARED_COLOR, STATE_HATCHES
from .live import FrameStepping, problem_html, within

# A system prompt every request starts with (after <s>), as a chat service puts its instructions in front: its
# full blocks are computed once and shared through the prefix cache.
SYSTEM_PROMPT = "You are the chorus. Say it in verse:\n"
SETTINGS = dict(rate=0.35, n_requests=10, n_blocks=28, block_size=8, budget=48, max_batch=4, max_new_tokens=24,
                max_prompt=24, seed=0)
RATES = (0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5)  # requests per tick
BLOCK_SIZES = (4, 8, 16)
BUDGETS = (16, 24, 32, 48, 64, 96, 128)  # tokens one step may feed (max_num_batched_tokens)
MAX_TICKS = 120  # a run longer than this is cut (every tier draws one frame per tick)
PHASE_CONCEPT = {"prefill": "prefill", "decode": "decode"}


@dataclass(frozen=True)
class EngineFrame:
    """The engine after one tick (request ids throughout). ``rows``: rid -> ("prefill" | "decode", tokens fed)
    for the step's batch; ``owners[b]``: the requests whose tables hold block b (two or more: a shared prefix
    block); ``cached[b]``: block b is in the prefix index; ``texts``: what each request has made so far;
    ``prompts``: each request's own prompt (after the shared system prompt)."""

    tick: int
    arrived: tuple
    waiting: tuple
    preempted: tuple
    running: tuple
    finished: tuple
    admitted: tuple
    preempted_now: tuple
    finished_now: tuple
    rows: dict
    owners: tuple
    cached: tuple
    prefill_tokens: int
    decode_tokens: int
    budget: int | None
    block_size: int
    prefix_hit_blocks: int
    texts: dict = field(default_factory=dict)
    prompts: dict = field(default_factory=dict)

    @property
    def used_blocks(self) -> int:
        return sum(bool(o) for o in self.owners)

    @property
    def shared_blocks(self) -> int:
        return sum(len(o) > 1 for o in self.owners)

    def block_state(self, b: int) -> str:
        """"free", "cached" (free, still in the prefix index), "shared" (two owners or more) or "used"."""
        if len(self.owners[b]) > 1:
            return "shared"
        if self.owners[b]:
            return "used"
        return "cached" if self.cached[b] else "free"


def engine_frame(engine: Engine, tick: int, arrived=(), events=None, prompts=None) -> EngineFrame:
    """The frame of ``engine`` now: its snapshot and ``events`` (the ``StepEvents`` of the tick's step; None: no
    step ran)."""
    snap = engine.snapshot()
    ev = events
    return EngineFrame(tick, tuple(arrived), tuple(snap.waiting), tuple(snap.preempted), tuple(snap.running),
                       tuple(snap.finished), tuple(ev.admitted) if ev else (), tuple(ev.preempted) if ev else (),
                       tuple(ev.finished) if ev else (), dict(ev.rows) if ev else {},
                       tuple(tuple(o) for o in snap.owners), tuple(snap.cached),
                       ev.prefill_tokens if ev else 0, ev.decode_tokens if ev else 0, snap.budget,
                       engine.pool.block_size, snap.prefix_hit_blocks, dict(snap.texts), dict(prompts or {}))


class EngineRun:
    """An ``Engine`` on ``model`` stepped one tick at a time while requests arrive: ``n_requests`` of held-out text
    (``lib.serving.arrivals``: a Poisson process of ``rate`` per tick, seeded), each after ``system_prompt``;
    ``n_blocks`` blocks of ``block_size`` tokens, prefix caching on, at most ``max_batch`` rows and ``budget``
    tokens fed per step. ``frames``: one ``EngineFrame`` per tick so far (tick 0: the first arrivals, no step
    yet). ``advance()`` runs one tick; ``send(text)`` adds the learner's own request now."""

    def __init__(self, model, tokenizer, *, rate: float = SETTINGS["rate"], n_requests: int = SETTINGS["n_requests"],
                 n_blocks: int = SETTINGS["n_blocks"], block_size: int = SETTINGS["block_size"],
                 budget: int = SETTINGS["budget"], max_batch: int = SETTINGS["max_batch"],
                 max_new_tokens: int = SETTINGS["max_new_tokens"], max_prompt: int = SETTINGS["max_prompt"],
                 system_prompt: str = SYSTEM_PROMPT, seed: int = SETTINGS["seed"]):
        rate = checks.number(rate, "rate", above=0, allowed="a finite number > 0 (requests per tick)")
        block_size = checks.integer(block_size, "block_size", 1)
        n_blocks = checks.integer(n_blocks, "n_blocks", 1)
        self.model, self.tokenizer = model, tokenizer
        self.settings = dict(rate=rate, n_requests=n_requests, n_blocks=n_blocks, block_size=block_size,
                             budget=budget, max_batch=max_batch, max_new_tokens=max_new_tokens, max_prompt=max_prompt,
                             seed=seed)
        self.system = tokenizer.encode(checks.text(system_prompt, "system_prompt"))
        reqs = arrivals(tokenizer, n_requests, rate, seed, system_prompt=system_prompt, max_prompt=max_prompt,
                        max_new_tokens=max_new_tokens)
        need = max(blocks_for(len(a.prompt) + a.max_new_tokens - 1, block_size) for a in reqs)
        if need > n_blocks:
            raise ValueError(f"n_blocks={n_blocks} is too small: the longest request needs {need} blocks of "
                             f"{block_size} tokens on its own; give n_blocks >= {need}")
        self.engine = Engine(model, tokenizer, max_batch=max_batch, n_blocks=n_blocks, block_size=block_size,
                             prefix_cache=True, max_num_batched_tokens=budget)
        self.pending = deque(reqs)
        self.prompts, self._sent, self.tick = {}, [], 0
        self.frames = [engine_frame(self.engine, 0, self._arrivals(), prompts=self.prompts)]

    def _add(self, prompt: list, max_new_tokens: int) -> int:
        rid = self.engine.add_request(prompt, max_new_tokens)
        self.prompts[rid] = self.tokenizer.decode(prompt[1 + len(self.system):])
        return rid

    def _arrivals(self) -> list:
        """Add every pending request whose time has come (and those sent since the last tick); their ids."""
        rids, self._sent = self._sent, []
        while self.pending and self.pending[0].at <= self.tick:
            a = self.pending.popleft()
            rids.append(self._add(a.prompt, a.max_new_tokens))
        return rids

    @property
    def done(self) -> bool:
        """Every request has arrived and finished (or the run reached MAX_TICKS)."""
        return (not self.pending and not self._sent and not self.engine.has_unfinished()) or self.tick >= MAX_TICKS

    def advance(self) -> bool:
        """One tick: the requests due arrive, the engine steps (if anything runs or waits), a frame is kept.
        False (and nothing happens) when the run is done."""
        if self.done:
            return False
        self.tick += 1
        arrived = self._arrivals()
        events = self.engine.step() if self.engine.has_unfinished() else None
        self.frames.append(engine_frame(self.engine, self.tick, arrived, events, self.prompts))
        return True

    def run(self) -> list[EngineFrame]:
        """Advance to the end; the frames."""
        while self.advance():
            pass
        return self.frames

    def send(self, text: str) -> int:
        """The learner's request: <s>, the system prompt, ``text``; it makes ``max_new_tokens`` tokens and
        arrives at the next tick. Returns its id; a text the model cannot take raises and adds nothing."""
        ids = [self.tokenizer.bos_id] + self.system + self.tokenizer.encode(checks.text(text, "text"))
        rid = self._add(ids, self.settings["max_new_tokens"])
        self._sent.append(rid)
        return rid


class Watcher:
    """``on_step`` for ``lib.serving.start_server``: after every step of the server's engine (in its thread), one
    ``EngineFrame`` in ``frames``; a tick is a step (the server's engine steps only while it has work)."""

    def __init__(self, tokenizer):
        self.tokenizer, self.frames, self._seen, self.prompts = tokenizer, [], 0, {}

    def __call__(self, engine: Engine, events):
        arrived = [s.rid for s in engine.record.records[self._seen:]]
        for s in engine.record.records[self._seen:]:
            self.prompts[s.rid] = self.tokenizer.decode(s.prompt[1:])
        self._seen = len(engine.record.records)
        self.frames.append(engine_frame(engine, len(self.frames) + 1, arrived, events, self.prompts))


def record_engine(model, tokenizer, **settings) -> list[EngineFrame]:
    """The frames of a whole ``EngineRun`` (``settings``: its keyword arguments)."""
    return EngineRun(model, tokenizer, **settings).run()


# -------------------------------------------------------------------------------- tier 1: table and figure

def _rids(rids) -> str:
    return " ".join(f"#{r}" for r in rids) or "-"


def engine_table(frames: list[EngineFrame], every_tick: bool = False) -> str:
    """One line per tick where something happened (all ticks with ``every_tick``): arrivals, the batch (prefill
    and decode tokens against the budget), admissions, preemptions, finishes, blocks in use and shared."""
    rows = []
    for f in frames:
        if not (every_tick or f.arrived or f.admitted or f.preempted_now or f.finished_now):
            continue
        budget = "-" if f.budget is None else f.budget
        rows.append([f.tick, _rids(f.arrived), _rids(f.admitted), _rids(f.preempted_now), _rids(f.finished_now),
                     f"{f.prefill_tokens} + {f.decode_tokens} / {budget}", len(f.waiting) + len(f.preempted),
                     f"{f.used_blocks} ({f.shared_blocks})"])
    return text_table(rows, translate=True, header=["tick", "arrived", "admitted", "preempted", "finished",
                                    "prefill + decode / budget", "queue", "blocks used (shared)"])


def owner_looks(frames) -> dict:
    """rid -> (fill, hatch): the owner's neutral look (``lib.widgets.blocks``), fixed over the run."""
    rids = sorted({r for f in frames for r in (*f.arrived, *f.running, *f.finished)})
    return {r: (SEQ_COLORS[i % len(SEQ_COLORS)], SEQ_HATCHES[i % len(SEQ_HATCHES)]) for i, r in enumerate(rids)}


def _block_look(f: EngineFrame, b: int, looks: dict) -> tuple[str, str]:
    state = f.block_state(b)
    if state == "used":
        return looks.get(f.owners[b][0], (SEQ_COLORS[0], ""))
    return {"free": (FREE_COLOR, ""), "cached": (CACHED_COLOR, STATE_HATCHES["cached"]),
            "shared": (SHARED_COLOR, STATE_HATCHES["shared"])}[state]


def _spans(frames, b: int):
    """(first tick, ticks, key) runs of block ``b`` holding the same thing (key: owners tuple, or the state)."""
    out, start, key = [], 0, None
    for i, f in enumerate(frames):
        k = f.owners[b] or f.block_state(b)
        if k != key:
            if key is not None:
                out.append((start, i - start, key))
            start, key = i, k
    out.append((start, len(frames) - start, key))
    return out


def plot_engine(frames: list[EngineFrame]):
    """Three panels over the ticks: the pool (a row per block, coloured by its owner, purple hatched where a
    prefix block is shared, dotted grey where a free block keeps its K/V in the prefix index); the batch (prefill
    and decode tokens fed, against the budget); the queues (waiting, preempted, running)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    looks, n_blocks = owner_looks(frames), len(frames[0].owners)
    pool_in = max(2.4, 0.21 * n_blocks)  # a row per block a little taller than a label (#7), so labels never touch
    fig, (pool, batch, queue) = plt.subplots(3, 1, figsize=(style.FIGURE_WIDTH, pool_in + 3.4), sharex=True,
                                             layout="constrained", gridspec_kw=dict(height_ratios=[pool_in, 1.5, 1.5]))
    plt.rcParams["hatch.color"] = HATCH_INK
    above: set = set()  # the (start, owner) spans labelled in the row above: a block under one is not labelled again
    for b in range(n_blocks):
        labelled = set()
        for start, width, key in _spans(frames, b):
            fill, hatch = _block_look(frames[start], b, looks)
            pool.broken_barh([(start - 0.5, width)], (b - 0.45, 0.9), facecolors=fill, hatch=hatch,
                             edgecolor=style.GRID, linewidth=0.5)
            if isinstance(key, tuple) and len(key) == 1 and width >= 6:
                if (start, key) not in above:  # a request's next block from the same tick: its label is above
                    pool.text(start - 0.3, b, f"#{key[0]}", va="center", ha="left", fontsize=style.SMALL_SIZE,
                              bbox=dict(boxstyle="square,pad=0.05", facecolor=fill, edgecolor="none"))
                labelled.add((start, key))
        above = labelled
    pool.set_ylim(n_blocks - 0.5, -0.5)
    pool.set_ylabel(t("block"))
    pool.set_title(t("The pool over time: each block's owner (#request)"), loc="left")
    legend = [Patch(facecolor=SHARED_COLOR, hatch=STATE_HATCHES["shared"], edgecolor=style.GRID,
                    label=t("shared prefix block")),
              Patch(facecolor=CACHED_COLOR, hatch=STATE_HATCHES["cached"], edgecolor=style.GRID,
                    label=t("free, still in the prefix cache")),
              Patch(facecolor=FREE_COLOR, edgecolor=style.GRID, label=t("free"))]
    pool.legend(handles=legend, loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    ticks = [f.tick for f in frames]
    pre, dec = [f.prefill_tokens for f in frames], [f.decode_tokens for f in frames]
    for values, bottom, name, label in ((pre, None, "prefill", t("prefill tokens")),
                                        (dec, pre, "decode", t("decode tokens"))):
        c = style.concept(name)
        batch.bar(ticks, values, bottom=bottom, width=0.85, color=c.colour, hatch=c.hatch, edgecolor=style.INK,
                  linewidth=0.4, label=label)
    if frames[-1].budget is not None:
        batch.axhline(frames[-1].budget, color=style.MUTED, linestyle=style.concept("reference").linestyle,
                      label=t("token budget"))
    batch.set_ylim(0, 1.2 * max([frames[-1].budget or 0] + [p + d for p, d in zip(pre, dec)]))
    batch.set_ylabel(t("tokens fed"))
    batch.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    for name, values, concept in ((t("waiting"), [len(f.waiting) for f in frames], "reference"),
                                  (t("preempted"), [len(f.preempted) for f in frames], "preempted"),
                                  (t("running"), [len(f.running) for f in frames], "decode")):
        c = style.concept(concept)
        queue.step(ticks, values, where="mid", color=style.graphic_colour(concept), linestyle=c.linestyle,
                   marker=c.marker, markersize=4, label=name)
    queue.set_ylabel(t("requests"))
    queue.set_xlabel(t("tick (one engine step)"))
    queue.legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), frameon=False)
    return fig


# -------------------------------------------------------------------------------- tier 2: plotly step-through

def informative(frames, at_most: int = 12) -> int | None:
    """The first frame that shows the engine at work: a queue, two rows or more and a shared block (or tick
    ``at_most``); None before there is one. Where the step-through and the live dashboard open."""
    for i, f in enumerate(frames):
        if (f.waiting and len(f.running) >= 2 and f.shared_blocks) or f.tick >= at_most:
            return i
    return None


def _pool_xy(n_blocks: int, cols: int):
    return [b % cols for b in range(n_blocks)], [b // cols for b in range(n_blocks)]


def _pool_texts(f: EngineFrame) -> list[str]:
    out = []
    for b, who in enumerate(f.owners):
        out.append(f"×{len(who)}" if len(who) > 1 else f"#{who[0]}" if who else "·" if f.cached[b] else "")
    return out


def queues_line(f: EngineFrame) -> str:
    """The queues in one line: waiting, preempted, running (each row's phase), finished."""
    running = " ".join(t("#{rid} (prefill)", rid=r) if f.rows.get(r, ("",))[0] == "prefill" else f"#{r}"
                       for r in f.running) or "-"
    return (f"{t('waiting')}{colon()}{_rids(f.waiting)}   {t('preempted')}{colon()}{_rids(f.preempted)}   "
            f"{t('running')}{colon()}{running}   {t('finished')}{colon()}{len(f.finished)}")


def tick_caption(f: EngineFrame) -> str:
    """What happened at this tick, in words."""
    parts = [t("tick {tick}", tick=f.tick)]
    for word, rids in (("arrived", f.arrived), ("admitted", f.admitted), ("preempted", f.preempted_now),
                       ("finished", f.finished_now)):
        if rids:
            parts.append(f"{t(word)} {_rids(rids)}")
    if f.tick and not f.rows:
        parts.append(t("nothing to run"))
    return " · ".join(parts)


def engine_figure(frames: list[EngineFrame], cols: int = 14):
    """The run as a plotly step-through: the pool's blocks (owner #id; ×n shared by n; · free but cached) and the
    batch's prefill and decode tokens against the budget, one frame per tick, a slider and Play."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    looks, n = owner_looks(frames), len(frames[0].owners)
    cols = min(cols, n)
    rows_ = -(-n // cols)
    x, y = _pool_xy(n, cols)
    top = max([f.budget or 0 for f in frames] + [f.prefill_tokens + f.decode_tokens for f in frames]) or 1

    def data(f, first=False):
        """The traces of tick ``f``: the first frame has everything, later ones only what changes."""
        fills = [_block_look(f, b, looks)[0] for b in range(n)]
        pool = dict(text=_pool_texts(f), marker=dict(color=fills))
        bars = [dict(x=[f.prefill_tokens]), dict(x=[f.decode_tokens])]
        if first:
            pool = dict(x=x, y=y, mode="markers+text", hoverinfo="skip", showlegend=False, text=pool["text"],
                        marker=dict(symbol="square", size=30, color=fills, line=dict(color=style.MUTED, width=1)),
                        textfont=dict(color=style.INK, size=style.plotly_px(style.PLOTLY_SMALL - 2)))
            bars = [dict(y=[t("batch")], orientation="h", xaxis="x2", yaxis="y2", **bar, **look) for bar, look in zip(bars, (
                dict(name=t("prefill tokens"), marker=dict(color=style.colour("prefill"), pattern_shape="/")),
                dict(name=t("decode tokens"), marker=dict(color=style.colour("decode")))))]
        return [go.Scatter(**pool), go.Bar(**bars[0]), go.Bar(**bars[1])]

    def notes(f):
        top = dict(x=0, y=1, xref="paper", yref="paper", showarrow=False, xanchor="left", yanchor="bottom")
        words = t("{p} prefill + {d} decode tokens", p=f.prefill_tokens, d=f.decode_tokens)
        return [dict(text=f"<b>{html.escape(tick_caption(f))}</b>", yshift=30,
                     font=dict(size=style.plotly_px(style.PLOTLY_SMALL + 1)), **top),
                dict(text=html.escape(queues_line(f)), yshift=6, font=dict(size=style.plotly_px(style.PLOTLY_SMALL)),
                     **top),
                dict(text=html.escape(words), x=1, y=1, xref="paper", yref="y2 domain", showarrow=False,
                     xanchor="right", yanchor="bottom", font=dict(size=style.plotly_px(style.PLOTLY_SMALL)))]

    fig = make_subplots(rows=2, cols=1, row_heights=[0.72, 0.28], vertical_spacing=0.16)
    first = informative(frames)
    first = len(frames) - 1 if first is None else first
    for trace in data(frames[first], first=True):
        fig.add_trace(trace)
    fig.frames = [go.Frame(name=str(f.tick), data=data(f), layout=dict(annotations=notes(f))) for f in frames]
    budget = frames[0].budget
    shapes = [] if budget is None else [dict(type="line", x0=budget, x1=budget, y0=-0.5, y1=0.5, xref="x2", yref="y2",
                                             line=dict(color=style.MUTED, dash="dash", width=2))]
    fig.update_layout(height=200 + 45 * rows_ + 130, margin=dict(l=20, r=20, t=70, b=110), barmode="stack",
                      annotations=notes(frames[first]), shapes=shapes, showlegend=False,
                      xaxis=dict(visible=False, range=[-0.6, cols - 0.4]),
                      yaxis=dict(visible=False, range=[rows_ - 0.5, -0.5]),
                      xaxis2=dict(range=[0, top * 1.05], title=t("tokens fed this step: prefill (orange, striped) + "
                                                                 "decode (blue); dashed: the budget")),
                      sliders=[frame_slider([f.tick for f in frames], prefix=t("tick") + " ", active=first, y=-0.3,
                                            len=0.8, x=0.2)],
                      updatemenus=[play_buttons(600, (t("▶ Play"), t("❚❚ Pause")), direction="left", x=0.0,
                                                y=-0.3, xanchor="left", yanchor="top")])
    return fig


# -------------------------------------------------------------------------------- tier 3: the live dashboard

def _chip(text: str, fill: str, hatch: str = "", edge: str | None = None, dashed: bool = False) -> str:
    """An inline chip: ``fill`` with its ``hatch`` (a matplotlib hatch, drawn as the figures draw it), its words on a
    white label so they read on any fill."""
    stripes = style.hatch_css(hatch)
    border = f"{'3px' if edge else '1px'} {'dashed' if dashed else 'solid'} {edge or style.MUTED}"
    return (f'<span style="display:inline-block;min-width:2.2em;margin:2px;padding:1px 4px;text-align:center;'
            f'border-radius:3px;background-color:{fill};{stripes}color:{style.INK};border:{border}">'
            f'<span style="background:{style.PAPER};padding:0 2px">{html.escape(text)}</span></span>')


def _request_chip(f: EngineFrame, rid: int, looks: dict, where: str) -> str:
    fill = looks.get(rid, (SEQ_COLORS[0], ""))[0]
    if where == "running" and rid in f.rows:
        phase, n = f.rows[rid]
        c = style.concept(PHASE_CONCEPT[phase])
        return _chip(f"#{rid} {t(phase)} {n}", c.colour, c.hatch, edge=style.INK)
    if where == "preempted":
        return _chip(f"#{rid}", fill, edge=style.colour("preempted"), dashed=True)
    return _chip(f"#{rid}", fill, dashed=where == "waiting")


def _queues_html(f: EngineFrame, looks: dict) -> str:
    rows = []
    for where, rids in (("waiting", f.waiting), ("preempted", f.preempted), ("running", f.running),
                        ("finished", f.finished[-8:])):
        chips = "".join(_request_chip(f, r, looks, where) for r in rids) or \
            f'<span style="color:{style.css("muted")}">-</span>'
        more = f" (+{len(f.finished) - 8})" if where == "finished" and len(f.finished) > 8 else ""
        rows.append(f'<div style="line-height:1.9em"><span style="display:inline-block;min-width:7em">'
                    f"<b>{html.escape(t(where))}</b></span>{chips}{html.escape(more)}</div>")
    return "".join(rows)


def _pool_html(f: EngineFrame, looks: dict, cols: int = 14) -> str:
    cells = []
    for b, text in enumerate(_pool_texts(f)):
        fill, hatch = _block_look(f, b, looks)
        state = f.block_state(b)
        cells.append(f'<span title="{html.escape(t("block {b}", b=b))}">' + _chip(
            text or "\u00a0", fill, hatch=hatch, dashed=state in ("free", "cached")) + "</span>")
        if (b + 1) % cols == 0:
            cells.append("<br>")
    used = t("{used} of {n} blocks in use, {shared} shared; prefix-cache hits so far: {hits} blocks",
             used=f.used_blocks, n=len(f.owners), shared=f.shared_blocks, hits=f.prefix_hit_blocks)
    return f'<div style="line-height:2.1em">{"".join(cells)}</div><div>{html.escape(used)}</div>'


def _batch_html(f: EngineFrame) -> str:
    top = max(f.budget or 0, f.prefill_tokens + f.decode_tokens, 1)
    scale = 420 / top
    parts = "".join(
        f'<span style="display:inline-block;height:1.1em;vertical-align:middle;width:{round(n * scale)}px;'
        f'{style.chip_css(PHASE_CONCEPT[name])}"></span>' for name, n in (("prefill", f.prefill_tokens),
                                                                          ("decode", f.decode_tokens)) if n)
    limit = "" if f.budget is None else t("budget {b}", b=f.budget)
    frame = (f'<span style="display:inline-block;width:{round(top * scale) + 4}px;border-right:2px dashed '
             f'{style.css("muted")}">{parts or "&nbsp;"}</span>')
    words = t("{p} prefill + {d} decode tokens", p=f.prefill_tokens, d=f.decode_tokens)
    return f"<div>{frame} {html.escape(words)} · {html.escape(limit)}</div>"


def _texts_html(f: EngineFrame, looks: dict, shown: int = 6) -> str:
    live = [*f.running, *reversed(f.finished)][:shown]
    lines = []
    for r in live:
        prompt = f.prompts.get(r, "").replace("\n", "⏎")[-24:]
        made = f.texts.get(r, "").replace("\n", "⏎")
        lines.append(f'<div style="white-space:nowrap;overflow:hidden;text-overflow:ellipsis">'
                     f'{_request_chip(f, r, looks, "finished")} <span style="color:{style.css("muted")}">'
                     f"…{html.escape(prompt)}</span><b>{html.escape(made)}</b></div>")
    return "".join(lines)


def engine_html(f: EngineFrame, looks: dict) -> str:
    """One tick as HTML: what happened, the queues as chips, the pool by owner, the batch against the budget,
    the streamed texts."""
    e = html.escape
    return (f'<div style="font-family:sans-serif;color:{style.css("ink")}">'
            f'<div style="margin-bottom:4px"><b>{e(tick_caption(f))}</b></div>{_queues_html(f, looks)}'
            f'<div style="margin-top:6px"><b>{e(t("the block pool"))}</b> '
            f'<span style="color:{style.css("muted")}">{e(t("(#request: its block; ×n: a prefix block n requests share; · free, still cached)"))}'
            f"</span></div>{_pool_html(f, looks)}"
            f'<div style="margin-top:6px"><b>{e(t("this step’s batch"))}</b></div>{_batch_html(f)}'
            f'<div style="margin-top:6px"><b>{e(t("streamed text"))}</b></div>{_texts_html(f, looks)}</div>')


class ServingDashboard(FrameStepping):
    """The live engine: an ``EngineRun`` on ``model`` stepped tick by tick. Step ▶ at the last tick runs the engine
    one step further; ◀ Back and the tick slider go back over the ticks kept; Play steps on its own; the sliders
    (arrival rate, pool blocks, block size, token budget) start a new run; the prompt box sends a request now.

    Python API (no browser needed): ``set(rate=, n_blocks=, block_size=, budget=)`` (a new run; bad values raise
    and change nothing), ``send(text)``, ``.step`` / ``.next()`` / ``.back()``, ``.run``, ``.state()``."""

    CONTROLS = ("rate", "n_blocks", "block_size", "budget")

    def __init__(self, model, tokenizer, open_at: int | None = None, **settings):
        import ipywidgets as W

        self.model, self.tokenizer = model, tokenizer
        self.values = {**SETTINGS, **settings}
        self.run = EngineRun(model, tokenizer, **self.values)
        look = dict(style=style.control_style(), layout=W.Layout(**style.control_layout()))
        self.rate_box = W.SelectionSlider(options=list(RATES), value=self.values["rate"],
                                          description=t("arrival rate (per tick)"), continuous_update=False, **look)
        self.blocks_box = W.IntSlider(value=self.values["n_blocks"], min=12, max=64, description=t("pool blocks"),
                                      continuous_update=False, **look)
        self.size_box = W.SelectionSlider(options=list(BLOCK_SIZES), value=self.values["block_size"],
                                          description=t("block size"), continuous_update=False, **look)
        self.budget_box = W.SelectionSlider(options=list(BUDGETS), value=self.values["budget"],
                                            description=t("token budget"), continuous_update=False, **look)
        self.slider = W.IntSlider(value=0, min=0, max=0, description=t("tick"), style=style.control_style(),
                                  layout=W.Layout(width="22em"))
        self.play = W.Play(value=0, min=0, max=10 ** 6, interval=500, description=t("play"))
        self.prompt_box = W.Text(value="", placeholder=t("type a prompt, press Enter: it arrives at the next tick"),
                                 description=t("your request"), continuous_update=False, style=style.control_style(),
                                 layout=W.Layout(width="40em"))
        self.problem = W.HTML()
        self.view = W.HTML()
        self._quiet = False
        for box, key in ((self.rate_box, "rate"), (self.blocks_box, "n_blocks"), (self.size_box, "block_size"),
                         (self.budget_box, "budget")):
            box.observe(lambda ch, key=key: self._from_widget(key, ch["new"]), names="value")
        self.slider.observe(lambda _: self.redraw(), names="value")
        self.play.observe(lambda _: self._played(), names="value")
        self.prompt_box.observe(lambda ch: self._from_prompt(ch["new"]), names="value")
        controls = style.grid(self.rate_box, self.blocks_box, self.size_box, self.budget_box, columns=2)
        self.widget = self.box(controls, self.prompt_box, self.playback(self.play), self.problem, self.view)
        self.last_update_ms = 0.0
        self._open(open_at)

    @property
    def frames(self):
        return self.run.frames

    def _open(self, at: int | None):
        """Run to ``at`` ticks, or to the first tick that shows the engine at work (``informative``)."""
        while self.run.advance():
            if (self.frames[-1].tick >= at) if at is not None else informative(self.frames) is not None:
                break
        self._show_last()

    def _show_last(self):
        self._quiet = True
        try:
            self.slider.max = len(self.frames) - 1
            self.slider.value = len(self.frames) - 1
        finally:
            self._quiet = False
        self.redraw()

    def more(self) -> None:
        """At the last tick kept: the engine runs one more step (a new frame); when the run is done, Play stops."""
        if self.run.advance():
            self.slider.max = len(self.frames) - 1
        else:
            self.play.playing = False

    def _played(self):
        if not self._quiet:
            self.next()

    def set(self, **values):
        """A new run with these settings (``CONTROLS``), opened at the same tick as the run before."""
        check_controls(values, self.CONTROLS)
        t0 = time.perf_counter()
        new = {**self.values, **values}
        run = EngineRun(self.model, self.tokenizer, **new)  # refuses bad settings before anything changes
        at = self.slider.value
        self.run, self.values = run, new
        self._quiet = True
        try:
            for key, box in (("rate", self.rate_box), ("n_blocks", self.blocks_box), ("block_size", self.size_box),
                             ("budget", self.budget_box)):
                if box.value != new[key]:
                    box.value = new[key]
        finally:
            self._quiet = False
        self.problem.value = ""
        self._open(max(at, 1))
        self.last_update_ms = (time.perf_counter() - t0) * 1e3

    def _from_widget(self, key, value):
        if self._quiet or self.values[key] == value:
            return
        try:
            self.set(**{key: value})
        except ValueError as err:  # a pool too small for the longest request: say so, keep the last run
            self.problem.value = problem_html(str(err))

    def send(self, text: str) -> int:
        """The learner's request (``EngineRun.send``): it arrives at the next tick, which is shown."""
        rid = self.run.send(text)
        self._show_last()
        self.next()
        return rid

    def _from_prompt(self, text: str):
        if self._quiet or not text.strip():
            return
        try:
            self.send(text)
            self.problem.value = ""
            self._quiet = True  # empty again, ready for the next request
            try:
                self.prompt_box.value = ""
            finally:
                self._quiet = False
        except ValueError as err:  # a character outside the vocabulary, a prompt too long: say so, add nothing
            self.problem.value = problem_html(prompt_problem(err))

    def state(self) -> dict:
        f = self.frames[self.slider.value]
        return dict(settings=dict(self.values), tick=f.tick, n_ticks=len(self.frames), done=self.run.done,
                    waiting=f.waiting, preempted=f.preempted, running=f.running, finished=f.finished,
                    used_blocks=f.used_blocks, shared_blocks=f.shared_blocks, html=self.view.value)

    def redraw(self):
        if self._quiet:
            return
        self.view.value = engine_html(self.frames[within(self.slider.value, len(self.frames))],
                                      owner_looks(self.frames))
