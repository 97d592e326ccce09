"""Real serving on a model (``serve``): one shared ``PagedKVPool``, and every iteration one
``lib.paged.forward_paged`` pass over the batch (joining requests feed their prompt, running ones one token).

    every pass:
        joined = scheduler.admit(running)      # "continuous": at every pass; "static": when the batch is done
        logits = forward_paged(running + joined)      # pool out of blocks -> scheduler.preempt, try again
        each row gets its greedy next token; a request at eos or max_new_tokens leaves, its blocks freed

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
import time
from dataclasses import dataclass, field

import torch

from .. import checks, costs
from ..blocks import BlockTable
from ..device import synchronize
from ..model import eval_mode
from ..paged import PagedKVPool, PoolExhaustedError, forward_paged
from ..sampling import choose
from ..text import sig
from .memory import pass_seconds
from .scheduler import PREEMPTIONS, REQUEST_BYTES, Scheduler, SchedulerCounts, listed


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


@dataclass
class RequestRecord:
    rid: int
    prompt_len: int
    tokens: list = field(default_factory=list)  # generated token ids (eos included when it came)
    admitted_step: int = -1  # the iteration of its (first) prefill
    first_token_step: int = -1
    finish_step: int = -1
    first_token_seconds: float = float("nan")  # since serve() started; every request arrived at time 0
    finish_seconds: float = float("nan")
    preemptions: int = 0


@dataclass
class ServeResult(SchedulerCounts):
    """What ``serve`` did: the scheduler's counts and the passes'. Counts are deterministic; ``seconds`` and the
    per-request times are measured."""

    policy: str
    max_batch: int
    records: list
    steps: int = 0  # iterations = forward passes
    batch_rows: list = field(default_factory=list)  # sequences in each forward pass (each gets one new token, but
    #                                                 a chunk of a prefill that is not its last)
    fed_tokens: list = field(default_factory=list)  # tokens fed in each pass (prompts of joining requests + 1 per
    #                                                 running one)
    idle_slots: list = field(default_factory=list)  # per pass: batch slots held by finished requests (static) or
    #                                                 left empty while requests waited (continuous)
    blocks_used: list = field(default_factory=list)  # KV blocks in use after each pass
    prefix_hit_blocks: int = 0  # blocks taken from the prefix cache instead of being computed
    swap_bytes: int = 0  # swap: bytes of K/V copied, both ways
    seconds: float = 0.0
    max_num_batched_tokens: int | None = None  # the token budget of a pass (chunked prefill); None: no limit
    passes: list = field(default_factory=list)  # per pass: {(n_new, context): sequences} it fed

    @property
    def tokens(self) -> int:
        return sum(len(r.tokens) for r in self.records)

    @property
    def tokens_per_second(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    def mean_ttft_steps(self) -> float:
        """Forward passes until a request's first token, counting the one that made it (mean over requests;
        NaN for a run of no requests, and so are the other means)."""
        return _mean([r.first_token_step + 1 for r in self.records])

    def mean_ttft_seconds(self) -> float:
        return _mean([r.first_token_seconds for r in self.records])

    def summary(self) -> dict:
        """The deterministic counts (same on every run and machine with the same model and requests)."""
        return {"policy": self.policy, "requests": len(self.records), "tokens": self.tokens,
                "forward passes": self.steps, "mean batch": round(sum(self.batch_rows) / max(1, self.steps), 2),
                "idle slot-steps": sum(self.idle_slots), "mean TTFT (passes)": round(self.mean_ttft_steps(), 2),
                "prefill tokens": self.prefill_tokens, "max blocks": max(self.blocks_used, default=0),
                "preemptions": self.preemptions}

    def preemption_costs(self) -> dict:
        """What preemption cost in this run, counted (deterministic)."""
        return {"preemption": self.preemption, "preemptions": self.preemptions, "forward passes": self.steps,
                "prefill tokens": self.prefill_tokens, "of them recomputed": self.recomputed_tokens,
                "blocks to CPU": self.swapped_out_blocks, "blocks from CPU": self.swapped_in_blocks,
                "bytes moved": self.swap_bytes, "most blocks on CPU": self.peak_cpu_blocks}

    def step_seconds(self, model, machine=None, dtype=torch.float16) -> list[float]:
        """Each pass's time if its lengths were ``model``'s (a config or a model) on ``machine`` (default the H100
        SXM), priced by the roofline (``lib.serving.memory.pass_seconds``, the same as ``SimResult``'s): a lower
        bound, every kernel at the roof."""
        return pass_seconds(self.passes, model, machine, dtype)

    def chunking_row(self, model, machine=None, dtype=torch.float16, rid=None) -> dict:
        """Figures for a table of chunked prefill, each pass priced for ``model`` on ``machine`` by the roofline
        (``step_seconds``): the token budget, the passes, the longest pass that carried a decode (what a running
        request waits for its next token), the whole run, and (``rid`` given) when request ``rid`` got its first
        token ("its first token": the pass that made it, and the time until then)."""
        secs = self.step_seconds(model, machine, dtype)
        decoding = [x for x, fed in zip(secs, self.passes) if any(n_new == 1 for n_new, _ in fed)]
        row = {"token budget": self.max_num_batched_tokens or "-", "forward passes": self.steps,
               "longest pass with decodes (ms)": sig(1e3 * max(decoding, default=float("nan"))),
               "whole run (ms)": sig(1e3 * sum(secs))}
        if rid is not None:
            rec = next((r for r in self.records if r.rid == rid), None)
            if rec is None:
                raise ValueError(f"no request has rid={rid!r}; the rids are {[r.rid for r in self.records]}")
            row |= {"its first token (pass)": rec.first_token_step + 1,
                    "its first token (ms)": sig(1e3 * sum(secs[:rec.first_token_step + 1]))}
        return row

    def timings(self) -> dict:
        """Measured on this machine (vary run to run)."""
        return {"policy": self.policy, "seconds": round(self.seconds, 3),
                "tokens/s": round(self.tokens_per_second, 1),
                "ms per pass": round(1e3 * self.seconds / self.steps, 2) if self.steps else float("nan"),
                "mean TTFT (ms)": round(1e3 * self.mean_ttft_seconds(), 1),
                "mean latency (ms)": round(1e3 * _mean([r.finish_seconds for r in self.records]), 1)}

    def _record_pass(self, batch: list, idle: int, blocks_used: int, contexts: list):
        self.batch_rows.append(len(batch))
        self.fed_tokens.append(sum(len(s.feed) for s in batch))
        self.idle_slots.append(idle)
        self.blocks_used.append(blocks_used)
        fed = {}
        for s, context in zip(batch, contexts):  # context: what its table held after the pass
            key = (len(s.feed), context)
            fed[key] = fed.get(key, 0) + 1
        self.passes.append(fed)
        self.steps += 1


def _mean(xs: list) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def _checked_request(r: ServeRequest, c) -> ServeRequest:
    """A copy of ``r`` with its prompt as a list of ints and both fields checked against the model's config."""
    prompt = checks.token_ids(r.prompt, f"request {r.rid}'s prompt", c.vocab_size)
    n = checks.integer(r.max_new_tokens, f"request {r.rid}'s max_new_tokens", 1)
    if len(prompt) + n - 1 > c.max_seq_len:
        raise ValueError(f"request {r.rid}: a prompt of {len(prompt)} token(s) with max_new_tokens={n} does not fit "
                         f"the context window (max_seq_len={c.max_seq_len})")
    return ServeRequest(r.rid, prompt, n)


@dataclass(eq=False)
class _Live:
    req: ServeRequest
    rec: RequestRecord
    table: BlockTable
    feed: list = field(default_factory=list)  # the tokens this request feeds in the next forward pass
    swapped: int = 0  # preempted by swapping: its blocks waiting in CPU memory (the scheduler's; the pool has them)
    prefilling: bool = False  # its prefill (or recomputation) is not all fed yet
    prefill_fed: int = 0  # tokens of that prefill fed so far (chunked prefill feeds it over several passes)

    @property
    def ids(self) -> list:
        return self.req.prompt + self.rec.tokens  # what its cache holds once everything it has is fed

    @property
    def made(self) -> int:
        return len(self.rec.tokens)

    def add_token(self, token: int, step: int, now: float, eos_id: int | None) -> bool:
        """Record the token this pass made for it; True when that finishes it (eos, or max_new_tokens made)."""
        self.rec.tokens.append(token)
        if self.rec.first_token_step < 0:
            self.rec.admitted_step = self.rec.first_token_step = step
            self.rec.first_token_seconds = now
        done = len(self.rec.tokens) >= self.req.max_new_tokens or (eos_id is not None and token == eos_id)
        if done:
            self.rec.finish_step, self.rec.finish_seconds = step, now
        return done


class _PoolMemory:
    """The scheduler's memory in real serving: one ``PagedKVPool``. Admission checks that the blocks the next
    pass takes fit (the joining request's prompt, or its swapped positions and one more, next to what the
    batch feeds); the pass itself takes them. With ``prefix_cache`` a joining prompt's cached blocks are reused."""

    def __init__(self, pool: PagedKVPool, prefix_cache: bool):
        self.pool, self.prefix_cache = pool, prefix_cache

    def take(self, s: _Live, batch: list, spare: int) -> bool:
        ids = s.req.prompt + s.rec.tokens  # after a preemption: prompt + what it had made
        if self.prefix_cache and not s.swapped:
            self.pool.match_prefix(s.table, ids)
        s.feed = [ids[-1]] if s.swapped else ids[s.table.n_tokens:]  # swapped: it continues with its last token
        tables, grow = [x.table for x in batch] + [s.table], [len(x.feed) for x in batch]
        grow.append(len(ids) - s.table.n_tokens)  # after the pass it holds len(ids) positions (a swapped table is
        #                                           empty until swap_in)
        if self.pool.allocator.blocks_needed(tables, grow) + spare <= self.pool.allocator.n_free:
            return True
        self.pool.free(s.table)  # give back the prefix blocks it had taken; it waits
        return False

    def free(self, s: _Live):
        self.pool.free(s.table)

    def swap_out(self, s: _Live) -> int:
        return self.pool.swap_out(s.table)

    def swap_in(self, s: _Live):
        self.pool.swap_in(s.table)


@torch.no_grad()
def serve(model, requests, policy: str = "continuous", max_batch: int = 8, eos_id: int | None = None,
          block_size: int = 16, n_blocks: int | None = None, prefix_cache: bool = False,
          preemption: str = "recompute", max_num_batched_tokens: int | None = None) -> ServeResult:
    """Serve ``requests`` (all arrived at time 0, first come first served) with greedy decoding on one
    shared ``PagedKVPool`` of ``n_blocks`` (default: enough for ``max_batch`` full-length sequences).

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
    checks.choice(policy, "policy", ("static", "continuous"))
    checks.choice(preemption, "preemption", PREEMPTIONS)
    max_batch, block_size = checks.integer(max_batch, "max_batch", 1), checks.integer(block_size, "block_size", 1)
    prefix_cache = checks.flag(prefix_cache, "prefix_cache")
    eos_id = None if eos_id is None else checks.token_id(eos_id, "eos_id", model.config.vocab_size)
    if max_num_batched_tokens is not None:
        max_num_batched_tokens = checks.integer(max_num_batched_tokens, "max_num_batched_tokens", max_batch,
                                                allowed=f"None (no limit) or an integer >= max_batch={max_batch}: "
                                                        f"every running decode feeds one token a pass")
        if preemption != "recompute":
            raise ValueError(f"chunked prefill (max_num_batched_tokens={max_num_batched_tokens}) works with "
                             f"preemption='recompute' only (as in vLLM's V1 engine), got preemption={preemption!r}")
    requests = [_checked_request(r, model.config) for r in listed(requests, "requests", ServeRequest,
                                                                     "ServeRequest objects (see demo_requests)")]
    pool = _pool_for(model, requests, max_batch, block_size, n_blocks)
    res = ServeResult(policy=policy, max_batch=max_batch, preemption=preemption,
                      max_num_batched_tokens=max_num_batched_tokens,
                      records=[RequestRecord(r.rid, len(r.prompt)) for r in requests])
    sched = Scheduler(_PoolMemory(pool, prefix_cache), [_Live(r, rec, pool.new_table(str(r.rid)))
                                                        for r, rec in zip(requests, res.records)], max_batch, res)
    running, batch_size = [], 0  # static: the size of the batch in flight
    t0 = time.perf_counter()
    with eval_mode(model):
        while sched.waiting or running:
            for s in running:
                s.feed = s.ids[s.table.n_tokens:]  # the token it made last (or the rest of a chunked prefill)
            joined, resumed = sched.admit(running) if policy == "continuous" or not running else ([], [])
            for s in joined:
                s.prefilling, s.prefill_fed = s not in resumed, 0  # it feeds a prompt (its first, or a recomputation)
            batch_size = len(joined) if policy == "static" and joined else batch_size
            order = running + joined  # admission order
            batch = order if max_num_batched_tokens is None else _within_budget(order, max_num_batched_tokens)
            fed = set(map(id, batch))
            next_ids = _forward(model, pool, sched, batch, res.steps)  # preempted requests leave the batch
            now, ran = time.perf_counter() - t0, dict(zip(map(id, batch), next_ids))
            contexts = [s.table.n_tokens for s in batch]  # before a finished request frees its table
            held = [s for s in order if id(s) not in fed or id(s) in ran]  # the preempted are back in the queue
            running = []
            for s in held:
                if id(s) not in ran:  # admitted with the budget spent, or a prefill with none of it left: it waits
                    running.append(s)
                    continue
                if s.prefilling:
                    sched.prefilled(s, len(s.feed), first=s.prefill_fed == 0)
                    s.prefill_fed += len(s.feed)
                    if s.table.n_tokens < len(s.ids):  # a chunk: the rest of its prompt comes in the next passes
                        running.append(s)
                        continue
                    s.prefilling = False
                    if prefix_cache:
                        pool.register_prefix(s.table, s.ids)
                if s.add_token(ran[id(s)], res.steps, now, eos_id):
                    pool.free(s.table)
                else:
                    running.append(s)
            idle = batch_size - len(held) if policy == "static" else (max_batch - len(held) if sched.waiting else 0)
            res._record_pass(batch, idle, pool.allocator.n_used, contexts)
    synchronize(model.device)
    res.seconds = time.perf_counter() - t0
    res.prefix_hit_blocks = pool.allocator.n_prefix_hits
    res.swap_bytes = (res.swapped_out_blocks + res.swapped_in_blocks) * pool.block_nbytes
    return res


def _within_budget(order: list, budget: int) -> list:
    """The rows of a pass under a budget of ``budget`` tokens (chunked prefill): every decode its one token, then
    the prefills, in admission order, a chunk each of what is left (their ``feed`` cut to it). Rows left with
    nothing to feed sit this pass out."""
    left = budget - sum(1 for s in order if not s.prefilling)
    for s in order:
        if s.prefilling:
            s.feed = s.feed[:max(0, left)]
            left -= len(s.feed)
    return [s for s in order if s.feed]


def _pool_for(model, requests: list, max_batch: int, block_size: int, n_blocks) -> PagedKVPool:
    """The pool every request shares: ``n_blocks`` blocks (None: room for ``max_batch`` full-length sequences),
    checked to hold the largest request alone (so the scheduler can always make progress)."""
    c = model.config
    if n_blocks is None:  # room for max_batch full-length sequences
        n_blocks = max_batch * -(-c.max_seq_len // block_size)
        checks.fits_in_memory(n_blocks * block_size * costs.kv_bytes_per_token(c, model.dtype), model.device,
                              f"the default pool for max_batch={max_batch} full-length sequences in "
                              f"blocks of block_size={block_size}")
    n_blocks = checks.integer(n_blocks, "n_blocks", 1)
    pool = PagedKVPool.for_model(model, n_blocks, block_size)
    biggest = max((-(-(len(r.prompt) + r.max_new_tokens - 1) // block_size) for r in requests), default=0)
    if biggest > n_blocks:
        raise ValueError(f"a request may need {biggest} blocks of {block_size} tokens (prompt + max_new_tokens) but "
                         f"the pool has n_blocks={n_blocks}; give n_blocks >= {biggest} or lower max_new_tokens")
    return pool


def _forward(model, pool: PagedKVPool, sched: Scheduler, batch: list, step: int) -> list[int]:
    """One ``forward_paged`` pass over ``batch`` and each row's greedy next token. While the pool runs out of
    blocks the scheduler preempts the batch's most recently admitted request (taken off ``batch``) and the pass
    runs again without it (a failed pass changes nothing)."""
    while batch:
        try:
            logits = forward_paged(model, pool, [s.table for s in batch], [s.feed for s in batch])
        except PoolExhaustedError:
            victim = sched.preempt(batch)
            victim.rec.preemptions += 1
            continue
        checks.finite_logits(logits, model, f"serve's forward pass {step}")
        next_ids = choose(logits).tolist()  # greedy
        synchronize(model.device)
        return next_ids
    raise RuntimeError(f"serve could not run any request at pass {step} ({len(sched.waiting)} waiting); "
                       f"this is a bug in lib.serving")
