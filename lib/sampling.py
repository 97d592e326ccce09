"""Choosing the next token: greedy, temperature, top-k, top-p — the one token chooser of the lab.

The model ends every pass with logits, one number per vocabulary token, for the next position. Then:

    temperature == 0:  next = argmax(logits)                                   (greedy)
    otherwise:         probs = softmax(filter_logits(logits, T, top_k, top_p))   (sampling distribution)
                       next  ~ probs, drawn with a seeded torch.Generator

Every loop and widget of the lab chooses through this module (speculative decoding adds its residual
rule, ``residual_distribution``); ``torch.multinomial`` appears nowhere else.

``choose``, ``filter_logits`` and ``sampling_probs`` check what they are given (the logits' finiteness is a
read of a device value: a host sync). A loop that checked its settings once and checks its logits itself
calls ``next_token`` and ``probs``, which read nothing back from the device.
"""
from __future__ import annotations

import torch

from . import checks


def make_generator(seed, device) -> torch.Generator | None:
    """A private random generator on ``device`` seeded with ``seed`` (same seed, same draws), or None
    for ``seed=None`` (torch's global stream)."""
    return None if seed is None else torch.Generator(device=device).manual_seed(
        checks.integer(seed, "seed", 0, 2 ** 63 - 1, allowed="None or an integer from 0 to 2**63 - 1"))


def filter_logits(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None) -> torch.Tensor:
    """The sampling distribution's logits, (B, vocab) float32: divided by the temperature, then every token
    outside the top-k and outside the smallest set whose probability reaches top_p set to -inf."""
    temperature, top_k, top_p = checks.sampling(temperature, top_k, top_p, greedy=False)
    return filtered(checks.logits(logits).float(), temperature, top_k, top_p)


def filtered(raw: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """``filter_logits`` of float32 logits (B, vocab) and settings that were checked already; no host sync."""
    logits = divide(raw, temperature)
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[..., -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        p_sorted = torch.softmax(sorted_logits, dim=-1)
        # drop a token when the tokens before it already reach top_p (the first token always stays)
        drop_sorted = (p_sorted.cumsum(dim=-1) - p_sorted) >= top_p
        drop_sorted[..., 0] = False  # (even when a tiny top_p rounds to 0 in float32)
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def divide(raw: torch.Tensor, temperature: float) -> torch.Tensor:
    """raw / temperature, (B, vocab) float32. A tiny temperature can overflow a finite logit to inf; then the
    same softmax, safely: shifted by each row's maximum and divided in float64. Which of the two is chosen on
    the device (``torch.where``), so nothing is read back; only on a device without float64 (mps) is the
    overflow flag read (a host sync) to skip the float64 path."""
    logits = raw / temperature
    if temperature >= 1:  # dividing by 1 or more cannot overflow
        return logits
    overflowed = (~torch.isfinite(logits) & ~torch.isinf(raw)).any()  # () bool: a finite logit became inf/NaN
    if raw.device.type == "mps" and not bool(overflowed):
        return logits
    safe = ((raw - raw.max(dim=-1, keepdim=True).values).double() / temperature).float()  # (B, vocab)
    return torch.where(overflowed, safe, logits)


def sampling_probs(logits: torch.Tensor, temperature: float = 0.0, top_k: int | None = None,
                   top_p: float | None = None) -> torch.Tensor:
    """(B, vocab) the probabilities the next token is drawn from. Greedy (temperature 0) draws nothing, so
    it reports the model's own distribution, softmax(logits) at temperature 1 (what a trace shows and what
    speculative decoding compares)."""
    temperature, top_k, top_p = checks.sampling(temperature, top_k, top_p)
    return probs(checks.logits(logits).float(), temperature, top_k, top_p)


def probs(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None) -> torch.Tensor:
    """``sampling_probs`` of float32 logits and settings that were checked already; no host sync."""
    if temperature == 0:
        return torch.softmax(logits, dim=-1)
    return torch.softmax(filtered(logits, temperature, top_k, top_p), dim=-1)


def draw(probs: torch.Tensor, generator: torch.Generator | None = None) -> torch.Tensor:
    """One token id per row of ``probs`` (B, vocab) -> (B,), drawn with ``generator``."""
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)


def choose(logits: torch.Tensor, temperature: float = 0.0, top_k: int | None = None, top_p: float | None = None,
           generator: torch.Generator | None = None) -> torch.Tensor:
    """The next token of every row of ``logits`` (B, vocab) -> (B,) long: the argmax when temperature is 0,
    otherwise one draw from ``sampling_probs``."""
    temperature, top_k, top_p = checks.sampling(temperature, top_k, top_p)
    return next_token(checks.logits(logits), temperature, top_k, top_p, generator)


def next_token(logits: torch.Tensor, temperature: float, top_k: int | None, top_p: float | None,
               generator: torch.Generator | None = None) -> torch.Tensor:
    """``choose`` for logits and settings that were checked already (``lib.generate``'s loop); no host sync."""
    if temperature == 0:
        return torch.argmax(logits, dim=-1)
    return draw(probs(logits.float(), temperature, top_k, top_p), generator)


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """norm(max(0, p - q)): where speculative decoding draws the target's token after it rejects a draft
    token (p: the target's distribution, q: the draft's). Mass only on tokens the draft proposes too rarely.
    If p == q nothing is left (and no rejection can happen): then p itself."""
    r = torch.clamp(p - q, min=0)
    total = r.sum(dim=-1, keepdim=True)
    if bool((total <= 0).any()):
        return p.clone()
    return r / total
