"""Block pool widget: KV blocks being allocated, shared, copied on write and freed as requests come and go.

The data comes from a real run: ``record_story`` drives the demo model on a ``lib.paged.PagedKVPool`` (with
``record_events=True``) through a short script and takes a ``PoolFrame`` after every event:

1. request A arrives: its prompt is prefilled into fresh blocks;
2. request B arrives: more blocks;
3. A forks into ``n_samples`` samples (parallel sampling): they share A's blocks (reference count n);
4. decode steps: every running sequence adds a token; the first write into the shared, half-full last
   block copies it (copy-on-write); a sequence whose last block is full gets a new one;
5. a finished request frees its blocks (they stay in the prefix index until reused);
6. request C arrives with B's prompt: the prefix cache hands it B's full blocks again;
7. everything finishes and every block is back on the free list.

Three render tiers over the frames (see CONTRIBUTING.md):

- Tier 1 (static): ``story_table(frames)`` -> str (one line per frame), ``block_tables_text(frame)`` -> str,
  ``plot_pool(frame)`` (one moment) and ``plot_story(frames)`` (chosen moments side by side) -> matplotlib Figure.
- Tier 2 (survives export): ``story_figure(frames)`` -> plotly ``go.Figure`` with one frame per event and a slider.
- Tier 3 (live kernel): ``BlockPoolWidget(model, tokenizer)``: prompts, number of samples, block size and pool
  size re-run the story; Back / Step buttons and a slider move through it. Drive it from Python with
  ``.step()``, ``.back()``, ``.goto(i)``, ``.set(...)``, ``.state()``, ``.html``.
"""
from __future__ import annotations

import html
import time
from dataclasses import dataclass, field

import torch

from .. import checks
from ..text import pad
from . import style
from ..i18n import CONTEXT, t
from ..model import eval_mode
from ..sampling import choose, make_generator
from ..blocks import PoolExhaustedError
from ..paged import PagedKVPool, decode_step, prefill
from . import check_controls, frame_slider, prompt_problem
from .live import LiveWidget, within

def _tint(hex_colour: str, amount: float = 0.5) -> str:
    """``hex_colour`` mixed with the white paper (``amount`` of the colour): a block's fill, light enough that its
    dark text (``style.INK``) keeps a contrast above 4.5:1 on every palette colour."""
    rgb = [int(hex_colour.lstrip("#")[i:i + 2], 16) for i in (0, 2, 4)]
    return "#" + "".join(f"{round(255 - amount * (255 - c)):02X}" for c in rgb)


# Block states from lib.widgets.style: a free block is the "free" concept (dashed outline); a free block still in the prefix
# index keeps a grey a shade darker, dotted (its K/V can be read again); a block shared by several
# sequences is the "shared" concept (purple, hatched); a block held by one sequence takes its sequence's look: owners
# are not concepts, so they get the neutral ``style.category`` looks (a light grey fill and a hatch each, never a
# concept's hue), and the owner's name is written in the block. Dark text reads on every fill.
FREE_COLOR = style.FREE
CACHED_COLOR = style.GRID  # a shade darker than free
SHARED_COLOR = _tint(style.colour("shared"))
SEQ_COLORS = tuple(look.fill for look in style.CATEGORY_LOOKS)
SEQ_HATCHES = tuple(look.hatch for look in style.CATEGORY_LOOKS)  # the owner's second cue, in the same order
STATE_HATCHES = {"free": "", "cached": "..", "shared": style.concept("shared").hatch}
HATCH_INK = "#9A9A9A"  # hatches in blocks: light enough that the text over them reads
TOUCHED_EDGE = style.INK  # the blocks an event touched: a thick dark outline (the others: thin, grey)
EVENT_WORDS = {"alloc": "allocated", "share": "shared", "cow": "copied on write", "free": "freed",
               "hit": "prefix-cache hit", "evict": "evicted from the prefix index"}
MAX_FRAMES = 64


def kind_word(kind: str) -> str:
    """A frame's kind in the notebook's language; "full" (the pool ran out) is keyed by its context: a bare "full"
    means other things elsewhere (12's full cache)."""
    return t("block event\x04full") if kind == "full" else t(kind)


@dataclass
class BlockView:
    """One physical block at one moment."""

    block: int
    owners: tuple  # the sequences whose block tables hold it
    refcount: int
    tokens: tuple  # the token strings whose K/V it holds (filled slots, in order)
    cached: bool  # free, but still indexed by the prefix cache (its K/V could be handed out again)

    @property
    def state(self) -> str:
        if self.refcount == 0:
            return "cached" if self.cached else "free"
        return "shared" if self.refcount > 1 else "used"


