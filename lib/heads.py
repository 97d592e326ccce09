"""Heads you can name: what a trained model's attention heads do, measured on text rather than read into a heat-map.

    prev = previous_token_share(model, ids)    # (layers, heads): weight each query gives the token just before it
    copy = copying(model, tokenizer)           # a random string written twice: loss on the 1st copy vs the 2nd
    text = passage_copying(model, tokenizer, "en")  # a held-out passage written twice: bits/char of each copy
    ind  = induction_share(model, ids_twice, n)  # (layers, heads): weight on "the token after my last occurrence"
    near = recent_share(model, ids, 128)       # (layers, heads): weight each query keeps within its last 128 keys
    far  = repeated_far(tokenizer, "zh")       # held-out windows whose opening passage comes again far later

A *previous-token head* puts most of its weight on position t - 1 (it lets a later layer know what came just
before each token). An *induction head* (Olsson et al. 2022) looks back for the last time the current token
appeared and attends to the token that followed it, so the model can continue a passage it has already seen:
on a random string written twice, the second copy becomes predictable although the first was not. The first
position's *sink* is measured by ``lib.sinks.sink_share``.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import checks
from .corpus import encode_text, heldout_passages, heldout_text
from .lm import windows
from .model import ForwardRecord


def _weights(model, ids: torch.Tensor) -> list[torch.Tensor]:
    """Every layer's attention weights for one sequence ids (1, T): a list of (n_heads, T, T)."""
    rec = ForwardRecord(capture=True)
    with torch.no_grad():
        model.eval()(ids, record=rec)
    return [rec.tensors[layer]["attn_weights"][0].float() for layer in range(model.config.n_layers)]


def _one(model, input_ids) -> torch.Tensor:
    ids = checks.token_ids(input_ids, "input_ids (one sequence)", model.config.vocab_size)
    return torch.tensor([ids], device=model.device)


def previous_token_share(model, input_ids) -> torch.Tensor:
    """(n_layers, n_heads): the mean weight that queries at positions 1.. give to the position just before them."""
    return torch.stack([w.diagonal(offset=-1, dim1=-2, dim2=-1).mean(-1) for w in _weights(model, _one(model, input_ids))])


def recent_share(model, input_ids, k: int, from_position: int | None = None) -> torch.Tensor:
    """(n_layers, n_heads): the mean weight that queries at positions >= ``from_position`` (default ``k``) give to
    the last ``k`` positions they see (their own and the k - 1 before it). 1.0 means a head never looks further
    back than k - 1 positions; what is missing from 1.0 went to older keys, the ones a short window would evict."""
    ids = _one(model, input_ids)
    T = ids.shape[1]
    k = checks.integer(k, "k", 1, T)
    start = checks.integer(k if from_position is None else from_position, "from_position", 0, T - 1)
    rows = torch.arange(T)
    band = (rows[:, None] - rows[None, :] >= 0) & (rows[:, None] - rows[None, :] < k)  # (T, T): key in the last k
    return torch.stack([(w * band.to(w.device)).sum(-1)[:, start:].mean(-1) for w in _weights(model, ids)])


def repeated_random(tokenizer, n: int, seed: int = 0, alphabet: str | None = None) -> list[int]:
    """<s> then ``n`` random characters, then the same ``n`` again. The characters are drawn from ``alphabet``
    (a string of characters of the vocabulary), or from the whole vocabulary but its special tokens (None)."""
    gen = torch.Generator().manual_seed(checks.integer(seed, "seed"))
    n = checks.integer(n, "n", 2)
    if alphabet is None:
        first = len(tokenizer.itos) - len(tokenizer.chars)  # ids below this are the special tokens
        rnd = torch.randint(first, tokenizer.vocab_size, (n,), generator=gen).tolist()
    else:
        pool = tokenizer.encode(checks.text(alphabet, "alphabet"))
        rnd = [pool[i] for i in torch.randint(len(pool), (n,), generator=gen).tolist()]
    return [tokenizer.bos_id] + rnd + rnd


