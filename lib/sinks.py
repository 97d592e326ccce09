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

Whether a model has a sink at all is a measurement, not a given (``uniform_share`` is the even spread to compare
with; Gu et al. 2024 count a head in a layer >= 1 whose share, over queries at positions >= 64, is at least 0.3:
``sink_share(model, ids, 1, 64)``). The toy ``chat`` parks half a head's weight on ``<s>``, but on positions it never
trained: a demo of the mechanism, not evidence about language models. What a window costs the real model ``lm``
depends on the text: little on plain text, more where a passage comes back from farther than the window and the
model would copy it (``lib.heads.repeated_far``); notebook 12 and ``python -m tools.context_report`` measure both.

Positions: by default lib keeps every key at its real position (its rotation or learned position embedding is
the one it got when it was computed) and the query's position keeps counting, so a generation ends at
``max_seq_len``. StreamingLLM instead numbers positions within the cache (keys are stored before RoPE and
rotated by their slot at every step): ``KVCache(..., window=W, sinks=n, positions="cache")`` does that (a model
with rotary positions only), and then runs past the context window in flat memory. ``stream_perplexity``
measures it over a stream longer than the window: window only, window + sinks, and the sliding window with
re-computation (the last W tokens encoded afresh for every prediction). Note that re-computation is not the same
as the cached window even without sinks: a cached key of layer 2 and above was computed when its token was fed,
from context that the window has since dropped.
"""
from __future__ import annotations

import math

import torch

from . import checks, progress
from .memo import memoised
from .cache import KVCache
from .costs import kv_cache_bytes
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


@memoised
@torch.no_grad()
def drift_sweep(model, input_ids, settings) -> list[dict]:
    """``streaming_drift`` for each (window, sinks) of ``settings``, with the full cache's pass run once."""
    ids = _ids(model, input_ids)
    n, T = ids.shape
    if T < 2:
        raise ValueError("input_ids needs at least 2 tokens: each position is scored on the next one")
    model.eval()
    full_cache = KVCache(model.config, n, T, device=model.device, dtype=model.dtype)
    full = model(ids, cache=full_cache).float()
    out = []
    for window, sinks in progress.bar(settings, desc="window settings", unit="setting"):  # a bar where it is long
        cache = KVCache(model.config, n, T, device=model.device, dtype=model.dtype, window=window, sinks=sinks)
        if (cache.window, cache.sinks) == (full_cache.window, full_cache.sinks):  # the full cache: its pass above
            cache, logits = full_cache, full
        else:
            logits = model(ids, cache=cache).float()  # (n, T, vocab): one pass, the cache's window masks it
        logp = torch.log_softmax(logits[:, :-1], dim=-1)  # (n, T-1, vocab): position t predicts token t+1
        nll = -logp.gather(2, ids[:, 1:, None])[..., 0]  # (n, T-1)
        out.append({"window": cache.window, "sinks": cache.sinks, "nll": float(nll.mean()),
                    "perplexity": math.exp(float(nll.mean())), "max_logit_diff": float((logits - full).abs().max()),
                    "agreement": float((logits.argmax(-1) == full.argmax(-1)).float().mean()),
                    "cache_bytes": cache.nbytes, "nll_by_position": nll.mean(0).tolist()})
    return out