@dataclass
class PoolFrame:
    """The pool after one event of the story."""

    index: int
    kind: str  # start / prefill / fork / decode / cow / finish / hit / full / end
    caption: str
    block_size: int
    blocks: list  # BlockView per physical block
    tables: dict  # sequence name -> physical block ids (its block table)
    texts: dict  # sequence name -> its text so far (prompt + generated)
    events: list = field(default_factory=list)  # (op, block) since the previous frame

    @property
    def n_used(self) -> int:
        return sum(b.refcount > 0 for b in self.blocks)

    @property
    def n_free(self) -> int:
        return len(self.blocks) - self.n_used

    @property
    def n_shared(self) -> int:
        return sum(b.refcount > 1 for b in self.blocks)

    def event_counts(self) -> dict:
        out = {}
        for op, _ in self.events:
            out[op] = out.get(op, 0) + 1
        return out


def _show(tok: str) -> str:
    return "␣" if tok == " " else tok


class _Recorder:
    """Runs the script on a real pool and takes the frames."""

    def __init__(self, model, tokenizer, n_blocks, block_size, temperature, seed, max_new_tokens):
        self.model, self.tok = model, tokenizer
        self.pool = PagedKVPool.for_model(model, n_blocks, block_size, record_events=True)
        self.seqs = {}  # name -> {"table", "ids", "done"}
        self.contents = {}  # block -> token strings it last held (kept for prefix-cached free blocks)
        self.frames = []
        self.n_events = 0
        self.temperature, self.max_new = temperature, max_new_tokens
        self.gen = make_generator(seed, model.device)

    def choose(self, logits) -> list[int]:
        return choose(logits.float().reshape(-1, logits.shape[-1]), self.temperature, generator=self.gen).tolist()

    def snapshot(self, kind: str, caption: str):
        a, bs = self.pool.allocator, self.pool.block_size
        owners = {b: [] for b in range(a.n_blocks)}
        for name, s in self.seqs.items():
            t = s["table"]
            names = self.tok.tokens(s["ids"][:t.n_tokens])
            for i, b in enumerate(t.blocks):
                owners[b].append(name)
                self.contents[b] = tuple(_show(x) for x in names[i * bs:(i + 1) * bs])
        cached = {b for b in range(a.n_blocks) if a.refcounts[b] == 0 and a.is_cached(b)}
        views = [BlockView(b, tuple(owners[b]), a.refcounts[b],
                           self.contents.get(b, ()) if (owners[b] or b in cached) else (), b in cached)
                 for b in range(a.n_blocks)]
        events = [(op, b) for op, b, _ in a.events[self.n_events:]]
        self.n_events = len(a.events)
        self.frames.append(PoolFrame(len(self.frames), kind, caption, bs, views,
                                     {n: list(s["table"].blocks) for n, s in self.seqs.items()},
                                     {n: self.tok.decode(s["ids"]) for n, s in self.seqs.items()}, events))

    def arrive(self, name: str, text: str):
        ids = self.tok.encode(text)
        table = self.pool.new_table(name)
        logits = prefill(self.model, self.pool, table, ids, prefix_cache=True)
        self.seqs[name] = {"table": table, "ids": ids + self.choose(logits), "prompt": len(ids)}
        hits = sum(op == "hit" for op, _, _ in self.pool.allocator.events[self.n_events:])
        reused = t("; {hits} full block(s) found in the prefix cache, only the rest computed", hits=hits) if hits else ""
        self.snapshot("hit" if hits else "prefill",
                      t("{name} arrives: prompt {text} ({n} tokens) takes {blocks} block(s){reused}; its first token "
                        "is {first}", name=name, text=repr(text), n=len(ids), blocks=len(table.blocks), reused=reused,
                        first=repr(self.tok.decode(self.seqs[name]['ids'][-1:]))))
        self.finish_done()

    def fork(self, name: str, n: int):
        parent = self.seqs.pop(name)
        shared = len(parent["table"].blocks)
        for i in range(n):
            child = f"{name}{i + 1}"
            self.seqs[child] = {"table": self.pool.fork(parent["table"], child), "ids": list(parent["ids"]),
                                "prompt": parent["prompt"]}
        self.pool.free(parent["table"])
        self.snapshot("fork", t("{name} forks into {n} samples ({children}): they share its {shared} block(s), "
                                "reference count {n}; nothing is copied", name=name, n=n,
                                children=", ".join(f"{name}{i + 1}" for i in range(n)), shared=shared))

    def done(self, s) -> bool:
        return s["ids"][-1] == self.tok.eos_id or len(s["ids"]) - s["prompt"] >= self.max_new

    def finish_done(self):
        gone = [n for n, s in self.seqs.items() if self.done(s)]
        for n in gone:
            n_blocks = len(self.seqs[n]["table"].blocks)
            self.pool.free(self.seqs.pop(n)["table"])
            self.snapshot("finish", t("{name} is done; its {n} block(s) lose a reference (a block nobody else "
                                      "holds returns to the free list)", name=n, n=n_blocks))

    def decode(self):
        names = list(self.seqs)
        tables = [self.seqs[n]["table"] for n in names]
        logits = decode_step(self.model, self.pool, tables, [self.seqs[n]["ids"][-1] for n in names])
        for n, token in zip(names, self.choose(logits)):
            self.seqs[n]["ids"].append(token)
        ev = [op for op, _, _ in self.pool.allocator.events[self.n_events:]]
        words = [t("{n} block(s) {what}", n=ev.count(op), what=t(EVENT_WORDS[op])) for op in ("cow", "alloc")
                 if ev.count(op)]
        kind = "cow" if "cow" in ev else "decode"
        who = ", ".join(names)
        self.snapshot(kind, (t("decode step: {names} each add one token", names=who) if len(names) > 1 else
                             t("decode step: {names} adds one token", names=who)) +
                      (f"; {', '.join(words)}" if words else t("; every write fits in a last block")))
        self.finish_done()


