"""The memory simulation (lengths only, no model): a seeded stream of requests is served from a fixed KV budget
under four allocation policies, and every step we count what the KV memory holds.

* ``"max"``: each request reserves one contiguous region of ``max_len`` positions (pre-vLLM systems; the
  vLLM paper's "Orca (Max)").
* ``"pow2"``: the prompt plus the output length rounded up to a power of two ("Orca (Pow2)", which over-reserves
  the output by at most 2x and needs to know the output length: a best case, not something real).
* ``"oracle"``: exactly prompt + output positions ("Orca (Oracle)", knowing every output length in advance).
* ``"paged"``: blocks of ``block_size`` positions, taken one at a time as the sequence grows (vLLM).

    every step:
        admitted = scheduler.admit(running)      # prefill: prompt written, first token made
        for s in running: s grows by one token   # a full last block takes a new one; none free -> preempt
        running += admitted
        count tokens / future / never / free      # over the whole budget
        finished requests free their memory

Contiguous regions come from a first-fit allocator over the whole budget, so variable-size reservations
leave holes between them (external fragmentation). Every step each position of the budget is one of:
holding a token's K/V, reserved for a token the request will produce later, reserved but never to be used
(internal fragmentation), or free. Admission and preemption are ``scheduler.Scheduler``'s, the same as real
serving's (``lib.serving.serve``).
"""
from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

import torch

from .. import checks, costs
from ..blocks import MAX_BLOCKS, BlockAllocator, BlockTable
from .scheduler import PREEMPTIONS, REQUEST_BYTES, Scheduler, SchedulerCounts, listed

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
    if policy == "max":
        return max_len
    if policy == "pow2":
        return min(max_len, request.prompt_len + 2 ** math.ceil(math.log2(request.output_len)))
    if policy == "oracle":
        return request.total_len
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

@dataclass(eq=False)
class _Running:
    req: SimRequest
    generated: int = 0  # tokens produced so far (the KV memory holds prompt + generated positions)
    start: int = 0  # contiguous: region start
    size: int = 0  # contiguous: region size
    table: BlockTable | None = None  # paged
    swapped: int = 0  # paged, preempted by swapping: blocks of it that wait in CPU memory (the scheduler's)

    @property
    def length(self) -> int:
        return self.req.prompt_len + self.generated

    @property
    def made(self) -> int:
        return self.generated


