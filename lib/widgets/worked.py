"""The worked case (claim C11): every number of a small model's cached generation, step by step.

``run_worked_case(model, tokenizer, "<s>")`` runs greedy generation with ``lib.generate(..., trace="full")``,
which keeps what the layers really computed: the token fed,
its embeddings, per layer q, k, v, the attention weights over the cached keys, the attention and FFN
outputs, the logits, and a snapshot of the cache after the step. Nothing here is re-derived by formula;
``compare_with_trace`` checks the numbers against ``lib.generate``'s own Trace.

Three views of the same numbers (see CONTRIBUTING.md):
1. ``step_table`` / ``cache_table``: fixed-format text tables (4 decimals);
2. ``worked_figure``: a plotly figure of tables with one frame per step and a slider (survives export);
3. ``WorkedExplorer``: ipywidgets (prompt box, step slider) that re-run the model in a live kernel.
"""
from __future__ import annotations

import html
import re
import unicodedata
import time
from dataclasses import dataclass

import torch

from .. import checks
from . import style
from ..generate import generate
from ..i18n import t
from ..model import ForwardRecord, eval_mode
from ..text import text_table
from . import frame_slider, prompt_problem
from .live import LiveWidget, problem_html

TOP = 5  # candidates shown per step


# ------------------------------------------------------------------------------------------ the numbers

@dataclass
class LayerNumbers:
    """What one layer computed in one step, for the tokens fed in that step (batch 0, CPU, float32)."""

    q: torch.Tensor  # (n_fed, n_heads * head_dim) queries of the fed tokens
    k: torch.Tensor  # (n_fed, n_kv_heads * head_dim) keys computed in this step (then appended to the cache)
    v: torch.Tensor  # (n_fed, n_kv_heads * head_dim) values computed in this step
    attn: torch.Tensor  # (n_heads, n_fed, n_keys) attention weights over every key in the cache
    mix: torch.Tensor  # (n_fed, n_heads * head_dim) weights @ cached V (before the output projection)
    attn_out: torch.Tensor  # (n_fed, d_model) the attention block's output, o_proj(mix)
    ffn_out: torch.Tensor  # (n_fed, d_model) the FFN block's output
    hidden: torch.Tensor  # (n_fed, d_model) the residual stream after the layer


@dataclass
class WorkedStep:
    """One forward pass of the generation loop, with every intermediate number."""

    step: int
    phase: str  # "prefill" (step 0, the whole prompt) or "decode" (one new token)
    fed_ids: list  # token ids fed in this pass
    fed_tokens: list  # their text
    positions: list  # their absolute positions
    tok_emb: torch.Tensor  # (n_fed, d_model) rows of the token-embedding table
    pos_emb: torch.Tensor | None  # (n_fed, d_model) rows of the position table (None with rotary positions)
    embedding: torch.Tensor  # (n_fed, d_model) what enters layer 0 (tok_emb + pos_emb), as captured
    layers: list  # LayerNumbers per layer
    logits: torch.Tensor  # (vocab,) the last fed position's logits
    probs: torch.Tensor  # (vocab,) softmax of the logits
    top_ids: list  # the TOP most likely next tokens
    top_tokens: list
    chosen: int  # the token appended (greedy: the argmax)
    chosen_token: str
    cache_k: list  # per layer (cache_len, n_kv_heads * head_dim): the cache's K rows after this step (a copy)
    cache_v: list  # per layer, the same for V

    @property
    def cache_len(self) -> int:
        return self.cache_k[0].shape[0]

    @property
    def n_fed(self) -> int:
        return len(self.fed_ids)


@dataclass
class WorkedCase:
    """A whole greedy generation, step by step. ``tokens``: the text of every position (prompt + output)."""

    config: object
    prompt_ids: list
    tokens: list
    steps: list
    eos_id: int | None

    @property
    def text(self) -> str:
        return "".join(self.tokens)

    @property
    def generated(self) -> str:
        return "".join(s.chosen_token for s in self.steps)

    def __len__(self):
        return len(self.steps)

    def __getitem__(self, i) -> WorkedStep:
        return self.steps[i]


def _rows(t: torch.Tensor) -> torch.Tensor:
    """(1, heads, T, head_dim) -> (T, heads * head_dim), float32 on the CPU (heads side by side)."""
    return t[0].transpose(0, 1).reshape(t.shape[2], -1).float().cpu()


