"""The real small language model in the course: held-out text, bits per character, and generations that hold.

    model, tok = lib.load_demo("lm")                      # 4 layers, d_model 256, context 512, trained here
    bits_per_char(model, tok, lib.corpus.heldout_text("en"))  # ~2.2 bits/char on unseen Shakespeare; uniform: ~11.9
    unigram_entropy(lib.corpus.heldout_text("en"))        # what a model that ignores context would score
    greedy_margins(model, tok, "<s>春", 40)               # per step: top-1 logit minus top-2 (a near-tie is small)

The course has two kinds of model (``lib.presets.DEMOS``): toys that memorised a few lines, for mechanisms that must
be exact and printable (the source's run <s> → 人工智能<eos>, the worked example), and this one, trained on real
English and Chinese text (``python -m lib.train_lm``), for what only a real model shows: sampling tails, heads you
can name, attention sinks, in-context copying, speculative α, int8 error, speed and memory at long context.

A stored notebook output is compared character by character on other CPUs, where sums are added in another order
and logits differ in the last bits. A greedy generation stays the same there only if no step is a near-tie:
``stable`` checks that every step's lead is at least ``MIN_MARGIN`` and that the tokens survive a relative
perturbation of every weight by ``PERTURBATION`` (what a different summation order can do, and more).
"""
from __future__ import annotations

import math
from collections import Counter

import torch
import torch.nn.functional as F

from . import checks
from .corpus import encode_text
from .generate import generate

MIN_MARGIN = 0.02  # logits: a lead this large cannot flip from float rounding (differences there are ~1e-5)
PERTURBATION = 1e-6  # relative, on every weight


