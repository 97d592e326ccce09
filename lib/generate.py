"""The autoregressive loop: feed tokens, take the last position's distribution, choose a token, repeat.

    cache = make_cache(...)                       # or the one you pass: KVCache, ConcatKVCache, PagedKVCache
    logits = model(prompt, cache)                 # prefill: the whole prompt in one pass
    loop:
        next = choose(logits)                     # lib.sampling: greedy, temperature, top-k, top-p
        stop at <eos>; record the step (Trace)
        logits = model(next, cache)               # decode: only the newest token; older K/V come from the cache

With ``use_cache=False`` every step feeds the whole sequence again and recomputes every K and V. Both give
the same tokens. This is the only generation loop of the lab: the paged cache, the worked example and the
widgets all call ``generate``.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from . import checks
from .cache import CACHE_KINDS
from .device import synchronize
from .model import ForwardRecord, eval_mode
from .sampling import choose, make_generator, sampling_probs
from .trace import Trace

TRACE_LEVELS = (False, True, "full")


@dataclass
class GenerationResult:
    sequences: torch.Tensor  # (B, prompt_len + generated): prompt followed by the new tokens
    trace: Trace | None
    cache: object | None  # the cache after the run (None without one), to inspect; drop it when done
    prompt_len: int

    @property
    def new_tokens(self) -> torch.Tensor:
        """(B, generated): the tokens after the prompt."""
        return self.sequences[:, self.prompt_len:]


def make_cache(model, kind: str, batch_size: int, max_len: int, copies: int = 1):
    """A new, empty cache of ``kind`` ("static", "concat" or "paged") on the model's device and dtype (a paged
    one with a pool large enough for ``copies`` forks of every sequence)."""
    more = {"samples": copies} if checks.choice(kind, "cache_kind", tuple(CACHE_KINDS)) == "paged" else {}
    return CACHE_KINDS[kind](model.config, batch_size, max_len, device=model.device, dtype=model.dtype, **more)


@torch.no_grad()
def generate(model, input_ids, max_new_tokens: int, use_cache: bool = True, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None, eos_id: int | None = None,
             seed: int | None = None, trace=False, cache=None, *, cache_kind: str = "static",
             num_samples: int = 1, pad_id: int | None = None, trace_top_k: int = 10) -> GenerationResult:
    """Generate up to ``max_new_tokens`` tokens after ``input_ids`` ((B, T) tensor, 1-D tensor or list).

    temperature=0 is greedy; otherwise tokens are sampled from softmax(logits / temperature), restricted to
    the top_k tokens and the top_p probability mass, with a generator seeded by ``seed`` (same seed, same
    tokens). A sequence stops at ``eos_id``; stopped sequences are padded with ``pad_id`` (default eos_id)
    until every one has stopped.

    ``cache``: any cache of the protocol (KVCache, ConcatKVCache, PagedKVCache), used as it is (the prompt
    continues after what it holds); None makes a ``cache_kind`` one just large enough. A call that fails
    leaves the cache as it was. ``num_samples=n``: n continuations of every prompt (parallel sampling): the
    prompt is prefilled once and the cache forked (a paged one shares the blocks); B * n rows come back.
    ``trace=True`` records a ``Trace``; ``trace="full"`` also every layer's tensors and the cache after each
    step (``TraceStep.tensors``), for the worked example.
    """
    input_ids = checks.generate_args(model, input_ids, max_new_tokens, temperature, top_k, top_p, eos_id)
    num_samples, pad = checks.loop_args(model, input_ids, max_new_tokens, use_cache, cache, trace, TRACE_LEVELS,
                                        num_samples, pad_id, eos_id, trace_top_k)
    B, prompt_len = input_ids.shape
    if use_cache and cache is None:  # never more room than the longest pass needs (the last token is not fed)
        cache = make_cache(model, cache_kind, B, prompt_len + max_new_tokens - 1, num_samples)
    tr = Trace.start(model.config, input_ids.repeat_interleave(num_samples, dim=0), cache,
                     dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed)) if trace else None
    gen, seq, finished, forked, passed = make_generator(seed, model.device), input_ids, None, None, cache
    start = cache.seq_len if use_cache else 0  # what a cache passed in already held
    with eval_mode(model):
        try:
            for step in range(max_new_tokens):
                t0 = time.perf_counter()
                fed = seq if step == 0 or not use_cache else seq[:, -1:]  # prefill, then only the newest token
                pos0 = cache.seq_len if use_cache else 0
                rec = ForwardRecord(capture=trace == "full") if trace else None
                logits = model(fed, cache=cache, record=rec, last_only=True)[:, -1, :].float()  # (B, vocab)
                checks.finite_logits(logits, model, f"step {step} ({'prefill' if step == 0 and use_cache else 'decode'})")
                if step == 0 and num_samples > 1:  # parallel sampling: n rows per prompt from here on
                    seq, fed, logits = (t.repeat_interleave(num_samples, dim=0) for t in (seq, fed, logits))
                    if use_cache:
                        forked = cache = passed.fork(num_samples)  # n copies of every sequence
                        if start == 0:  # they hold all it held: it lets go now (paged: its blocks, for the copies' growth)
                            passed.release()
                    if rec is not None:
                        rec.attention = {l: a.repeat_interleave(num_samples, dim=0) for l, a in rec.attention.items()}
                finished = torch.zeros(seq.shape[0], dtype=torch.bool, device=seq.device) if finished is None else finished
                next_ids = choose(logits, temperature, top_k, top_p, gen)  # (B,)
                if eos_id is not None:  # a sequence that has stopped only gets padding
                    next_ids = torch.where(finished, torch.full_like(next_ids, pad), next_ids)
                seq = torch.cat([seq, next_ids[:, None]], dim=1)
                if trace:
                    synchronize(seq.device)  # so that the step's time is its work, not its launch
                    tr.add(step, fed, pos0, rec, logits, sampling_probs(logits, temperature, top_k, top_p), next_ids,
                           finished, cache, trace_top_k, time.perf_counter() - t0)
                if eos_id is not None:
                    finished = finished | (next_ids == eos_id)
                    if bool(finished.all()):
                        break
        except BaseException as failure:  # a failed call (a full pool, Ctrl-C) gives back what it took
            if forked is not None:
                forked.release()
            if use_cache:
                try:
                    passed.crop(start)  # the cache holds again exactly what it held before the call
                except ValueError as undo:  # a sliding-window ring that wrapped cannot go back: empty it, and say so
                    passed.crop(0)
                    getattr(failure, "add_note", lambda _: None)(f"the cache was emptied: {undo}")
            raise
    if forked is not None and start:  # a cache that held positions before the call lets go of them only now
        passed.release()
    return GenerationResult(sequences=seq, trace=tr, cache=cache, prompt_len=prompt_len)