def run_worked_case(model, tokenizer, prompt: str = "<s>", max_new_tokens: int = 8) -> WorkedCase:
    """Greedy generation from ``prompt`` (text, e.g. "<s>" or "<s>深") with a KV cache, keeping every number:
    ``lib.generate(..., trace="full")``, read back step by step.

    Step 0 feeds the whole prompt (prefill); each later step feeds the newest token only. Stops after
    ``<eos>`` or ``max_new_tokens`` tokens. One sequence (batch 1)."""
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be text such as '<s>' or '<s>深', got {type(prompt).__name__}")
    ids = tokenizer.encode(prompt)  # unknown characters raise UnknownCharacterError, which lists them
    if not ids:
        raise ValueError("the prompt is empty: give at least one token, e.g. '<s>'")
    out = generate(model, ids, max_new_tokens, eos_id=tokenizer.eos_id, trace="full")
    c, steps = model.config, []
    for s in out.trace:
        t = s.tensors
        layers = [LayerNumbers(q=_rows(L["q"]), k=_rows(L["k"]), v=_rows(L["v"]), attn=L["attn_weights"][0].float(),
                               mix=L["mix"][0].float(), attn_out=L["attn_out"][0].float(),
                               ffn_out=L["ffn_out"][0].float(), hidden=L["hidden"][0].float())
                  for L in t["layers"]]
        fed = s.input_ids[0].tolist()
        logits = s.logits[0]  # (vocab,)
        probs = torch.softmax(logits, dim=-1)
        top = torch.topk(probs, min(TOP, c.vocab_size)).indices.tolist()
        chosen = int(s.chosen[0])
        with torch.no_grad():  # the rows of the lookup tables that the step added together
            tok_emb = model.tok_emb.weight[fed].float().cpu()
            pos_emb = model.pos_emb.weight[s.positions].float().cpu() if c.positions == "learned" else None
        steps.append(WorkedStep(
            step=s.step, phase=s.phase, fed_ids=fed, fed_tokens=[tokenizer.decode([i]) for i in fed],
            positions=s.positions, tok_emb=tok_emb, pos_emb=pos_emb, embedding=t["embedding"][0].float(),
            layers=layers, logits=logits, probs=probs, top_ids=top, top_tokens=[tokenizer.decode([i]) for i in top],
            chosen=chosen, chosen_token=tokenizer.decode([chosen]),
            cache_k=[_rows(k) for k in t["cache_k"]], cache_v=[_rows(v) for v in t["cache_v"]]))
    seq = out.sequences[0].tolist()
    return WorkedCase(config=c, prompt_ids=list(ids), tokens=[tokenizer.decode([i]) for i in seq], steps=steps,
                      eos_id=tokenizer.eos_id)


# --------------------------------------------------------------------------------------------- checks

def compare_with_trace(case: WorkedCase, trace) -> dict:
    """Check the worked case against ``lib.generate(..., trace=True)`` run on the same prompt: same tokens,
    and the largest differences in logits and in the newest query's attention weights (0.0 when identical)."""
    if len(trace) != len(case):
        raise ValueError(f"the trace has {len(trace)} steps but the worked case has {len(case)}; run "
                         f"lib.generate with the same prompt, max_new_tokens and eos_id")
    same_tokens = all(int(t.chosen[0]) == s.chosen for t, s in zip(trace, case.steps))
    d_logits = max(float((t.logits[0] - s.logits).abs().max()) for t, s in zip(trace, case.steps))
    d_attn = max(float((t.attention[l, 0] - s.layers[l].attn[:, -1, :]).abs().max())
                 for t, s in zip(trace, case.steps) for l in range(case.config.n_layers))
    return {"same tokens": same_tokens, "max |logits diff|": d_logits, "max |attention diff|": d_attn}


def history_unchanged(case: WorkedCase) -> list[dict]:
    """For every step after the first, per layer: are the cache rows that existed before the step
    bit-for-bit the same after it (torch.equal)? The cache only ever appends."""
    out = []
    for prev, cur in zip(case.steps, case.steps[1:]):
        n = prev.cache_len
        for l in range(case.config.n_layers):
            out.append({"step": cur.step, "layer": l, "old rows": n, "new rows": cur.cache_len - n,
                        "K unchanged": torch.equal(cur.cache_k[l][:n], prev.cache_k[l]),
                        "V unchanged": torch.equal(cur.cache_v[l][:n], prev.cache_v[l])})
    return out