class _PagedMemory:
    """The scheduler's memory under ``"paged"``: a ``BlockAllocator`` over kv_tokens // block_size blocks (no
    tensors); a request's block table covers its prompt and the tokens it made. Swapping only counts blocks."""

    def __init__(self, requests, kv_tokens: int, block_size: int):
        n_blocks = kv_tokens // block_size
        if n_blocks == 0 or kv_tokens % block_size:
            raise ValueError(f"kv_tokens={kv_tokens} must be a positive multiple of block_size={block_size}")
        if n_blocks > MAX_BLOCKS:
            raise ValueError(f"kv_tokens={kv_tokens} in blocks of block_size={block_size} makes {n_blocks:,} blocks, "
                             f"more than the {MAX_BLOCKS:,} the simulation keeps track of; lower kv_tokens or raise "
                             f"block_size")
        self.alloc = BlockAllocator(n_blocks, block_size)
        biggest = max((-(-r.total_len // block_size) for r in requests), default=0)
        if biggest > n_blocks:
            raise ValueError(f"a request needs {biggest} blocks but the pool has only {n_blocks}; raise kv_tokens")

    def take(self, s: _Running, batch, spare: int) -> bool:
        """Blocks for its prompt (+ the tokens it made before a preemption) and its prefill's token."""
        n = s.length + 1
        if self.alloc.n_free - -(-n // self.alloc.block_size) < spare:
            return False
        s.table = BlockTable()
        self.alloc.reserve(s.table, n)
        s.table.n_tokens = n
        return True

    def grow(self, s: _Running) -> bool:
        """One more position for ``s``: a new block when its last one is full; False when none is free."""
        if s.table.n_tokens % self.alloc.block_size == 0:
            if self.alloc.n_free == 0:
                return False
            self.alloc.reserve(s.table, 1)
        s.table.n_tokens += 1
        return True

    def held(self, s: _Running) -> int:
        return len(s.table.blocks) * self.alloc.block_size

    def free(self, s: _Running):
        self.alloc.free(s.table)

    def swap_out(self, s: _Running) -> int:
        n = len(s.table.blocks)
        self.alloc.free(s.table)
        return n

    def swap_in(self, s: _Running):
        """Nothing to do: ``take`` gave it its blocks, and the copy back is only counted (by the scheduler)."""


class _ContiguousMemory:
    """The scheduler's memory under ``"max"``, ``"pow2"``, ``"oracle"``: one region per request, reserved at
    admission (first fit) for every token it will make, so it never runs out later and never preempts (no
    swap methods)."""

    def __init__(self, requests, policy: str, kv_tokens: int, max_len: int):
        self.alloc, self.policy, self.max_len = ContiguousAllocator(kv_tokens), policy, max_len
        biggest = max((reservation(r, policy, max_len) for r in requests), default=0)
        if biggest > kv_tokens:
            raise ValueError(f"a request reserves {biggest} positions under {policy!r} but the budget is only "
                             f"kv_tokens={kv_tokens}; raise kv_tokens")

    def take(self, s: _Running, batch, spare: int) -> bool:
        """A region for the whole request; False while no hole is big enough (the head of the queue waits)."""
        size = reservation(s.req, self.policy, self.max_len)
        start = self.alloc.allocate(size)
        if start is None:
            return False
        s.start, s.size = start, size
        return True

    def grow(self, s: _Running) -> bool:
        return True  # its region has room for every token it will make

    def held(self, s: _Running) -> int:
        return s.size

    def free(self, s: _Running):
        self.alloc.free(s.start, s.size)


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
    steps: int = 0
    running: list = field(default_factory=list)  # requests in the batch
    waiting: list = field(default_factory=list)  # requests still queued after admission
    tokens: list = field(default_factory=list)  # positions holding K/V of a token
    future: list = field(default_factory=list)  # reserved, will hold a token later
    never: list = field(default_factory=list)  # reserved, will never hold a token (internal fragmentation)
    free: list = field(default_factory=list)  # not handed out
    passes: list = field(default_factory=list)  # per step: {(n_new, context): sequences} the step's forward pass fed

    def _record_step(self, running: list, n_waiting: int, held):
        """Count what the budget holds after a step; ``held(s)``: the positions request s holds."""
        tokens = future = never = allocated = 0
        for s in running:
            n = held(s)
            allocated += n
            tokens += s.length
            future += min(n, s.req.total_len) - s.length
            never += n - min(n, s.req.total_len)
        for name, value in (("running", len(running)), ("waiting", n_waiting), ("tokens", tokens),
                            ("future", future), ("never", never), ("free", self.kv_tokens - allocated)):
            getattr(self, name).append(value)
        self.steps += 1

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

    def preemption_costs(self) -> dict:
        """What preemption cost in this run, as counts (for a table)."""
        return {"preemption": self.preemption, "preemptions": self.preemptions, "steps": self.steps,
                "tokens prefilled": self.prefill_tokens, "of them recomputed": self.recomputed_tokens,
                "blocks to CPU": self.swapped_out_blocks, "blocks from CPU": self.swapped_in_blocks,
                "most blocks on CPU": self.peak_cpu_blocks}

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
    sched = Scheduler(memory, [_Running(r) for r in requests], max_running, res, spare)
    running: list[_Running] = []
    while sched.waiting or running:
        admitted, fed = scheduler_step(sched, running, memory)  # 1. admission, 2. one token for the others
        res.passes.append(fed)
        running.extend(admitted)
        res._record_step(running, len(sched.waiting), memory.held)  # 3. count what the memory holds now
        still = []  # 4. finished requests give their memory back
        for s in running:
            if s.generated < s.req.output_len:
                still.append(s)
            else:
                memory.free(s)
        running = still
    return res


def scheduler_step(sched: Scheduler, running: list, memory) -> tuple[list, dict]:
    """One step of the scheduler over the memory, as ``simulate`` runs it (and notebook 10's build-it exercise
    checks against): 1. admission, first come first served (``Scheduler.admit``): each admitted request's prefill
    writes its prompt (after a recomputing preemption, prompt + the tokens it had made) and makes its first token;
    2. every request of ``running`` (in admission order) grows by one token (``_decode``): a new block when its
    last is full, and while none is free the most recently admitted of them is preempted. Returns (admitted,
    fed): the requests admitted (not yet in ``running``: the caller appends them) and what the step's forward
    pass fed, {(n_new, context): sequences}."""
    fed = {}
    admitted, resumed = sched.admit(running)
    for s in admitted:
        if s not in resumed:  # a prefill: the prompt, and after a preemption by recomputation every token made
            sched.prefilled(s, s.length)
            _feed(fed, s.length, s.length)
        else:  # swapped back in: it continues with its newest token
            _feed(fed, 1, s.length)
        s.generated += 1  # the prefill's token
    _decode(running, memory, sched, fed)
    return admitted, fed


def pass_seconds(passes, model, machine=None, dtype=torch.float16) -> list[float]:
    """Each forward pass's time on ``machine`` (default the H100 SXM) for ``model`` (a config or a model): a pass is
    {(n_new, context): sequences}, every sequence feeding n_new tokens over context positions; priced by the
    roofline (max(FLOPs / peak, bytes / bandwidth)) with the weights read once per pass and each sequence's K/V
    read and written (``lib.costs.step_cost``). The one pricing of ``SimResult`` and ``ServeResult``."""
    from ..roofline import DEFAULT_GPU, as_machine  # the one table of reference machines
    machine = as_machine(machine, default=DEFAULT_GPU)
    weights = costs.streamed_weight_bytes(model, dtype)
    per_seq = {}  # (n_new, context) -> (FLOPs, K/V bytes) of one sequence: the costs of lib.costs.step_cost
    out = []
    for fed in passes:
        flops = kv = 0
        for (n_new, context), n in fed.items():
            if (n_new, context) not in per_seq:
                c = costs.step_cost(model, context, n_new, 1, dtype)
                per_seq[n_new, context] = (c.flops, c.kv_read_bytes + c.kv_write_bytes)
            f, b = per_seq[n_new, context]
            flops, kv = flops + n * f, kv + n * b
        out.append(max(flops / (machine.peak_gflops * 1e9), (weights + kv) / (machine.bandwidth_gbs * 1e9)))
    return out


def _feed(fed: dict, n_new: int, context: int):
    fed[n_new, context] = fed.get((n_new, context), 0) + 1


def _decode(running: list, memory, sched: Scheduler, fed: dict):
    """One token for every request of ``running``, in admission order (each a pass of one new token over its
    ``length`` positions, counted in ``fed``). One whose last block is full takes a new block; while none is
    free the scheduler preempts the most recently admitted request (the end of ``running``), which may be this
    one itself."""
    i = 0
    while i < len(running):
        s = running[i]
        if memory.grow(s):
            _feed(fed, 1, s.length)
            s.generated += 1
            i += 1
        elif sched.preempt(running) is s:
            break


def compare_policies(requests, kv_tokens: int = 16384, block_size: int = 16, max_len: int = 2048,
                     policies=POLICIES) -> dict[str, SimResult]:
    """``simulate`` under each policy, same requests and budget."""
    return {p: simulate(requests, p, kv_tokens, block_size, max_len) for p in policies}
