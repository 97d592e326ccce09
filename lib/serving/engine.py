"""The engine: real serving as a loop you drive one step at a time, while requests arrive whenever they like
(nano-vllm's ``LLMEngine``, in small). ``serve`` runs it over requests that all came at once, ``rate_sweep`` over
requests that arrive at a rate, the OpenAI-compatible server (``openai_server``) over requests from HTTP clients:

    engine = Engine(model, tokenizer, max_batch=8, n_blocks=64, prefix_cache=True)
    rid = engine.add_request(prompt_ids, max_new_tokens=32)    # any time: it joins the back of the queue
    while engine.has_unfinished():
        events = engine.step()     # scheduler.schedule() -> one forward_paged pass -> scheduler.postprocess()
        events.tokens              # {rid: [token]} each row's new token; events.finished {rid: "length" | "stop"}
        engine.snapshot()          # what a dashboard draws: the queues, the pool by owner, the batch, the texts

A step is one turn of the scheduler's loop (``scheduler.py``): admission and preemption, one pass of the model
over the batch's rows (prefill chunks beside decodes, on one shared ``PagedKVPool``), then the new tokens
appended and finished requests' blocks freed. A step with nothing to run runs no pass (``StepEvents.idle``).

Each request chooses its own tokens: greedy by default, or drawn at its ``temperature`` (``top_k``, ``top_p``)
with its own generator seeded by ``seed``, one draw per token it makes (a prefill chunk that is not the last makes
none). So a request gets the tokens ``lib.generate`` gives it alone, whoever shares its batch, whenever it
arrived, however often it is preempted. ``stop`` sequences (token ids) end a request when its tokens end with one;
``abort(rid)`` ends it at once (a client that went away); either way its blocks go back to the pool.

Why a request finished (``StepEvents.finished``, ``Engine.finish_reason``): "length" (it made
``max_new_tokens``), "stop" (eos or a stop sequence), "abort". The run's record is a ``ServeResult``
(``Engine.result()``): the scheduler's counts, every pass's rows, fed tokens and blocks in use, and the
requests' ``Sequence`` objects in the order they arrived.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .. import checks, costs
from ..blocks import blocks_for
from ..device import synchronize
from ..model import eval_mode
from ..paged import PagedKVPool, forward_paged
from ..sampling import make_generator, next_token
from ..text import sig
from .latency import pass_seconds
from .scheduler import PREEMPTIONS, Batch, Scheduler, SchedulerCounts, Sequence, Status

FINISH_REASONS = ("length", "stop", "abort")  # why a request finished: max_new_tokens, eos or a stop sequence,
#                                               aborted (its client went away)


@dataclass(frozen=True)
class StepEvents:
    """What one ``Engine.step()`` did. Request ids throughout; ``tokens`` and ``finished`` in batch order."""

    step: int  # the pass it ran (0, 1, ...): the engine's passes before it
    admitted: list  # joined the batch in this step (a preempted request that comes back counts again)
    preempted: list  # preempted in this step: back at the head of the queue
    tokens: dict  # rid -> [the token it made] (a row that fed a prefill chunk but its last made none)
    finished: dict  # rid -> why: "length" or "stop" (FINISH_REASONS); its blocks are back in the pool
    prefill_tokens: int = 0  # tokens the pass fed for prompts (chunks of them, recomputations)
    decode_tokens: int = 0  # tokens it fed for decodes, one per decoding row
    fed: dict = field(default_factory=dict)  # {(n_new, context): sequences}, the pass as pass_seconds prices it
    rows: dict = field(default_factory=dict)  # rid -> ("prefill" | "decode", tokens it fed), in batch order
    seconds: float = 0.0  # measured: the step's time on this machine

    @property
    def idle(self) -> bool:
        """Nothing was running or waiting: the step ran no pass."""
        return not self.fed


@dataclass(frozen=True)
class Snapshot:
    """What the engine holds between steps, for a dashboard to draw (request ids throughout).

    ``waiting``: the queue in order, requests never admitted; ``preempted``: requests back in the queue after a
    preemption (they sit at its head and go first); ``running``: in admission order; ``finished``: in the order
    they finished. ``owners[b]``: the requests whose block tables hold physical block b (empty: free; two or more:
    a block of a shared prefix, computed once); ``cached[b]``: the prefix index holds block b (a free cached
    block is handed out last and revived when a later prompt starts with its tokens). The last step's batch:
    ``prefill_tokens`` and ``decode_tokens`` against the ``budget`` (None: no limit). ``texts``: rid -> the
    text it has made so far (empty without a tokenizer)."""

    step: int
    waiting: list
    preempted: list
    running: list
    finished: list
    owners: list
    cached: list
    prefill_tokens: int
    decode_tokens: int
    budget: int | None
    texts: dict
    prefix_hit_blocks: int  # blocks a prompt took from the prefix cache instead of computing them, so far

    @property
    def shared_blocks(self) -> list:
        """Blocks held by more than one request: shared prefix blocks."""
        return [b for b, who in enumerate(self.owners) if len(who) > 1]

    @property
    def used_blocks(self) -> int:
        return sum(bool(who) for who in self.owners)


@dataclass
class _Choice:
    """How one request chooses its tokens (checked settings) and when it stops."""

    temperature: float
    top_k: int | None
    top_p: float | None
    generator: torch.Generator | None
    stop: list  # token-id sequences


class Engine:
    """Real serving one step at a time over one shared ``PagedKVPool`` of ``n_blocks`` blocks of ``block_size``
    tokens (None: room for ``max_batch`` full-length sequences), with ``serve``'s settings: ``policy``
    ("continuous": admission at every step; "static": a new batch only when the last one is done), ``max_batch``
    rows, ``prefix_cache``, ``preemption`` ("recompute" or "swap"), ``max_num_batched_tokens`` (chunked prefill;
    None: no limit) and ``eos_id`` (a request that makes it finishes). ``tokenizer`` (optional) gives the
    snapshot's texts. Times are measured with ``time.perf_counter`` from the engine's start."""

    def __init__(self, model, tokenizer=None, *, policy: str = "continuous", max_batch: int = 8,
                 eos_id: int | None = None, block_size: int = 16, n_blocks: int | None = None,
                 prefix_cache: bool = False, preemption: str = "recompute", max_num_batched_tokens: int | None = None):
        max_batch, block_size, prefix_cache, eos_id, budget = _checked_settings(
            model, policy, max_batch, eos_id, block_size, prefix_cache, preemption, max_num_batched_tokens)
        self.model, self.tokenizer = model, tokenizer
        self.pool = _pool_for(model, max_batch, block_size, n_blocks)
        self.record = ServeResult(policy=policy, max_batch=max_batch, preemption=preemption, records=[],
                                  max_num_batched_tokens=budget)
        self.scheduler = Scheduler(_PoolMemory(self.pool, prefix_cache), [], max_batch, self.record, 0, budget,
                                   continuous=policy == "continuous", eos_id=eos_id)
        self._seqs, self._choices, self._reasons = {}, {}, {}  # rid -> Sequence, _Choice, why it finished
        self._finished = []  # rids in the order they finished
        self._last = StepEvents(0, [], [], {}, {})
        self._t0 = time.perf_counter()

    # -- requests -------------------------------------------------------------------------------------------
    def add_request(self, prompt_ids, max_new_tokens: int, *, temperature: float = 0.0, top_k: int | None = None,
                    top_p: float | None = None, seed: int | None = None, stop=None, rid: int | None = None) -> int:
        """Queue a request (first come, first served) and return its id (``rid``, or the next free one).
        Greedy by default; ``temperature`` > 0 draws with ``top_k`` / ``top_p`` from a generator seeded by
        ``seed``. ``stop``: token-id sequences that end it (not counted as text a client sees is the caller's
        business). Checked before anything is queued: a request the context or the whole pool cannot hold is
        refused."""
        c = self.model.config
        prompt = checks.token_ids(prompt_ids, "prompt_ids", c.vocab_size)
        n = checks.new_tokens_fit(c, len(prompt), max_new_tokens)
        temperature, top_k, top_p = checks.sampling(temperature, top_k, top_p)
        stops = [checks.token_ids(s, f"stop[{i}]", c.vocab_size) for i, s in enumerate([] if stop is None else stop)]
        rid = max(self._seqs, default=-1) + 1 if rid is None else checks.integer(rid, "rid")
        if rid in self._seqs:
            raise ValueError(f"rid={rid} is taken already; leave rid=None for the next free id")
        need, bs = blocks_for(len(prompt) + n - 1, self.pool.block_size), self.pool.block_size
        if need > self.pool.n_blocks:
            raise ValueError(f"a request may need {need} blocks of {bs} tokens (prompt + max_new_tokens) but the "
                             f"pool has n_blocks={self.pool.n_blocks}; give n_blocks >= {need} or lower "
                             f"max_new_tokens")
        self._choices[rid] = _Choice(temperature, top_k, top_p, make_generator(seed, self.model.device), stops)
        s = Sequence(rid, len(prompt), n, prompt, table=self.pool.new_table(str(rid)), arrival_step=self.record.steps,
                     arrival_seconds=self.now())
        self._seqs[rid] = s
        self.record.records.append(s)
        self.scheduler.waiting.append(s)
        return rid

    def abort(self, rid: int) -> bool:
        """End request ``rid`` now (waiting or running), its blocks back in the pool; False if it had finished."""
        s = self.request(rid)
        if s.status is Status.FINISHED:
            return False
        self.scheduler.finish(s, self.record.steps)
        self._done(s, "abort")
        return True

    def request(self, rid: int) -> Sequence:
        """Request ``rid``'s ``Sequence``: its prompt, tokens so far, status, block table, times."""
        if rid not in self._seqs:
            raise KeyError(f"no request has rid={rid!r}; the engine has {len(self._seqs)} (rids "
                           f"{min(self._seqs, default='-')} .. {max(self._seqs, default='-')})")
        return self._seqs[rid]

    def finish_reason(self, rid: int) -> str | None:
        """Why request ``rid`` finished (FINISH_REASONS), or None while it has not."""
        self.request(rid)
        return self._reasons.get(rid)

    def has_unfinished(self) -> bool:
        return not self.scheduler.is_finished()

    def now(self) -> float:
        """Seconds since the engine started (measured)."""
        return time.perf_counter() - self._t0

    # -- one step -------------------------------------------------------------------------------------------
    @torch.no_grad()
    def step(self) -> StepEvents:
        """One step: admission (and preemption) by the scheduler, one forward pass over the batch, each row's
        token chosen and appended, finished requests freed. Returns what happened (``StepEvents``)."""
        sched, t = self.scheduler, time.perf_counter()
        if sched.is_finished():
            return StepEvents(self.record.steps, [], [], {}, {})
        before = list(sched.running)
        batch = sched.schedule()  # admission, each row's prefill chunk or token, preemption
        admitted = [s.rid for s in sched.running[len(sched.running) - batch.admitted:]] if batch.admitted else []
        preempted = [s.rid for s in before if s not in sched.running]
        rows = {s.rid: ("prefill" if s.is_prefill else "decode", n) for s, n in zip(batch.seqs, batch.n_new)}
        prefill = sum(n for phase, n in rows.values() if phase == "prefill")
        makes = [s.num_computed + s.num_scheduled >= len(s) for s in batch.seqs]  # rows that make a token
        with eval_mode(self.model):
            new_tokens = self._pass(batch, makes)
        _stamp(batch, self.now())
        sched.postprocess(batch, new_tokens)  # appended; at eos or max_new_tokens it leaves, its blocks freed
        tokens, finished = {}, {}
        for s, made in zip(batch.seqs, makes):
            if made:
                tokens[s.rid] = [s.tokens[-1]]
                reason = self._why(s)
                if reason is not None:
                    finished[s.rid] = reason
        self.record._record_pass(batch, bool(sched.waiting), self.pool.allocator.n_used)
        self._last = StepEvents(self.record.steps - 1, admitted, preempted, tokens, finished, prefill,
                                sum(batch.n_new) - prefill, batch.fed(), rows, time.perf_counter() - t)
        return self._last

    def _pass(self, batch: Batch, makes: list) -> list[int]:
        """One ``forward_paged`` pass over the batch's rows (each feeds its next ``num_scheduled`` tokens into
        the blocks the scheduler took) and each row's next token: greedy, or drawn with the row's own generator
        (only for a row that makes a token, so each generator draws once per token, as in ``lib.generate``)."""
        step = self.record.steps
        if not batch.seqs:  # every request fits alone (checked when added): a step always has a row
            raise RuntimeError(f"the engine could not run any request at pass {step}; this is a bug in lib.serving")
        feeds = [s.ids[s.num_computed:s.num_computed + s.num_scheduled] for s in batch.seqs]
        logits = forward_paged(self.model, self.pool, [s.table for s in batch.seqs], feeds)  # (B, vocab_size)
        checks.finite_logits(logits, self.model, f"the engine's forward pass {step}")
        out = torch.argmax(logits, dim=-1).tolist()  # greedy, every row
        for i, (s, made) in enumerate(zip(batch.seqs, makes)):
            c = self._choices[s.rid]
            if made and c.temperature > 0:
                out[i] = int(next_token(logits[i:i + 1], c.temperature, c.top_k, c.top_p, c.generator))
        synchronize(self.model.device)
        return out

    def _why(self, s: Sequence) -> str | None:
        """After ``s`` made a token: end it at a stop sequence; say why it finished, if it did."""
        if any(s.tokens[-len(q):] == q for q in self._choices[s.rid].stop if len(q) <= len(s.tokens)):
            if s.status is not Status.FINISHED:
                self.scheduler.finish(s, self.record.steps)
            return self._done(s, "stop")
        if s.status is Status.FINISHED:
            eos = self.scheduler.eos_id
            return self._done(s, "stop" if eos is not None and s.tokens[-1] == eos else "length")
        return None

    def _done(self, s: Sequence, reason: str) -> str:
        self._reasons[s.rid] = reason
        self._finished.append(s.rid)
        self._choices[s.rid].generator = None  # its random state is no longer needed
        return reason

    # -- what to draw and what it did -----------------------------------------------------------------------
    def snapshot(self) -> Snapshot:
        """The queues, the pool by owner, the last step's batch and every request's text (``Snapshot``)."""
        sched, a = self.scheduler, self.pool.allocator
        owners = [[] for _ in range(self.pool.n_blocks)]
        for s in sched.running:
            for b in s.table.blocks:
                owners[b].append(s.rid)
        decode = self.tokenizer.decode if self.tokenizer is not None else None
        texts = {} if decode is None else {rid: decode(s.tokens) for rid, s in self._seqs.items()}
        return Snapshot(self.record.steps, [s.rid for s in sched.waiting if not s.preemptions],
                        [s.rid for s in sched.waiting if s.preemptions], [s.rid for s in sched.running],
                        list(self._finished), owners, [a.is_cached(b) for b in range(self.pool.n_blocks)],
                        self._last.prefill_tokens, self._last.decode_tokens, sched.budget, texts,
                        a.n_prefix_hits)

    def result(self) -> ServeResult:
        """The run so far as a ``ServeResult`` (its counts, passes and records; seconds since the engine began)."""
        synchronize(self.model.device)
        res = self.record
        res.seconds = self.now()
        res.prefix_hit_blocks = self.pool.allocator.n_prefix_hits
        res.swap_bytes = (res.swapped_out_blocks + res.swapped_in_blocks) * self.pool.block_nbytes
        return res


