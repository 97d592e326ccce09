"""Real serving on a model (``serve``): every request there at time 0, and an ``Engine`` (``engine.py``) stepped
until they are all done: one shared ``PagedKVPool``, and every step one ``lib.paged.forward_paged`` pass over the
scheduler's batch (joining requests feed their prompt, running ones one token).

    while scheduler.waiting or scheduler.running:    # engine.step(), again and again
        batch = scheduler.schedule()                 # "continuous": admission at every step; "static": when the
                                                     #   batch is done; preemption when the pool cannot grow
        new_tokens = greedy(forward_paged(batch))    # each row's next token
        scheduler.postprocess(batch, new_tokens)     # appended; at eos or max_new_tokens it leaves, blocks freed

``"static"`` batching admits a batch and runs it until its longest request is done (rows that finished early
sit idle: padding); ``"continuous"`` (iteration-level, Orca / vLLM) lets finished requests leave and waiting
ones join at every step. Admission and preemption (by recomputation or by swapping to CPU memory) are
``scheduler.Scheduler``'s, the same as the memory simulation's. Both report deterministic counts (steps,
tokens, idle slots, time-to-first-token in passes) and measured wall-clock figures (tokens/s, TTFT in seconds).

*Chunked prefill* (``max_num_batched_tokens=``, vLLM's name for the token budget of a step): a pass feeds at most
that many tokens; every running decode gets its one token first, then the prefills take what is left of the
budget, in admission order, a chunk each; a prompt longer than that is fed over several passes, and its first
token comes with its last chunk. The decodes beside a long prompt keep their pace (``ServeResult.step_seconds``
prices every pass by the roofline) and every request gets the same tokens.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

import torch

from .. import checks, progress
from .engine import Engine, ServeResult
from .scheduler import REQUEST_BYTES, listed


@dataclass
class ServeRequest:
    """A real request: prompt token ids and how many tokens it may generate (it also stops at eos)."""

    rid: int
    prompt: list
    max_new_tokens: int


def demo_requests(tokenizer, n: int = 32, seed: int = 0, max_new_tokens: int = 32) -> list[ServeRequest]:
    """``n`` prompts for the demo models: <s> followed by the first 1 .. half of the characters of a random
    line of the training corpus (seeded), so the model completes the line and stops at <eos>: outputs of
    3 to about 30 tokens, depending on the line."""
    from ..corpus import read_corpus

    n, max_new_tokens = checks.integer(n, "n", 1), checks.integer(max_new_tokens, "max_new_tokens", 1)
    checks.fits_in_memory(REQUEST_BYTES * n, "cpu", f"n={n} requests")
    lines = sorted(set(read_corpus()))
    rng = random.Random(seed)
    out = []
    for rid in range(n):
        line = rng.choice(lines)
        cut = rng.randint(1, max(1, len(line) // 2))
        out.append(ServeRequest(rid, tokenizer.encode("<s>" + line[:cut]), max_new_tokens))
    return out


def text_requests(tokenizer, n: int = 24, max_prompt: int = 128, max_new_tokens: int = 64,
                  langs=("en", "zh")) -> list[ServeRequest]:
    """``n`` real requests for the real model (``lib.load_demo("lm")``), from held-out text it never trained on
    (``lib.corpus.heldout_pairs``): the prompt is <s>, a passage (a speech or a sonnet, a Chinese poem; cut to
    ``max_prompt`` tokens in all) and a blank line, so the model goes on with the next passage; the request may
    generate as many tokens as the passage that really follows has characters, at most ``max_new_tokens``. The
    model was trained on running text and never writes <eos>: every request stops at its length, so the steps
    and tokens of a run follow from the lengths alone."""
    from ..corpus import encode_text, heldout_pairs

    n = checks.integer(n, "n", 1)
    max_prompt = checks.integer(max_prompt, "max_prompt", 3, allowed="an integer >= 3 (<s>, a character and the "
                                                                      "blank line)")
    max_new_tokens = checks.integer(max_new_tokens, "max_new_tokens", 1)
    checks.fits_in_memory(REQUEST_BYTES * n, "cpu", f"n={n} requests")
    blank = encode_text(tokenizer, "\n\n")
    out = []
    for rid, (_, prompt, answer) in enumerate(heldout_pairs(n, langs)):
        ids = [tokenizer.bos_id] + encode_text(tokenizer, prompt)[:max_prompt - 3] + blank
        out.append(ServeRequest(rid, ids, max(1, min(max_new_tokens, len(answer)))))
    return out


def _checked_request(r: ServeRequest, c) -> ServeRequest:
    """A copy of ``r`` with its prompt as a list of ints and both fields checked against the model's config."""
    prompt = checks.token_ids(r.prompt, f"request {r.rid}'s prompt", c.vocab_size)
    n = checks.integer(r.max_new_tokens, f"request {r.rid}'s max_new_tokens", 1)
    if len(prompt) + n - 1 > c.max_seq_len:
        raise ValueError(f"request {r.rid}: a prompt of {len(prompt)} token(s) with max_new_tokens={n} does not fit "
                         f"the context window (max_seq_len={c.max_seq_len})")
    return ServeRequest(r.rid, prompt, n)


