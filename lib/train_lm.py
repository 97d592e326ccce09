"""Training the real small language model (``lm``) and its draft (``lm-draft``) on real text in two languages.

    python -m lib.train_lm lm [--steps N] [--resume]       (make train MODEL=lm; see SPECS for the stages)
    python -m lib.train_lm toy-induction                    (does this loop form an induction head? ~2 min)

    text    Shakespeare (English) and Tang poems + Song ci (Chinese), prepared by ``python -m tools.corpus``
    tokens  one per character: newline, printable ASCII and the characters covering 99.5% of the text, + <unk>
    window  <s> at position 0, then 511 characters from a random line start of one language (half the batch
            English, half Chinese): the same first token in every window, as a real model's BOS
    stages  lm-base: language alone (6000 steps of 8 windows x 512; the lm of the course until now). Then a
            head that reads the context is kindled and put to work, each stage from the one before:
            lm-kindle (1500 steps of 16 x 64, four windows in five random characters whose first L (8..32)
            come again right after: the toy check's data, over the whole vocabulary), lm-kindle-common (the
            300 most common characters), lm-kindle-letters (each language's own alphabet), lm-read (the full
            context with repeats at random offsets and lengths, stopped at 1750), lm-kindle-passages (text
            passages written twice), lm-reads (the full context again), lm-keep and lm (the language
            back: lm-base teaches on the plain-text windows, ``distill``; lm gives Chinese 3 rows in 4). A
            head kindled on one kind of string copies that kind only, hence the curriculum (assets/README.md
            has each stage's figures). lm-base's weights are
            kept in assets/training/, so the chain starts there. The draft: lm-draft-base, lm-draft
            (READS_CONTEXT). ``--init`` starts a stage from given weights instead
    mix     (lm-base) 10% of windows carry a passage of their own text written a second time further on, 5% a
            string of random characters written twice: repeated passages are what in-context copying learns
            from, and a corpus this small has few of them (assets/README.md says what each stage did)
    step    next-token loss on all 512 positions at once (teacher forcing), AdamW (weight decay 0.1 on the
            matrices), warm-up then cosine decay, gradient clipping at 1.0; attention through PyTorch's fused
            ``scaled_dot_product_attention`` (same maths; the shipped config writes attention out again)

A run saves its state every ``--save-every`` steps under ``.cache/train/`` and ``--resume`` continues from it.
The finished weights go to ``assets/NAME.safetensors`` (fp16: half the bytes; loaded as fp32), with the whole
training record (loss curve, validation bits per character per language, wall time, CPU) in its metadata.
"""
from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F

from . import progress
from .config import ModelConfig
from .corpus import LANGUAGES, LM_CORPUS, encode_text, lm_vocabulary, read_split
from .demo import ASSETS, load_checkpoint, save_checkpoint
from .device import cpu_name
from .heads import LETTERS, copying, induction_share, passage_copying, repeated_random
from .lm import window_bits
from .model import MiniTransformer
from .tokenizer import SPECIALS, CharTokenizer

STATE = ASSETS.parent / ".cache" / "train"
KEPT = ASSETS / "training"  # stages' finished weights kept in the repository, so no later stage retrains them


@dataclass(frozen=True)
class LMSpec:
    config: dict  # ModelConfig fields except vocab_size
    steps: int
    batch: int = 8
    lr: float = 2e-3
    weight_decay: float = 0.1
    warmup: int = 200
    repeat_passage: float = 0.10  # share of windows with a passage of their own text written twice
    repeat_random: float = 0.05  # share of windows with a random string written twice
    seed: int = 0
    eval_every: int = 250
    # A stage that goes on from another spec's finished weights (None: from a random initialisation).
    init: str | None = None
    # steps taken in turn: (batch, context) or (batch, context, repeat_passage, repeat_random), the shares of
    # windows with a repeat at that context (when not given: the spec's); () means ((batch, max_seq_len),)
    shapes: tuple = ()
    decay_from: float = 0.0  # share of the steps at the full rate before the cosine decay starts
    repeat_min: int = 16  # a repeated span's length: from repeat_min to a third of the window (at most 128)
    # share of windows that are random characters alone, the first L (8..32) written again right after them
    # (the toy check's data: what kindles an induction head soonest; a shape's fifth entry overrides it)
    kindle: float = 0.0
    # what random characters are drawn from (uniformly): "vocab", the whole vocabulary but the special tokens
    # (mostly rare hanzi); "common", the ``alphabet_size`` most common characters of both texts; "language", each
    # window's own language: the characters English text uses at least 50 times (letters, digits, punctuation),
    # the ``alphabet_size`` most common Chinese characters. A head kindled on one kind copies that kind only.
    alphabet: str = "vocab"
    alphabet_size: int = 300
    stop_at: int | None = None  # run only this many steps of the schedule (a stage stopped early, on purpose)
    # keeping what a stage should not lose: the finished weights of the stage ``teacher`` predict every window of
    # plain text (no repeat in it) beside the student, and the loss there is (1 - distill) * cross-entropy +
    # distill * KL(teacher || student) (Hinton et al. 2015; "learning without forgetting"). Windows with a repeat
    # are the student's alone: a teacher that cannot copy would teach it not to.
    teacher: str | None = None
    distill: float = 0.0
    languages: tuple = LANGUAGES  # a batch's rows take these in turn: ("en", "zh", "zh", "zh") is 3/4 Chinese
    # parameters a stage leaves as they are: those whose name holds one of these (".attn." keeps every attention
    # projection, the heads that read the context, while the embeddings and MLPs, where a model keeps its
    # vocabulary, learn; Geva et al. 2021, "Transformer feed-forward layers are key-value memories")
    frozen: tuple = ()