@dataclass
class ServeResult(SchedulerCounts):
    """What ``serve`` (or an ``Engine``) did: the scheduler's counts and the passes'. Counts are deterministic;
    ``seconds`` and the per-request times are measured. ``records``: the requests' ``Sequence`` objects, in the
    order they arrived (``tokens``, ``arrival_step``, ``first_token_step``, ``finish_step``, ``arrival_seconds``,
    ``first_token_seconds``, ``finish_seconds``, ``preemptions``); ``steps``: forward passes."""

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
        """Forward passes from a request's arrival to its first token, counting the one that made it (mean over
        requests; NaN for a run of no requests, and so are the other means)."""
        return _mean([r.first_token_step - r.arrival_step + 1 for r in self.records])

    def mean_ttft_seconds(self) -> float:
        return _mean([r.first_token_seconds - r.arrival_seconds for r in self.records])

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
                "mean latency (ms)": round(1e3 * _mean([r.finish_seconds - r.arrival_seconds for r in self.records]), 1)}

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
        self.pool.free(s.table)  # give back the prefix blocks it had taken; it waits (and they were no hit)
        self.pool.allocator.n_prefix_hits -= s.num_cached // self.pool.block_size
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

    def drop_swapped(self, s: Sequence):
        self.pool.drop_swapped(s.table)


