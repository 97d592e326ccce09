"""Real serving on a model (``serve``): one shared ``PagedKVPool``, and every step one
``lib.paged.forward_paged`` pass over the scheduler's batch (joining requests feed their prompt, running ones one
token).

    while scheduler.waiting or scheduler.running:
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
import time
from dataclasses import dataclass, field

import torch

from .. import checks, costs, progress
from ..blocks import blocks_for
from ..device import synchronize
from ..model import eval_mode
from ..paged import PagedKVPool, forward_paged
from ..sampling import choose
from ..text import sig
from .latency import pass_seconds
from .scheduler import PREEMPTIONS, REQUEST_BYTES, Batch, Scheduler, SchedulerCounts, Sequence, listed


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
class ServeResult(SchedulerCounts):
    """What ``serve`` did: the scheduler's counts and the passes'. Counts are deterministic; ``seconds`` and the
    per-request times are measured. ``records``: the requests' ``Sequence`` objects, in request order (``tokens``,
    ``first_token_step``, ``finish_step``, ``first_token_seconds``, ``finish_seconds``, ``preemptions``);
    ``steps``: forward passes."""

    STEP_WORDS = ("forward passes", "prefill tokens")

    policy: str
    max_batch: int
    records: list
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
    _batch_size: int = field(default=0, repr=False)  # static: the size of the batch in flight

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

    def moved_bytes(self) -> int:
        """Bytes of K/V that swapping copied, both ways (``preemption_costs``' "bytes moved")."""
        return self.swap_bytes

    def step_seconds(self, model, machine=None, dtype=torch.float16) -> list[float]:
        """Each pass's time if its lengths were ``model``'s (a config or a model) on ``machine`` (default the H100
        SXM), priced by the roofline (``lib.serving.latency.pass_seconds``, the same as ``SimResult``'s): a lower
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

    def _record_pass(self, batch: Batch, waiting: bool, blocks_used: int):
        """Count a pass: its rows, tokens fed and idle slots (static: slots of the batch in flight whose request
        finished; continuous: free slots while requests wait), and the blocks in use after it."""
        if self.policy == "static":
            self._batch_size = batch.admitted or self._batch_size
            idle = self._batch_size - batch.running
        else:
            idle = self.max_batch - batch.running if waiting else 0
        self.batch_rows.append(len(batch))
        self.fed_tokens.append(sum(batch.n_new))
        self.idle_slots.append(idle)
        self.blocks_used.append(blocks_used)
        self.passes.append(batch.fed())


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


class _PoolMemory:
    """The scheduler's memory in real serving: one ``PagedKVPool``. Admission checks that the blocks the next
    pass takes fit (the joining request's prompt, or its swapped positions and one more, next to what the
    running requests feed); ``grow`` takes the blocks of the step's rows, and the pass writes into them. With
    ``prefix_cache`` a joining prompt's cached blocks are reused, and a prompt's full blocks are indexed once it
    is computed."""

    def __init__(self, pool: PagedKVPool, prefix_cache: bool):
        self.pool, self.prefix_cache = pool, prefix_cache

    def take(self, s: Sequence, rows: list, spare: int) -> bool:
        if self.prefix_cache and not s.swapped:
            s.num_cached = self.pool.match_prefix(s.table, s.ids)  # after a preemption: prompt + what it had made
        tables = [x.table for x in rows] + [s.table]
        grow = [len(x) - x.table.n_tokens for x in rows + [s]]  # a swapped table is empty until swap_in
        if self.pool.allocator.blocks_needed(tables, grow) + spare <= self.pool.allocator.n_free:
            return True
        self.pool.free(s.table)  # give back the prefix blocks it had taken; it waits
        s.num_cached = 0
        return False

    def fits(self, rows: list) -> bool:
        a = self.pool.allocator
        return a.blocks_needed([s.table for s in rows], [s.num_scheduled for s in rows]) <= a.n_free

    def grow(self, rows: list):
        for s in rows:
            self.pool.reserve(s.table, s.num_scheduled)

    def prefilled(self, s: Sequence):
        if self.prefix_cache:
            self.pool.register_prefix(s.table, s.ids)

    def free(self, s: Sequence):
        self.pool.free(s.table)

    def swap_out(self, s: Sequence) -> int:
        return self.pool.swap_out(s.table)

    def swap_in(self, s: Sequence):
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
    max_batch, block_size, prefix_cache, eos_id, max_num_batched_tokens = _checked_settings(
        model, policy, max_batch, eos_id, block_size, prefix_cache, preemption, max_num_batched_tokens)
    requests = [_checked_request(r, model.config) for r in listed(requests, "requests", ServeRequest,
                                                                     "ServeRequest objects (see demo_requests)")]
    pool = _pool_for(model, requests, max_batch, block_size, n_blocks)
    seqs = [Sequence(r.rid, len(r.prompt), r.max_new_tokens, r.prompt, table=pool.new_table(str(r.rid)))
            for r in requests]
    res = ServeResult(policy=policy, max_batch=max_batch, preemption=preemption, records=seqs,
                      max_num_batched_tokens=max_num_batched_tokens)
    sched = Scheduler(_PoolMemory(pool, prefix_cache), seqs, max_batch, res, 0, max_num_batched_tokens,
                      continuous=policy == "continuous", eos_id=eos_id)
    t0 = time.perf_counter()
    with eval_mode(model), progress.bar(desc=f"serve ({policy})", unit="pass") as passes:  # shown in a long cell
        while not sched.is_finished():
            batch = sched.schedule()  # admission, each row's prefill chunk or token, preemption
            new_tokens = _forward(model, pool, batch, res.steps)
            _stamp(batch, time.perf_counter() - t0)
            sched.postprocess(batch, new_tokens)  # appended; finished requests leave, their blocks freed
            res._record_pass(batch, bool(sched.waiting), pool.allocator.n_used)
            passes.update()
    synchronize(model.device)
    res.seconds = time.perf_counter() - t0
    res.prefix_hit_blocks = pool.allocator.n_prefix_hits
    res.swap_bytes = (res.swapped_out_blocks + res.swapped_in_blocks) * pool.block_nbytes
    return res


def _checked_settings(model, policy, max_batch, eos_id, block_size, prefix_cache, preemption,
                      max_num_batched_tokens) -> tuple:
    """serve's settings checked: (max_batch, block_size, prefix_cache, eos_id, max_num_batched_tokens)."""
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
    return max_batch, block_size, prefix_cache, eos_id, max_num_batched_tokens


def _pool_for(model, requests: list, max_batch: int, block_size: int, n_blocks) -> PagedKVPool:
    """The pool every request shares: ``n_blocks`` blocks (None: room for ``max_batch`` full-length sequences),
    checked to hold the largest request alone (so the scheduler can always make progress)."""
    c = model.config
    if n_blocks is None:  # room for max_batch full-length sequences
        n_blocks = max_batch * blocks_for(c.max_seq_len, block_size)
        checks.fits_in_memory(n_blocks * block_size * costs.kv_bytes_per_token(c, model.dtype), model.device,
                              f"the default pool for max_batch={max_batch} full-length sequences in "
                              f"blocks of block_size={block_size}")
    n_blocks = checks.integer(n_blocks, "n_blocks", 1)
    pool = PagedKVPool.for_model(model, n_blocks, block_size)
    biggest = max((blocks_for(len(r.prompt) + r.max_new_tokens - 1, block_size) for r in requests), default=0)
    if biggest > n_blocks:
        raise ValueError(f"a request may need {biggest} blocks of {block_size} tokens (prompt + max_new_tokens) but "
                         f"the pool has n_blocks={n_blocks}; give n_blocks >= {biggest} or lower max_new_tokens")
    return pool


def _forward(model, pool: PagedKVPool, batch: Batch, step: int) -> list[int]:
    """One ``forward_paged`` pass over the batch's rows (each feeds its next ``num_scheduled`` tokens into the
    blocks the scheduler took) and each row's greedy next token."""
    if not batch.seqs:  # every request fits alone (checked up front): a step always has a row
        raise RuntimeError(f"serve could not run any request at pass {step}; this is a bug in lib.serving")
    feeds = [s.ids[s.num_computed:s.num_computed + s.num_scheduled] for s in batch.seqs]
    logits = forward_paged(model, pool, [s.table for s in batch.seqs], feeds)  # (B, vocab_size)
    checks.finite_logits(logits, model, f"serve's forward pass {step}")
    next_ids = choose(logits).tolist()  # greedy
    synchronize(model.device)
    return next_ids


def _stamp(batch: Batch, now: float):
    """Measured times, ``now`` seconds since serve started, for the rows whose first token this step makes (it
    makes a token for every row but a chunk of a prefill that is not its last) and for those it may finish."""
    for s in batch.seqs:
        if s.num_computed + s.num_scheduled >= len(s):
            if not s.tokens:
                s.first_token_seconds = now
            s.finish_seconds = now  # the time of its latest token: its last once it has finished