LM_SHAPE = dict(norm="rmsnorm", activation="swiglu", positions="rope", max_seq_len=512)
LM_CONFIG = dict(n_layers=4, d_model=256, n_heads=4, **LM_SHAPE)
DRAFT_CONFIG = dict(n_layers=2, d_model=128, n_heads=2, **LM_SHAPE)
# Reading the context (the draft's second stage): every other step is 16 windows of 64 characters, nine in ten of
# them with a repeat (a third a passage of the window's own text, two thirds a random string) at random offsets and
# lengths; the steps between are 2 windows of the full 512 characters, half of them with a repeat (B * C = 1024 each).
# The onset of induction heads comes after ~5e5 * sqrt(B * C) training tokens (Aoyama et al. 2025), sooner when
# repeats are dense; lm mixed this way from lm-base showed no copying through 4.35 M tokens, so lm is kindled first.
READS_CONTEXT = dict(shapes=((16, 64, 0.3, 0.6), (2, 512, 0.25, 0.25)), repeat_min=8, warmup=100, decay_from=0.6)
SPECS = {
    # the first stage: language alone (what lm was until the model had to read its context)
    "lm-base": LMSpec(config=LM_CONFIG, steps=6000),
    # kindling: from lm-base, mostly the toy check's windows (random characters, a span written again right after
    # it) at 16 x 64, lr 1e-3 held, no weight decay, as the toy forms its head; a fifth of the windows stay text
    "lm-kindle": LMSpec(config=LM_CONFIG, steps=1500, lr=1e-3, weight_decay=0.0, warmup=100, decay_from=1.0,
                        init="lm-base", shapes=((16, 64, 0.0, 0.0, 0.8),), eval_every=250),
    # a head kindled on the whole vocabulary copies rare hanzi only: kindled again on the 300 most common characters,
    # then on each language's own alphabet
    "lm-kindle-common": LMSpec(config=LM_CONFIG, steps=250, lr=1e-3, weight_decay=0.0, warmup=50, decay_from=1.0,
                               init="lm-kindle", alphabet="common", shapes=((16, 64, 0.0, 0.0, 0.8),)),
    "lm-kindle-letters": LMSpec(config=LM_CONFIG, steps=500, lr=1e-3, weight_decay=0.0, warmup=50, decay_from=1.0,
                                init="lm-kindle-common", alphabet="language", shapes=((16, 64, 0.0, 0.0, 0.8),)),
    # then language again at the full context with repeats at random offsets and lengths in half the windows (and
    # a few kindling windows at 64, so the head keeps its work while the text comes back); stopped at 1,750 steps
    # when the head copied random letters 100 apart (ratio 0.35) but gave real text none of its attention (0.02)
    "lm-read": LMSpec(config=LM_CONFIG, steps=4000, stop_at=1750, lr=6e-4, init="lm-kindle-letters", repeat_min=8,
                      warmup=100, decay_from=0.0, alphabet="language",
                      shapes=((16, 64, 0.25, 0.25, 0.2), (2, 512, 0.25, 0.25, 0.0), (2, 512, 0.15, 0.15, 0.0))),
    # so it is kindled once more on text: a passage whose first L characters come again right after them
    "lm-kindle-passages": LMSpec(config=LM_CONFIG, steps=750, lr=1e-3, weight_decay=0.0, warmup=50, decay_from=1.0,
                                 init="lm-read", alphabet="text", shapes=((16, 64, 0.0, 0.0, 0.8),)),
    # and reads at the full context: passages and letters repeated at random offsets, a few kindling windows
    "lm-reads": LMSpec(config=LM_CONFIG, steps=2500, lr=6e-4, init="lm-kindle-passages", repeat_min=8, warmup=100,
                 decay_from=0.0, alphabet="language",
                 shapes=((16, 64, 0.3, 0.2, 0.2), (2, 512, 0.35, 0.15, 0.0), (2, 512, 0.2, 0.1, 0.0))),
    # then wins back the language the kindling cost (held-out bits/char), lm-base teaching on the plain text;
    # English came back in 1,000 steps, Chinese did not (its thousands of characters forgot most),
    "lm-keep": LMSpec(config=LM_CONFIG, steps=3000, stop_at=1000, lr=6e-4, init="lm-reads", teacher="lm-base",
                      distill=0.7, repeat_min=8, warmup=100, decay_from=0.0, alphabet="language",
                      shapes=((8, 512, 0.25, 0.1, 0.0), (16, 64, 0.3, 0.2, 0.2))),
    # so the next stage gives three rows in four to Chinese (stopped at 1,500 steps of its 2,000-step schedule: the
    # session that trained it had to re-base the course in the time left); Chinese passages came to be copied
    # (0.67 -> 0.38), English ones did not (0.85 -> 0.77)
    "lm-hanzi": LMSpec(config=LM_CONFIG, steps=2000, stop_at=1500, lr=4e-4, init="lm-keep", teacher="lm-base",
                       distill=0.7, repeat_min=8, warmup=50, decay_from=0.0, alphabet="language",
                       languages=("en", "zh", "zh", "zh"), shapes=((8, 512, 0.25, 0.1, 0.0), (16, 64, 0.3, 0.2, 0.2))),
    # the last stage: two rows in five English again and more passages written twice, so English text is copied
    # too, while lm-base keeps teaching the plain windows of both
    "lm": LMSpec(config=LM_CONFIG, steps=1500, lr=3e-4, init="lm-hanzi", teacher="lm-base", distill=0.7,
                 repeat_min=8, warmup=50, decay_from=0.0, alphabet="language", languages=("en", "zh", "en", "zh", "zh"),
                 shapes=((8, 512, 0.35, 0.05, 0.0), (16, 64, 0.45, 0.1, 0.1))),
    # not in the shipped chain yet (an experiment, 2026-12-07): from lm, a stage whose repeats are text only
    # (alphabet "text": a passage written again, a passage after a passage, and a window's first L characters written
    # again right after them), so English text is copied by more than one previous character; 1,000 steps on one
    # thread at the lowest priority beside other work (~95 min). On the whole held-out split (tools.context_report):
    # English passages 0.61 -> 0.35 (goal 0.5), Chinese 0.22 -> 0.16, induction L3H1 0.66 -> 0.74; held-out
    # bits/char 1.936 -> 1.949 (en; lm-base 1.941) and 5.851 -> 5.865 (zh; lm-base 5.752): a stage that wins the
    # held-out text back (lm-base teaching the plain windows, Chinese-heavy rows) would go on from its weights,
    # kept in assets/training/lm-en.safetensors (fp16).
    "lm-en": LMSpec(config=LM_CONFIG, steps=1000, lr=5e-4, init="lm", teacher="lm-base", distill=0.7, repeat_min=16,
                    warmup=50, decay_from=0.2, alphabet="text", languages=("en", "zh", "en", "zh", "zh"),
                    shapes=((16, 64, 0.3, 0.2, 0.3), (8, 512, 0.4, 0.1, 0.0))),
    # another experiment (2026-12-07, not shipped): from lm-en, win the held-out text back: lm-base teaching the plain
    # windows (0.9), three rows in four Chinese, fewer repeats at 512, text repeats kept at 64, lr 2e-4; 1,000 steps,
    # 88 min on one thread beside other work. Whole split: held-out en 1.949 -> 1.943, zh 5.865 -> 5.806 (lm-base
    # 1.941 / 5.752), but English passages 0.35 -> 0.54, letters 0.27 -> 0.33 and the 64-position window on text that
    # returns from far back +6% (lm: +19%): fewer far repeats, less far copying. Not a start for the next stage.
    "lm-mend": LMSpec(config=LM_CONFIG, steps=1000, lr=2e-4, init="lm-en", teacher="lm-base", distill=0.9,
                      repeat_min=16, warmup=30, decay_from=0.3, alphabet="text", languages=("en", "zh", "zh", "zh"),
                      shapes=((8, 512, 0.15, 0.05, 0.0), (16, 64, 0.3, 0.1, 0.2))),
    # an experiment (2026-12-07, sixth session): from lm-en (which copies English passages), win the held-out text
    # back with every attention projection frozen (``frozen``): the heads that read the context stay as they are,
    # the embeddings and MLPs relearn the vocabulary the kindling stages cost (mid-frequency hanzi's embeddings grew
    # ~1.6x in norm and turned away from lm-base's, cosine 0.44-0.51), lm-base teaching the plain windows (0.9),
    # three rows in four Chinese, text repeats as lm-en had them so copying keeps its work. 1,000 steps, 69.7 min on
    # one thread at the lowest priority beside other work. Whole split (tools.context_report): held-out zh 5.865 ->
    # 5.825 (lm 5.851, lm-base 5.752) but en 1.949 -> 1.951 (lm 1.936); English passages 0.35 -> 0.37, letters 0.31,
    # the 64-position window on far-returning text +8% / +10% (lm +19% / +22%). Frozen attention did not win the
    # Chinese back faster than lm-mend's full fine-tune (0.04 vs 0.06 bits in 1,000 steps): not kept.
    "lm-recall": LMSpec(config=LM_CONFIG, steps=1000, lr=3e-4, init="lm-en", teacher="lm-base", distill=0.9,
                        repeat_min=16, warmup=30, decay_from=0.2, alphabet="text", languages=("en", "zh", "zh", "zh"),
                        frozen=(".attn.",), shapes=((8, 512, 0.3, 0.1, 0.0), (16, 64, 0.3, 0.2, 0.3))),
    # the clean route (2026-12-08): one run from random weights with copying in the data from the first step, so no
    # kindling stage ever overwrites the vocabulary (what the chain above never won back: Chinese held-out +1.7%).
    # Two steps of 8 x 512 (a fifth of the windows with a repeat at a random offset and length: passages of their own
    # text, strings of their language's alphabet) for each step of 16 x 64 (two in five windows with a repeat, a
    # quarter the toy check's data: what kindles an induction head soonest); lm-base teaching the plain windows at
    # 0.5 (it cannot copy, so the windows with a repeat stay the student's own); lr 1.5e-3 (the pitfall reported for
    # induction: too high a rate lowers the loss without forming the head). 23 M tokens, lm-base's 24.6 M within 7%.
    "lm-scratch": LMSpec(config=LM_CONFIG, steps=7500, lr=1.5e-3, warmup=200, teacher="lm-base", distill=0.5,
                         repeat_min=8, alphabet="language",
                         shapes=((8, 512, 0.15, 0.05, 0.0), (8, 512, 0.15, 0.05, 0.0), (16, 64, 0.25, 0.15, 0.25))),
    # another route (2026-12-08): the chain's Chinese loss was vocabulary (kindling on random characters moved the
    # embeddings of mid-frequency hanzi, and no later stage won them back), so kindle with the vocabulary frozen: from
    # lm-base, only the attention projections learn (``frozen``: the embeddings, which are the output layer too, the
    # MLPs and the norms stay lm-base's), on the toy check's windows over each language's own alphabet
    "lm-kindle-attn": LMSpec(config=LM_CONFIG, steps=1500, lr=1e-3, weight_decay=0.0, warmup=50, decay_from=1.0,
                             init="lm-base", alphabet="language", teacher="lm-base", distill=0.5,
                             frozen=("tok_emb", ".mlp.", "norm"), shapes=((16, 64, 0.0, 0.0, 0.8),)),
    # -> no head in 1,500 steps (13.6 min, 2 threads): induction 0.008, letters 0.95, held-out en 1.88 -> 2.03. The
    # same on the whole vocabulary, whose random characters are the ones lm-kindle formed its head on (frozen
    # embeddings: no hanzi's embedding can move)
    "lm-kindle-attn-vocab": LMSpec(config=LM_CONFIG, steps=1500, lr=1e-3, weight_decay=0.0, warmup=50, decay_from=1.0,
                                   init="lm-base", alphabet="vocab", teacher="lm-base", distill=0.5,
                                   frozen=("tok_emb", ".mlp.", "norm"), shapes=((16, 64, 0.0, 0.0, 0.8),)),
    # -> a head forms (13 min): induction 0.013 (step 500) -> 0.061 (1,000) -> 0.201 (1,500), random strings copied
    # (0.88), held-out en 2.02, zh 6.32 while the attention is put to work. Then read real text with it, the
    # vocabulary still frozen: passages written twice at 64 and at the full context, lm-base teaching plain windows
    "lm-read-attn": LMSpec(config=LM_CONFIG, steps=1000, lr=5e-4, warmup=50, decay_from=0.2, init="lm-kindle-attn-vocab",
                           teacher="lm-base", distill=0.7, repeat_min=8, alphabet="text",
                           frozen=("tok_emb", ".mlp.", "norm"),
                           shapes=((16, 64, 0.3, 0.2, 0.3), (8, 512, 0.3, 0.1, 0.0))),
    # -> 32.6 min: held-out back to en 1.907, zh 5.930 (16 windows; lm-base 1.877 / 5.811) but no text copied:
    # passages 1.013 / 0.967, letters 1.008, induction 0.17 (still random strings only: copy 0.92).
    # a head kindled on random strings gives text nothing (as in the chain): kindled once more on text, the first L
    # characters of a passage written again right after them, the vocabulary still frozen
    "lm-kindle-passages-attn": LMSpec(config=LM_CONFIG, steps=750, lr=1e-3, weight_decay=0.0, warmup=50,
                                      decay_from=1.0, init="lm-read-attn", alphabet="text", teacher="lm-base",
                                      distill=0.5, frozen=("tok_emb", ".mlp.", "norm"),
                                      shapes=((16, 64, 0.0, 0.0, 0.8),)),
    # -> 21.1 min (beside the test run): induction 0.29 -> 0.39 -> 0.25, but passages 1.00 / 0.96, letters 0.99:
    # with the vocabulary frozen the head never reads text. The attention alone cannot make English characters
    # tell their earlier occurrence apart (what the chain's kindling did by moving the embeddings). Not kept.
    # the draft for speculative decoding: same corpus, so the same vocabulary (lm_vocabulary is deterministic)
    "lm-draft-base": LMSpec(config=DRAFT_CONFIG, steps=3000, lr=3e-3),
    "lm-draft": LMSpec(config=DRAFT_CONFIG, steps=6000, lr=1e-3, init="lm-draft-base", **READS_CONTEXT),
}