@torch.no_grad()
def recompute_without_cache(model, case: WorkedCase) -> list[dict]:
    """Feed the whole sequence again in one pass *without* a cache and compare, per layer, the K and V it
    recomputes for every position with the rows the cache holds at the end (largest absolute difference)."""
    last = case.steps[-1]
    ids = case.prompt_ids + [s.chosen for s in case.steps[:-1]]  # everything that was ever fed
    rec = ForwardRecord(capture=True)
    with eval_mode(model):
        logits = model(torch.tensor([ids], device=model.device), record=rec)[0].float().cpu()  # (T, vocab)
    out = []
    for l in range(case.config.n_layers):
        k, v = _rows(rec.tensors[l]["k"]), _rows(rec.tensors[l]["v"])
        out.append({"layer": l, "positions": k.shape[0],
                    "max |K diff|": float((k - last.cache_k[l]).abs().max()),
                    "max |V diff|": float((v - last.cache_v[l]).abs().max()),
                    "allclose": bool(torch.allclose(k, last.cache_k[l], atol=1e-6)
                                     and torch.allclose(v, last.cache_v[l], atol=1e-6))})
    ends = [len(case.prompt_ids) - 1 + s.step for s in case.steps]  # the position whose logits each step used
    d_logits = max(float((logits[p] - s.logits).abs().max()) for p, s in zip(ends, case.steps))
    for row in out:
        row["max |logits diff|"] = d_logits
    return out


# ------------------------------------------------------------------------------------ tier 1: text tables

def num(x: float) -> str:
    """Fixed format for one number: sign and 4 decimals ('-0.0000' never appears)."""
    x = round(float(x), 4)
    return f"{x + 0.0:+.4f}" if x != 0 else "+0.0000"


def vec(t) -> str:
    return " ".join(num(x) for x in t.tolist())


def _key_labels(case: WorkedCase, n_keys: int) -> list:
    return [f"{p}:{case.tokens[p]}" for p in range(n_keys)]


def step_rows(case: WorkedCase, step: int) -> list:
    """(label, numbers) for one step, in reading order: embeddings, per layer q k v, attention weights,
    weighted values, attention output, FFN output, residual stream; then the top candidates' logits and
    probabilities. A prefill step of several tokens gets one row per fed token (label '@position')."""
    s = _get_step(case, step)
    rows = []
    multi = s.n_fed > 1
    at = lambda i: f" @{s.positions[i]}" if multi else ""
    for i in range(s.n_fed):
        rows.append((f"token embedding{at(i)}", s.tok_emb[i].tolist()))
        if s.pos_emb is not None:
            rows.append((f"+ position embedding{at(i)}", s.pos_emb[i].tolist()))
        rows.append((f"= input to layer 0{at(i)}", s.embedding[i].tolist()))
    for l, L in enumerate(s.layers):
        for name, t in (("q", L.q), ("k (new, appended)", L.k), ("v (new, appended)", L.v)):
            for i in range(s.n_fed):
                rows.append((f"L{l} {name}{at(i)}", t[i].tolist()))
        for h in range(L.attn.shape[0]):
            hd = f" head {h}" if L.attn.shape[0] > 1 else ""
            for i in range(s.n_fed):
                rows.append((f"L{l} attention{hd}{at(i)}", L.attn[h, i, :s.positions[i] + 1].tolist()))
        for name, t in (("weights @ V", L.mix), ("attention output", L.attn_out), ("FFN output", L.ffn_out),
                        ("residual stream", L.hidden)):
            for i in range(s.n_fed):
                rows.append((f"L{l} {name}{at(i)}", t[i].tolist()))
    for i, tok in zip(s.top_ids, s.top_tokens):
        rows.append((f"candidate {tok!s}", [float(s.logits[i]), float(s.probs[i])]))
    return rows


def _label(label: str) -> str:
    """A row label of ``step_rows`` in the notebook's language ('L1 attention head 0 @2': the layer, head and
    position marks stay as they are)."""
    if label.startswith("candidate "):
        return t("candidate {token}", token=label[len("candidate "):])
    m = re.fullmatch(r"(L\d+ )?(.+?)( head \d+)?( @\d+)?", label)
    lead, name, head, at = m.groups()
    return (lead or "") + t(name) + (t(" head {h}", h=head.split()[-1]) if head else "") + (at or "")