def windows(tokenizer, text: str, length: int, n: int | None = None) -> torch.Tensor:
    """(n, length) windows of ``text``, each ``<s>`` then the characters from a line start (evenly spaced through
    the text; n=None: as many as fit without overlapping)."""
    ids = encode_text(tokenizer, checks.text(text, "text"))
    nl = tokenizer.stoi["\n"]
    starts = [i + 1 for i, t in enumerate(ids[:len(ids) - length]) if t == nl]
    if not starts:
        raise ValueError(f"the text ({len(ids)} characters) is shorter than one window of {length}")
    picked, last = [], -length
    for s in starts:
        if s >= last + length - 1:
            picked.append(s)
            last = s
    if n is not None:
        step = max(1, len(picked) // checks.integer(n, "n", 1))
        picked = picked[::step][:n]
    return torch.tensor([[tokenizer.bos_id] + ids[s:s + length - 1] for s in picked])


@torch.no_grad()
def window_bits(model, x: torch.Tensor) -> float:
    """Mean next-token loss over the windows ``x`` (n, length), every position after the first, in bits."""
    model.eval()
    total, count = 0.0, 0
    for row in x.to(model.device).split(4):  # a few windows per pass: memory stays small
        logits = model(row[:, :-1]).float()
        total += F.cross_entropy(logits.flatten(0, 1), row[:, 1:].flatten(), reduction="sum").item()
        count += row[:, 1:].numel()
    return total / count / math.log(2)


def bits_per_char(model, tokenizer, text: str, length: int | None = None, n: int | None = None) -> float:
    """The model's mean next-token loss on ``text``, in bits per character, over windows of ``length`` (default:
    the context) that each start with <s> at a line start; the <s> itself is not scored."""
    return window_bits(model, windows(tokenizer, text, length or model.config.max_seq_len, n))


def unigram_entropy(text: str) -> float:
    """Bits per character of a model that knows only how often each character occurs (no context at all)."""
    counts = Counter(checks.text(text, "text"))
    total = sum(counts.values())
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def greedy_margins(model, tokenizer, prompt: str, max_new_tokens: int) -> tuple[str, list[float]]:
    """(the greedy continuation, each step's lead of the top logit over the second) for ``prompt``."""
    out = generate(model, tokenizer.encode(prompt), max_new_tokens, eos_id=tokenizer.eos_id, trace=True,
                   trace_top_k=2)
    margins = []
    for step in out.trace.steps:
        top2 = torch.topk(step.logits[0], 2).values
        margins.append(float(top2[0] - top2[1]))
    return tokenizer.decode(out.new_tokens[0]), margins


def perturbed(model, relative: float = PERTURBATION, seed: int = 0):
    """A copy of ``model`` with every weight w moved to w * (1 + relative * e), e ~ N(0, 1), seeded."""
    import copy
    gen = torch.Generator().manual_seed(seed)
    other = copy.deepcopy(model)
    with torch.no_grad():
        for p in other.parameters():
            p.mul_(1 + relative * torch.randn(p.shape, generator=gen).to(p))
    return other


def stable(model, tokenizer, prompt: str, max_new_tokens: int, seeds=(0, 1, 2)) -> dict:
    """Whether the greedy run of ``prompt`` can be stored: its smallest step margin, whether that is at least
    ``MIN_MARGIN``, and whether the tokens are the same under ``PERTURBATION`` of the weights (each seed)."""
    text, margins = greedy_margins(model, tokenizer, prompt, max_new_tokens)
    same = [greedy_margins(perturbed(model, seed=s), tokenizer, prompt, max_new_tokens)[0] == text for s in seeds]
    return {"text": text, "min_margin": min(margins), "margin_ok": min(margins) >= MIN_MARGIN,
            "perturbation_ok": all(same)}


# Prompts the course shows the real model on (one home, so a notebook and its test cannot disagree).
EN_PROMPTS = ("<s>HAMLET.\n", "<s>KING HENRY.\n", "<s>To be, or not to be", "<s>What is", "<s>FIRST CITIZEN.\n")
FIVE_CHARACTER_PROMPTS = ("<s>春晓\n孟浩然\n春眠不觉晓，", "<s>相思\n王维\n红豆生南国，", "<s>静夜思\n李白\n床前明月光，")


def repeated_lines(text: str) -> tuple[int, int]:
    """(complete non-empty lines in ``text``, how many of them repeat an earlier line word for word): how far a
    generation has fallen into a loop (greedy poetry writes the same line again and again; sampling rarely does).
    A line is complete when a newline follows it, so the unfinished last line is not counted."""
    lines = [line for line in text.split("\n")[:-1] if line.strip()]
    return len(lines), len(lines) - len(set(lines))


# Notebook 01: a poem's title and poet, where the greedy run falls into a loop and sampled runs do not.
LOOP_PROMPT = "<s>静夜思\n李白\n"
# Notebook 02: the generation player's run on the real model, in the edition's language (``lib.notebook.language``):
# a speech heading, whose first phrase comes back; a poem's title and poet, the title copied into the first line and
# the first line written again under the next title. Either way the model reads what it wrote.
PLAYER_PROMPTS = {"en": "<s>PORTIA.\n", "zh": "<s>月下独酌\n李白\n"}
# Notebook 05: the int8 cache's first greedy divergence (lib.quant.STORED_DIVERGENCES).
INT8_PROMPT = "<s>FIRST CITIZEN.\n"


# Every greedy run of the real model whose text a notebook stores (prompt -> max_new_tokens). tests/test_lm.py checks
# each with ``stable``: a stored output must not hinge on a near-tie that another CPU could flip. A notebook that
# stores a new greedy generation of the real model adds it here.
STORED_GENERATIONS: dict[str, int] = {
    LOOP_PROMPT: 72,       # notebook 01: greedy poetry falls into a loop
    PLAYER_PROMPTS["en"]: 32,  # notebook 02: the generation player's run on the real model
    PLAYER_PROMPTS["zh"]: 32,  # the same in the Chinese edition
    "<s>Et tu, Brute?": 16,  # 03: the heat-maps' run (Julius Caesar, held out) and cached ≡ uncached
    INT8_PROMPT: 21,       # notebook 05: the fp32 run up to its first int8 divergence (lib.quant)
}
