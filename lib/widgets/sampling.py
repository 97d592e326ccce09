"""Sampling explorer: how temperature, top-k and top-p reshape the next-token distribution.

The model gives one logit per vocabulary token for the next position. Greedy decoding takes the largest;
sampling draws from ``softmax(filter_logits(logits, temperature, top_k, top_p))``, where
``lib.sampling.filter_logits`` (the function ``generate()`` itself samples with) divides by the
temperature and sets every token outside the top-k / top-p set to -inf. This module draws that
distribution as bars over the top candidates, sorted by logit: tokens that can still be drawn in colour,
tokens removed by top-k / top-p greyed (at the height they had before the cut), and the model's own
distribution (temperature 1) as an outline behind them.

Three tiers (CONTRIBUTING.md):
1. ``plot_sampling``: a static matplotlib figure (``sampling_bars`` gives the numbers, ``Bars.text()`` a table).
2. ``sampling_figure``: a plotly figure with a slider over ``TEMPERATURES``, every frame precomputed.
3. ``SamplingExplorer``: live ipywidgets (prompt, temperature, top-k, top-p, seeded draws), drivable from
   Python through ``set()`` and ``sample()``.
"""
from __future__ import annotations

import html
import time
from dataclasses import dataclass

import torch

from .. import checks
from . import style
from ..checks import sampling as check_sampling
from ..i18n import say, t
from ..sampling import draw, filter_logits, make_generator
from ..text import pad, token_label
from . import figure_and_axes, frame_slider, try_prompt
from .live import LiveWidget, problem_html

TEMPERATURES = (0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0)  # the plotly slider's discrete steps
MAX_BARS = 50  # never more bars than this: past ~50 they stop being readable
# lib.widgets.style's concepts: "kept" (a dark neutral) and "removed" (a light one, dotted), the model's own T=1
# distribution an ink outline; lightness and the hatch tell them apart as well as the colour
KEPT, REMOVED, OUTLINE = style.colour("kept"), style.colour("removed"), style.INK
REMOVED_HATCH = style.concept("removed").hatch


# -- the numbers --------------------------------------------------------------------------------------------
def _as_vector(logits) -> torch.Tensor:
    if not isinstance(logits, torch.Tensor):
        raise TypeError(f"logits must be a torch.Tensor of shape (vocab,) or (1, vocab), got {type(logits).__name__}")
    if logits.dim() == 2 and logits.shape[0] == 1:
        logits = logits[0]
    if logits.dim() != 1 or logits.shape[0] < 1:
        raise ValueError(f"logits must have shape (vocab,) or (1, vocab) (one position of one sequence), "
                         f"got shape {tuple(logits.shape)}")
    return logits.detach().float().cpu()


def sampling_views(logits, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None):
    """Full-vocabulary views of one sampling rule, three (vocab,) tensors:

    before: softmax(logits / temperature), before top-k / top-p cut anything;
    probs:  softmax(filter_logits(logits, temperature, top_k, top_p)), what is actually sampled from;
    kept:   bool, the tokens filter_logits left finite (the rest can never be drawn).
    temperature=0 is greedy, as in ``generate``: all the probability on the argmax; top-k / top-p unused.
    """
    check_sampling(temperature, top_k, top_p)
    logits = _as_vector(logits)  # (vocab,)
    if temperature == 0:
        probs = torch.zeros_like(logits)
        probs[torch.argmax(logits)] = 1.0
        return probs.clone(), probs, probs > 0
    filtered = filter_logits(logits[None], temperature, top_k, top_p)[0]  # (vocab,), -inf where cut
    before = torch.softmax(logits / temperature, dim=-1)
    return before, torch.softmax(filtered, dim=-1), torch.isfinite(filtered)


