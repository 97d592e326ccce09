"""Speculative decoding, round by round: which draft tokens the target kept, which it rejected, and the
token it added itself (a correction after a rejection, a bonus when every proposal was kept).

Everything is read from a ``SpeculativeResult`` (``lib.speculative.speculative_generate``); nothing here
re-runs a model except the live explorer, when the user changes a control.

Three tiers (CONTRIBUTING.md):
1. ``plot_rounds``: a static matplotlib grid (one row per round), ``SpeculativeResult.table`` as text;
   ``plot_tokens_per_pass``: measured tokens per target pass against the prediction from the measured α;
2. ``rounds_figure``: a plotly figure with one frame per round and a slider (survives export);
3. ``SpeculativeExplorer``: ipywidgets (prompt, k, temperature, seed) that re-run both models, drivable
   from Python with ``set()``.
"""
from __future__ import annotations

import html
import time
from dataclasses import dataclass

from .. import checks
from . import style
from ..i18n import t
from ..speculative import SpeculativeResult, expected_tokens_per_pass, speculative_generate
from ..text import token_label
from . import figure_and_axes, frame_slider, play_buttons, try_prompt
from .live import LiveWidget

# Each state: a concept of lib.widgets.style (its colour) and a second cue (a hatch in matplotlib, a marker symbol in plotly,
# a text decoration in the HTML chips), so the grid reads without colour too. The target's own tokens (correction,
# bonus, alone) share the "newest" colour: they are the token the target adds; their hatch and symbol tell them apart.
CONCEPT_OF = {
    "accepted": "accepted",  # a draft token the target kept
    "rejected": "rejected",  # the first draft token the target refused
    "discarded": "draft",  # draft tokens after a rejection: dropped unchecked
    "correction": "newest",  # the target's own token in place of the rejected one
    "bonus": "newest",  # the target's extra token after k kept proposals
    "target": "newest",  # the target's token in a round without proposals (the last token of the budget)
    "cut": "free",  # a token computed after <eos>: not part of the text
}
COLORS = {s: style.colour(c) for s, c in CONCEPT_OF.items()}
HATCHES = {"accepted": style.concept("accepted").hatch, "rejected": style.concept("rejected").hatch,
           "discarded": style.concept("draft").hatch, "correction": "oo", "bonus": "**", "target": "", "cut": ""}
SYMBOLS = {"accepted": "square", "rejected": "square-x", "discarded": "square-open", "correction": "circle",
           "bonus": "star-square", "target": "square", "cut": "square"}  # plotly markers: the second cue
BLANK = style.PAPER  # a cell of a round not yet shown
MEANING = {
    "accepted": "draft token kept", "rejected": "draft token rejected", "discarded": "dropped after a rejection",
    "correction": "target's correction", "bonus": "target's bonus token", "target": "target alone",
    "cut": "after <eos>, unused",
}
TEMPERATURES = (0.0, 0.5, 0.8, 1.0, 1.2, 1.5)  # the live explorer's steps
MAX_ROUNDS = 48  # rows drawn at most (an animation longer than that stops being readable)


@dataclass(frozen=True)
class Cell:
    """One square of the grid: a draft proposal (slot 0..k-1) or the target's token (slot k)."""

    round: int
    slot: int
    token: int
    label: str
    status: str  # a key of COLORS
    p: float | None  # target probability of the token (proposals only)
    q: float | None  # draft probability (proposals only)
    accept_prob: float | None  # min(1, p/q) (sampling) or 1/0 (greedy); None if never tested

    @property
    def hover(self) -> str:
        text = t("round {round}: {label} — {meaning}", round=self.round, label=self.label,
                 meaning=t(MEANING[self.status]))
        if self.p is not None:
            text += t("; p target {p}, q draft {q}", p=f"{self.p:.4f}", q=f"{self.q:.4f}")
        if self.accept_prob is not None:
            text += t(", kept with probability {a}", a=f"{self.accept_prob:.4f}")
        return text


def round_cells(result: SpeculativeResult, tokenizer) -> list[list[Cell]]:
    """Per round, the cells to draw: its proposals, then the target's token (plain data)."""
    if not isinstance(result, SpeculativeResult):
        raise TypeError(f"round_cells needs a SpeculativeResult from speculative_generate, got {type(result).__name__}")
    rows = []
    for r in result.rounds[:MAX_ROUNDS]:
        cells = []
        for i, x in enumerate(r.proposed):
            status = "accepted" if i < r.accepted else "rejected" if i == r.accepted else "discarded"
            if i < r.accepted and i >= len(r.emitted):
                status = "cut"
            cells.append(Cell(r.index, i, x, token_label(tokenizer.tokens([x])[0]), status, r.p[i], r.q[i],
                              r.accept_prob[i] if i < len(r.accept_prob) else None))
        used = len(r.emitted) == r.accepted + 1
        cells.append(Cell(r.index, result.k, r.target_token, token_label(tokenizer.tokens([r.target_token])[0]),
                          r.kind if used else "cut", None, None, None))
        rows.append(cells)
    return rows