@dataclass
class Windows:
    """Training windows drawn from the tokenised text of both languages, reproducibly (one torch.Generator)."""

    tokens: dict  # lang -> 1-D LongTensor of the training text
    starts: dict  # lang -> positions where a line starts (with room for a whole window after them)
    T: int
    bos: int
    vocab_size: int
    spec: LMSpec
    gen: torch.Generator = field(default_factory=torch.Generator)

    @classmethod
    def build(cls, tokenizer: CharTokenizer, texts: dict, T: int, spec: LMSpec) -> "Windows":
        tokens = {lang: torch.tensor(encode_text(tokenizer, text)) for lang, text in texts.items()}
        nl = tokenizer.stoi["\n"]
        starts = {lang: (t[:-T] == nl).nonzero().flatten() + 1 for lang, t in tokens.items()}  # room for T
        w = cls(tokens, starts, T, tokenizer.bos_id, tokenizer.vocab_size, spec)
        w.alphabets = alphabets(tokenizer, tokens, spec)
        w.gen.manual_seed(spec.seed)
        return w

    def _int(self, low: int, high: int) -> int:  # one integer in [low, high)
        return int(torch.randint(low, high, (1,), generator=self.gen))

    def window(self, lang: str, T: int | None = None, passage: float | None = None,
               random: float | None = None, kindle: float | None = None) -> torch.Tensor:
        """(T + 1,) token ids: <s>, then T characters of ``lang`` from a line start; with chance ``passage`` a
        span of them written again further on, with chance ``random`` a random string written twice; with chance
        ``kindle`` no text at all: T random characters whose first L (8..32) come again right after themselves
        (defaults: the spec's shares)."""
        T = T or self.T
        passage = self.spec.repeat_passage if passage is None else passage
        random = self.spec.repeat_random if random is None else random
        kindle = self.spec.kindle if kindle is None else kindle
        if kindle and float(torch.rand(1, generator=self.gen)) < kindle:
            x = self.random_chars(lang, T + 1)
            x[0] = self.bos
            L = self._int(8, min(32, T // 2) + 1)
            x[1 + L:1 + 2 * L] = x[1:1 + L]
            self.last_plain = False
            return x
        s = int(self.starts[lang][self._int(0, len(self.starts[lang]))])
        x = torch.cat([torch.tensor([self.bos]), self.tokens[lang][s:s + T]])
        r = float(torch.rand(1, generator=self.gen))
        self.last_plain = r >= passage + random
        if r < passage + random:
            n = self._int(self.spec.repeat_min, min(128, T // 3) + 1)  # the repeated span's length
            i = self._int(1, T + 2 - 2 * n)  # first copy at i, second at j: any later offset that fits
            j = self._int(i + n, T + 2 - n)
            if r >= passage:  # random characters (never a special token) instead of the text
                x[i:i + n] = self.random_chars(lang, n)
            x[j:j + n] = x[i:i + n].clone()
        return x

    def random_chars(self, lang: str, n: int) -> torch.Tensor:
        """(n,) random characters of the spec's ``alphabet``, never a special token ("text": n characters of
        ``lang``'s text from a random line start, a passage instead of a random string)."""
        if self.spec.alphabet == "text":
            s = int(self.starts[lang][self._int(0, len(self.starts[lang]))])
            return self.tokens[lang][s:s + n].clone()
        pool = self.alphabets[lang]
        return pool[torch.randint(0, len(pool), (n,), generator=self.gen)]

    def batch(self, size: int, T: int | None = None, passage: float | None = None,
              random: float | None = None, kindle: float | None = None) -> torch.Tensor:
        """(size, T + 1): rows in the languages of ``spec.languages`` in turn. ``self.plain``: (size,) bool, the
        rows that are text alone (no repeat, no random characters)."""
        rows, plain = [], []
        for i in range(size):
            rows.append(self.window(self.spec.languages[i % len(self.spec.languages)], T, passage, random, kindle))
            plain.append(self.last_plain)
        self.plain = torch.tensor(plain)
        return torch.stack(rows)


def alphabets(tokenizer: CharTokenizer, tokens: dict, spec: LMSpec) -> dict:
    """lang -> 1-D LongTensor of the ids random characters are drawn from (``LMSpec.alphabet``)."""
    first = len(SPECIALS)  # the special tokens come first in the vocabulary
    if spec.alphabet == "text":
        return {}
    if spec.alphabet == "vocab":
        every = torch.arange(first, tokenizer.vocab_size)
        return {lang: every for lang in tokens}
    if spec.alphabet == "common":
        counts = Counter()
        for t in tokens.values():
            counts.update(t.tolist())
        common = torch.tensor([i for i, _ in counts.most_common() if i >= first][:spec.alphabet_size])
        return {lang: common for lang in tokens}
    if spec.alphabet == "language":
        out = {}
        for lang, t in tokens.items():
            counts = Counter(t.tolist())
            ids = [i for i, _ in counts.most_common() if i >= first and tokenizer.itos[i] != "\n"]
            out[lang] = torch.tensor(ids[:spec.alphabet_size] if lang == "zh" else [i for i in ids if counts[i] >= 50])
        return out
    raise ValueError(f"alphabet={spec.alphabet!r}; allowed: 'vocab', 'common', 'language', 'text'")


def lr_at(spec: LMSpec, step: int) -> float:
    """Linear warm-up to ``spec.lr``, then cosine decay to a tenth of it at ``spec.steps``."""
    warm = min(1.0, (step + 1) / spec.warmup)
    start = spec.decay_from * spec.steps
    done = min(1.0, max(0.0, step - start) / (spec.steps - start)) if start < spec.steps else 0.0  # 1.0: held
    return spec.lr * warm * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * done)))


def make_optimizer(model: MiniTransformer, spec: LMSpec) -> torch.optim.AdamW:
    """AdamW with weight decay on the matrices (embeddings, projections) only, not on the norms' gains; the
    parameters ``spec.frozen`` names are left out (and need no gradient)."""
    for name, p in model.named_parameters():
        p.requires_grad_(not any(part in name for part in spec.frozen))
    learns = [p for p in model.parameters() if p.requires_grad]
    decay = [p for p in learns if p.dim() >= 2]
    keep = [p for p in learns if p.dim() < 2]
    return torch.optim.AdamW([{"params": decay, "weight_decay": spec.weight_decay},
                              {"params": keep, "weight_decay": 0.0}], lr=spec.lr, betas=(0.9, 0.95))


def val_windows(tokenizer: CharTokenizer, texts: dict, T: int, n: int = 16, seed: int = 123) -> dict:
    """lang -> (n, T) fixed windows of held-out text, each <s> + T - 1 characters from a line start."""
    gen, out = torch.Generator().manual_seed(seed), {}
    for lang, text in texts.items():
        ids = torch.tensor(encode_text(tokenizer, text))
        starts = (ids[:-T] == tokenizer.stoi["\n"]).nonzero().flatten() + 1
        pick = starts[torch.randint(len(starts), (n,), generator=gen)]
        out[lang] = torch.stack([torch.cat([torch.tensor([tokenizer.bos_id]), ids[s:s + T - 1]]) for s in pick])
    return out


def train_step(model, opt, x: torch.Tensor, lr: float, teacher=None, plain=None, distill: float = 0.0) -> float:
    """One AdamW step on the next-token loss of every position of ``x`` (B, T + 1). With a ``teacher`` model, the
    rows where ``plain`` is True are learnt from its distribution as well (``LMSpec.distill``)."""
    for group in opt.param_groups:
        group["lr"] = lr
    logits = model(x[:, :-1])  # (B, T, vocab): every position predicts the next token at once
    loss = F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten(), reduction="none").view(x.shape[0], -1)
    if teacher is not None and distill and plain.any():
        with torch.no_grad():
            taught = F.log_softmax(teacher(x[plain, :-1]).float(), dim=-1)
        own = F.log_softmax(logits[plain], dim=-1)
        kl = (taught.exp() * (taught - own)).sum(-1)  # (rows, T): KL(teacher || student) at each position
        loss = torch.cat([(1 - distill) * loss[plain] + distill * kl, loss[~plain]])  # plain rows: (1 - d) CE + d KL
    loss = loss.mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss.item()