@torch.no_grad()
def serve(model, requests, policy: str = "continuous", max_batch: int = 8, eos_id: int | None = None,
          block_size: int = 16, n_blocks: int | None = None, prefix_cache: bool = False,
          preemption: str = "recompute", max_num_batched_tokens: int | None = None) -> ServeResult:
    """Serve ``requests`` (all arrived at time 0, first come first served) with greedy decoding on one
    shared ``PagedKVPool`` of ``n_blocks`` (default: enough for ``max_batch`` full-length sequences): an
    ``Engine`` stepped until every request is done.

    Each iteration is one ``forward_paged`` pass over the batch: requests that join feed their whole prompt
    (and get their first token), running ones feed their last token. Who joins: ``"continuous"``: whenever a
    batch slot is free and the pool has the blocks; ``"static"``: a new batch only when the previous one has
    completely finished. A request finishes at ``eos_id`` or after ``max_new_tokens`` and leaves at once
    (under static batching its slot stays empty until the batch is done). If the pool runs out of blocks, the
    most recently admitted request is preempted: its blocks are freed and it waits at the head of the queue.
    ``preemption="recompute"`` (what vLLM does today) feeds it its prompt and the tokens it had made again when
    it is admitted; ``"swap"`` copies its keys and values to CPU memory first and back into new blocks when it
    is admitted, and it continues with its last token. Either way every request gets the tokens it would get
    with a pool large enough never to preempt (greedy decoding).

    ``max_num_batched_tokens`` (None: no limit) is the token budget of a pass (chunked prefill, as vLLM's
    scheduler has it): the running decodes feed their token first, then the prefills feed chunks of what is left,
    in admission order; a request whose prefill is not all fed makes no token in that pass, and one admitted when
    the budget is spent waits in its slot for the next pass. It must be at least ``max_batch`` (every decode gets
    its token) and works with ``preemption="recompute"`` (as vLLM's V1 engine, which recomputes only)."""
    requests = [_checked_request(r, model.config) for r in listed(requests, "requests", ServeRequest,
                                                                     "ServeRequest objects (see demo_requests)")]
    engine = Engine(model, policy=policy, max_batch=max_batch, eos_id=eos_id, block_size=block_size,
                    n_blocks=n_blocks, prefix_cache=prefix_cache, preemption=preemption,
                    max_num_batched_tokens=max_num_batched_tokens)
    for r in requests:  # all arrive before the first step
        engine.add_request(r.prompt, r.max_new_tokens, rid=r.rid)
    with progress.bar(desc=f"serve ({policy})", unit="pass") as passes:  # shown in a long cell
        while engine.has_unfinished():
            engine.step()  # admission, one forward pass, tokens appended, finished requests freed
            passes.update()
    return engine.result()