@dataclass(frozen=True)
class Bars:
    """What the bar chart shows: the top ``len(ids)`` tokens by logit (left to right = most likely first)."""

    ids: list  # token ids, sorted by logit, largest first
    labels: list  # their labels (see token_label)
    model: list  # softmax(logits): the model's own distribution, temperature 1
    before: list  # softmax(logits / T) before the top-k / top-p cut
    probs: list  # the sampling distribution (0 for removed tokens)
    kept: list  # bool: can this token still be drawn?
    temperature: float
    top_k: int | None
    top_p: float | None
    n_kept: int  # tokens left in the whole vocabulary (may exceed the bars shown)
    vocab_size: int

    @property
    def greyed(self) -> list:
        """Ids of the shown tokens that top-k / top-p (or greedy) removed."""
        return [i for i, k in zip(self.ids, self.kept) if not k]

    def rule(self) -> str:
        """The setting in words, e.g. 'T=0.7, top-k=5, top-p=0.9' or 'greedy (T=0)'."""
        if self.temperature == 0:
            return t("greedy (T=0)")
        parts = [f"T={self.temperature:g}"]
        if self.top_k is not None:
            parts.append(f"top-k={self.top_k}")
        if self.top_p is not None:
            parts.append(f"top-p={self.top_p:g}")
        return ", ".join(parts)

    def summary(self) -> str:
        return t("{rule}: {n} of {vocab} tokens can be drawn", rule=self.rule(), n=self.n_kept, vocab=self.vocab_size)

    def text(self, digits: int = 4) -> str:
        """The bars as a text table (probabilities rounded to ``digits`` decimals)."""
        head = "  ".join([pad(t("token"), 6, "right"), *(pad(t(h), 8, "right") for h in ("p model", "p before",
                                                                                           "p sample")), t("kept")])
        rows = [f"{lab:>6}  {m:8.{digits}f}  {b:8.{digits}f}  {p:8.{digits}f}  {t('yes') if k else '-'}"
                for lab, m, b, p, k in zip(self.labels, self.model, self.before, self.probs, self.kept)]
        return "\n".join([self.summary(), head] + rows)


def _check_vocab(tokenizer, n_logits: int) -> None:
    """The logits and the tokenizer belong to one model. lib's tokenizers label exactly the model's vocabulary. A
    Hugging Face one (``lib.hf.HFTokenizer``) need only cover its base vocabulary (``base_vocab_size``): real
    checkpoints pad the embedding past it (Qwen2.5: 151,936 rows for 151,665 tokens) or add special tokens the
    model has no row for; a padding row is labelled by its id."""
    base = getattr(tokenizer, "base_vocab_size", None)
    if base is None and tokenizer.vocab_size != n_logits:
        raise ValueError(f"the logits have {n_logits} entries but the tokenizer has "
                         f"{tokenizer.vocab_size} tokens: they belong to different models")
    if base is not None and not base <= n_logits <= 2 * max(base, tokenizer.vocab_size):
        raise ValueError(f"the logits have {n_logits} entries but the tokenizer's base vocabulary has {base} "
                         f"tokens (the model's rows must cover it, padding allowed): they belong to different models")


def _labels(tokenizer, ids: list[int]) -> list[str]:
    """One label per id; an id past the tokenizer (a padding row of the embedding) as #id."""
    known = [i for i in ids if i < tokenizer.vocab_size]
    pieces = dict(zip(known, tokenizer.tokens(known)))
    return [token_label(pieces[i]) if i in pieces else f"#{i}" for i in ids]


def sampling_bars(logits, tokenizer, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None, n_bars: int = 20) -> Bars:
    """The numbers behind every tier: the ``n_bars`` (<= 50) most likely tokens under this sampling rule."""
    n_bars = checks.integer(n_bars, "n_bars", 1, MAX_BARS)
    logits = _as_vector(logits)
    _check_vocab(tokenizer, logits.shape[0])
    before, probs, kept = sampling_views(logits, temperature, top_k, top_p)
    model = torch.softmax(logits, dim=-1)
    n = min(n_bars, logits.shape[0])
    ids = torch.sort(logits, descending=True, stable=True).indices[:n]  # ties keep the lower id first
    return Bars(ids=ids.tolist(), labels=_labels(tokenizer, ids.tolist()),
                model=model[ids].tolist(), before=before[ids].tolist(), probs=probs[ids].tolist(),
                kept=kept[ids].tolist(), temperature=float(temperature), top_k=top_k,
                top_p=None if top_p is None else float(top_p), n_kept=int(kept.sum()),
                vocab_size=logits.shape[0])