# Common characters: what a random string "of common characters" is drawn from (``copying(..., alphabet=LETTERS)``;
# the default draws from the whole vocabulary, mostly rare Chinese characters).
LETTERS = "abcdefghijklmnopqrstuvwxyz"


def copy_losses(model, input_ids, n: int) -> tuple[float, float]:
    """(mean loss on the first copy, on the second) in nats, for ids = <s> + x + x with len(x) = ``n``; the first
    token of each copy is left out (nothing can predict it)."""
    ids = _one(model, input_ids)
    with torch.no_grad():
        logits = model.eval()(ids[:, :-1]).float()
    nll = F.cross_entropy(logits[0], ids[0, 1:], reduction="none")  # position t predicts token t + 1
    return float(nll[1:n].mean()), float(nll[n + 1:].mean())


def copying(model, tokenizer, n: int = 100, seeds=(0, 1, 2, 3), alphabet: str | None = None) -> dict:
    """In-context copying on random strings written twice (``repeated_random``), averaged over ``seeds``:
    the loss on each copy (nats), their ratio, and the uniform guess's loss, ln(vocabulary size)."""
    pairs = [copy_losses(model, repeated_random(tokenizer, n, s, alphabet), n) for s in seeds]
    first, second = (sum(p[i] for p in pairs) / len(pairs) for i in (0, 1))
    return {"n": n, "first": first, "second": second, "ratio": second / first,
            "uniform": math.log(tokenizer.vocab_size)}


def passages_twice(tokenizer, lang: str, n: int = 120, count: int = 8) -> list[list[int]]:
    """``count`` held-out passages of ``lang`` (evenly spaced through the text), each cut to its first ``n``
    characters and written twice: <s> + p + p, as ids."""
    n, count = checks.integer(n, "n", 2), checks.integer(count, "count", 1)
    long = [p for p in heldout_passages(lang) if len(p) >= n]
    if len(long) < count:
        raise ValueError(f"the held-out {lang} text has {len(long)} passages of {n} characters or more, "
                         f"fewer than count={count}")
    picked = long[::len(long) // count][:count]
    return [[tokenizer.bos_id] + 2 * encode_text(tokenizer, p[:n]) for p in picked]


def passage_copying(model, tokenizer, lang: str, n: int = 120, count: int = 8) -> dict:
    """In-context copying on real text: held-out passages written twice (``passages_twice``), the mean loss on
    each copy in bits per character and their ratio (the first character of each copy left out)."""
    pairs = [copy_losses(model, ids, n) for ids in passages_twice(tokenizer, lang, n, count)]
    first, second = (sum(p[i] for p in pairs) / len(pairs) / math.log(2) for i in (0, 1))
    return {"lang": lang, "n": n, "count": count, "first": first, "second": second, "ratio": second / first}


def repeated_far(tokenizer, lang: str, length: int = 512, n: int = 128, count: int = 4) -> torch.Tensor:
    """(count, length) windows of held-out ``lang`` text (<s> at a line start, as ``lib.lm.windows``) in which the
    window's first ``n`` characters are written again at its end: the second copy stands ``length - 1 - n``
    positions after the first, far beyond a short window. What a cache that keeps every key is worth."""
    n = checks.integer(n, "n", 2, (length - 1) // 2)
    out = windows(tokenizer, heldout_text(lang), length, count).clone()
    out[:, length - n:] = out[:, 1:1 + n]
    return out


def induction_share(model, input_ids, n: int) -> torch.Tensor:
    """(n_layers, n_heads): on ids = <s> + x + x, the mean weight that each query in the second copy gives to the
    token right after its own earlier occurrence (position t - n + 1): an induction head's signature."""
    ws = _weights(model, _one(model, input_ids))
    q = torch.arange(n + 1, 2 * n + 1)  # queries in the second copy
    return torch.stack([w[:, q, q - n + 1].mean(-1) for w in ws])


def strongest(share: torch.Tensor) -> tuple[int, int, float]:
    """(layer, head, value) of the largest entry of a (n_layers, n_heads) share."""
    flat = int(share.argmax())
    layer, head = divmod(flat, share.shape[1])
    return layer, head, float(share[layer, head])
