"""Serving many requests at once: how KV memory is handed out decides how many fit, and how requests are
batched decides how busy the model stays.

Part 1, a simulation (lengths only, no model): a seeded stream of requests is served from a fixed KV budget
under four allocation policies, and every step we count what the KV memory holds.

* ``"max"``: each request reserves one contiguous region of ``max_len`` positions (pre-vLLM systems; the
  vLLM paper's "Orca (Max)").
* ``"pow2"``: the prompt plus the output length rounded up to a power of two ("Orca (Pow2)", which over-reserves
  the output by at most 2x and needs to know the output length: a best case, not something real).
* ``"oracle"``: exactly prompt + output positions ("Orca (Oracle)", knowing every output length in advance).
* ``"paged"``: blocks of ``block_size`` positions, taken one at a time as the sequence grows (vLLM).

When the paged pool runs out, a running request is preempted, in one of two ways (``preemption=``), the two
the vLLM paper compared: ``"recompute"`` frees its blocks and prefills its prompt and every token it had made
again when it comes back (counted: ``recomputed_tokens``); ``"swap"`` copies its blocks to CPU memory and back
(counted: ``swapped_out_blocks``, ``swapped_in_blocks``, ``peak_cpu_blocks``). vLLM today (the V1 engine)
recomputes only. ``block_size_tradeoff`` measures what the block size trades: empty slots in the last blocks
against block-table entries.

Contiguous regions come from a first-fit allocator over the whole budget, so variable-size reservations
leave holes between them (external fragmentation). Every step each position of the budget is one of:
holding a token's K/V, reserved for a token the request will produce later, reserved but never to be used
(internal fragmentation), or free.

Part 2, real serving on a model (``serve``): one shared ``PagedKVPool``, and every iteration one
``lib.paged.forward_paged`` pass over the batch (joining requests feed their prompt, running ones one token).
``"static"`` batching admits a batch and runs it until its longest request is done (rows that finished early
sit idle: padding); ``"continuous"`` (iteration-level, Orca / vLLM) lets finished requests leave and waiting
ones join at every step. Both report deterministic counts (steps,
tokens, idle slots, time-to-first-token in passes) and measured wall-clock figures (tokens/s, TTFT in seconds).
"""
from __future__ import annotations

import math
import random
import time
from collections import deque
from dataclasses import dataclass, field

import torch

from . import checks, costs
from .device import synchronize
from .roofline import DEFAULT_GPU, Machine
from .paged import MAX_BLOCKS, BlockAllocator, BlockTable, PagedKVPool, PoolExhaustedError, forward_paged
from .sampling import choose


POLICIES = ("max", "pow2", "oracle", "paged")
PREEMPTIONS = ("recompute", "swap")  # what happens to a preempted request's blocks
HOST_LINK_GBS = 64.0  # GB/s each way between GPU and CPU memory: PCIe 5.0 x16, nominal (PCIe 4.0 x16: 32)
REQUEST_BYTES = 1024  # about what one request of a stream and its record in a run take
CONTIGUOUS = ("max", "pow2", "oracle")


# ====================================================================================== part 1: simulation

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


@dataclass(eq=False)
class _Running:
    req: SimRequest
    generated: int = 0  # tokens produced so far (the KV memory holds prompt + generated positions)
    start: int = 0  # contiguous: region start
    size: int = 0  # contiguous: region size
    table: BlockTable | None = None  # paged
    swapped: int = 0  # paged, preempted by swapping: blocks of it that wait in CPU memory

    @property
    def length(self) -> int:
        return self.req.prompt_len + self.generated