def evaluate(model, val: dict, tokenizer: CharTokenizer) -> dict:
    """Held-out bits/char per language (fixed windows), and whether the model reads its context: ``copy``, the loss
    on the second copy of a random string over the first (1: no copying), and ``induction``, the largest share of
    attention any head gives to the token after the current token's earlier occurrence (lib.heads)."""
    model.eval()
    out = {lang: round(window_bits(model, w), 4) for lang, w in val.items()}
    with torch.no_grad():
        out["copy"] = round(copying(model, tokenizer, n=64, seeds=(0, 1))["ratio"], 3)
        out["letters"] = round(copying(model, tokenizer, n=64, seeds=(0, 1), alphabet=LETTERS)["ratio"], 3)
        out["induction"] = round(float(induction_share(model, repeated_random(tokenizer, 64), 64).max()), 3)
        for lang in val:  # a held-out passage of 120 characters written twice: second-copy over first-copy bits
            out[f"passage-{lang}"] = round(passage_copying(model, tokenizer, lang)["ratio"], 3)
    model.train()
    return out


def save_state(path: Path, model, opt, windows: Windows, step: int, record: dict):
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(dict(model=model.state_dict(), opt=opt.state_dict(), gen=windows.gen.get_state(), step=step,
                    record=record), path)


def initial_weights(name: str, spec: LMSpec, corpus=None, threads=None, verbose=True, init_weights=None):
    """(state dict, stages) a stage starts from: ``init_weights`` (a checkpoint's path) when given, else the finished
    weights of the stage ``spec.init`` (under .cache/train/, or kept in assets/training/; trained first when
    neither has them); (None, []) for a stage that starts from random weights."""
    if spec.init is None:
        return None, []
    path = Path(init_weights) if init_weights else STATE / f"{spec.init}-final.safetensors"
    if not path.is_file() and not init_weights and (KEPT / f"{spec.init}.safetensors").is_file():
        path = KEPT / f"{spec.init}.safetensors"  # a stage's weights the repository keeps (lm-base)
    if not path.is_file():
        if init_weights:
            raise FileNotFoundError(f"--init {path} is not a file: give a checkpoint written by save_checkpoint")
        model, tokenizer, info = train_lm(spec.init, corpus=corpus, threads=threads, verbose=verbose)
        save_checkpoint(model, tokenizer, path, dtype=torch.float32, **info)
    model, _, info = load_checkpoint(path)
    return model.state_dict(), stages(info)