def _state(state: str) -> str:
    """A block's state in words ("cached": free, but still in the prefix cache)."""
    return t("block state\x04cached") if state == "cached" else t(state)


def record_story(model, tokenizer, prompts=("<s>缓存", "<s>hello", "<s>hello"), n_samples: int = 2,
                 block_size: int = 4, n_blocks: int = 16, max_new_tokens: int = 8, temperature: float = 1.0,
                 seed: int = 0) -> list[PoolFrame]:
    """Run the script above on ``model`` and return a frame per event. ``prompts`` are the texts of requests
    A, B and C (C's blocks come from the prefix cache where its prompt starts like an earlier one). Tokens are
    sampled at ``temperature`` (0: greedy) with a seeded generator, at most ``max_new_tokens`` per request.
    A pool too small for the story ends it with a ``"full"`` frame that shows the allocator's message."""
    if not isinstance(prompts, (list, tuple)) or len(prompts) != 3:
        got = len(prompts) if isinstance(prompts, (list, tuple)) else f"{type(prompts).__name__} {prompts!r:.40}"
        raise ValueError(f"the story has three requests (A, B, C); give three prompts, got {got}")
    for name, text in zip(("prompts[0]", "prompts[1]", "prompts[2]"), prompts):
        checks.text(text, name)
    n_samples, block_size, n_blocks, max_new_tokens = (
        checks.integer(v, name, 1) for name, v in (("n_samples", n_samples), ("block_size", block_size),
                                                     ("n_blocks", n_blocks), ("max_new_tokens", max_new_tokens)))
    longest = max(len(tokenizer.encode(p)) for p in prompts) + max_new_tokens
    if longest > model.config.max_seq_len:
        raise ValueError(f"a prompt plus max_new_tokens={max_new_tokens} would pass the model's context window "
                         f"(max_seq_len={model.config.max_seq_len}); shorten it")
    r = _Recorder(model, tokenizer, n_blocks, block_size, temperature, seed, max_new_tokens)
    r.snapshot("start", t("an empty pool: {n} blocks of {size} token slots, all on the free list", n=n_blocks,
                          size=block_size))
    try:
        with torch.no_grad(), eval_mode(model):
            r.arrive("A", prompts[0])
            r.arrive("B", prompts[1])
            if n_samples > 1 and "A" in r.seqs:
                r.fork("A", n_samples)
            while "B" in r.seqs and len(r.frames) < MAX_FRAMES:
                r.decode()
            r.arrive("C", prompts[2])
            while r.seqs and len(r.frames) < MAX_FRAMES:
                r.decode()
        r.snapshot("end", t("every request is done: all {n} blocks are free again ({copies} copy-on-write copies, "
                            "{hits} block(s) reused from the prefix cache)", n=n_blocks,
                            copies=r.pool.allocator.n_copies, hits=r.pool.allocator.n_prefix_hits))
    except PoolExhaustedError as e:
        r.snapshot("full", str(e))
    return r.frames


