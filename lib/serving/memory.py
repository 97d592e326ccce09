"""The memory simulation (lengths only, no model): a seeded stream of requests is served from a fixed KV budget
under four allocation policies, and every step we count what the KV memory holds.

* ``"max"``: each request reserves one contiguous region of ``max_len`` positions (pre-vLLM systems; the
  vLLM paper's "Orca (Max)").
* ``"pow2"``: the prompt plus the output length rounded up to a power of two ("Orca (Pow2)", which over-reserves
  the output by at most 2x and needs to know the output length: a best case, not something real).
* ``"oracle"``: exactly prompt + output positions ("Orca (Oracle)", knowing every output length in advance).
* ``"paged"``: blocks of ``block_size`` positions, taken one at a time as the sequence grows (vLLM).

    while scheduler.waiting or scheduler.running:
        batch = scheduler.schedule()       # admitted: prefill, prompt written; running: one token each; a full
                                           #   last block takes a new one; none free -> preempt
        count tokens / future / never / free      # over the whole budget, with the tokens this step makes
        scheduler.postprocess(batch, [None] * len(batch))   # lengths only; finished requests free their memory

Contiguous regions come from a first-fit allocator over the whole budget, so variable-size reservations
leave holes between them (external fragmentation). Every step each position of the budget is one of:
holding a token's K/V, reserved for a token the request will produce later, reserved but never to be used
(internal fragmentation), or free. Admission and preemption are ``scheduler.Scheduler``'s, the same as real
serving's (``lib.serving.serve``); each step is priced by ``latency.pass_seconds``.
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import torch

from .. import checks, costs
from ..blocks import MAX_BLOCKS, BlockAllocator, blocks_for
from .latency import pass_seconds
from .scheduler import PREEMPTIONS, REQUEST_BYTES, Scheduler, SchedulerCounts, Sequence, listed

POLICIES = ("max", "pow2", "oracle", "paged")
CONTIGUOUS = ("max", "pow2", "oracle")


@dataclass(frozen=True)
class SimRequest:
    """A request as the memory manager sees it: how long its prompt is and how many tokens it will generate."""

    rid: int
    prompt_len: int
    output_len: int

    def __post_init__(self):  # checked once, here: a prompt of 0 tokens or an output of -1 would skew every share
        for name, low in (("rid", None), ("prompt_len", 1), ("output_len", 1)):
            object.__setattr__(self, name, checks.integer(getattr(self, name), f"SimRequest.{name}", low))

    @property
    def total_len(self) -> int:
        return self.prompt_len + self.output_len


def request_stream(n: int = 400, seed: int = 0, prompt_mean: float = 160.0, output_mean: float = 340.0,
                   sigma: float = 1.0, max_len: int = 2048) -> list[SimRequest]:
    """``n`` requests with log-normal prompt and output lengths (seeded, Python's ``random``).

    Each length is exp(N(mu, sigma²)) rounded, with mu = ln(mean) - sigma²/2 so that ``mean`` is the mean
    before clipping; prompts are clipped to 1 .. max_len - 1 and outputs to 1 .. max_len - prompt. The default
    means are close to the ShareGPT conversations the vLLM paper served (about 160 prompt and 340 output
    tokens on average, long-tailed), with OPT's context of 2048."""
    n, max_len = checks.integer(n, "n", 1), checks.integer(max_len, "max_len", 2)
    checks.fits_in_memory(REQUEST_BYTES * n, "cpu", f"a stream of n={n} requests")
    prompt_mean, output_mean = (checks.number(v, name, above=0, maximum=1e9) for name, v in
                                (("prompt_mean", prompt_mean), ("output_mean", output_mean)))
    sigma = checks.number(sigma, "sigma", above=0, maximum=5)
    rng = random.Random(checks.integer(seed, "seed"))
    out = []
    for rid in range(n):
        p = min(max_len - 1, max(1, round(rng.lognormvariate(math.log(prompt_mean) - sigma ** 2 / 2, sigma))))
        o = min(max_len - p, max(1, round(rng.lognormvariate(math.log(output_mean) - sigma ** 2 / 2, sigma))))
        out.append(SimRequest(rid, p, o))
    return out


def text_stream(n: int = 400, max_len: int = 2048, langs=("en", "zh")) -> list[SimRequest]:
    """``n`` requests whose lengths come from real text (no randomness): request j's prompt is <s>, a passage of
    the held-out text (a speech or a sonnet of Shakespeare, a Chinese poem; ``lib.corpus.heldout_pairs``) and the
    blank line after it, its output as long as the passage that follows. Lengths are counted in tokens of the
    real model's tokenizer, one per character (a subword tokenizer counts English in far fewer tokens). Clipped
    to ``max_len`` as ``request_stream`` clips."""
    from ..corpus import heldout_pairs

    n, max_len = checks.integer(n, "n", 1), checks.integer(max_len, "max_len", 2)
    checks.fits_in_memory(REQUEST_BYTES * n, "cpu", f"a stream of n={n} requests")
    out = []
    for rid, (_, prompt, answer) in enumerate(heldout_pairs(n, langs)):
        p = min(max_len - 1, len(prompt) + 3)  # <s>, the passage, the blank line ("\n\n") that ends it
        out.append(SimRequest(rid, p, max(1, min(max_len - p, len(answer)))))
    return out


def reservation(request: SimRequest, policy: str, max_len: int = 2048) -> int:
    """Positions a contiguous policy reserves for ``request`` when it is admitted."""
    return _reserved(request.prompt_len, request.output_len, policy, max_len)


def _reserved(prompt_len: int, output_len: int, policy: str, max_len: int) -> int:
    if policy == "max":
        return max_len
    if policy == "pow2":
        return min(max_len, prompt_len + 2 ** math.ceil(math.log2(output_len)))
    if policy == "oracle":
        return prompt_len + output_len
    raise ValueError(f"reservation is for the contiguous policies {CONTIGUOUS}, got {policy!r}")


class ContiguousAllocator:
    """First-fit allocation of contiguous regions of a budget of ``n_slots`` positions: a sorted list of free
    holes (start, size); freeing merges a hole with its neighbours."""

    def __init__(self, n_slots: int):
        n_slots = checks.integer(n_slots, "n_slots", 1)
        self.n_slots = n_slots
        self.holes = [(0, n_slots)]

    @property
    def n_free(self) -> int:
        return sum(size for _, size in self.holes)

    @property
    def largest_hole(self) -> int:
        return max((size for _, size in self.holes), default=0)

    def allocate(self, size: int) -> int | None:
        """Start of the first hole that fits ``size`` positions, or None if none does."""
        for i, (start, hole) in enumerate(self.holes):
            if hole >= size:
                if hole == size:
                    del self.holes[i]
                else:
                    self.holes[i] = (start + size, hole - size)
                return start
        return None

    def free(self, start: int, size: int):
        i = 0
        while i < len(self.holes) and self.holes[i][0] < start:
            i += 1
        self.holes.insert(i, (start, size))
        if i + 1 < len(self.holes) and start + size == self.holes[i + 1][0]:  # merge with the hole after
            self.holes[i] = (start, size + self.holes.pop(i + 1)[1])
        if i > 0 and self.holes[i - 1][0] + self.holes[i - 1][1] == start:  # and with the hole before
            s, z = self.holes.pop(i - 1)
            self.holes[i - 1] = (s, z + self.holes[i - 1][1])


# ----------------------------------------------------------------------------- the two kinds of memory

class _PagedMemory:
    """The scheduler's memory under ``"paged"``: a ``BlockAllocator`` over kv_tokens // block_size blocks (no
    tensors). A request's block table covers its prompt, the tokens it made and the one the step makes (the
    simulation counts a token's position as held from the step that makes it: one slot ahead of what the step
    feeds). Swapping only counts blocks."""

    def __init__(self, requests, kv_tokens: int, block_size: int):
        n_blocks = kv_tokens // block_size
        if n_blocks == 0 or kv_tokens % block_size:
            raise ValueError(f"kv_tokens={kv_tokens} must be a positive multiple of block_size={block_size}")
        if n_blocks > MAX_BLOCKS:
            raise ValueError(f"kv_tokens={kv_tokens} in blocks of block_size={block_size} makes {n_blocks:,} blocks, "
                             f"more than the {MAX_BLOCKS:,} the simulation keeps track of; lower kv_tokens or raise "
                             f"block_size")
        self.alloc = BlockAllocator(n_blocks, block_size)
        biggest = max((blocks_for(r.total_len, block_size) for r in requests), default=0)
        if biggest > n_blocks:
            raise ValueError(f"a request needs {biggest} blocks but the pool has only {n_blocks}; raise kv_tokens")

    def take(self, s: Sequence, rows, spare: int) -> bool:
        """Blocks for its prompt (+ the tokens it made before a preemption) and its prefill's token, taken now;
        False while fewer than ``spare`` blocks would be left (the running requests' growth is not counted)."""
        n = len(s) + 1
        if self.alloc.n_free - blocks_for(n, self.alloc.block_size) < spare:
            return False
        self.alloc.reserve(s.table, n)
        s.table.n_tokens = n
        return True

    def _short(self, s: Sequence) -> int:
        """Positions the step's row ``s`` still needs: what it feeds and the slot of the token it makes (none for
        a row admitted in the step: ``take`` reserved its prompt and that slot)."""
        return max(0, s.num_computed + s.num_scheduled + 1 - s.table.n_tokens)

    def fits(self, rows) -> bool:
        bs = self.alloc.block_size
        need = sum(blocks_for(s.table.n_tokens + self._short(s), bs) - len(s.table.blocks) for s in rows)
        return need <= self.alloc.n_free

    def grow(self, rows):
        bs = self.alloc.block_size
        for s in rows:
            n = self._short(s)  # a decode's one slot (an admitted request's were taken at admission)
            if blocks_for(s.table.n_tokens + n, bs) > len(s.table.blocks):  # its last block is full: a new one
                self.alloc.reserve(s.table, n)
            s.table.n_tokens += n

    def held(self, s: Sequence) -> int:
        return len(s.table.blocks) * self.alloc.block_size

    def prefilled(self, s: Sequence):
        """Nothing to do: the simulation caches no prefixes."""

    def free(self, s: Sequence):
        self.alloc.free(s.table)

    def swap_out(self, s: Sequence) -> int:
        n = len(s.table.blocks)
        self.alloc.free(s.table)
        return n

    def swap_in(self, s: Sequence):
        """Nothing to do: ``take`` gave it its blocks, and the copy back is only counted (by the scheduler)."""


class _ContiguousMemory:
    """The scheduler's memory under ``"max"``, ``"pow2"``, ``"oracle"``: one region per request, reserved at
    admission (first fit) for every token it will make, so it never runs out later and never preempts (no
    swap methods). ``regions``: each admitted request's (start, size)."""

    def __init__(self, requests, policy: str, kv_tokens: int, max_len: int):
        self.alloc, self.policy, self.max_len = ContiguousAllocator(kv_tokens), policy, max_len
        self.regions: dict[Sequence, tuple[int, int]] = {}
        biggest = max((reservation(r, policy, max_len) for r in requests), default=0)
        if biggest > kv_tokens:
            raise ValueError(f"a request reserves {biggest} positions under {policy!r} but the budget is only "
                             f"kv_tokens={kv_tokens}; raise kv_tokens")

    def take(self, s: Sequence, rows, spare: int) -> bool:
        """A region for the whole request; False while no hole is big enough (the head of the queue waits)."""
        size = _reserved(s.prompt_len, s.max_tokens, self.policy, self.max_len)
        start = self.alloc.allocate(size)
        if start is None:
            return False
        self.regions[s] = (start, size)
        return True

    def fits(self, rows) -> bool:
        return True  # each region has room for every token its request will make

    def grow(self, rows):
        """Nothing to do: the regions were reserved whole."""

    def held(self, s: Sequence) -> int:
        return self.regions[s][1]

    def prefilled(self, s: Sequence):
        """Nothing to do."""

    def free(self, s: Sequence):
        self.alloc.free(*self.regions.pop(s))


# ------------------------------------------------------------------------------------------ the simulation

@dataclass
class SimResult(SchedulerCounts):
    """What ``simulate`` measured: the scheduler's counts, and per step lists of position counts of the whole
    budget after that step's tokens were written (tokens + future + never + free == kv_tokens every step)."""

    policy: str
    kv_tokens: int
    block_size: int
    max_len: int
    n_requests: int
    running: list = field(default_factory=list)  # requests in the batch
    waiting: list = field(default_factory=list)  # requests still queued after admission
    tokens: list = field(default_factory=list)  # positions holding K/V of a token
    future: list = field(default_factory=list)  # reserved, will hold a token later
    never: list = field(default_factory=list)  # reserved, will never hold a token (internal fragmentation)
    free: list = field(default_factory=list)  # not handed out
    passes: list = field(default_factory=list)  # per step: {(n_new, context): sequences} the step's forward pass fed

    def _record_step(self, running: list, n_waiting: int, held):
        """Count what the budget holds after a step (with the token it makes); ``held(s)``: the positions request s
        holds."""
        tokens = future = never = allocated = 0
        for s in running:
            n, length, total = held(s), len(s) + 1, s.prompt_len + s.max_tokens
            allocated += n
            tokens += length
            future += min(n, total) - length
            never += n - min(n, total)
        for name, value in (("running", len(running)), ("waiting", n_waiting), ("tokens", tokens),
                            ("future", future), ("never", never), ("free", self.kv_tokens - allocated)):
            getattr(self, name).append(value)

    def _window(self, saturated: bool):
        idx = [i for i, w in enumerate(self.waiting) if w > 0] if saturated else list(range(self.steps))
        return idx or list(range(self.steps))

    def shares(self, saturated: bool = True) -> dict:
        """Mean share of the KV budget in each state, over the steps where requests were waiting for memory
        (``saturated=True``: the server is full, the regime the vLLM paper measured) or over every step.
        A run of no requests has no steps: its budget was all free."""
        idx = self._window(saturated)
        if not idx:
            return {"tokens": 0.0, "future": 0.0, "never": 0.0, "free": 1.0}
        mean = lambda xs: sum(xs[i] for i in idx) / (len(idx) * self.kv_tokens)
        return {k: mean(getattr(self, k)) for k in ("tokens", "future", "never", "free")}

    def token_share_of_allocated(self, saturated: bool = True) -> float:
        """Positions holding tokens / positions handed out to requests (free memory left out); NaN when
        nothing was handed out (a run of no requests)."""
        idx = self._window(saturated)
        allocated = sum(self.kv_tokens - self.free[i] for i in idx)
        return sum(self.tokens[i] for i in idx) / allocated if allocated else float("nan")

    def mean_running(self, saturated: bool = True) -> float:
        idx = self._window(saturated)
        return sum(self.running[i] for i in idx) / len(idx) if idx else 0.0

    def swap_bytes(self, bytes_per_token: int) -> int:
        """Bytes that swapping moved between GPU and CPU memory, both ways (0 under recomputation), for a
        model whose K/V take ``bytes_per_token`` per position (``lib.costs.kv_bytes_per_token``)."""
        bytes_per_token = checks.integer(bytes_per_token, "bytes_per_token", 1)
        return (self.swapped_out_blocks + self.swapped_in_blocks) * self.block_size * bytes_per_token

    def step_seconds(self, model, machine=None, dtype=torch.float16) -> list[float]:
        """Each step's time if its lengths were ``model``'s requests on ``machine`` (default the H100 SXM): one
        forward pass that feeds every running request its token and every admitted one its prefill (the prompt,
        and after a recomputing preemption every token it had made), timed by the roofline
        (``lib.roofline.Machine.seconds``: max(FLOPs / peak, bytes / bandwidth)), the weights read once per step.
        A lower bound: every kernel at the roof, no scheduling overhead."""
        return pass_seconds(self.passes, model, machine, dtype)

    def seconds(self, model, machine=None, dtype=torch.float16) -> float:
        """The whole run's time on ``machine``: the sum of ``step_seconds`` (prefills and recomputation charged)."""
        return sum(self.step_seconds(model, machine, dtype))

    def summary(self) -> dict:
        """Rounded figures for a table: shares of the budget while saturated, concurrency, steps."""
        s = self.shares()
        return {"policy": self.policy, "tokens %": round(100 * s["tokens"], 1),
                "reserved, later %": round(100 * s["future"], 1), "reserved, never %": round(100 * s["never"], 1),
                "free %": round(100 * s["free"], 1),
                "tokens / allocated %": round(100 * self.token_share_of_allocated(), 1),
                "mean batch": round(self.mean_running(), 1), "max batch": max(self.running, default=0),
                "steps": self.steps, "preemptions": self.preemptions}


def simulate(requests, policy: str = "paged", kv_tokens: int = 16384, block_size: int = 16, max_len: int = 2048,
             watermark: float = 0.0, max_running: int = 256, preemption: str = "recompute") -> SimResult:
    """Serve ``requests`` (all queued at step 0, first come first served) from a KV budget of ``kv_tokens``
    positions. Every step: admit queued requests while memory allows (a new request's prefill writes its
    prompt and yields its first token), then every earlier request generates one token, then finished
    requests free their memory.

    Contiguous policies reserve a region at admission (first fit; the head of the queue waits while no hole
    is big enough) and never run out later. ``"paged"`` admits a waiting (or preempted) request when its
    blocks fit with ``watermark`` (a fraction from 0 to 1) of the pool to spare (the watermark keeps room for
    the running requests to grow; it never holds back a request when none is running; vLLM's V1 scheduler
    has the same knob for admission only, and its default is 0), takes a new block whenever a sequence's last
    block is full and, when none is free, preempts the most recently admitted request: its blocks are freed
    and it waits at the head of the queue. ``preemption="recompute"`` (what vLLM does today) prefills its
    prompt and the tokens it had made again when it is admitted; ``"swap"`` (the vLLM paper's other option)
    copies its blocks to CPU memory at the preemption and back at the readmission, and it continues where it
    stopped. Both give every request the same tokens; they differ in what they cost (``preemption_costs``).
    Every step makes progress: a request that could never be served is refused before the first step."""
    checks.choice(policy, "policy", POLICIES)
    checks.choice(preemption, "preemption", PREEMPTIONS)
    kv_tokens, block_size = checks.integer(kv_tokens, "kv_tokens", 1), checks.integer(block_size, "block_size", 1)
    max_len, max_running = checks.integer(max_len, "max_len", 1), checks.integer(max_running, "max_running", 1)
    watermark = checks.number(watermark, "watermark", 0, below=1,
                              allowed="a fraction of the pool from 0 to 1 (1 excluded), e.g. 0.01")
    requests = listed(requests, "requests", SimRequest, "SimRequest(rid, prompt_len, output_len) objects")
    for r in requests:
        if r.total_len > max_len:
            raise ValueError(f"request {r.rid} needs {r.total_len} positions, more than max_len={max_len}")
    if policy == "paged":
        memory = _PagedMemory(requests, kv_tokens, block_size)
        spare = int(watermark * memory.alloc.n_blocks)  # blocks admission leaves free while requests run
    else:
        memory, spare = _ContiguousMemory(requests, policy, kv_tokens, max_len), 0
    res = SimResult(policy=policy, kv_tokens=kv_tokens, block_size=block_size, max_len=max_len,
                    n_requests=len(requests), preemption=preemption)
    sched = Scheduler(memory, [Sequence(r.rid, r.prompt_len, r.output_len) for r in requests], max_running, res, spare)
    while not sched.is_finished():
        batch = sched.schedule()  # admission, a prefill or a token for every row, preemption
        res.passes.append(batch.fed())
        res._record_step(batch.seqs, len(sched.waiting), memory.held)  # what the memory holds after the step
        sched.postprocess(batch, [None] * len(batch))  # lengths only: a token with no id; finished ones free
    return res


def compare_policies(requests, kv_tokens: int = 16384, block_size: int = 16, max_len: int = 2048,
                     policies=POLICIES) -> dict[str, SimResult]:
    """``simulate`` under each policy, same requests and budget."""
    return {p: simulate(requests, p, kv_tokens, block_size, max_len) for p in policies}