@dataclass
class SimResult:
    """What ``simulate`` measured. The per-step lists hold position counts of the whole budget after that
    step's tokens were written (tokens + future + never + free == kv_tokens every step)."""

    policy: str
    kv_tokens: int
    block_size: int
    max_len: int
    n_requests: int
    preemption: str = "recompute"
    steps: int = 0
    preemptions: int = 0
    prefill_tokens: int = 0  # tokens fed by prefills: every prompt, plus what recomputation fed again
    recomputed_tokens: int = 0  # recompute: tokens prefilled again after a preemption (prompt + tokens made)
    swapped_out_blocks: int = 0  # swap: blocks copied to CPU memory at preemptions
    swapped_in_blocks: int = 0  # swap: blocks copied back when a preempted request resumed
    peak_cpu_blocks: int = 0  # swap: most blocks waiting in CPU memory at one time
    running: list = field(default_factory=list)  # requests in the batch
    waiting: list = field(default_factory=list)  # requests still queued after admission
    tokens: list = field(default_factory=list)  # positions holding K/V of a token
    future: list = field(default_factory=list)  # reserved, will hold a token later
    never: list = field(default_factory=list)  # reserved, will never hold a token (internal fragmentation)
    free: list = field(default_factory=list)  # not handed out

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
    requests = _listed(requests, "requests", SimRequest, "SimRequest(rid, prompt_len, output_len) objects")
    for r in requests:
        if r.total_len > max_len:
            raise ValueError(f"request {r.rid} needs {r.total_len} positions, more than max_len={max_len}")
    paged = policy == "paged"
    if paged:
        n_blocks = kv_tokens // block_size
        if n_blocks == 0 or kv_tokens % block_size:
            raise ValueError(f"kv_tokens={kv_tokens} must be a positive multiple of block_size={block_size}")
        if n_blocks > MAX_BLOCKS:
            raise ValueError(f"kv_tokens={kv_tokens} in blocks of block_size={block_size} makes {n_blocks:,} blocks, "
                             f"more than the {MAX_BLOCKS:,} the simulation keeps track of; lower kv_tokens or raise "
                             f"block_size")
        alloc = BlockAllocator(n_blocks, block_size)
        spare = int(watermark * n_blocks)
        biggest = max((-(-r.total_len // block_size) for r in requests), default=0)
        if biggest > n_blocks:
            raise ValueError(f"a request needs {biggest} blocks but the pool has only {n_blocks}; raise kv_tokens")
    else:
        alloc = ContiguousAllocator(kv_tokens)
        biggest = max((reservation(r, policy, max_len) for r in requests), default=0)
        if biggest > kv_tokens:
            raise ValueError(f"a request reserves {biggest} positions under {policy!r} but the budget is only "
                             f"kv_tokens={kv_tokens}; raise kv_tokens")
    res = SimResult(policy, kv_tokens, block_size, max_len, len(requests), preemption)
    waiting = deque(_Running(r) for r in requests)
    cpu_blocks = 0  # swap: blocks of preempted requests held in CPU memory
    running: list[_Running] = []
    while waiting or running:
        # 1. admission, first come first served
        admitted = []
        while waiting and len(running) + len(admitted) < max_running:
            s = waiting[0]
            if paged:
                need = -(-(s.length + 1) // block_size)  # prompt (+ tokens made before a preemption) + 1 new
                if alloc.n_free - need < (spare if running or admitted else 0):  # alone, it always fits
                    break
                s.table = BlockTable()
                alloc.reserve(s.table, s.length + 1)
                s.table.n_tokens = s.length + 1
                if s.swapped:  # its blocks come back from CPU memory; it continues with one decode step
                    res.swapped_in_blocks += s.swapped
                    cpu_blocks -= s.swapped
                    s.swapped = 0
                else:  # a prefill: the prompt, and after a preemption by recomputation every token made so far
                    res.prefill_tokens += s.length
                    res.recomputed_tokens += s.length if s.generated else 0
            else:
                size = reservation(s.req, policy, max_len)
                start = alloc.allocate(size)
                if start is None:
                    break
                s.start, s.size = start, size
            waiting.popleft()
            s.generated += 1  # the prefill's token
            admitted.append(s)
        if waiting and not running and not admitted:  # the checks above make this impossible; never spin
            raise RuntimeError(f"simulate admitted nothing with an empty batch (request {waiting[0].req.rid}); "
                               f"this is a bug in lib.serving")
        # 2. one decode step for every request that was already running (in admission order)
        i = 0
        while i < len(running):
            s = running[i]
            if paged and s.table.n_tokens % block_size == 0:  # its last block is full: it needs a new one
                while alloc.n_free == 0:
                    victim = running.pop()  # preempt the most recently admitted request
                    if preemption == "swap":  # its blocks go to CPU memory
                        victim.swapped = len(victim.table.blocks)
                        res.swapped_out_blocks += victim.swapped
                        cpu_blocks += victim.swapped
                        res.peak_cpu_blocks = max(res.peak_cpu_blocks, cpu_blocks)
                    alloc.free(victim.table)
                    waiting.appendleft(victim)
                    res.preemptions += 1
                    if victim is s:
                        break
                if i >= len(running):  # it was itself the victim
                    break
                alloc.reserve(s.table, 1)
            if paged:
                s.table.n_tokens += 1
            s.generated += 1
            i += 1
        running.extend(admitted)
        # 3. count what the memory holds now
        tokens = future = never = allocated = 0
        for s in running:
            held = len(s.table.blocks) * block_size if paged else s.size
            allocated += held
            tokens += s.length
            future += min(held, s.req.total_len) - s.length
            never += held - min(held, s.req.total_len)
        res.running.append(len(running))
        res.waiting.append(len(waiting))
        res.tokens.append(tokens)
        res.future.append(future)
        res.never.append(never)
        res.free.append(kv_tokens - allocated)
        res.steps += 1
        # 4. finished requests give their memory back
        still = []
        for s in running:
            if s.generated < s.req.output_len:
                still.append(s)
            elif paged:
                alloc.free(s.table)
            else:
                alloc.free(s.start, s.size)
        running = still
    return res


def preemption_seconds(result: SimResult, model, dtype=torch.float16, machine: Machine | None = None,
                       link_gbs: float = HOST_LINK_GBS) -> dict:
    """Lower bounds on the time ``result``'s preemptions cost if its lengths were a real model's requests:
    ``"recompute"``: its recomputed tokens' prefill at the machine's peak (2 FLOPs per weight per token, the
    weight products; attention adds more at long contexts); ``"swap"``: its swapped bytes over the host link at
    ``link_gbs`` GB/s each way. A run of one kind has 0 for the other."""
    if not isinstance(result, SimResult):
        raise TypeError(f"preemption_seconds takes a SimResult from simulate, got {type(result).__name__}")
    machine = DEFAULT_GPU if machine is None else machine
    if not isinstance(machine, Machine):
        raise TypeError(f"machine must be a lib.roofline.Machine (e.g. lib.roofline.REFERENCE_MACHINES['H100 SXM']), "
                        f"got {type(machine).__name__}")
    link_gbs = checks.number(link_gbs, "link_gbs", above=0, maximum=1e6)
    flops = 2 * costs.param_count(model) * result.recomputed_tokens
    return {"recompute": flops / (machine.peak_gflops * 1e9),
            "swap": result.swap_bytes(costs.kv_bytes_per_token(model, dtype)) / (link_gbs * 1e9)}


def _listed(items, name: str, kind, what: str) -> list:
    """``items`` (any iterable) as a list, every element a ``kind``, else a TypeError saying what is expected."""
    try:
        items = list(items)
    except TypeError:
        raise TypeError(f"{name} must be a list of {what}, got {type(items).__name__} {items!r:.60}") from None
    bad = next((x for x in items if not isinstance(x, kind)), None)
    if bad is not None:
        raise TypeError(f"{name} must be a list of {what}; one of them is {type(bad).__name__} {bad!r:.60}")
    return items


def compare_policies(requests, kv_tokens: int = 16384, block_size: int = 16, max_len: int = 2048,
                     policies=POLICIES) -> dict[str, SimResult]:
    """``simulate`` under each policy, same requests and budget."""
    return {p: simulate(requests, p, kv_tokens, block_size, max_len) for p in policies}


@dataclass(frozen=True)
class BlockSizeCost:
    """What paging sequences of given lengths in blocks of ``block_size`` positions costs: the empty slots of
    their last blocks (internal waste) against the entries of their block tables."""

    block_size: int
    n_sequences: int
    tokens: int  # positions holding tokens, all sequences together
    table_entries: int  # blocks held = block-table entries, all sequences together

    @property
    def slots(self) -> int:
        return self.table_entries * self.block_size

    @property
    def empty_slots(self) -> int:
        """Slots of the last blocks that hold no token (never more than block_size - 1 per sequence)."""
        return self.slots - self.tokens

    @property
    def empty_share(self) -> float:
        """Empty slots / slots held."""
        return self.empty_slots / self.slots

    @property
    def entries_per_sequence(self) -> float:
        return self.table_entries / self.n_sequences

    def table_bytes(self, entry_bytes: int = 4) -> int:
        """Bytes of all block tables (vLLM keeps a block id in 4 bytes, an int32)."""
        return self.table_entries * checks.integer(entry_bytes, "entry_bytes", 1)

    def row(self) -> dict:
        """Rounded, for a table."""
        return {"block size": self.block_size, "empty slots": self.empty_slots,
                "empty %": round(100 * self.empty_share, 2), "table entries": self.table_entries,
                "entries / sequence": round(self.entries_per_sequence, 2)}


def block_size_tradeoff(lengths, block_sizes=range(1, 65)) -> list[BlockSizeCost]:
    """For each block size, the cost of holding sequences of ``lengths`` positions in blocks: each takes
    ceil(length / block_size) blocks (its table's entries), and the last one has
    blocks * block_size - length empty slots. Small blocks waste almost nothing but make long tables (more
    entries to keep, look up and gather, each a small piece); large blocks make short tables and big pieces
    but leave up to block_size - 1 slots empty per sequence (about half a block on average)."""
    lengths = [checks.integer(n, "each length", 1) for n in _listed(lengths, "lengths", object, "positive integers")]
    if not lengths:
        raise ValueError("block_size_tradeoff needs at least one sequence length")
    sizes = [checks.integer(b, "each block size", 1) for b in _listed(block_sizes, "block_sizes", object,
                                                                           "positive integers")]
    if not sizes:
        raise ValueError("block_size_tradeoff needs at least one block size")
    total = sum(lengths)
    return [BlockSizeCost(b, len(lengths), total, sum(-(-n // b) for n in lengths)) for b in sizes]


# ================================================================================= part 2: real serving

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
    from .corpus import read_corpus

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
class ServeResult:
    """What ``serve`` did. Counts are deterministic; ``seconds`` and the per-request times are measured."""

    policy: str
    max_batch: int
    records: list
    steps: int  # iterations = forward passes
    batch_rows: list  # sequences in each forward pass (each of them gets one new token from it)
    fed_tokens: list  # tokens fed in each forward pass (whole prompts of joining requests + 1 per running one)
    idle_slots: list  # per pass: batch slots held by finished requests (static) or left empty while requests
    #                   waited (continuous)
    blocks_used: list  # KV blocks in use after each pass
    prefills: int  # prompts fed (a preempted request's recomputation counts again)
    prefill_tokens: int  # prompt tokens computed (prefix-cache hits excluded, recomputation included)
    prefix_hit_blocks: int  # blocks taken from the prefix cache instead of being computed
    preemptions: int
    seconds: float
    preemption: str = "recompute"
    recomputed_tokens: int = 0  # recompute: tokens prefilled again after preemptions (prompt + tokens made)
    swapped_out_blocks: int = 0  # swap: blocks copied from the pool to CPU memory
    swapped_in_blocks: int = 0  # swap: blocks copied back into the pool
    swap_bytes: int = 0  # swap: bytes of K/V copied, both ways
    peak_cpu_blocks: int = 0  # swap: most blocks in CPU memory at one time

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

    def timings(self) -> dict:
        """Measured on this machine (vary run to run)."""
        return {"policy": self.policy, "seconds": round(self.seconds, 3),
                "tokens/s": round(self.tokens_per_second, 1),
                "ms per pass": round(1e3 * self.seconds / self.steps, 2) if self.steps else float("nan"),
                "mean TTFT (ms)": round(1e3 * self.mean_ttft_seconds(), 1),
                "mean latency (ms)": round(1e3 * _mean([r.finish_seconds for r in self.records]), 1)}


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
    swapped: tuple | None = None  # preempted by swapping: (positions, [(K, V) per layer] in CPU memory)


def _swap_out(pool: PagedKVPool, s: _Live) -> int:
    """Copy the K/V of ``s``'s positions to CPU memory and free its blocks; returns the blocks copied."""
    blocks = torch.tensor(s.table.blocks, dtype=torch.long, device=pool.device)
    s.swapped = (s.table.n_tokens, [(k[blocks].to("cpu"), v[blocks].to("cpu")) for k, v in zip(pool.k, pool.v)])
    pool.free(s.table)
    return len(blocks)


def _swap_in(pool: PagedKVPool, s: _Live) -> int:
    """Give ``s`` new blocks and copy its K/V back from CPU memory; returns the blocks copied."""
    n_tokens, saved = s.swapped
    pool.reserve(s.table, n_tokens)
    blocks = torch.tensor(s.table.blocks, dtype=torch.long, device=pool.device)
    for layer, (k, v) in enumerate(saved):
        pool.k[layer][blocks] = k.to(pool.device)
        pool.v[layer][blocks] = v.to(pool.device)
    s.table.n_tokens, s.swapped = n_tokens, None
    return len(blocks)


@torch.no_grad()
def serve(model, requests, policy: str = "continuous", max_batch: int = 8, eos_id: int | None = None,
          block_size: int = 16, n_blocks: int | None = None, prefix_cache: bool = False,
          preemption: str = "recompute") -> ServeResult:
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
    with a pool large enough never to preempt (greedy decoding)."""
    checks.choice(policy, "policy", ("static", "continuous"))
    checks.choice(preemption, "preemption", PREEMPTIONS)
    max_batch, block_size = checks.integer(max_batch, "max_batch", 1), checks.integer(block_size, "block_size", 1)
    prefix_cache = checks.flag(prefix_cache, "prefix_cache")
    c = model.config
    eos_id = None if eos_id is None else checks.token_id(eos_id, "eos_id", c.vocab_size)
    requests = [_checked_request(r, c) for r in _listed(requests, "requests", ServeRequest,
                                                            "ServeRequest objects (see demo_requests)")]
    if n_blocks is None:  # room for max_batch full-length sequences
        n_blocks = max_batch * -(-c.max_seq_len // block_size)
        checks.fits_in_memory(2 * c.n_layers * n_blocks * c.n_kv_heads * block_size * c.head_dim * model.dtype.itemsize,
                              model.device, f"the default pool for max_batch={max_batch} full-length sequences in "
                                            f"blocks of block_size={block_size}")
    pool = PagedKVPool.for_model(model, checks.integer(n_blocks, "n_blocks", 1), block_size)
    biggest = max((-(-(len(r.prompt) + r.max_new_tokens - 1) // block_size) for r in requests), default=0)
    if biggest > n_blocks:
        raise ValueError(f"a request may need {biggest} blocks of {block_size} tokens (prompt + max_new_tokens) but "
                         f"the pool has n_blocks={n_blocks}; give n_blocks >= {biggest} or lower max_new_tokens")
    device = model.device
    was_training = model.training
    model.eval()
    records = [RequestRecord(r.rid, len(r.prompt)) for r in requests]
    waiting = deque(_Live(r, rec, BlockTable(name=str(r.rid))) for r, rec in zip(requests, records))
    running: list[_Live] = []
    res = ServeResult(policy, max_batch, records, 0, [], [], [], [], 0, 0, 0, 0, 0.0, preemption)
    cpu_blocks = 0  # swap: blocks of preempted requests held in CPU memory
    batch_size = 0  # static: the size of the batch in flight
    t0 = time.perf_counter()
    try:
        while waiting or running:
            # 1. admission: who joins this pass (their prompt's blocks must fit next to the running ones' growth)
            joined, resumed = [], set()  # resumed: swapped back in this pass (they feed one token, no prompt)
            if policy == "continuous" or not running:
                while waiting and len(running) + len(joined) < max_batch:
                    s = waiting[0]
                    ids = s.req.prompt + s.rec.tokens  # after a preemption: prompt + what it had made
                    if s.swapped:  # it needs blocks for what waits in CPU memory, and one more position
                        s.feed = [s.rec.tokens[-1]]
                        grow = s.swapped[0] + 1
                    else:
                        if prefix_cache:
                            pool.match_prefix(s.table, ids)
                        s.feed = ids[s.table.n_tokens:]
                        grow = len(s.feed)
                    batch = running + joined + [s]
                    need = pool.allocator.blocks_needed([x.table for x in batch],
                                                        [1] * len(running) + [len(x.feed) for x in joined] + [grow])
                    if need > pool.allocator.n_free:
                        pool.free(s.table)  # give back the prefix blocks it had taken; it waits
                        break
                    if s.swapped:
                        k = _swap_in(pool, s)
                        res.swapped_in_blocks += k
                        res.swap_bytes += k * pool.block_nbytes
                        cpu_blocks -= k
                        resumed.add(s)
                    joined.append(waiting.popleft())
                if policy == "static" and joined:
                    batch_size = len(joined)
            for s in running:
                s.feed = [s.rec.tokens[-1]]
            # 2. one forward pass over the whole batch
            batch, logits = running + joined, None
            while batch and logits is None:
                try:
                    logits = forward_paged(model, pool, [s.table for s in batch], [s.feed for s in batch])
                except PoolExhaustedError:  # preempt the most recently admitted request; it is recomputed later
                    victim = batch.pop()
                    if preemption == "swap" and victim.rec.tokens:  # it has made tokens: keep its K/V on the CPU
                        k = _swap_out(pool, victim)
                        res.swapped_out_blocks += k
                        res.swap_bytes += k * pool.block_nbytes
                        cpu_blocks += k
                        res.peak_cpu_blocks = max(res.peak_cpu_blocks, cpu_blocks)
                    else:  # it starts again from its prompt (a request that had not run yet loses nothing)
                        pool.free(victim.table)
                    victim.rec.preemptions += 1
                    res.preemptions += 1
                    waiting.appendleft(victim)
            if logits is None:  # nothing could run: the checks before the loop make this impossible; never spin
                raise RuntimeError(f"serve could not run any request at pass {res.steps} ({len(waiting)} waiting); "
                                   f"this is a bug in lib.serving")
            if logits is not None:
                checks.finite_logits(logits, model, f"serve's forward pass {res.steps}")
                next_ids = choose(logits).tolist()  # greedy
                synchronize(device)
                now = time.perf_counter() - t0
            res.batch_rows.append(len(batch) if logits is not None else 0)
            res.fed_tokens.append(sum(len(s.feed) for s in batch) if logits is not None else 0)
            running = []
            for s, tok in zip(batch, next_ids if logits is not None else []):
                if s in joined and s not in resumed:  # it fed a prompt (its first, or a recomputation)
                    res.prefills += 1
                    res.prefill_tokens += len(s.feed)
                    if s.rec.tokens:
                        res.recomputed_tokens += len(s.feed)
                    if prefix_cache:
                        pool.register_prefix(s.table, s.req.prompt + s.rec.tokens)
                s.rec.tokens.append(tok)
                if s.rec.first_token_step < 0:
                    s.rec.admitted_step = s.rec.first_token_step = res.steps
                    s.rec.first_token_seconds = now
                if len(s.rec.tokens) >= s.req.max_new_tokens or (eos_id is not None and tok == eos_id):
                    pool.free(s.table)
                    s.rec.finish_step, s.rec.finish_seconds = res.steps, now
                else:
                    running.append(s)
            rows = res.batch_rows[-1]
            if policy == "static":
                res.idle_slots.append(batch_size - rows if rows else 0)
            else:
                res.idle_slots.append(max_batch - rows if waiting else 0)
            res.blocks_used.append(pool.allocator.n_used)
            res.steps += 1
    finally:
        model.train(was_training)
    synchronize(device)
    res.seconds = time.perf_counter() - t0
    res.prefix_hit_blocks = pool.allocator.n_prefix_hits
    return res