def text_after(result: SpeculativeResult, tokenizer, n_rounds: int) -> str:
    """The text (prompt + tokens) after the first ``n_rounds`` rounds."""
    ids = result.sequences[0, :result.prompt_len].tolist()
    for r in result.rounds[:n_rounds]:
        ids += r.emitted
    return tokenizer.decode(ids)


def describe(result: SpeculativeResult, sep: str = "; ") -> str:
    """The run's settings and outcome (used as a title; ``sep="\n"`` for two lines)."""
    s, r = result.sampling, result
    rule = t("greedy") if s["temperature"] == 0 else t("T={temp}, seed {seed}", temp=f"{s['temperature']:g}",
                                                      seed=s["seed"])
    return t("k={k}, {rule}: {n} new tokens in {passes} target passes (generate: {base}){sep}{drafts} draft passes, "
             "{kept}/{proposed} proposals kept ({rate})", k=r.k, rule=rule, n=r.n_new, passes=r.target_forwards,
             base=r.baseline_target_forwards, sep=sep, drafts=r.draft_forwards, kept=r.n_accepted,
             proposed=r.n_proposed, rate=f"{r.acceptance_rate:.0%}")


# -- tier 1: static matplotlib ---------------------------------------------------------------------------------
def plot_rounds(result: SpeculativeResult, tokenizer, ax=None, title: str | None = None):
    """Tier 1: one row per round; the draft's tokens kept (orange, hatched //), rejected (vermillion, xx) or
    dropped (sky blue, dotted), then the target's own token (yellow: ring-hatched correction, starred bonus).
    The right margin says how many tokens the round added."""
    from matplotlib.patches import Patch, Rectangle

    rows = round_cells(result, tokenizer)
    k = result.k
    n = len(rows)
    fig, ax = figure_and_axes(ax, (min(style.FIGURE_WIDTH, max(6.0, 1.5 + 0.55 * (k + 3))), 2.3 + 0.42 * max(n, 1)))
    for row in rows:
        for c in row:
            x = c.slot + (0.4 if c.slot == k else 0)  # a gap before the target's column
            y = n - 1 - c.round
            ax.add_patch(Rectangle((x, y), 0.92, 0.84, facecolor=COLORS[c.status], edgecolor=style.INK,
                                   linewidth=0.6, hatch=HATCHES[c.status] or None, hatchcolor=style.PAPER))
            ax.text(x + 0.46, y + 0.42, c.label, ha="center", va="center", color=style.INK,
                    fontsize=style.FONT_SIZE if len(c.label) == 1 else style.SMALL_SIZE - 2,
                    bbox=dict(boxstyle="square,pad=0.1", facecolor=COLORS[c.status], edgecolor="none"))
        r = result.rounds[row[0].round]
        ax.text(k + 1.55, n - 1 - r.index + 0.42, f"+{len(r.emitted)}", va="center")
    ax.set_xlim(-0.1, k + 2.2)
    ax.set_ylim(-0.2, n)
    ax.set_yticks([n - 1 - i + 0.42 for i in range(n)], [t("round {i}", i=i) for i in range(n)])
    ax.set_xticks([i + 0.46 for i in range(k)] + [k + 0.86], [f"x{i + 1}" for i in range(k)] + [t("target")])
    ax.tick_params(length=0)
    for side in ("left", "bottom", "top", "right"):
        ax.spines[side].set_visible(False)
    ax.set_title(title if title is not None else describe(result, sep="\n"))
    shown = [s for s in COLORS if any(c.status == s for row in rows for c in row)]
    # the key goes under the whole figure: a legend anchored to the axes and wider than the grid made the layout
    # shrink the grid to fit it (the rounds became a 50-px strip with "x1 ... target" printed over each other)
    fig.legend(handles=[Patch(facecolor=COLORS[s], edgecolor=style.INK, linewidth=0.6, hatch=HATCHES[s] or None,
                              hatchcolor=style.PAPER, label=t(MEANING[s])) for s in shown],
               loc="outside lower center", ncol=min(len(shown), 2))
    return fig


