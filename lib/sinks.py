"""Attention sinks (StreamingLLM, Xiao et al. 2023): what keeping the first few positions does when a cache
keeps only a window.

A model trained with full attention puts a large share of its attention on the first token, whatever that
token is: softmax must give its weight somewhere, and the one position every query can see becomes the place
to park it (``sink_share`` measures that share, per layer and head). A cache that keeps only the last W
positions (``KVCache(config, ..., window=W)`` on such a model) throws that position away after W steps, and
the model's outputs drift; keeping the first ``sinks`` positions for good and the last W - sinks
(``KVCache(..., window=W, sinks=n)``) keeps the memory just as flat and much of the quality
(``streaming_drift`` measures both against the full cache).

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
    """One sequence (a list of ids, a 1-D tensor, or a (1, T) tensor) as a (1, T) tensor on the model's device."""
    if isinstance(input_ids, torch.Tensor) and input_ids.dim() == 2 and input_ids.shape[0] == 1:
        input_ids = input_ids[0]
    ids = checks.token_ids(input_ids, "input_ids (one sequence)", model.config.vocab_size)
    return torch.tensor([ids], device=model.device)


@torch.no_grad()
def sink_share(model, input_ids, n_sinks: int = 1, from_position: int | None = None) -> torch.Tensor:
    """(n_layers, n_heads) float: the attention weight that queries at positions >= ``from_position``
    (default: 2 * n_sinks) give to the first ``n_sinks`` positions, averaged over those queries. Uniform
    attention would give n_sinks / (p + 1) at position p; a sink head gives far more."""
    ids = _ids(model, input_ids)
    T = ids.shape[1]
    n_sinks = checks.integer(n_sinks, "n_sinks", 1, T - 1, allowed=f"an integer from 1 to {T - 1} (the "
                                                                   f"sequence has {T} positions)")
    start = 2 * n_sinks if from_position is None else from_position
    start = checks.integer(start, "from_position", n_sinks, T - 1)
    rec = ForwardRecord(capture=True)
    model.eval()(ids, record=rec)
    shares = [rec.tensors[layer]["attn_weights"][0, :, start:, :n_sinks].sum(-1).mean(-1).float().cpu()
              for layer in range(model.config.n_layers)]  # each (n_heads,)
    return torch.stack(shares)  # (n_layers, n_heads)


@torch.no_grad()
def streaming_drift(model, input_ids, window: int | None = None, sinks: int = 0) -> dict:
    """Feed ``input_ids`` (1, T) through a ``KVCache`` that keeps ``window`` positions (``sinks`` of them the
    first ones; None: every position) and compare with the full cache, teacher-forced: each position predicts
    the next token of the same text. -> dict: window, sinks, ``nll`` (mean negative log-likelihood of the
    next tokens, nats), ``perplexity`` (exp of it), ``max_logit_diff`` (largest |logit - full cache's logit|),
    ``agreement`` (share of positions whose argmax equals the full cache's), ``cache_bytes`` (its nbytes)."""
    ids = _ids(model, input_ids)
    T = ids.shape[1]
    if T < 2:
        raise ValueError("input_ids needs at least 2 tokens: each position is scored on the next one")
    model.eval()
    full = model(ids, cache=KVCache(model.config, 1, T, device=model.device, dtype=model.dtype)).float()
    cache = KVCache(model.config, 1, T, device=model.device, dtype=model.dtype, window=window, sinks=sinks)
    logits = model(ids, cache=cache).float()  # (1, T, vocab): one pass, the cache's window masks it
    logp = torch.log_softmax(logits[0, :-1], dim=-1)  # (T-1, vocab): position t predicts token t+1
    nll = float(-logp.gather(1, ids[0, 1:, None]).mean())
    return {"window": cache.window, "sinks": cache.sinks, "nll": nll, "perplexity": math.exp(nll),
            "max_logit_diff": float((logits - full).abs().max()),
            "agreement": float((logits.argmax(-1) == full.argmax(-1)).float().mean()),
            "cache_bytes": cache.nbytes}