def next_token_logits(model, tokenizer, prompt: str) -> torch.Tensor:
    """One forward pass: the logits (vocab,) for the token after ``prompt`` (text; write ``<s>`` to start).
    Unknown characters raise the tokenizer's UnknownCharacterError, which lists them."""
    ids = tokenizer.encode(checks.text(prompt, "prompt"))
    if not ids:
        raise ValueError("the prompt is empty: type at least one token, e.g. <s>")
    x = torch.tensor([ids], dtype=torch.long, device=model.device)  # (1, T)
    with torch.no_grad():
        return model(x)[0, -1].float().cpu()  # (vocab,)


def draw_tokens(logits, n: int = 20, temperature: float = 1.0, top_k: int | None = None,
                top_p: float | None = None, seed: int | None = 0) -> list[int]:
    """Draw ``n`` next tokens independently from this sampling rule, one ``torch.multinomial`` call each
    from a generator seeded with ``seed`` -- what ``generate(..., seed=seed)`` does, so its first draw
    equals generate's first sampled token. Same seed, same tokens."""
    n = checks.integer(n, "n", 1)
    _, probs, _ = sampling_views(logits, temperature, top_k, top_p)
    if temperature == 0:
        return [int(torch.argmax(probs))] * n
    gen = make_generator(seed, "cpu")  # None: torch's global random stream
    return [int(draw(probs[None], gen)) for _ in range(n)]


# -- tier 1: static matplotlib ------------------------------------------------------------------------------
def plot_bars(bars: Bars, ax=None, title: str | None = None, legend: bool = True):
    """Draw ``bars`` on ``ax`` (a new figure if None) and return the figure."""
    from matplotlib.patches import Patch

    fig, ax = figure_and_axes(ax, (min(style.FIGURE_WIDTH, max(4.0, 0.32 * len(bars.ids) + 1.5)), 3.4))
    x = list(range(len(bars.ids)))
    heights = [p if k else b for p, b, k in zip(bars.probs, bars.before, bars.kept)]
    ax.bar(x, heights, color=[KEPT if k else REMOVED for k in bars.kept], width=0.8,
           hatch=["" if k else REMOVED_HATCH for k in bars.kept], edgecolor=style.MUTED, linewidth=0.5)
    ax.bar(x, bars.model, fill=False, edgecolor=OUTLINE, linewidth=0.8, width=0.8)
    ax.set_xticks(x, bars.labels, fontsize=style.FONT_SIZE if len(x) <= 25 else style.SMALL_SIZE)
    for tick in ax.get_xticklabels():  # <eos>, <s>: upright would collide with their neighbours
        if len(tick.get_text()) > 1:
            tick.set_rotation(90)
    ax.set_ylim(0, 1.02)
    ax.set_ylabel(t("probability"))
    ax.set_title(say(title) if title is not None else bars.summary(), loc="left")  # a cell's title: say
    if legend:
        ax.legend(handles=[Patch(facecolor=KEPT, edgecolor=style.MUTED, label=t(style.concept("kept").label)),
                           Patch(facecolor=REMOVED, edgecolor=style.MUTED, hatch=REMOVED_HATCH,
                                 label=t(style.concept("removed").label)),
                           Patch(fill=False, edgecolor=OUTLINE, label=t("model, T=1"))], loc="upper right")
    return fig


def plot_sampling(logits, tokenizer, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None, n_bars: int = 20, ax=None, title: str | None = None,
                  legend: bool = True):
    """Tier 1: the top ``n_bars`` next-token probabilities under one sampling rule, removed tokens greyed."""
    return plot_bars(sampling_bars(logits, tokenizer, temperature, top_k, top_p, n_bars), ax=ax, title=title,
                     legend=legend)


# -- tier 2: plotly, a slider over discrete temperatures -------------------------------------------------------
def _r(values, digits=4):
    return [round(float(v), digits) for v in values]