def plot_tokens_per_pass(rows: list[dict], ax=None, title: str | None = None, legend: bool = True):
    """Tier 1: tokens per target pass against k, from ``lib.speculative.measure_acceptance`` rows: the
    prediction (1 − α^(k+1)) / (1 − α) at each row's measured α (line), the measured tokens per full round
    (dots) and per pass over the whole runs (open circles, lower: the last round of a text is cut short),
    between the bounds 1 (every draft rejected) and k + 1 (every draft kept). ``title`` goes through ``t``;
    ``legend=False`` leaves the key to the caller (one ``fig.legend`` for a grid of these)."""
    needed = ("k", "α", "tokens/pass", "tokens/full round")
    if not rows or any(any(n not in r for n in needed) for r in rows):
        raise ValueError(f"plot_tokens_per_pass needs the rows of lib.speculative.measure_acceptance (keys "
                         f"{', '.join(needed)}), got {len(rows) if isinstance(rows, list) else type(rows).__name__} rows")
    rows = [r for r in rows if r["α"] != "-"]
    ks = [r["k"] for r in rows]
    fig, ax = figure_and_axes(ax, (style.FIGURE_WIDTH * 0.72, 3.8))
    ref = style.concept("reference")
    ax.plot(ks, [k + 1 for k in ks], color=ref.colour, ls="--", lw=1, label=t("k + 1 (α = 1)"))
    ax.plot(ks, [1] * len(ks), color=ref.colour, ls=":", lw=1, label=t("1 (α = 0)"))
    predicted = style.concept("cached")  # the line: what the formula reads off α
    ax.plot(ks, [expected_tokens_per_pass(r["α"], r["k"]) for r in rows], color=predicted.colour,
            ls=predicted.linestyle, lw=2, label=t("predicted from the measured α"))
    measured = style.concept("accepted")  # the points: tokens the target kept, counted
    full = [(r["k"], r["tokens/full round"]) for r in rows if r["tokens/full round"] != "-"]
    ax.scatter(*zip(*full), color=measured.colour, marker=measured.marker, edgecolor=style.INK, linewidth=0.5,
               zorder=3, label=t("measured, full rounds"))
    ax.scatter(ks, [r["tokens/pass"] for r in rows], facecolor="none", edgecolor=style.text_colour("accepted"),
               marker="o", s=60, linewidth=1.2, zorder=3, label=t("measured, all passes"))
    for r in rows:
        ax.annotate(f"α={r['α']:.2f}", (r["k"], expected_tokens_per_pass(r["α"], r["k"])),
                    fontsize=style.SMALL_SIZE, xytext=(0, 9), textcoords="offset points", ha="center",
                    color=style.text_colour("cached"))
    ax.set_xticks(ks)
    ax.set_xlim(min(ks) - 0.5, max(ks) + 0.5)  # room for the first and last α labels inside the axes
    ax.set_xlabel(t("k (draft tokens proposed per round)"))
    ax.set_ylabel(t("tokens per target pass"))
    ax.set_title(t(title if title is not None else "tokens per target pass: predicted vs measured"))
    if legend:
        ax.legend(loc="upper left")
    return fig