def _checked_settings(model, policy, max_batch, eos_id, block_size, prefix_cache, preemption,
                      max_num_batched_tokens) -> tuple:
    """The engine's (and serve's) settings checked: (max_batch, block_size, prefix_cache, eos_id, max_num_batched_tokens)."""
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


def _pool_for(model, max_batch: int, block_size: int, n_blocks) -> PagedKVPool:
    """The pool every request shares: ``n_blocks`` blocks (None: room for ``max_batch`` full-length sequences).
    ``add_request`` checks that it holds each request alone (so the scheduler can always make progress)."""
    c = model.config
    if n_blocks is None:  # room for max_batch full-length sequences
        n_blocks = max_batch * blocks_for(c.max_seq_len, block_size)
        checks.fits_in_memory(n_blocks * block_size * costs.kv_bytes_per_token(c, model.dtype), model.device,
                              f"the default pool for max_batch={max_batch} full-length sequences in "
                              f"blocks of block_size={block_size}")
    n_blocks = checks.integer(n_blocks, "n_blocks", 1)
    return PagedKVPool.for_model(model, n_blocks, block_size)


def _stamp(batch: Batch, now: float):
    """Measured times, ``now`` seconds since the engine started, for the rows whose first token this step makes (it
    makes a token for every row but a chunk of a prefill that is not its last) and for those it may finish."""
    for s in batch.seqs:
        if s.num_computed + s.num_scheduled >= len(s):
            if not s.tokens:
                s.first_token_seconds = now
            s.finish_seconds = now  # the time of its latest token: its last once it has finished