def sampling_figure(logits, tokenizer, temperatures=TEMPERATURES, top_k: int | None = None,
                    top_p: float | None = None, n_bars: int = 20, title: str = "next-token distribution",
                    start: float = 1.0):
    """Tier 2: a plotly figure with one precomputed frame per temperature and a slider between them
    (works in a saved page without a kernel). Bars sorted by logit; removed tokens grey; model outline."""
    title = t(title)
    import plotly.graph_objects as go

    temperatures = list(temperatures)
    if not temperatures:
        raise ValueError("temperatures is empty: give at least one temperature step, e.g. TEMPERATURES")
    views = [sampling_bars(logits, tokenizer, t, top_k, top_p, n_bars) for t in temperatures]
    first = views[0]
    x = list(range(len(first.ids)))

    def main_trace(b: Bars):
        heights = [p if k else q for p, q, k in zip(b.probs, b.before, b.kept)]
        return go.Bar(x=x, y=_r(heights), marker=dict(
                          color=[KEPT if k else REMOVED for k in b.kept],
                          pattern=dict(shape=["" if k else style.plotly_pattern("removed") for k in b.kept],
                                       fgcolor=style.MUTED)),
                      customdata=[[html.escape(lab), round(p, 4), round(q, 4)]  # plotly reads <s> as markup
                                  for lab, p, q in zip(b.labels, b.probs, b.before)],
                      hovertemplate=t("%{customdata[0]}: p sample %{customdata[1]}, before the cut %{customdata[2]}")
                                    + "<extra></extra>", name=t("sampling distribution"), showlegend=False)

    start_i = temperatures.index(start) if start in temperatures else 0
    outline = go.Bar(x=x, y=_r(first.model), marker=dict(color="rgba(0,0,0,0)", line=dict(color=OUTLINE, width=1)),
                     hovertemplate=t("model (T=1): %{y}") + "<extra></extra>", name=t("model, T=1"), showlegend=False)
    fig = go.Figure(data=[main_trace(views[start_i]), outline])
    fig.frames = [go.Frame(name=f"{t:g}", data=[main_trace(b)], traces=[0],
                           layout=dict(title_text=html.escape(f"{title} — {b.summary()}")))
                  for t, b in zip(temperatures, views)]
    fig.update_layout(
        title_text=html.escape(f"{title} — {views[start_i].summary()}"), barmode="overlay",
        height=380, margin=dict(l=60, r=20, t=60, b=40), yaxis=dict(range=[0, 1.02], title=t("probability")),
        xaxis=dict(tickmode="array", tickvals=x, ticktext=[html.escape(lab) for lab in first.labels]),
        sliders=[frame_slider([f"{t:g}" for t in temperatures], t("temperature: "), start_i, pad=dict(t=30))])
    return fig