# -- tier 2: plotly, one frame per round -------------------------------------------------------------------------
def rounds_figure(result: SpeculativeResult, tokenizer, title: str = "speculative decoding"):
    """Tier 2: the same grid, revealed one round per frame (slider + play), the text so far and the pass
    counts in the title. Fixed grid: later rounds are empty squares, so frames never re-layout."""
    import plotly.graph_objects as go

    title = t(title)

    rows = round_cells(result, tokenizer)
    k, n = result.k, len(rows)
    cells = [c for row in rows for c in row]
    xs = [c.slot + (0.4 if c.slot == result.k else 0) for c in cells]
    ys = [c.round for c in cells]
    hover = [html.escape(c.hover) for c in cells]  # plotly reads <...> as markup: escape <s>, <eos>
    size = 24

    def state(upto: int):
        """Colours, symbols and labels with rounds 0..upto shown, later ones blank."""
        colors = [COLORS[c.status] if c.round <= upto else BLANK for c in cells]
        symbols = [SYMBOLS[c.status] if c.round <= upto else "square" for c in cells]
        labels = [html.escape(c.label) if c.round <= upto else "" for c in cells]
        return colors, symbols, labels

    def heading(upto: int) -> str:
        passes = upto + 1
        new = sum(len(r.emitted) for r in result.rounds[:passes])
        text = html.escape(text_after(result, tokenizer, passes))
        return (t("{title} — round {upto}: {new} new tokens in {passes} target passes (generate: {new})",
                  title=html.escape(title), upto=upto, new=new, passes=passes) + f"<br>{text}")

    colors, symbols, labels = state(n - 1)
    outline = dict(color=style.INK, width=1)
    trace = go.Scatter(x=xs, y=ys, mode="markers+text", text=labels, hovertext=hover, hoverinfo="text",
                       marker=dict(symbol=symbols, size=size, color=colors, line=outline), showlegend=False)
    fig = go.Figure(data=[trace])
    frames = []
    for i in range(n):
        c, sym, lab = state(i)
        frames.append(go.Frame(name=str(i), data=[go.Scatter(marker=dict(color=c, symbol=sym), text=lab)],
                               traces=[0], layout=dict(title_text=heading(i))))
    fig.frames = frames
    legend = [go.Scatter(x=[None], y=[None], mode="markers", name=t(MEANING[s]),
                         marker=dict(symbol=SYMBOLS[s], size=12, color=COLORS[s], line=outline))
              for s in COLORS if any(c.status == s for c in cells)]
    fig.add_traces(legend)
    fig.update_layout(  # colours and fonts come from the kvlab template; no fixed width: the cell's
        title_text=heading(n - 1), height=260 + 32 * n, margin=dict(l=80, t=150, b=120),
        xaxis=dict(range=[-0.6, k + 1.0], tickvals=list(range(k)) + [k + 0.4],
                   ticktext=[f"x{i + 1}" for i in range(k)] + [t("target")], showgrid=False, zeroline=False),
        yaxis=dict(range=[n - 0.5, -0.5], tickvals=list(range(n)), ticktext=[t("round {i}", i=i) for i in range(n)],
                   showgrid=False, zeroline=False),
        # from the top: the title (two lines), the legend (above the grid, never over its tick labels), the grid
        # with its tick labels, then the Play button and, beside it (not under it), the slider
        legend=dict(orientation="h", x=0, xanchor="left", y=1.02, yanchor="bottom"),
        sliders=[frame_slider(range(n), t("round: "), n - 1, x=0.1, len=0.9, xanchor="left", y=-0.12,
                              yanchor="top", pad=dict(t=0))],
        updatemenus=[play_buttons(700, from_current=False, x=0, y=-0.12, xanchor="left", yanchor="top",
                                  pad=dict(t=0, r=10))])
    return fig


# -- tier 3: live ipywidgets -------------------------------------------------------------------------------------
def rounds_html(result: SpeculativeResult, tokenizer) -> str:
    """The rounds as coloured token chips, one line per round, under a summary (what the explorer shows). A chip's
    colour is its state's concept colour with dark text on it; struck-through text marks what the text lost
    (rejected, dropped, after <eos>), a bold outline the target's own token, so the chips read without colour."""
    muted = style.css("muted")
    lines = []
    for row in round_cells(result, tokenizer):
        chips = []
        for c in row:
            sep = f'<span style="margin:0 6px;color:{muted}">|</span>' if c.slot == result.k else ""
            chips.append(f'{sep}<span title="{html.escape(c.hover)}" style="{_chip_style(c.status)}">'
                         f'{html.escape(c.label)}</span>')
        r = result.rounds[row[0].round]
        lines.append(f'<div><span style="display:inline-block;width:64px;color:{muted}">{t("round {i}", i=r.index)}</span>'
                     f'{"".join(chips)}<span style="margin-left:8px;color:{muted}">+{len(r.emitted)}</span></div>')
    key = " ".join(f'<span style="{_chip_style(s, key=True)}">{t(MEANING[s])}</span>'
                   for s in ("accepted", "rejected", "discarded", "correction", "bonus"))
    return (f"<div style='font-size:1em;color:{style.css('ink')}'><b>{html.escape(describe(result))}</b><br>"
            + t("text: <code>{text}</code>", text=html.escape(tokenizer.decode(result.sequences[0]))) +
            f"<div style='margin:4px 0'>{''.join(lines)}</div><div style='font-size:0.85em'>{key}</div></div>")


def _chip_style(status: str, key: bool = False) -> str:
    """CSS of one chip: the state's colour with INK text (readable on every concept colour, in both themes: the chip
    carries its own background) and the state's second cue."""
    cue = {"rejected": "text-decoration:line-through;", "discarded": f"text-decoration:line-through;"
           f"border:1px dashed {style.INK};", "cut": "text-decoration:line-through;",
           "correction": f"font-weight:bold;border:2px solid {style.INK};",
           "bonus": f"font-weight:bold;border:2px dotted {style.INK};"}.get(status, f"border:1px solid {style.INK};")
    if key:
        cue = cue.replace("text-decoration:line-through;", "")  # the key's words stay readable
    size = ("padding:0 4px;" if key
            else "display:inline-block;min-width:18px;padding:1px 4px;margin:1px;text-align:center;")
    return f"{size}border-radius:3px;background:{COLORS[status]};color:{style.INK};{cue}"


