"""The autoregressive loop: feed tokens, take the last position's distribution, choose a token, repeat.

With ``use_cache=True`` the prompt goes through the model once (prefill) and every later step feeds only
the newest token, reading earlier keys and values from the cache. With ``use_cache=False`` every step feeds
the whole sequence again and recomputes every K and V. Both give the same tokens.
"""
from __future__ import annotations

import numbers
import time
from dataclasses import dataclass

import torch

from .cache import ConcatKVCache, KVCache
from .model import ForwardRecord
from .trace import Trace, TraceStep

CACHE_KINDS = {"static": KVCache, "concat": ConcatKVCache}


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


def filter_logits(logits: torch.Tensor, temperature: float = 1.0, top_k: int | None = None,
                  top_p: float | None = None) -> torch.Tensor:
    """The sampling distribution's logits: divided by the temperature, then every token outside the top-k
    and outside the smallest set whose probability reaches top_p set to -inf. logits: (B, vocab)."""
    logits = logits.float() / temperature
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]  # (B, 1)
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        sorted_logits, order = torch.sort(logits, dim=-1, descending=True)
        cum = torch.softmax(sorted_logits, dim=-1).cumsum(dim=-1)
        # drop a token when the tokens before it already reach top_p (the first token always stays)
        drop_sorted = (cum - torch.softmax(sorted_logits, dim=-1)) >= top_p
        drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def _ids_from_lists(prompts) -> torch.Tensor:
    """One prompt (a list of token ids) or a batch of them (a list of such lists) as a (B, T) tensor."""
    rows = list(prompts) if prompts and isinstance(prompts[0], (list, tuple)) else [prompts]
    for b, row in enumerate(rows):
        where = f"prompt {b} of the batch" if len(rows) > 1 else "the prompt"
        if not isinstance(row, (list, tuple)):
            raise TypeError(f"a batch of prompts is a list of lists of token ids; {where} is {row!r} "
                            f"({type(row).__name__})")
        if not row:
            raise ValueError(f"{where} is empty: give at least one token (e.g. the <s> token)")
        bad = next((t for t in row if isinstance(t, bool) or not isinstance(t, numbers.Integral)), None)
        if bad is not None:
            raise TypeError(f"token ids are integers; {where} holds {bad!r} ({type(bad).__name__}) "
                            f"(encode text with the tokenizer first)")
    lengths = [len(row) for row in rows]
    if len(set(lengths)) > 1:
        raise ValueError(f"the prompts of one batch must have the same length (lib's attention has no padding "
                         f"mask), got lengths {lengths}; generate them one at a time, or use lib.serving.serve, "
                         f"which batches requests of any length")
    return torch.tensor(rows, dtype=torch.long)


def check_generate_args(model, input_ids, max_new_tokens, temperature, top_k, top_p, eos_id, cache_kind="static"):
    """Validate generate()'s arguments (clear errors) and return input_ids as a (B, T) tensor on the model's device."""
    c = model.config
    if isinstance(input_ids, (list, tuple)):
        input_ids = _ids_from_lists(input_ids).to(model.device)
    if not isinstance(input_ids, torch.Tensor):
        raise TypeError(f"input_ids must be a list of token ids or a (batch, seq_len) tensor, "
                        f"got {type(input_ids).__name__}")
    if input_ids.dim() == 1:
        input_ids = input_ids.unsqueeze(0)
    if input_ids.dim() != 2 or input_ids.shape[1] == 0:
        raise ValueError(f"input_ids must have shape (batch, seq_len) with seq_len >= 1, got {tuple(input_ids.shape)}")
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")
    prompt_len = input_ids.shape[1]
    if prompt_len > c.max_seq_len:
        raise ValueError(f"the prompt has {prompt_len} tokens but the model's context window holds "
                         f"max_seq_len={c.max_seq_len}; shorten the prompt")
    # the last new token is never fed back, so the longest forward pass sees prompt_len + max_new_tokens - 1
    room = c.max_seq_len - prompt_len + 1
    if max_new_tokens > room:
        raise ValueError(f"a prompt of {prompt_len} tokens leaves room for at most {room} new token(s) in the "
                         f"context window (max_seq_len={c.max_seq_len}), but max_new_tokens={max_new_tokens}")
    if not isinstance(temperature, (int, float)) or temperature < 0:
        raise ValueError(f"temperature must be a number >= 0 (0 means greedy), got {temperature!r}")
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(f"top_k must be None or an integer >= 1, got {top_k!r}")
    if top_p is not None and (not isinstance(top_p, (int, float)) or not 0 < top_p <= 1):
        raise ValueError(f"top_p must be None or a number in (0, 1], got {top_p!r}")
    if eos_id is not None and not 0 <= eos_id < c.vocab_size:
        raise ValueError(f"eos_id={eos_id} is not a token id of this model (0..{c.vocab_size - 1})")
    if cache_kind not in CACHE_KINDS:
        raise ValueError(f"cache_kind={cache_kind!r} is not known; allowed: {', '.join(CACHE_KINDS)}")
    return input_ids.to(model.device)


