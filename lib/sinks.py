"""Attention sinks (StreamingLLM, Xiao et al. 2023): what keeping the first few positions does when a cache
keeps only a window.

A model trained with full attention puts a large share of its attention on the first token, whatever that
token is: softmax must give its weight somewhere, and the one position every query can see becomes the place
to park it (``sink_share`` measures that share, per layer and head). A cache that keeps only the last W
positions (``KVCache(config, ..., window=W)`` on such a model) throws that position away after W steps, and
the model's outputs drift; keeping the first ``sinks`` positions for good and the last W - sinks
(``KVCache(..., window=W, sinks=n)``) keeps the memory just as flat and much of the quality
(``streaming_drift`` measures both against the full cache; ``drift_sweep`` does it for several settings with one
pass of the full cache). Both take one sequence or several of one length (an (n, T) tensor) and average over them.

Whether a model has a sink at all is a measurement, not a given: the toy ``chat`` has one (a head gives ``<s>``
half its weight), the course's real model ``lm`` has none on held-out text (no head gives it more than a few times
``uniform_share``, the even spread), and a window costs it only the text it evicts.

Positions: lib keeps every key at its real position (its rotation or learned position embedding is the one it
got when it was computed) and the query's position keeps counting. StreamingLLM instead re-numbers positions
inside the cache (keys are stored before RoPE and rotated by their slot), which lets it run past the model's
context window; lib does not, so a generation still ends at ``max_seq_len``.
"""
from __future__ import annotations

import math

import torch

from . import checks
from .cache import KVCache
from .model import ForwardRecord


def _ids(model, input_ids) -> torch.Tensor:
    """One sequence (a list of ids, a 1-D tensor) or several of one length (a (n, T) tensor, a list of lists) as
    an (n, T) tensor on the model's device."""
    rows = input_ids.tolist() if isinstance(input_ids, torch.Tensor) and input_ids.dim() == 2 else input_ids
    if isinstance(rows, (list, tuple)) and rows and all(isinstance(r, (list, tuple)) for r in rows):
        rows = [checks.token_ids(r, f"input_ids (row {i})", model.config.vocab_size) for i, r in enumerate(rows)]
        if len({len(r) for r in rows}) > 1:
            raise ValueError(f"input_ids: every row must have the same length, got {sorted({len(r) for r in rows})}")
    else:
        rows = [checks.token_ids(input_ids, "input_ids (one sequence)", model.config.vocab_size)]
    return torch.tensor(rows, device=model.device)


@torch.no_grad()
def sink_share(model, input_ids, n_sinks: int = 1, from_position: int | None = None) -> torch.Tensor:
    """(n_layers, n_heads) float: the attention weight that queries at positions >= ``from_position``
    (default: 2 * n_sinks) give to the first ``n_sinks`` positions, averaged over those queries (and over the
    rows, when ``input_ids`` holds several sequences of one length). Uniform attention would give n_sinks / (p + 1)
    at position p; a sink head gives far more."""
    ids = _ids(model, input_ids)
    T = ids.shape[1]
    n_sinks = checks.integer(n_sinks, "n_sinks", 1, T - 1, allowed=f"an integer from 1 to {T - 1} (the "
                                                                   f"sequence has {T} positions)")
    start = 2 * n_sinks if from_position is None else from_position
    start = checks.integer(start, "from_position", n_sinks, T - 1)
    model.eval()
    shares = torch.zeros(model.config.n_layers, model.config.n_heads)
    for row in ids.split(1):  # one sequence per pass: the captured weights stay (layers, heads, T, T)
        rec = ForwardRecord(capture=True)
        model(row, record=rec)
        shares += torch.stack([rec.tensors[layer]["attn_weights"][0, :, start:, :n_sinks].sum(-1).mean(-1).float().cpu()
                               for layer in range(model.config.n_layers)])  # each (n_heads,)
    return shares / ids.shape[0]  # (n_layers, n_heads)


def uniform_share(length: int, n_sinks: int = 1, from_position: int | None = None) -> float:
    """What ``sink_share`` would give if every query spread its weight evenly over the keys it sees: the mean of
    n_sinks / (p + 1) over the query positions p from ``from_position`` (default 2 * n_sinks) to length - 1."""
    start = 2 * n_sinks if from_position is None else from_position
    positions = range(checks.integer(start, "from_position", 0, length - 1), length)
    return sum(n_sinks / (p + 1) for p in positions) / len(positions)


@torch.no_grad()
def streaming_drift(model, input_ids, window: int | None = None, sinks: int = 0) -> dict:
    """Feed ``input_ids`` (one sequence, or (n, T) of several) through a ``KVCache`` that keeps ``window``
    positions (``sinks`` of them the first ones; None: every position) and compare with the full cache,
    teacher-forced: each position predicts the next token of the same text. -> dict: window, sinks, ``nll``
    (mean negative log-likelihood of the next tokens, nats, over every row), ``perplexity`` (exp of it),
    ``max_logit_diff`` (largest |logit - full cache's logit|), ``agreement`` (share of positions whose argmax
    equals the full cache's), ``cache_bytes`` (its nbytes, for all n rows), ``nll_by_position`` (T - 1 floats:
    the mean over rows of the NLL at each position t, which predicts token t + 1)."""
    return drift_sweep(model, input_ids, [(window, sinks)])[0]


@torch.no_grad()
def drift_sweep(model, input_ids, settings) -> list[dict]:
    """``streaming_drift`` for each (window, sinks) of ``settings``, with the full cache's pass run once."""
    ids = _ids(model, input_ids)
    n, T = ids.shape
    if T < 2:
        raise ValueError("input_ids needs at least 2 tokens: each position is scored on the next one")
    model.eval()
    full = model(ids, cache=KVCache(model.config, n, T, device=model.device, dtype=model.dtype)).float()
    out = []
    for window, sinks in settings:
        cache = KVCache(model.config, n, T, device=model.device, dtype=model.dtype, window=window, sinks=sinks)
        logits = model(ids, cache=cache).float()  # (n, T, vocab): one pass, the cache's window masks it
        logp = torch.log_softmax(logits[:, :-1], dim=-1)  # (n, T-1, vocab): position t predicts token t+1
        nll = -logp.gather(2, ids[:, 1:, None])[..., 0]  # (n, T-1)
        out.append({"window": cache.window, "sinks": cache.sinks, "nll": float(nll.mean()),
                    "perplexity": math.exp(float(nll.mean())), "max_logit_diff": float((logits - full).abs().max()),
                    "agreement": float((logits.argmax(-1) == full.argmax(-1)).float().mean()),
                    "cache_bytes": cache.nbytes, "nll_by_position": nll.mean(0).tolist()})
    return out