def step_table(case: WorkedCase, step: int) -> str:
    """One step as a text table: every number, 4 decimals; attention columns are the cached keys."""
    s = _get_step(case, step)
    fed = "".join(s.fed_tokens)
    pos = f"{s.positions[0]}..{s.positions[-1]}" if s.n_fed > 1 else str(s.positions[0])
    head = t("step {step} ({phase}): fed {fed} at position {pos}; the cache holds positions 0..{last} after it "
             "({n} K and {n} V rows per layer)", step=s.step, phase=t(s.phase), fed=fed, pos=pos,
             last=s.cache_len - 1, n=s.cache_len)
    rows = []
    for label, values in step_rows(case, step):
        if label.startswith("candidate"):
            continue
        if "attention" in label and "output" not in label:
            keys = _key_labels(case, len(values))
            rows.append((_label(label), "  ".join(f"{k} {p:.4f}" for k, p in zip(keys, values))))
        else:
            rows.append((_label(label), " ".join(num(x) for x in values)))
    cand = [(f"{rank + 1}", tok, f"{float(s.logits[i]):+.4f}", f"{float(s.probs[i]):.4f}")
            for rank, (i, tok) in enumerate(zip(s.top_ids, s.top_tokens))]
    return "\n".join([head, text_table(rows, [t("quantity"), t("numbers")]), "",
                      text_table(cand, [t("rank"), t("next token"), "logit", t("probability")]),
                      t("chosen (greedy): {token}", token=s.chosen_token)])


def cache_rows(case: WorkedCase, step: int, layer: int) -> list:
    """The cache of one layer after a step: (position, token, K row, V row, written in this step?)."""
    s = _get_step(case, step)
    _check_layer(case, layer)
    new = set(s.positions)
    return [(p, case.tokens[p], s.cache_k[layer][p].tolist(), s.cache_v[layer][p].tolist(), p in new)
            for p in range(s.cache_len)]


def cache_table(case: WorkedCase, step: int, layer: int | None = None) -> str:
    """The KV cache after a step as a text table: one K row and one V row per position per layer;
    rows written in this step are marked 'new'. ``layer=None``: every layer."""
    s = _get_step(case, step)
    layers = range(case.config.n_layers) if layer is None else [layer]
    parts = [t("KV cache after step {step}: {n} position(s)", step=s.step, n=s.cache_len)]
    for l in layers:
        rows = [(p, tok, " ".join(num(x) for x in k), " ".join(num(x) for x in v), t("written\x04new") if is_new else "")
                for p, tok, k, v, is_new in cache_rows(case, step, l)]
        parts.append(t("layer {l}", l=l))
        parts.append(text_table(rows, [t("pos"), t("token"), "K", "V", t("written")]))
    return "\n".join(parts)


def _get_step(case: WorkedCase, step) -> WorkedStep:
    n = len(case.steps)
    return case.steps[checks.integer(step, "step", 0, n - 1, allowed=f"an integer from 0 to {n - 1} (this case has "
                                                                  f"{n} steps)")]


def _check_layer(case: WorkedCase, layer):
    checks.integer(layer, "layer", 0, case.config.n_layers - 1)


# ------------------------------------------------------------------------- tier 2: plotly step-through

# lib.widgets.style's concepts: the cache rows computed in this step are "computed (first time)" (as in the player), also
# marked "+" in their position cell; rows from earlier steps plain paper; positions not cached yet "free"
NEW_FILL, OLD_FILL, EMPTY_FILL, HEAD_FILL = style.colour("computed"), style.PAPER, style.FREE, style.GRID
NEW_MARK = "+"  # the player's mark for K/V computed for the first time
TABLE_SIZE = style.PLOTLY_SMALL + 1  # plotly table text (px); its smallest, TABLE_SIZE - 1, is the floor
GAP = 24  # px between the worked figure's tables
WIDTH_PX = 860  # the narrowest plot width the worked figure is sized for (a JupyterLab cell at a 1,280-px window)
NUMBERS_X, RIGHT_X = 0.56, 0.6  # the numbers table spans [0, NUMBERS_X] of the width, the two beside it [RIGHT_X, 1]