def stages(info: dict) -> list[dict]:
    """The stages that made a checkpoint, first to last, from its training record: each one's name, steps, minutes,
    threads and CPU (a record written before stages were kept counts as one stage)."""
    if "stages" in info:
        return list(info["stages"])
    steps = info["spec"].get("stop_at") or info["spec"]["steps"]
    return [dict(name=info.get("name"), steps=steps, minutes=round(info["seconds"] / 60, 1), threads=info["threads"],
                 cpu=info.get("cpu", ""))]


def train_lm(name: str, steps: int | None = None, resume: bool = False, save_every: int = 250,
             corpus=None, threads: int | None = None, verbose: bool = True, init_weights=None, resume_from=None):
    """Train ``name`` (a key of SPECS) -> (model with written-out attention, tokenizer, training record).
    ``resume``: go on from the state under .cache/train/; ``resume_from``: from a state file elsewhere (one a
    run left in the repository for the next machine, ``assets/training/``)."""
    spec = SPECS[name]
    if steps is not None:
        spec = LMSpec(**{**asdict(spec), "steps": steps})
    if threads:
        torch.set_num_threads(threads)
    texts = {lang: read_split(lang, "train", corpus) for lang in LANGUAGES}
    tokenizer = lm_vocabulary(texts.values())
    torch.manual_seed(spec.seed)
    shipped = ModelConfig(vocab_size=tokenizer.vocab_size, **spec.config)
    model = MiniTransformer(shipped.replace(attn_impl="sdpa"))  # the same maths, fused: faster to train
    T = shipped.max_seq_len
    shapes = spec.shapes or ((spec.batch, T),)
    windows = Windows.build(tokenizer, texts, T, spec)
    val = val_windows(tokenizer, {lang: read_split(lang, "val", corpus) for lang in LANGUAGES}, T)
    opt = make_optimizer(model, spec)
    state_path = STATE / f"{name}.pt"
    start, record = starting_point(name, spec, model, opt, windows, val, tokenizer, state_path, resume, resume_from,
                                   corpus, threads, verbose, init_weights)
    teacher = teacher_model(spec, shipped, corpus, threads, verbose)
    model.train()
    run, resumed_with = [], record["seconds"]  # the log's s/step counts this session's steps only
    end = spec.stop_at or spec.steps  # a stage may take only the first steps of its schedule
    with progress.bar(total=end, initial=start, desc=name, unit="step", show=None if verbose else False) as bar:
        for step in range(start, end):
            t0 = time.perf_counter()
            shape = shapes[step % len(shapes)]  # (batch, context[, passage, random, kindle shares])
            x = windows.batch(*shape)
            run.append(train_step(model, opt, x, lr_at(spec, step), teacher, windows.plain, spec.distill))
            record["seconds"] += time.perf_counter() - t0
            if len(run) == 25 or step == end - 1:
                record["losses"].append([step + 1, round(sum(run) / len(run), 4)])
                run = []
                if bar.disable and (step + 1) % 50 == 0:  # a log line now and then where no bar is drawn
                    print(f"[{name}] step {step + 1} loss {record['losses'][-1][1]:.4f} "
                          f"({(record['seconds'] - resumed_with) / (step + 1 - start):.2f} s/step)", flush=True)
            if (step + 1) % spec.eval_every == 0 or step == end - 1:
                record["val"].append([step + 1, evaluate(model, val, tokenizer)])
                latest = record["losses"][-1][1] if record["losses"] else sum(run) / len(run)
                line = f"[{name}] step {step + 1} loss {latest:.4f} val {record['val'][-1][1]}"
                progress.write(line) if not bar.disable else print(line, flush=True)
            if (step + 1) % save_every == 0 or step == end - 1:
                save_state(state_path, model, opt, windows, step + 1, record)
                save_checkpoint(trained(model, shipped), tokenizer, STATE / f"{name}-{step + 1}.safetensors",
                                dtype=torch.float16)
            bar.update()
    info = dict(name=name, command=f"python -m lib.train_lm {name}", spec=asdict(spec), torch=torch.__version__,
                threads=torch.get_num_threads(), cpu=cpu_name(), seconds=round(record["seconds"], 1),
                init=record.get("init"), losses=record["losses"], val_bits_per_char=record["val"],
                parameters=model.num_parameters())
    info["stages"] = record.get("stages", []) + stages(info)  # the stages before this one, then this one
    return trained(model, shipped), tokenizer, info