# -- tier 3: live ipywidgets ----------------------------------------------------------------------------------
def bars_html(bars: Bars, width_px: int = 260) -> str:
    """The bars as an HTML table (token, bar, p sample, p model) — what the live explorer shows. Each bar lies on
    a white track, a small card like the figures': its fixed colours read the same in a light and a dark theme."""
    rows = []
    cell = "padding:1px 0.6em;vertical-align:bottom"
    num = f"{cell};text-align:right;white-space:nowrap;font-variant-numeric:tabular-nums"
    for lab, m, b, p, k in zip(bars.labels, bars.model, bars.before, bars.probs, bars.kept):
        h = p if k else b
        fill = (f"background:{KEPT}" if k else  # removed: the light fill, dotted (the hatch of the figures)
                f"background:{REMOVED} radial-gradient({style.MUTED} 0.8px, transparent 1px) 0 0 / 4px 4px")
        bar = (f'<div style="position:relative;width:{width_px}px;height:14px;background:{style.PAPER}">'
               f'<div style="position:absolute;left:0;top:2px;height:10px;width:{h * width_px:.1f}px;'
               f'box-sizing:border-box;border:1px solid {style.MUTED};{fill}"></div>'
               f'<div style="position:absolute;left:{m * width_px:.1f}px;top:0;height:14px;width:2px;'
               f'background:{OUTLINE};outline:1px solid {style.PAPER}" title="{t("model, T=1")}"></div></div>')
        row_style = "" if k else f"color:{style.css('muted')}"
        rows.append(f'<tr style="{row_style}"><td style="{cell};text-align:right">{html.escape(lab)}</td>'
                    f'<td style="{cell}">{bar}</td><td style="{num}">{p:.4f}</td><td style="{num}">{m:.4f}</td></tr>')
    # the bar column's heading wraps within the bars' width (it would widen the column past them), and every
    # column keeps a gutter, so the numbers' headings never run together ("p samplep model")
    head = (f'<tr><th style="{cell};text-align:right">{t("token")}</th>'
            f'<th style="{cell};text-align:left;font-weight:normal;width:{width_px}px;max-width:{width_px}px;'
            f'white-space:normal">{t("bar (dark: can be drawn; light, dotted: removed; tick: model at T=1)")}</th>'
            f'<th style="{num}">{t("p sample")}</th><th style="{num}">{t("p model")}</th></tr>')
    return (f'<div style="color:{style.css("ink")};line-height:1.35"><b>{html.escape(bars.summary())}</b>'
            f'<table style="font-size:0.92em;border-collapse:collapse;color:inherit">{head}{"".join(rows)}</table>'
            f'</div>')