# -- tier 1: text and matplotlib ----------------------------------------------------------------------------

def story_colors(frames) -> dict:
    """A fixed colour per sequence name, in order of first appearance over the whole story."""
    names = []
    for f in frames:
        for n in f.tables:
            if n not in names:
                names.append(n)
    return {n: SEQ_COLORS[i % len(SEQ_COLORS)] for i, n in enumerate(names)}


def story_hatches(colors: dict) -> dict:
    """The hatch of each sequence, matching its fill (``story_colors``)."""
    return {n: SEQ_HATCHES[SEQ_COLORS.index(c)] if c in SEQ_COLORS else "" for n, c in colors.items()}


def block_hatch(b: BlockView, colors: dict) -> str:
    """A block's hatch: its state's (free, cached, shared), or its owner's when one sequence holds it."""
    if b.state == "used":
        return story_hatches(colors).get(b.owners[0], "")
    return STATE_HATCHES.get(b.state, "")


def block_color(b: BlockView, colors: dict) -> str:
    if b.state == "free":
        return FREE_COLOR
    if b.state == "cached":
        return CACHED_COLOR
    if b.state == "shared":
        return SHARED_COLOR
    return colors.get(b.owners[0], SEQ_COLORS[0])


def block_tables_text(frame: PoolFrame) -> str:
    """Each sequence's block table and text at this moment (the logical -> physical map). A block held by
    more than one sequence shows its reference count: ``[0 (refcount 2), 5]``."""
    if not frame.tables:
        return "(no sequences)"
    w = max(len(n) for n in frame.tables)
    rows = []
    for n, blocks in frame.tables.items():
        refs = [f" (refcount {frame.blocks[b].refcount})" if frame.blocks[b].refcount > 1 else "" for b in blocks]
        shown = ", ".join(f"{b}{r}" for b, r in zip(blocks, refs))
        rows.append(f"{n.ljust(w)}  blocks [{shown}]  {frame.texts[n]}")
    return "\n".join(rows)


def story_table(frames) -> str:
    """One line per frame: blocks used / shared / free, the events, the caption."""
    lines = [f"{'#':>2}  " + pad(t("kind"), 7) + " " + t("used shared free  events")]
    for f in frames:
        ev = ", ".join(f"{t('event code' + CONTEXT + k)} {v}" for k, v in f.event_counts().items())
        lines.append(f"{f.index:>2}  " + pad(kind_word(f.kind), 7) + f" {f.n_used:4d} {f.n_shared:6d} {f.n_free:4d}  {ev}")
    return "\n".join(lines)


def _grid(n_blocks: int, cols: int | None = None) -> int:
    return cols or min(8, n_blocks)


