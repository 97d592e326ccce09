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
from .cache import ConcatKVCache, KVCache
from .device import synchronize
from .model import ForwardRecord
from .paged import PagedKVCache, PagedKVPool
from .sampling import check_sampling, choose, make_generator, sampling_probs
from .trace import Trace, TraceStep

CACHE_KINDS = {"static": KVCache, "concat": ConcatKVCache, "paged": PagedKVCache}
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


# ------------------------------------------------------------------------------------------- the arguments

def check_generate_args(model, input_ids, max_new_tokens, temperature=0.0, top_k=None, top_p=None, eos_id=None):
    """Validate generate()'s arguments (clear errors) and return input_ids as a (B, T) tensor on the model's device."""
    c = model.config
    if isinstance(input_ids, (list, tuple)):
        input_ids = checks.prompt_tensor(input_ids).to(model.device)
    if isinstance(input_ids, torch.Tensor) and input_ids.dim() == 1:
        input_ids = input_ids.unsqueeze(0)
    checks.token_tensor(input_ids, c.vocab_size, model.device)
    max_new_tokens = checks.integer(max_new_tokens, "max_new_tokens", 1)
    prompt_len = input_ids.shape[1]
    if prompt_len > c.max_seq_len:
        raise ValueError(f"the prompt has {prompt_len} tokens but the model's context window holds "
                         f"max_seq_len={c.max_seq_len}; shorten the prompt")
    # the last new token is never fed back, so the longest forward pass sees prompt_len + max_new_tokens - 1
    room = c.max_seq_len - prompt_len + 1
    if max_new_tokens > room:
        raise ValueError(f"a prompt of {prompt_len} tokens leaves room for at most {room} new token(s) in the "
                         f"context window (max_seq_len={c.max_seq_len}), but max_new_tokens={max_new_tokens}")
    check_sampling(temperature, top_k, top_p)
    if eos_id is not None:
        checks.token_id(eos_id, "eos_id", c.vocab_size)
    return input_ids


def make_cache(model, kind: str, batch_size: int, max_len: int):
    """A new, empty cache of ``kind`` ("static", "concat" or "paged") on the model's device and dtype."""
    if kind not in CACHE_KINDS:
        raise ValueError(f"cache_kind={kind!r} is not known; allowed: {', '.join(CACHE_KINDS)}")
    return CACHE_KINDS[kind](model.config, batch_size, max_len, device=model.device, dtype=model.dtype)


# ------------------------------------------------------------------------------------------------ the loop