class SamplingExplorer(LiveWidget):
    """Tier 3: prompt box, temperature / top-k / top-p sliders and seeded draws, on a live model.

    Changing the prompt re-runs the model once (unknown characters: a readable message, the last good
    prompt stays); the sliders only re-filter the same logits. Drive it from Python with ``set(...)``
    and ``sample(...)``; ``state`` is what is drawn, ``message`` the text under the controls.
    """

    def __init__(self, model, tokenizer, prompt: str = "<s>", temperature: float = 1.0,
                 top_k: int | None = None, top_p: float | None = None, n_bars: int = 20):
        import ipywidgets as W

        check_sampling(temperature, top_k, top_p)
        self._check_slider_ranges(temperature, top_k, top_p)
        self.model, self.tokenizer, self.n_bars = model, tokenizer, checks.integer(n_bars, "n_bars", 1, MAX_BARS)
        self.logits = next_token_logits(model, tokenizer, prompt)  # the given prompt must be valid
        self.prompt = prompt
        self.message = ""
        self.last_update_seconds = 0.0  # wall time of the last callback (re-filter + render; + forward pass)
        self.samples: list[int] = []
        look = dict(style=style.control_style(), layout=W.Layout(**style.control_layout()))
        self.prompt_box = W.Text(value=prompt, description=t("prompt"), continuous_update=False, **look)
        self.temperature = W.FloatSlider(value=temperature, min=0.0, max=2.0, step=0.05, description=t("temperature"),
                                         readout_format=".2f", continuous_update=True, **look)
        self.top_k = W.IntSlider(value=top_k or 0, min=0, max=MAX_BARS, description=t("top-k (0=off)"), **look)
        self.top_p = W.FloatSlider(value=1.0 if top_p is None else top_p, min=self.TOP_P_MIN, max=1.0, step=0.05,
                                   description=t("top-p (1=off)"), readout_format=".2f", **look)
        self.seed = W.IntText(value=0, description=t("seed"), **look)
        self.draw_button = W.Button(description=t("draw 20 tokens"), layout=W.Layout(width="auto",
                                                                                  min_width="max-content"))
        self.message_box = W.HTML()
        self.bars_box = W.HTML()
        self.samples_box = W.HTML()
        self.redraw()
        self.prompt_box.observe(self._on_prompt, names="value")
        for w in (self.temperature, self.top_k, self.top_p):
            w.observe(self._on_setting, names="value")
        self.draw_button.on_click(lambda _: self.sample())
        self.controls = style.grid(self.prompt_box, self.seed, self.draw_button, self.temperature, self.top_k,
                                   self.top_p, columns=3)
        self.widget = self.box(self.controls, self.message_box, self.bars_box, self.samples_box)

    # -- the settings, as the sampling functions take them -----------------------------------------------------
    TOP_P_MIN = 0.05  # the top-p slider's range is 0.05..1

    @classmethod
    def _check_slider_ranges(cls, temperature, top_k, top_p):
        """What the sliders can show (the constructor and ``set`` refuse the same values; nothing is clamped)."""
        if temperature > 2:
            raise ValueError(f"the explorer's temperature slider runs from 0 to 2, got {temperature!r}")
        if top_k is not None and top_k > MAX_BARS:
            raise ValueError(f"the explorer's top-k slider runs from 1 to {MAX_BARS} (None = off), got {top_k!r}")
        if top_p is not None and top_p < cls.TOP_P_MIN:
            raise ValueError(f"the explorer's top-p slider runs from {cls.TOP_P_MIN} to 1 (None = off), got {top_p!r}")

    def settings(self) -> dict:
        """temperature, top_k, top_p as ``generate`` / ``filter_logits`` take them (slider 0 / 1 = off)."""
        return dict(temperature=round(float(self.temperature.value), 6), top_k=int(self.top_k.value) or None,
                    top_p=None if self.top_p.value >= 1.0 else round(float(self.top_p.value), 6))

    def _compute(self) -> Bars:
        return sampling_bars(self.logits, self.tokenizer, n_bars=self.n_bars, **self.settings())

    def _show(self):
        self.bars_box.value = bars_html(self.state)
        self.message_box.value = (problem_html(self.message) if self.message
                                  else t("prompt <code>{prompt}</code>: {n} token(s)", prompt=html.escape(self.prompt),
                                         n=len(self.tokenizer.encode(self.prompt))))

    def redraw(self):
        """Filter the logits with the sliders' settings and draw the bars (no model run)."""
        t0 = time.perf_counter()
        self.state = self._compute()
        self._show()
        self.last_update_seconds = time.perf_counter() - t0

    # -- callbacks ----------------------------------------------------------------------------------------------
    def _on_setting(self, change=None):
        self.redraw()

    def _on_prompt(self, change):
        t0 = time.perf_counter()
        try_prompt(self, change["new"], lambda text: setattr(self, "logits",
                                                              next_token_logits(self.model, self.tokenizer, text)))
        self.redraw()
        self.last_update_seconds = time.perf_counter() - t0  # this time including the forward pass

    # -- the Python API ---------------------------------------------------------------------------------------
    def set(self, prompt: str | None = None, temperature: float | None = None, top_k="keep", top_p="keep"):
        """Change the controls as a user would (the callbacks run). ``top_k=None`` / ``top_p=None`` turn that
        rule off; leave an argument out to keep it. Out-of-range values raise a ValueError that says why."""
        t = self.settings()["temperature"] if temperature is None else temperature
        k = self.settings()["top_k"] if top_k == "keep" else top_k
        p = self.settings()["top_p"] if top_p == "keep" else top_p
        check_sampling(t, k, p)
        self._check_slider_ranges(t, k, p)
        if prompt is not None:
            checks.text(prompt, "prompt")
        self.temperature.value = float(t)
        self.top_k.value = k or 0
        self.top_p.value = 1.0 if p is None else float(p)
        if prompt is not None:
            self.prompt_box.value = prompt
        return self

    def sample(self, n: int = 20, seed: int | None = None) -> list[str]:
        """Draw ``n`` tokens from the current distribution (seed: the seed box's value unless given)."""
        if seed is not None:
            self.seed.value = seed
        self.samples = draw_tokens(self.logits, n, seed=int(self.seed.value), **self.settings())
        labels = [token_label(t) for t in self.tokenizer.tokens(self.samples)]
        self.samples_box.value = (t("seed {seed}, {n} draws: ", seed=int(self.seed.value), n=n)
                                  + f"<span style='font-size:1.15em'>{html.escape(' '.join(labels))}</span>")
        return labels

    def __repr__(self):
        return (f"SamplingExplorer(prompt={self.prompt!r}, {self.state.summary()}; live widget: needs a running "
                f"kernel)")