@memoised
@torch.no_grad()
def stream_perplexity(model, input_ids, window: int, sinks: int = 4, stride: int = 1, batch: int = 64) -> dict:
    """StreamingLLM's comparison on a text longer than the window, teacher-forced (position t predicts token t + 1
    of the same text), for one sequence or (n, T) of several: the NLL of three ways to keep ``window`` positions:

    - ``"window only"``: the last W only (``KVCache(..., window=W, positions="cache")``), fed one token at a time;
    - ``"window + sinks"``: the first ``sinks`` tokens and the last W - sinks, numbered 0..W-1 within the cache, the same way;
    - ``"recompute"``: the sliding window with re-computation: for each scored position the last W tokens
      encoded afresh at positions 0..W-1, W times the work per token. So only every ``stride``-th position
      is scored (``stride=1``: every one); the windows run ``batch`` at a time.

    Positions t < W see the whole text in all three; the scored ``positions`` are W, W + stride, ... up to T - 2,
    the same for all three. -> dict: window, sinks, stride, positions, and per way (its key above) a dict:
    ``nll`` (nats, the mean over the scored positions and rows), ``perplexity`` (exp of it), ``nll_by_position``
    (the mean over rows at each scored position), ``perplexity_by_row`` (each row's own, n floats: several texts
    of one length streamed side by side, one step for all of them), ``cache_bytes`` (the K and V it holds for all n rows: flat;
    re-computation holds W positions' while it encodes). ``full_cache_bytes``: what a cache of all T positions
    would hold (beyond ``max_seq_len`` the model could not use it anyway)."""
    ids = _ids(model, input_ids)
    n, T = ids.shape
    c = model.config
    window = checks.integer(window, "window", 1, c.max_seq_len, allowed=f"an integer from 1 to the model's "
                                                                        f"max_seq_len={c.max_seq_len}")
    stride = checks.integer(stride, "stride", 1)
    batch = checks.integer(batch, "batch", 1)
    if T < window + 2:
        raise ValueError(f"the stream has {T} tokens, but window={window} needs at least window + 2 = {window + 2}: "
                         f"the three ways differ only once the window is full (position {window} predicting token "
                         f"{window + 1}); give a longer text or a smaller window")
    sinks = checks.cache_window(window, sinks, c.sliding_window)[1]  # 0 <= sinks < window
    model.eval()
    positions = list(range(window, T - 1, stride))
    ways = {name: (nll[:, positions], nbytes) for name, (nll, nbytes) in  # nll: (n, T - 1) -> (n, len(positions))
            (("window only", _streamed_nll(model, ids, window, 0)),
             ("window + sinks", _streamed_nll(model, ids, window, sinks)))}
    ways["recompute"] = (_recomputed_nll(model, ids, window, positions, batch), kv_cache_bytes(c, window, n, model.dtype))
    out = {"window": window, "sinks": sinks, "stride": stride, "positions": positions,
           "full_cache_bytes": kv_cache_bytes(c, T, n, model.dtype)}
    for name, (nll, nbytes) in ways.items():
        out[name] = {"nll": float(nll.mean()), "perplexity": math.exp(float(nll.mean())),
                     "nll_by_position": nll.mean(0).tolist(), "cache_bytes": nbytes,
                     "perplexity_by_row": [math.exp(float(row)) for row in nll.mean(1)]}
    return out


def _next_nll(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """(N, V) logits and (N,) next tokens -> (N,) negative log-likelihoods, float32."""
    return -torch.log_softmax(logits.float(), dim=-1).gather(1, targets[:, None])[:, 0]


def _streamed_nll(model, ids: torch.Tensor, window: int, sinks: int) -> tuple:
    """Feed ids (n, T) through a ``KVCache(window=, sinks=, positions="cache")``: the first W tokens in one pass
    (the ring is not full yet), then one at a time as generation does. -> ((n, T - 1) NLL, the cache's nbytes)."""
    n, T = ids.shape
    cache = KVCache(model.config, n, window, device=model.device, dtype=model.dtype, window=window, sinks=sinks,
                    positions="cache")
    logits = model(ids[:, :window], cache=cache)  # (n, W, vocab)
    nll = [_next_nll(logits.flatten(0, 1), ids[:, 1:window + 1].flatten()).view(n, window)]  # (n, W)
    for t in progress.bar(range(window, T - 1), desc=f"window {window}, sinks {sinks}", unit="token"):
        logits = model(ids[:, t:t + 1], cache=cache, last_only=True, checked=True)[:, -1]  # (n, vocab)
        nll.append(_next_nll(logits, ids[:, t + 1])[:, None])  # (n, 1)
    return torch.cat(nll, dim=1).cpu(), cache.nbytes  # (n, T - 1)


def _recomputed_nll(model, ids: torch.Tensor, window: int, positions: list, batch: int) -> torch.Tensor:
    """For each position t of ``positions``, the last W tokens (t - W + 1 .. t) encoded afresh, no cache:
    -> (n, len(positions)) NLL of token t + 1."""
    n = ids.shape[0]
    windows = ids.unfold(1, window, 1)  # (n, T - W + 1, W): windows[:, s] = ids[:, s .. s + W - 1]
    starts = torch.tensor(positions, device=ids.device) - window + 1  # the window that ends at t starts at t - W + 1
    nll = []
    for part in progress.bar(starts.split(batch), desc=f"recompute {window}", unit="batch"):
        x = windows[:, part].flatten(0, 1)  # (n * len(part), W)
        logits = model(x, last_only=True, checked=True)[:, -1]  # (n * len(part), vocab)
        nll.append(_next_nll(logits, ids[:, part + window].flatten()).view(n, len(part)))
    return torch.cat(nll, dim=1).cpu()  # (n, len(positions))