@torch.no_grad()
def generate(model, input_ids, max_new_tokens: int, use_cache: bool = True, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None, eos_id: int | None = None,
             seed: int | None = None, trace=False, cache=None, *, cache_kind: str = "static",
             num_samples: int = 1, pad_id: int | None = None, trace_top_k: int = 10) -> GenerationResult:
    """Generate up to ``max_new_tokens`` tokens after ``input_ids`` ((B, T) tensor, 1-D tensor or list).

    temperature=0 is greedy (argmax); otherwise tokens are sampled from softmax(logits / temperature),
    optionally restricted to the top_k tokens and to the top_p probability mass, with a private random
    generator seeded by ``seed`` (same seed, same tokens). A sequence stops at ``eos_id``; once every
    sequence has stopped the loop ends, and stopped sequences are padded with ``pad_id`` (default eos_id).

    ``cache``: any cache of the protocol (``KVCache``, ``ConcatKVCache``, ``lib.paged.PagedKVCache``), used as
    it is (the prompt continues after whatever it holds); None makes one of ``cache_kind`` just large enough.
    ``num_samples``: n continuations of every prompt (parallel sampling): the prompt is prefilled once and
    its cache forked (a paged cache shares the prompt's blocks); ``sequences`` then has B * n rows and
    ``result.cache`` holds the forks (the cache passed in is released, or left as it was if it cannot be).
    A call that fails leaves the cache passed in as it was (a paged one gives its new blocks back).
    ``trace=True`` records a ``Trace`` of every step; ``trace="full"`` also keeps every intermediate tensor
    of every layer and a copy of the cache after each step (``TraceStep.tensors``), for the worked example.
    """
    input_ids = check_generate_args(model, input_ids, max_new_tokens, temperature, top_k, top_p, eos_id)
    if trace not in TRACE_LEVELS:
        raise ValueError(f"trace must be False, True or 'full', got {trace!r}")
    num_samples = checks.integer(num_samples, "num_samples", 1)
    if pad_id is not None:
        checks.token_id(pad_id, "pad_id", model.config.vocab_size)
    if cache is not None and not use_cache:
        raise ValueError("cache= was given with use_cache=False; drop one of them")
    B, prompt_len = input_ids.shape
    if use_cache and cache is None:
        # never more room than the longest forward pass needs: the last new token is never fed back
        cache = make_cache(model, cache_kind, B, prompt_len + max_new_tokens - 1)
        if cache_kind == "paged" and num_samples > 1:  # a private pool with room for every sample
            bs = cache.block_size
            pool = PagedKVPool.for_model(model, B * num_samples * -(-cache.max_len // bs), bs)
            cache = PagedKVCache(model.config, B, cache.max_len, pool=pool)
    gen = make_generator(seed, model.device)
    pad = eos_id if pad_id is None else pad_id
    tr = None
    if trace:
        kind = {cls: name for name, cls in CACHE_KINDS.items()}.get(type(cache), type(cache).__name__)
        tr = Trace(prompt_len=prompt_len, use_cache=use_cache, cache_kind=kind if use_cache else None,
                   n_layers=model.config.n_layers, n_heads=model.config.n_heads, n_kv_heads=model.config.n_kv_heads,
                   sampling=dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed),
                   prompt_ids=input_ids.repeat_interleave(num_samples, dim=0).cpu())
    seq, finished, forked = input_ids, None, None
    start = cache.seq_len if use_cache else 0  # what a cache passed in already held
    was_training = model.training
    model.eval()
    try:
        for step in range(max_new_tokens):
            t0 = time.perf_counter()
            fed = seq if step == 0 or not use_cache else seq[:, -1:]  # prefill, then only the newest token
            pos0 = cache.seq_len if use_cache else 0
            rec = ForwardRecord(capture=trace == "full") if trace else None
            logits = model(fed, cache=cache, record=rec, last_only=True)[:, -1, :].float()  # (B, vocab)
            if step == 0 and num_samples > 1:  # parallel sampling: n rows per prompt from here on
                forked = cache.fork(num_samples) if use_cache else None
                if use_cache and hasattr(cache, "release"):
                    cache.release()  # the forks hold the prompt's blocks now
                cache = forked if use_cache else cache
                seq, fed, logits = (t.repeat_interleave(num_samples, dim=0) for t in (seq, fed, logits))
                if rec is not None:
                    rec.attention = {l: a.repeat_interleave(num_samples, dim=0) for l, a in rec.attention.items()}
            if finished is None:
                finished = torch.zeros(seq.shape[0], dtype=torch.bool, device=seq.device)
            next_ids = choose(logits, temperature, top_k, top_p, gen)  # (B,)
            was_finished = finished
            if eos_id is not None:
                next_ids = torch.where(finished, torch.full_like(next_ids, pad), next_ids)
                finished = finished | (next_ids == eos_id)
            seq = torch.cat([seq, next_ids[:, None]], dim=1)
            if trace:
                synchronize(seq.device)  # so that the step's time is its work, not its launch
                tr.steps.append(_trace_step(step, use_cache, fed, pos0, rec, logits, next_ids, was_finished, cache,
                                            sampling_probs(logits, temperature, top_k, top_p), trace_top_k,
                                            time.perf_counter() - t0))
            if eos_id is not None and bool(finished.all()):
                break
    except BaseException:  # a failed call (a full pool, Ctrl-C) gives back what it took
        if forked is not None and hasattr(forked, "release"):
            forked.release()
        elif use_cache and forked is None:
            cache.crop(start)  # the cache holds again exactly what it held before the call
        raise
    finally:
        model.train(was_training)
    return GenerationResult(sequences=seq, trace=tr, cache=cache, prompt_len=prompt_len)


def _trace_step(step, use_cache, fed, pos0, rec, logits, chosen, finished, cache, sample_probs, top_k,
                seconds) -> TraceStep:
    """One TraceStep from what the pass recorded (counts from the attention layers, real cache sizes)."""
    n_layers = len(rec.kv_computed)
    probs = torch.softmax(logits, dim=-1)
    k = min(top_k, logits.shape[-1])
    top, stop = torch.topk(probs, k, dim=-1), torch.topk(sample_probs, k, dim=-1)
    tensors = None
    if rec.capture:  # everything the layers computed, and the cache as it stands after the step
        tensors = {"embedding": rec.tensors["embedding"].cpu(),
                   "layers": [{name: t.cpu() for name, t in rec.tensors[l].items()} for l in range(n_layers)]}
        if use_cache:
            tensors["cache_k"] = [cache.keys(l).cpu().clone() for l in range(n_layers)]
            tensors["cache_v"] = [cache.values(l).cpu().clone() for l in range(n_layers)]
    return TraceStep(
        step=step, phase=("prefill" if step == 0 else "decode") if use_cache else "recompute",
        input_ids=fed.cpu(), positions=list(range(pos0, pos0 + fed.shape[1])),
        kv_computed=[rec.kv_computed[l] for l in range(n_layers)],
        kv_read=[rec.kv_read[l] for l in range(n_layers)],
        attention=torch.stack([rec.attention[l] for l in range(n_layers)]).float().cpu(),
        logits=logits.cpu(), top_ids=top.indices.cpu(), top_probs=top.values.cpu(),
        sample_top_ids=stop.indices.cpu(), sample_top_probs=stop.values.cpu(), chosen=chosen.cpu(),
        chosen_prob=sample_probs.gather(1, chosen[:, None]).squeeze(1).cpu(), finished=finished.cpu(),
        cache_bytes=cache.nbytes if use_cache else 0, cache_len=cache.seq_len if use_cache else 0,
        bytes_copied=getattr(cache, "bytes_copied", 0) if use_cache else 0, seconds=seconds, tensors=tensors)