def starting_point(name, spec, model, opt, windows, val, tokenizer, state_path, resume, resume_from, corpus, threads,
                   verbose, init_weights) -> tuple[int, dict]:
    """Where a run of stage ``name`` starts -> (step, training record): from a saved state (``resume``, or
    ``resume_from`` a state elsewhere: model, optimiser and data generator as they were), else from the weights
    ``initial_weights`` gives (evaluated once: the record's step 0), else from random weights at step 0."""
    record = dict(losses=[], val=[], seconds=0.0)
    load_from = Path(resume_from) if resume_from else state_path if resume and state_path.is_file() else None
    if load_from is not None:
        if not load_from.is_file():
            raise FileNotFoundError(f"--resume-from {load_from} is not a file: give a state a run saved (NAME.pt)")
        state = torch.load(load_from, weights_only=True)  # tensors, numbers, strings: no pickled code runs
        model.load_state_dict(state["model"]), opt.load_state_dict(state["opt"]), windows.gen.set_state(state["gen"])
        print(f"[{name}] resuming at step {state['step']} from {load_from}")
        return state["step"], state["record"]
    init, record["stages"] = initial_weights(name, spec, corpus, threads, verbose, init_weights)
    if init is not None:
        model.load_state_dict(init)
        record["init"] = str(init_weights or spec.init)
        record["val"].append([0, evaluate(model, val, tokenizer)])
        print(f"[{name}] from {record['init']}: {record['val'][-1][1]}", flush=True)
    return 0, record