@torch.no_grad()
def generate(model, input_ids, max_new_tokens: int, use_cache: bool = True, temperature: float = 0.0,
             top_k: int | None = None, top_p: float | None = None, eos_id: int | None = None,
             seed: int | None = None, trace: bool = False, *, cache_kind: str = "static",
             pad_id: int | None = None, trace_top_k: int = 10) -> GenerationResult:
    """Generate up to ``max_new_tokens`` tokens after ``input_ids`` ((B, T) tensor, 1-D tensor or list).

    temperature=0 is greedy (argmax); otherwise tokens are sampled from softmax(logits / temperature),
    optionally restricted to the top_k tokens and to the top_p probability mass, with a private random
    generator seeded by ``seed`` (same seed, same tokens). A sequence stops at ``eos_id``; once every
    sequence has stopped the loop ends, and stopped sequences are padded with ``pad_id`` (default eos_id).
    ``trace=True`` records a ``Trace`` of every step.
    """
    input_ids = check_generate_args(model, input_ids, max_new_tokens, temperature, top_k, top_p, eos_id, cache_kind)
    B, prompt_len = input_ids.shape
    device = model.device
    pad = eos_id if pad_id is None else pad_id
    gen = None
    if seed is not None:
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
    c = model.config
    cache = None
    if use_cache:
        # never more room than the longest forward pass needs
        cache = CACHE_KINDS[cache_kind](c, B, prompt_len + max_new_tokens - 1, device=device, dtype=model.dtype)
    tr = None
    if trace:
        tr = Trace(prompt_len=prompt_len, use_cache=use_cache, cache_kind=cache_kind if use_cache else None,
                   n_layers=c.n_layers, n_heads=c.n_heads, n_kv_heads=c.n_kv_heads,
                   sampling=dict(temperature=temperature, top_k=top_k, top_p=top_p, seed=seed),
                   prompt_ids=input_ids.cpu())
    seq = input_ids
    finished = torch.zeros(B, dtype=torch.bool, device=device)
    was_training = model.training
    model.eval()
    try:
        for step in range(max_new_tokens):
            t0 = time.perf_counter()
            if use_cache:
                fed = seq if step == 0 else seq[:, -1:]  # prefill the prompt, then only the newest token
            else:
                fed = seq  # no cache: the whole sequence again
            pos0 = cache.seq_len if use_cache else 0
            rec = ForwardRecord() if trace else None
            logits = model(fed, cache=cache, record=rec, last_only=True)[:, -1, :].float()  # (B, vocab)
            if temperature == 0:
                next_ids = torch.argmax(logits, dim=-1)
                probs = sample_probs = torch.softmax(logits, dim=-1) if trace else None  # only the trace needs them
            else:
                sample_probs = torch.softmax(filter_logits(logits, temperature, top_k, top_p), dim=-1)
                next_ids = torch.multinomial(sample_probs, 1, generator=gen).squeeze(1)
                probs = torch.softmax(logits, dim=-1) if trace else None
            was_finished = finished.clone()
            if eos_id is not None:
                next_ids = torch.where(finished, torch.full_like(next_ids, pad), next_ids)
                finished = finished | (next_ids == eos_id)
            seq = torch.cat([seq, next_ids[:, None]], dim=1)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            seconds = time.perf_counter() - t0
            if trace:
                k = min(trace_top_k, c.vocab_size)
                top = torch.topk(probs, k, dim=-1)
                stop = torch.topk(sample_probs, k, dim=-1)
                tr.steps.append(TraceStep(
                    step=step,
                    phase=("prefill" if step == 0 else "decode") if use_cache else "recompute",
                    input_ids=fed.cpu(),
                    positions=list(range(pos0, pos0 + fed.shape[1])),
                    kv_computed=[rec.kv_computed[l] for l in range(c.n_layers)],
                    kv_read=[rec.kv_read[l] for l in range(c.n_layers)],
                    attention=torch.stack([rec.attention[l] for l in range(c.n_layers)]).float().cpu(),
                    logits=logits.cpu(),
                    top_ids=top.indices.cpu(), top_probs=top.values.cpu(),
                    sample_top_ids=stop.indices.cpu(), sample_top_probs=stop.values.cpu(),
                    chosen=next_ids.cpu(),
                    chosen_prob=sample_probs.gather(1, next_ids[:, None]).squeeze(1).cpu(),
                    finished=was_finished.cpu(),
                    cache_bytes=cache.nbytes if use_cache else 0,
                    cache_len=cache.seq_len if use_cache else 0,
                    bytes_copied=getattr(cache, "bytes_copied", 0) if use_cache else 0,
                    seconds=seconds,
                ))
            if eos_id is not None and bool(finished.all()):
                break
    finally:
        model.train(was_training)
    return GenerationResult(sequences=seq, trace=tr, cache=cache, prompt_len=prompt_len)