def plot_pool(frame: PoolFrame, ax=None, colors: dict | None = None, cols: int | None = None, title: bool = True):
    """One moment of the pool as a grid of blocks: colour = owner (purple, hatched: shared by several; light grey,
    dotted: free but still in the prefix cache; light grey, dashed outline: free); a thick outline marks the blocks
    the event touched; inside, the block id, its tokens and its reference count."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    cols = _grid(len(frame.blocks), cols)
    rows = -(-len(frame.blocks) // cols)
    colors = colors or story_colors([frame])
    if ax is None:
        _, ax = plt.subplots(figsize=(1.1 * cols + 0.4, 0.66 * rows + 0.8))
    touched = {b for _, b in frame.events}
    for b in frame.blocks:
        r, c = divmod(b.block, cols)
        ax.add_patch(Rectangle((c + 0.04, -r - 0.96), 0.92, 0.92, facecolor=block_color(b, colors),
                               edgecolor=TOUCHED_EDGE if b.block in touched else style.MUTED,
                               linewidth=2.4 if b.block in touched else 0.8,
                               linestyle="--" if b.state in ("free", "cached") else "-",
                               hatch=block_hatch(b, colors) or None, hatchcolor=HATCH_INK))
        small = style.SMALL_SIZE
        box = dict(boxstyle="square,pad=0.05", facecolor=block_color(b, colors), edgecolor="none") \
            if block_hatch(b, colors) else None  # text over a hatch sits on its fill, not on the stripes
        ax.text(c + 0.1, -r - 0.14, str(b.block), fontsize=small, va="top", ha="left", color=style.INK)
        if b.refcount > 1:
            ax.text(c + 0.9, -r - 0.14, f"×{b.refcount}", fontsize=small, va="top", ha="right", color=style.INK)
        if b.tokens:
            ax.text(c + 0.5, -r - 0.55, "".join(b.tokens), fontsize=small, ha="center", va="center",
                    color=style.MUTED if b.state == "cached" else style.INK, bbox=box)
        if b.owners:
            ax.text(c + 0.5, -r - 0.88, ",".join(b.owners), fontsize=small, ha="center", va="bottom",
                    color=style.INK, bbox=box)
    ax.set_xlim(0, cols)
    ax.set_ylim(-rows, 0)
    ax.axis("off")  # blocks wider than tall: room for their tokens at the type floor
    if title:
        ax.set_title(t("{i}. {kind}: {used} used, {shared} shared, {free} free", i=frame.index, kind=kind_word(frame.kind),
                       used=frame.n_used, shared=frame.n_shared, free=frame.n_free),
                     fontsize=style.FONT_SIZE)
    return ax


def default_moments(frames) -> list[int]:
    """The first frame of each kind worth a picture: prefill, fork, copy-on-write, finish, prefix hit, end."""
    out = []
    for kind in ("prefill", "fork", "cow", "finish", "hit", "end", "full"):
        i = next((f.index for f in frames if f.kind == kind), None)
        if i is not None and i not in out:
            out.append(i)
    return sorted(out)


def plot_story(frames, moments=None, cols: int | None = None, per_row: int = 1):
    """Chosen moments of the story side by side (default: ``default_moments``), one grid each."""
    import matplotlib.pyplot as plt

    moments = default_moments(frames) if moments is None else list(moments)
    if not moments or any(not 0 <= m < len(frames) for m in moments):
        raise ValueError(f"moments must be frame indices from 0 to {len(frames) - 1}, got {moments!r}")
    colors = story_colors(frames)
    n_cols = min(per_row, len(moments))
    n_rows = -(-len(moments) // n_cols)
    cols = _grid(len(frames[0].blocks), cols)
    rows = -(-len(frames[0].blocks) // cols)
    width = min(style.FIGURE_WIDTH, n_cols * (1.1 * cols + 0.3))
    height = n_rows * (0.62 * rows + 0.45) + 0.9  # each block about 1.1 x 0.62 inches
    fig, axes = plt.subplots(n_rows, n_cols, figsize=(width, height), squeeze=False, layout="constrained")
    for ax in axes.flat:
        ax.axis("off")
    for ax, m in zip(axes.flat, moments):
        plot_pool(frames[m], ax, colors, cols)
    _legend(fig, frames, colors)
    return fig


def _legend(fig, frames, colors: dict) -> None:
    """Under the grids: what each fill means (the states, then the sequences by name)."""
    from matplotlib.patches import Patch

    edge = dict(edgecolor=style.MUTED, linewidth=0.8, hatchcolor=style.MUTED)
    handles = [Patch(facecolor=FREE_COLOR, linestyle="--", label=t("free"), **edge),
               Patch(facecolor=CACHED_COLOR, hatch=STATE_HATCHES["cached"], linestyle="--",
                     label=t("free, still in the prefix cache"), **edge),
               Patch(facecolor=SHARED_COLOR, hatch=STATE_HATCHES["shared"], label=t("shared (refcount > 1)"), **edge),
               Patch(facecolor=style.PAPER, edgecolor=TOUCHED_EDGE, linewidth=2.4, label=t("touched by the event"))]
    hatches = story_hatches(colors)
    handles += [Patch(facecolor=c, hatch=hatches[n] or None, label=t("held by {name}", name=n), **edge)
                for n, c in colors.items()]
    fig.legend(handles=handles, loc="outside lower center", ncol=min(len(handles), 4))


# -- tier 2: plotly step-through ------------------------------------------------------------------------------

_STATES = ("free", "cached", "shared")


def _codes(frames) -> tuple[dict, list]:
    """Heat-map category of each state / owner and the matching discrete colour scale."""
    colors = story_colors(frames)
    order = [FREE_COLOR, CACHED_COLOR, SHARED_COLOR] + [colors[n] for n in colors]
    code = {**{s: i for i, s in enumerate(_STATES)}, **{n: 3 + i for i, n in enumerate(colors)}}
    n = len(order)
    scale = []
    for i, c in enumerate(order):
        scale += [[round(i / n, 6), c], [round((i + 1) / n, 6), c]]
    return code, scale


def _plotly_data(frame: PoolFrame, code: dict, cols: int):
    rows = -(-len(frame.blocks) // cols)
    z = [[None] * cols for _ in range(rows)]
    text = [[""] * cols for _ in range(rows)]
    hover = [[""] * cols for _ in range(rows)]
    for b in frame.blocks:
        r, c = divmod(b.block, cols)
        z[r][c] = code[b.state] if b.state in _STATES else code[b.owners[0]]
        ref = f" ×{b.refcount}" if b.refcount > 1 else ""
        text[r][c] = f"<b>{b.block}</b>{ref}<br>{html.escape(''.join(b.tokens))}<br>{','.join(b.owners)}"
        hover[r][c] = t("block {block}: {state}, reference count {refs}<br>owners: {owners}<br>tokens: {tokens}",
                        block=b.block, state=_state(b.state), refs=b.refcount, owners=", ".join(b.owners) or "-",
                        tokens=html.escape(" ".join(b.tokens)) or "-")
    touched = sorted({b for _, b in frame.events})
    xs = [b % cols for b in touched] or [None]
    ys = [b // cols for b in touched] or [None]
    return [dict(type="heatmap", z=z, text=text, hovertext=hover),
            dict(type="scatter", x=xs, y=ys)]


def story_figure(frames, cols: int | None = None):
    """A plotly ``go.Figure`` with one frame per event and a slider: the story precomputed, so it steps in a
    saved notebook without a kernel. Thick dark outlines mark the blocks the event touched."""
    import plotly.graph_objects as go

    code, scale = _codes(frames)
    cols = _grid(len(frames[0].blocks), cols)
    rows = -(-len(frames[0].blocks) // cols)
    first = _plotly_data(frames[0], code, cols)
    fig = go.Figure()
    fig.add_trace(go.Heatmap(colorscale=scale, zmin=0, zmax=len(scale) // 2, showscale=False, xgap=3, ygap=3,
                             texttemplate="%{text}", textfont=dict(color=style.INK), hoverinfo="text",
                             **{k: v for k, v in first[0].items() if k != "type"}))
    fig.add_trace(go.Scatter(mode="markers", hoverinfo="skip", marker=dict(symbol="square-open", size=58,
                                                                            color=TOUCHED_EDGE, line=dict(width=3)),
                             **{k: v for k, v in first[1].items() if k != "type"}))

    def title(f):
        small = f"<span style='font-size:{style.PLOTLY_SMALL}px'>"  # not <sub>: plotly draws it under the floor
        return html.escape(f"{f.index}. {f.caption}")[:220] + "<br>" + small + t(
            "{used} used, {shared} shared, {free} free", used=f.n_used, shared=f.n_shared, free=f.n_free) + "</span>"

    fig.frames = [go.Frame(name=str(f.index), data=_plotly_data(f, code, cols), traces=[0, 1],
                           layout=dict(title_text=title(f))) for f in frames]
    fig.update_xaxes(range=[-0.5, cols - 0.5], showticklabels=False, showgrid=False, zeroline=False)
    fig.update_yaxes(range=[rows - 0.5, -0.5], showticklabels=False, showgrid=False, zeroline=False)
    fig.update_layout(
        title_text=title(frames[0]), showlegend=False, height=170 + 78 * rows, margin=dict(l=20, r=20, t=100, b=90),
        sliders=[frame_slider([f.index for f in frames], t("event "), x=0.0, y=0, len=1.0, xanchor="left",
                              yanchor="top", pad=dict(t=10))])
    return fig


# -- tier 3: live ipywidgets ---------------------------------------------------------------------------------

def frame_html(frame: PoolFrame, colors: dict | None = None, cols: int | None = None) -> str:
    """One frame as self-contained HTML (inline styles, no scripts): what the live widget shows."""
    e = html.escape
    colors = colors or story_colors([frame])
    cols = _grid(len(frame.blocks), cols)
    touched = {b for _, b in frame.events}
    cells = []
    for b in frame.blocks:
        border = f"3px solid {TOUCHED_EDGE}" if b.block in touched else (
            f"1px dashed {style.MUTED}" if b.state in ("free", "cached") else f"1px solid {style.MUTED}")
        ref = f' <span style="float:right">×{b.refcount}</span>' if b.refcount > 1 else ""
        tip = t("block {block}: {state}, reference count {refs}", block=b.block, state=_state(b.state), refs=b.refcount)
        cells.append(
            f'<td title="{e(tip)}" style="width:5.7em;height:4.2em;'
            f'vertical-align:top;background:{block_color(b, colors)};border:{border};padding:2px;font-size:0.85em;'
            f'color:{style.INK}">'  # the block carries its own light background: dark text in both themes
            f'<b>{b.block}</b>{ref}<div style="text-align:center;font-size:1.25em;'
            f'color:{style.MUTED if b.state == "cached" else style.INK}">{e("".join(b.tokens)) or "&nbsp;"}</div>'
            f'<div style="text-align:center;font-size:0.8em">{e(",".join(b.owners))}</div></td>')
    rows = "".join("<tr>" + "".join(cells[i:i + cols]) + "</tr>" for i in range(0, len(cells), cols))
    tables = "".join(
        f'<tr><td style="padding:1px 8px;background:{colors.get(n, SEQ_COLORS[0])};color:{style.INK}">{e(n)}</td>'
        f'<td style="padding:1px 8px;font-variant-numeric:tabular-nums">{e(str(bl))}</td>'
        f'<td style="padding:1px 8px">{e(frame.texts[n])}</td></tr>' for n, bl in frame.tables.items())
    counts = t("{used} used, {shared} shared, {free} free; thick outline: touched by this event; dashed: free",
               used=frame.n_used, shared=frame.n_shared, free=frame.n_free)
    return (f'<div style="color:{style.css("ink")}"><div style="font-weight:bold;margin:4px 0">{frame.index}. '
            f'{e(frame.caption)}</div>'
            f'<div style="font-size:0.92em;margin-bottom:4px;color:{style.css("muted")}">{counts}</div>'
            f'<table style="border-collapse:separate;border-spacing:3px">{rows}</table>'
            f'<table style="margin-top:6px;font-size:0.92em"><tr><th style="text-align:left">{t("sequence")}</th>'
            f'<th style="text-align:left">{t("block table")}</th><th style="text-align:left">{t("text")}</th>'
            f'</tr>{tables}</table></div>')


def first_view(frames) -> int:
    """The event a block-pool view opens on: the first fork (blocks in use, one of them shared with reference
    count 2: paging's point in one picture), else the first event with a block in use, else the first event."""
    for f in frames:
        if f.kind == "fork":
            return f.index
    return next((f.index for f in frames if f.n_used), 0)


class BlockPoolWidget(LiveWidget):
    """Live block-pool view: change the prompts, the number of samples, the block size or the pool size and
    the story is recorded again on the model; Back / Step and the slider move through it. It opens (and reopens
    after a change) on the story's first fork (``first_view``), not on the empty pool.

    Python API (no browser needed): ``.step()`` (or ``.next()``), ``.back()``, ``.goto(i)``, ``.set(prompt_a=...,
    prompt_b=..., prompt_c=..., n_samples=..., block_size=..., n_blocks=...)``, ``.state()``, ``.frame``, ``.html``;
    ``.last_update_seconds`` is how long the last update took in Python. Display the widget itself (``.widget`` is
    its ipywidgets box)."""

    BLOCK_SIZES = (1, 2, 4, 8, 16)
    N_SAMPLES, N_BLOCKS = (1, 4), (4, 48)  # the sliders' ranges

    def __init__(self, model, tokenizer, prompts=("<s>缓存", "<s>hello", "<s>hello"), n_samples: int = 2,
                 block_size: int = 4, n_blocks: int = 16, seed: int = 0):
        import ipywidgets as W

        if not isinstance(prompts, (list, tuple)) or len(prompts) != 3:
            raise ValueError(f"prompts must be the three prompts of requests A, B and C, got {prompts!r:.60}")
        v = self._checked(prompt_a=prompts[0], prompt_b=prompts[1], prompt_c=prompts[2], n_samples=n_samples,
                          block_size=block_size, n_blocks=n_blocks)
        self.model, self.tokenizer, self.seed = model, tokenizer, checks.integer(seed, "seed", 0)
        self.error = ""
        self.frames, self.index, self.last_update_seconds = [], 0, 0.0
        ctl = dict(style=style.control_style(), layout=style.control_layout())
        self.controls = {
            "prompt_a": W.Text(value=v["prompt_a"], description="A", **ctl),
            "prompt_b": W.Text(value=v["prompt_b"], description="B", **ctl),
            "prompt_c": W.Text(value=v["prompt_c"], description="C", **ctl),
            "n_samples": W.IntSlider(value=v["n_samples"], min=self.N_SAMPLES[0], max=self.N_SAMPLES[1],
                                     description=t("samples of A"), **ctl),
            "block_size": W.Dropdown(options=self.BLOCK_SIZES, value=v["block_size"], description=t("block size"),
                                     **ctl),
            "n_blocks": W.IntSlider(value=v["n_blocks"], min=self.N_BLOCKS[0], max=self.N_BLOCKS[1],
                                    description=t("pool blocks"), **ctl),
        }
        self.back_button, self.step_button = self.step_buttons(layout=style.control_layout())
        self.slider = W.IntSlider(value=0, min=0, max=0, description=t("event"), **ctl)
        self.view = W.HTML()
        self.message = W.HTML()
        self.slider.observe(lambda ch: self.goto(ch["new"]), names="value")
        for c in self.controls.values():
            c.observe(lambda _: self._record(), names="value")
        self.widget = self.box(style.grid(*(self.controls[k] for k in ("prompt_a", "prompt_b", "prompt_c", "n_samples",
                                                                        "block_size", "n_blocks")),
                                          self.back_button, self.step_button, self.slider, columns=3),
                               self.message, self.view)
        self._record()

    def _record(self):
        t0 = time.perf_counter()
        v = {k: c.value for k, c in self.controls.items()}
        try:
            frames = record_story(self.model, self.tokenizer, (v["prompt_a"], v["prompt_b"], v["prompt_c"]),
                                  v["n_samples"], v["block_size"], v["n_blocks"], seed=self.seed)
        except ValueError as e:  # unknown characters, too long: keep the last story and say why
            self.error = prompt_problem(e)
            self.message.value = f'<span style="color:{style.text_colour("rejected")}">{html.escape(self.error)}</span>'
            return
        self.error, self.message.value = "", ""
        self.frames = frames
        self.slider.max = len(frames) - 1
        self.goto(first_view(frames))
        self.last_update_seconds = time.perf_counter() - t0

    def goto(self, i: int) -> int:
        """Show event ``i`` (moved into the story's events); returns the event shown."""
        self.index = i = within(i, len(self.frames))
        if self.slider.value != i:
            self.slider.value = i  # (its observer calls goto again, which finds nothing to change)
        self.redraw()
        return i

    def redraw(self):
        t0 = time.perf_counter()
        self.view.value = frame_html(self.frames[self.index], story_colors(self.frames))
        self.last_update_seconds = time.perf_counter() - t0

    def next(self) -> int:
        """One event forward (stays on the last one); returns the event shown."""
        return self.goto(self.index + 1)

    step = next  # the widget's own word for it (Step ▶)

    def back(self) -> int:
        """One event back (stays on the first); returns the event shown."""
        return self.goto(self.index - 1)

    def set(self, **values):
        """Change controls by name (prompt_a, prompt_b, prompt_c, n_samples, block_size, n_blocks): the story is
        recorded again, as when the control is changed in the browser. A value a control would clamp or refuse
        raises a ValueError / TypeError that names it, and nothing changes."""
        for k, v in self._checked(**values).items():
            self.controls[k].value = v
        return self

    @classmethod
    def _checked(cls, **values) -> dict:
        """The controls' values, each checked against its control (the constructor and ``set`` share this)."""
        allowed = ("prompt_a", "prompt_b", "prompt_c", "n_samples", "block_size", "n_blocks")
        check_controls(values, allowed)
        check = {"n_samples": lambda v: checks.integer(v, "n_samples", *cls.N_SAMPLES),
                 "n_blocks": lambda v: checks.integer(v, "n_blocks", *cls.N_BLOCKS),
                 "block_size": lambda v: checks.choice(checks.integer(v, "block_size", 1), "block_size",
                                                       cls.BLOCK_SIZES)}
        return {k: check.get(k, lambda v, k=k: checks.text(v, k))(v) for k, v in values.items()}

    @property
    def frame(self) -> PoolFrame:
        return self.frames[self.index]

    @property
    def html(self) -> str:
        return self.view.value

    def state(self) -> dict:
        f = self.frame
        return {"index": self.index, "n_frames": len(self.frames), "kind": f.kind, "caption": f.caption,
                "used": f.n_used, "shared": f.n_shared, "free": f.n_free, "tables": f.tables, "error": self.error}