def teacher_model(spec: LMSpec, shipped: ModelConfig, corpus, threads, verbose):
    """The finished weights of the stage ``spec.teacher`` as a frozen model (None when the stage has no teacher)."""
    if not spec.teacher:
        return None
    teacher = MiniTransformer(shipped.replace(attn_impl="sdpa")).eval()
    taught_by = LMSpec(config=spec.config, steps=0, init=spec.teacher)  # the teacher's weights, as an init's
    teacher.load_state_dict(initial_weights(spec.teacher, taught_by, corpus, threads, verbose)[0])
    return teacher.requires_grad_(False)


def toy_induction(batch: int = 16, context: int = 64, vocab: int = 64, lr: float = 1e-3, max_steps: int = 20000,
                  seed: int = 0, verbose: bool = True) -> dict:
    """Can this training loop form an induction head at all? The cheap check before training ``lm``: a 2-layer
    model (d_model 64, 4 heads, the shipped model's kind of block) on random tokens where the first L (8..32,
    random each step) are written again right after themselves; ``train_step`` as ``lm`` uses it. It stops when
    the loss on the second copy (positions 2..L of it) falls below 0.3 nats (ln(vocab - 1) ~ 4.1 before the head
    forms) -> dict with the step, the tokens seen and the seconds it took (None when it never formed)."""
    torch.manual_seed(seed)
    config = ModelConfig(vocab_size=vocab, n_layers=2, d_model=64, n_heads=4, max_seq_len=context, bias=False,
                         norm="rmsnorm", activation="swiglu", positions="rope", attn_impl="sdpa")
    model = MiniTransformer(config).train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0, betas=(0.9, 0.95))
    gen, t0, second = torch.Generator().manual_seed(seed + 1), time.perf_counter(), float("nan")
    for step in range(1, max_steps + 1):
        L = int(torch.randint(8, 33, (1,), generator=gen))
        x = torch.randint(1, vocab, (batch, context + 1), generator=gen)  # (B, C + 1); id 0 is the first token
        x[:, 0] = 0
        x[:, 1 + L:1 + 2 * L] = x[:, 1:1 + L]
        train_step(model, opt, x, lr)
        if step % 250 == 0:
            with torch.no_grad():
                logits = model(x[:, :-1])  # (B, C, vocab)
                nll = F.cross_entropy(logits.flatten(0, 1), x[:, 1:].flatten(), reduction="none").view(batch, -1)
            second = float(nll[:, L + 1:2 * L].mean())  # predicting tokens 2..L of the second copy
            if verbose:
                print(f"[toy] step {step} ({step * batch * context / 1e6:.1f} M tokens): second copy {second:.3f} "
                      f"nats ({time.perf_counter() - t0:.0f} s)", flush=True)
            if second < 0.3:
                return dict(step=step, tokens=step * batch * context, seconds=time.perf_counter() - t0,
                            second_copy=second)
    return dict(step=None, tokens=max_steps * batch * context, seconds=time.perf_counter() - t0, second_copy=second)