def _lines(text: str, px: float, size: float, mono: bool) -> int:
    """Lines a plotly table cell of ``px`` pixels wraps ``text`` into: it breaks at spaces only, so a word wider than
    the cell is clipped (counted here as the lines it would need). A character is ~0.6 em in monospace, ~0.55 em
    otherwise, and a wide (CJK) one 1 em; 16 px of padding."""
    em = lambda w: sum(1.0 if unicodedata.east_asian_width(c) in "WF" else 0.6 if mono else 0.55 for c in w)
    room = max(1.0, (px - 16) / size)  # ems a line holds
    lines, width = 1, 0.0
    for word in str(text).replace("<br>", " ").split(" "):
        w = em(word)
        if width and width + 0.5 + w > room:
            lines, width = lines + 1, w
        else:
            width += (0.5 if width else 0) + w
        lines += int(w // room) if w > room else 0
    return lines


def _table_size(frames, key: str, share: float, columns: list, header: list) -> tuple[int, int, int]:
    """(header height, row height, whole table height) in px of the worked figure's table ``key``. The row height is
    one line's: plotly makes a row whose text wraps taller by itself, so only those rows grow (one height for all
    made every row of the English numbers two lines tall for one wrapped label). The table is as tall as its rows
    are in the frame where they are tallest."""
    col_px = [WIDTH_PX * share * c / sum(columns) for c in columns]
    size = TABLE_SIZE - 1 if key == "cache" else TABLE_SIZE
    line = round(size * 1.4)  # plotly's line height in a table cell
    plain = [html.unescape(str(h)) for h in header]  # "&lt;s&gt;" is drawn as "<s>"
    head = max(_lines(h, w, TABLE_SIZE, False) for h, w in zip(plain, col_px)) * round(TABLE_SIZE * 1.4) + 12
    def row_lines(f):  # each row's lines in frame f: its most wrapped cell ("&lt;s&gt;" is drawn as "<s>")
        return [max(_lines(html.unescape(str(col[i])), w, size, True) for col, w in zip(f[key], col_px))
                for i in range(len(f[key][0]))]
    body = max(sum(n * line + 14 for n in row_lines(f)) for f in frames)
    return head, line + 12, head + body + 16  # + the borders plotly adds


def plotly_text(text: str) -> str:
    """Plotly reads a few HTML tags in text ('<s>' is strike-through!): escape <, > and & so tokens show."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _newest_rows(case: WorkedCase, s: WorkedStep) -> tuple[list, list]:
    """The newest fed token's numbers (the one whose logits choose the next token), as two columns."""
    i = s.n_fed - 1
    labels = [t("token fed"), t("token embedding")]
    values = [t("{token} at position {p}", token=plotly_text(s.fed_tokens[i]), p=s.positions[i]), vec(s.tok_emb[i])]
    if s.pos_emb is not None:
        labels.append(t("+ position embedding"))
        values.append(vec(s.pos_emb[i]))
    labels.append(t("= input to layer 0"))
    values.append(vec(s.embedding[i]))
    for l, L in enumerate(s.layers):
        for name, x in (("q", L.q), ("k (new)", L.k), ("v (new)", L.v), ("weights @ V", L.mix),
                        ("attention output", L.attn_out), ("FFN output", L.ffn_out)):
            labels.append(t("layer {l} {name}", l=l, name=t(name)))
            values.append(vec(x[i]))
    return labels, values


def _cache_columns(case: WorkedCase, s: WorkedStep, n_pos: int) -> tuple[list, list]:
    """Cache table columns on a fixed grid of n_pos rows (empty where a position is not cached yet)."""
    cols = [[f"{NEW_MARK}{p}" if p in s.positions else str(p) for p in range(n_pos)],
            [plotly_text(case.tokens[p]) if p < s.cache_len else "" for p in range(n_pos)]]
    for l in range(case.config.n_layers):
        for t in (s.cache_k[l], s.cache_v[l]):
            cols.append([vec(t[p]) if p < s.cache_len else "" for p in range(n_pos)])
    fill = [NEW_FILL if p in s.positions else (OLD_FILL if p < s.cache_len else EMPTY_FILL) for p in range(n_pos)]
    return cols, fill


def figure_frames(case: WorkedCase) -> list[dict]:
    """Per step, the cell values of the figure's four tables (what the slider shows), as plain lists; token
    text is escaped for plotly (``plotly_text``)."""
    n_pos = case.steps[-1].cache_len
    frames = []
    for s in case.steps:
        labels, values = _newest_rows(case, s)
        # a row per cached key, as the cache table below (a column per position wrapped "0.0510" at 860 px)
        attn = [[plotly_text(k) if p < s.cache_len else "" for p, k in enumerate(_key_labels(case, n_pos))]]
        for L in s.layers:
            attn.append([f"{float(L.attn[0, -1, p]):.4f}" if p < s.cache_len else "" for p in range(n_pos)])
        cand = [[str(r + 1) for r in range(len(s.top_ids))], [plotly_text(t) for t in s.top_tokens],
                [f"{float(s.logits[i]):+.4f}" for i in s.top_ids], [f"{float(s.probs[i]):.4f}" for i in s.top_ids]]
        cache, fill = _cache_columns(case, s, n_pos)
        frames.append({"name": f"step {s.step}", "numbers": [labels, values], "attention": attn,
                       "candidates": cand, "cache": cache, "cache_fill": fill,
                       "label": t("step {step}", step=s.step),
                       "title": plotly_text(t("step {step} ({phase}): feed {fed} → next token {chosen}; the cache now "
                                              "holds {n} K and V rows per layer", step=s.step, phase=t(s.phase),
                                              fed="".join(s.fed_tokens), chosen=s.chosen_token, n=s.cache_len))})
    return frames


def worked_figure(case: WorkedCase):
    """A plotly figure of four tables (the newest token's numbers, the top candidates, its attention over the
    cached keys — head 0 —, and the KV cache with this step's rows highlighted) with one frame per step and a
    slider; precomputed, so it works in an exported page."""
    import plotly.graph_objects as go

    frames = figure_frames(case)
    n_pos = case.steps[-1].cache_len
    key_head = [t("cached key")] + [t("layer {l}", l=l) for l in range(case.config.n_layers)]
    cache_head = [t("pos ({mark}: new)", mark=NEW_MARK), t("token")] + [f"L{l} {kv}" for l in range(case.config.n_layers)
                                                           for kv in ("K", "V")]
    mono = dict(family="monospace", size=style.plotly_px(TABLE_SIZE), color=style.INK)

    # every row as tall as its text, wrapped lines included (plotly's fixed 20-px rows cut the descenders: "layer 0
    # q" read "layer 0 g"), and every table as tall as its most rows in any frame (else it scrolls inside itself and a
    # screenshot or a projector shows it cut): sized for the narrowest page the course expects (WIDTH_PX)
    layout = {"numbers": (NUMBERS_X, [1.1, 1.9], [t("quantity (newest token)"), t("numbers")]),
              "candidates": (1 - RIGHT_X, [1] * 4, [t("rank"), t("next token"), "logit", t("prob")]),
              "attention": (1 - RIGHT_X, [1.2] + [1] * (len(key_head) - 1), key_head),
              "cache": (1.0, [0.9, 0.6] + [2] * (len(cache_head) - 2), cache_head)}
    size = {key: _table_size(frames, key, *spec) for key, spec in layout.items()}  # key -> (header, row, total) px
    px = {key: v[2] for key, v in size.items()}
    left, right = px["numbers"], px["candidates"] + GAP + px["attention"]
    top, bottom = max(left, right), px["cache"]
    plot = top + GAP + bottom
    y = lambda v: v / plot  # pixels from the bottom of the plot area -> the domain's fraction
    cand_bottom = plot - px["candidates"]
    head = lambda key: dict(values=layout[key][2], fill_color=HEAD_FILL, align="left", height=size[key][0],
                            font=dict(size=style.plotly_px(TABLE_SIZE), color=style.INK), line=dict(color=style.GRID))

    def tables(f):
        cells = lambda key, **kw: dict(values=f[key], align="left", height=size[key][1], line=dict(color=style.GRID),
                                       **kw)
        return [
            go.Table(domain=dict(x=[0, NUMBERS_X], y=[y(plot - left), 1]), columnwidth=layout["numbers"][1],
                     header=head("numbers"), cells=cells("numbers", font=mono)),
            go.Table(domain=dict(x=[RIGHT_X, 1], y=[y(cand_bottom), 1]), header=head("candidates"),
                     cells=cells("candidates", font=mono)),
            go.Table(domain=dict(x=[RIGHT_X, 1], y=[y(cand_bottom - GAP - px["attention"]), y(cand_bottom - GAP)]),
                     columnwidth=layout["attention"][1], header=head("attention"), cells=cells("attention", font=mono)),
            go.Table(domain=dict(x=[0, 1], y=[0, y(bottom)]), header=head("cache"), columnwidth=layout["cache"][1],
                     cells=cells("cache", fill_color=[f["cache_fill"]], font=dict(mono, size=style.plotly_px(TABLE_SIZE - 1)))),
        ]

    fig = go.Figure(data=tables(frames[0]),
                    frames=[go.Frame(name=f["name"], data=tables(f), layout=dict(title_text=f["title"]))
                            for f in frames])
    fig.update_layout(
        title=dict(text=frames[0]["title"]), height=plot + 50 + 80, margin=dict(l=10, r=10, t=50, b=80),
        sliders=[frame_slider([f["name"] for f in frames], labels=[f["label"] for f in frames], pad=dict(t=20))])
    return fig


# ----------------------------------------------------------------------------------- tier 3: live widget

# Compact rows: ipywidgets gives HTML a 28-px line height (its controls' height), which made one step of the
# 2-layer case ~1,200 px tall; at 1.3 and 1-px padding the numbers and the cache fit a 1,000-px screen together.
_CELL = "padding:1px 6px;border-bottom:1px solid {border};vertical-align:top"
_WRAP = "white-space:normal;max-width:34ch"  # long rows (a late step's attention weights) wrap in their cell


def _html_table(header, rows, highlight=(), wrap=()) -> str:
    """A table whose text follows the theme (``style.css``); highlighted rows (K/V computed in this step) are the
    "computed" fill with ink text on it, and their first cell carries the "+" mark as well. Cells of the row
    numbers in ``wrap`` may wrap (everything else stays on one line)."""
    esc = lambda x: html.escape(str(x))
    cell = _CELL.format(border=style.css("border"))
    th = "".join(f"<th style='text-align:left;padding:1px 6px;border-bottom:2px solid {style.css('border')}'>"
                 f"{esc(h)}</th>" for h in header)
    body = []
    for i, r in enumerate(rows):
        new = i in highlight
        bg = f" style='background:{NEW_FILL};color:{style.INK}'" if new else ""
        cells = [f"{NEW_MARK}{r[0]}" if new else r[0], *r[1:]]
        body.append(f"<tr{bg}>" + "".join(
            f"<td style='{cell};{_WRAP if i in wrap and j else 'white-space:nowrap'}'>{esc(c)}</td>"
            for j, c in enumerate(cells)) + "</tr>")
    return (f"<table style='border-collapse:collapse;font-family:monospace;font-size:0.88em;line-height:1.3;"
            f"color:{style.css('ink')}'><tr>{th}</tr>" + "".join(body) + "</table>")


def step_html(case: WorkedCase, step: int) -> str:
    """One step as HTML: the numbers (same rows as ``step_table``) beside the KV cache of every layer (the two
    columns stack when the cell is too narrow), so the step slider, the numbers and the cache are on one screen."""
    s = _get_step(case, step)
    rows, wrap = [], set()
    for label, values in step_rows(case, step):
        if label.startswith("candidate"):
            rows.append((_label(label), t("logit {logit}  probability {p}", logit=f"{values[0]:+.4f}",
                                          p=f"{values[1]:.4f}")))
        elif "attention" in label and "output" not in label:
            wrap.add(len(rows))
            rows.append((_label(label), "  ".join(f"{k} {p:.4f}" for k, p in zip(_key_labels(case, len(values)),
                                                                                  values))))
        else:
            rows.append((_label(label), " ".join(num(x) for x in values)))
    head = t("<b>step {step} ({phase})</b>: fed {fed} → chose <b>{chosen}</b>", step=s.step, phase=t(s.phase),
             fed=html.escape("".join(s.fed_tokens)), chosen=html.escape(s.chosen_token))
    cache = []
    for l in range(case.config.n_layers):
        crow = cache_rows(case, step, l)
        cache.append("<div style='margin:0 0 2px 0'>" + t(
            "<b>KV cache, layer {l}</b> ({n} rows; this step's rows highlighted and marked {mark})", l=l,
            n=s.cache_len, mark=NEW_MARK) + "</div>")
        cache.append(_html_table([t("pos"), t("token"), "K", "V"],
                                 [(p, tok, vec(torch.tensor(k)), vec(torch.tensor(v))) for p, tok, k, v, _ in crow],
                                 highlight={i for i, r in enumerate(crow) if r[4]}))
        cache.append("<div style='height:0.7em'></div>")
    return (f"<div style='line-height:1.35'><div style='margin:0 0 4px 0'>{head}</div>"
            f"<div style='display:flex;flex-wrap:wrap;align-items:flex-start;gap:0.6em 2em'>"
            f"<div>{_html_table([t('quantity'), t('numbers')], rows, wrap=wrap)}</div>"
            f"<div>{''.join(cache)}</div></div></div>")


class WorkedExplorer(LiveWidget):
    """Live worked case: a prompt box (re-runs the model) and a step slider.

    Python API (no browser needed): ``set_prompt(text)``, ``set_step(i)``, ``.case``, ``.step``, ``.html``
    (what the view shows), ``.error`` (the last bad prompt's message, shown instead of the tables) and
    ``.last_update_ms``; display the explorer itself (``.widget`` is its ipywidgets box)."""

    def __init__(self, model, tokenizer, prompt: str = "<s>", max_new_tokens: int = 8):
        import ipywidgets as W

        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens = checks.integer(max_new_tokens, "max_new_tokens", 1)
        self.case = run_worked_case(model, tokenizer, prompt, self.max_new_tokens)
        self.prompt, self.error, self.last_update_ms = prompt, None, 0.0
        self.step = first = self.first_step(self.case)
        look = dict(style=style.control_style(), layout=W.Layout(**style.control_layout()))
        self.prompt_box = W.Text(value=prompt, description=t("prompt"), continuous_update=False, **look)
        self.slider = W.IntSlider(value=first, min=0, max=len(self.case) - 1, description=t("step"), **look)
        self.view = W.HTML()
        self.status = W.HTML()
        # the observers skip values the Python API has already applied (no double work, no loops)
        self.prompt_box.observe(lambda ch: ch["new"] != self.prompt and self.set_prompt(ch["new"]), names="value")
        self.slider.observe(lambda ch: ch["new"] != self.step and self.set_step(ch["new"]), names="value")
        self.controls = style.grid(self.prompt_box, self.slider, columns=2)
        self.widget = self.box(self.controls, self.status, self.view)
        self.redraw()

    FIRST_STEP = 1  # the view opens on the first decode step: one K/V row appended, the prompt's read back

    @classmethod
    def first_step(cls, case: WorkedCase) -> int:
        """The step a case is first shown at: ``FIRST_STEP`` (the last step of a shorter case)."""
        return min(cls.FIRST_STEP, len(case) - 1)

    def set_prompt(self, prompt: str) -> None:
        """Re-run the model on a new prompt. A bad prompt keeps the last good case and shows the error."""
        t0 = time.perf_counter()
        try:
            case = run_worked_case(self.model, self.tokenizer, prompt, self.max_new_tokens)
        except ValueError as e:  # includes UnknownCharacterError
            self.error, self.prompt = prompt_problem(e), prompt
            self.status.value = problem_html(self.error)
            self.last_update_ms = (time.perf_counter() - t0) * 1e3
            return
        self.error = None
        self.case, self.step, self.prompt = case, self.first_step(case), prompt
        if self.prompt_box.value != prompt:
            self.prompt_box.value = prompt
        with self.slider.hold_trait_notifications():
            self.slider.max = len(case) - 1
            self.slider.value = self.step
        self.redraw()
        self.last_update_ms = (time.perf_counter() - t0) * 1e3

    def set_step(self, step: int) -> None:
        t0 = time.perf_counter()
        _get_step(self.case, step)  # a clear error for a bad step
        self.step = step = int(step)
        if self.slider.value != step:
            self.slider.value = step
        self.redraw()
        self.last_update_ms = (time.perf_counter() - t0) * 1e3

    def redraw(self):
        self.status.value = (t("generated: {text} ({n} forward passes)", text=html.escape(self.case.generated),
                               n=len(self.case))
                             if self.error is None else self.status.value)
        self.html = step_html(self.case, self.step)
        self.view.value = self.html