class SpeculativeExplorer(LiveWidget):
    """Tier 3: prompt box, k slider, temperature steps and seed; each change re-runs draft + target once.

    Drive it from Python with ``set(prompt=..., k=..., temperature=..., seed=...)``; ``result`` is the last
    run, ``html`` what is shown, ``message`` the error text for a bad prompt (the last good run stays). Display the
    explorer itself (``.widget`` is its ipywidgets box)."""

    def __init__(self, target, draft, tokenizer, prompt: str = "<s>the", k: int = 4, temperature: float = 0.0,
                 seed: int = 0, max_new_tokens: int = 24):
        import ipywidgets as W

        self.target, self.draft, self.tokenizer = target, draft, tokenizer
        self.max_new_tokens = checks.integer(max_new_tokens, "max_new_tokens", 1)
        k, temperature, seed = self._check(k, temperature, seed)
        checks.text(prompt, "prompt")
        ctl = dict(style=style.control_style(), layout=style.control_layout())
        self.prompt_box = W.Text(value=prompt, description=t("prompt"), continuous_update=False, **ctl)
        self.k_slider = W.IntSlider(value=k, min=1, max=8, description=t("k (draft)"), **ctl)
        self.temperature = W.SelectionSlider(options=list(TEMPERATURES), value=float(temperature),
                                             description=t("temperature"), **ctl)
        self.seed = W.IntText(value=seed, description=t("seed"), **ctl)
        self.view = W.HTML()
        self.message = ""
        self.last_update_seconds = 0.0
        self.result = self._run(prompt)  # the first prompt must be valid: a bad one raises here
        self.prompt = prompt
        self.redraw()
        for w in (self.prompt_box, self.k_slider, self.temperature, self.seed):
            w.observe(self._on_change, names="value")
        self.widget = self.box(style.grid(self.prompt_box, self.seed, self.k_slider, self.temperature, columns=2),
                               self.view)

    @staticmethod
    def _check(k, temperature, seed) -> tuple:
        """k, temperature and seed as the controls hold them (the constructor and ``set`` refuse the same)."""
        k = checks.integer(k, "k", 1, 8, allowed="an integer from 1 to 8 (the explorer's k slider)")
        if checks.as_number(temperature) not in TEMPERATURES:
            raise ValueError(f"the explorer's temperature takes one of {list(TEMPERATURES)}, got {temperature!r}")
        seed = checks.integer(seed, "seed", 0, 2 ** 31 - 1)  # a seed box, as in the generation player
        return k, checks.as_number(temperature), seed

    def _run(self, prompt: str) -> SpeculativeResult:
        ids = self.tokenizer.encode(prompt)
        return speculative_generate(self.target, self.draft, ids, self.max_new_tokens, k=int(self.k_slider.value),
                                    temperature=float(self.temperature.value), eos_id=self.tokenizer.eos_id,
                                    seed=int(self.seed.value))

    def redraw(self):
        error = (f'<div style="color:{style.text_colour("rejected")}">{html.escape(self.message)}</div>'
                 if self.message else "")
        self.view.value = error + rounds_html(self.result, self.tokenizer)

    def _on_change(self, change=None):
        t0 = time.perf_counter()
        try_prompt(self, self.prompt_box.value, lambda text: setattr(self, "result", self._run(text)))
        self.redraw()
        self.last_update_seconds = time.perf_counter() - t0

    @property
    def html(self) -> str:
        return self.view.value

    def set(self, prompt: str | None = None, k: int | None = None, temperature: float | None = None,
            seed: int | None = None):
        """Change controls as a user would (the callback re-runs once per changed control). A value the controls
        do not offer raises a ValueError that names it, and nothing changes."""
        new_k, new_t, new_seed = self._check(self.k_slider.value if k is None else k,
                                             self.temperature.value if temperature is None else temperature,
                                             self.seed.value if seed is None else seed)
        if prompt is not None:
            checks.text(prompt, "prompt")
        if k is not None:
            self.k_slider.value = new_k
        if temperature is not None:
            self.temperature.value = new_t
        if seed is not None:
            self.seed.value = new_seed
        if prompt is not None:
            self.prompt_box.value = prompt
        return self