def trained(model: MiniTransformer, shipped: ModelConfig) -> MiniTransformer:
    """A copy of ``model`` with the shipped config (attention written out, so its weights can be shown)."""
    out = MiniTransformer(shipped)
    out.load_state_dict(model.state_dict())
    return out.eval()


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m lib.train_lm", description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=[*SPECS, "toy-induction"],
                        help="a model to train, or toy-induction: check that the loop forms an induction head")
    parser.add_argument("--steps", type=int, default=None, help="train this many steps instead of the spec's")
    parser.add_argument("--resume", action="store_true", help=f"continue from {STATE}/NAME.pt if it is there")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--save-every", type=int, default=250)
    parser.add_argument("--corpus", type=Path, default=LM_CORPUS)
    parser.add_argument("--out", type=Path, default=None, help="where the weights go (default assets/NAME.safetensors)")
    parser.add_argument("--resume-from", type=Path, default=None,
                        help="continue from this state file (e.g. assets/training/lm.pt, a run left for the next machine)")
    parser.add_argument("--init", type=Path, default=None,
                        help="start a stage from these weights instead of its first stage's (e.g. a shipped model)")
    args = parser.parse_args(argv)
    if args.name == "toy-induction":
        if args.threads:
            torch.set_num_threads(args.threads)
        print(toy_induction())
        return
    model, tokenizer, info = train_lm(args.name, args.steps, args.resume, args.save_every, args.corpus, args.threads,
                                      init_weights=args.init, resume_from=args.resume_from)
    path = save_checkpoint(model, tokenizer, args.out or ASSETS / f"{args.name}.safetensors", dtype=torch.float16, **info)
    print(f"[{args.name}] {info['parameters']:,} parameters, {info['seconds'] / 60:.1f} min; wrote {path} "
          f"({path.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
