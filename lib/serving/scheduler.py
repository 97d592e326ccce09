"""One scheduler for both halves of ``lib.serving`` (nano-vllm's ``Scheduler`` and ``Sequence``, in small): who
joins the step, what each request feeds in it, who is preempted when the memory runs out, and what a step's new
tokens do. The memory simulation (``simulate``) and real serving on a model (``serve``) are the same loop over it:

    while scheduler.waiting or scheduler.running:
        batch = scheduler.schedule()        # the step's rows: prefill chunks and decodes, their memory taken
        new_tokens = ...                    # serve: one forward pass; simulate: lengths only (no tokens)
        scheduler.postprocess(batch, new_tokens)   # append, finish at eos / max_tokens, free

``schedule()``, in order:
    1. admission, first come first served: while a row is free (``max_running``) the head of ``waiting`` joins
       if the memory takes it (``spare`` blocks left over while others run); the head waits, and nobody behind it
       jumps ahead. "static" batching admits only into an empty batch.
    2. what each row feeds: a decode its newest token; a prefill its prompt (after a preemption by recompute, the
       prompt and every token it had made); one swapped back in continues with its newest token. Under a token
       budget (``max_num_batched_tokens``) every decode gets its token first, then the prefills, in admission
       order, a chunk each of what is left (chunked prefill); a row left with nothing waits in its slot.
    3. while the step's rows do not fit in the memory, the most recently admitted request that was running before
       this step is preempted (a request admitted in this step was admitted because it fit): "recompute" frees
       its blocks, "swap" copies them to CPU memory first; either way it goes back to the head of ``waiting``.

A ``Sequence`` is the one request type in flight: its prompt, the tokens it has made, its status, its block table
and how many of its positions are computed. What ``memory`` is differs: the simulation's counts positions and
blocks (no tensors), real serving's is a ``lib.paged.PagedKVPool``. Each has these methods:

    take(seq, rows, spare) -> bool   room for seq's step next to ``rows`` (the step's rows so far) with ``spare``
                                     blocks left over; False, and nothing changed, when there is not
    fits(rows) -> bool               the step's rows fit (their new positions, in free blocks)
    grow(rows)                       take the blocks the step's rows write
    prefilled(seq)                   seq's prefill is all computed (real serving indexes its prefix blocks)
    free(seq)                        its blocks back to the pool
    swap_out(seq) -> int             its blocks copied to CPU memory, then freed; how many
    swap_in(seq)                     blocks again (take made sure they are there) and its K/V copied back
    drop_swapped(seq)                forget what swap_out copied (real serving: a swapped request aborted)
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from enum import Enum

from ..blocks import BlockTable

PREEMPTIONS = ("recompute", "swap")  # what happens to a preempted request's blocks
REQUEST_BYTES = 1024  # about what one request of a stream and its record in a run take


class Status(Enum):
    WAITING = "waiting"  # in the queue: not admitted yet, or preempted
    RUNNING = "running"  # admitted: holds memory, feeds a chunk or a token each step
    FINISHED = "finished"  # eos or max_tokens reached; its memory is freed


@dataclass(eq=False)
class Sequence:
    """A request in flight. ``prompt`` holds token ids (None in the simulation, which knows lengths only); ``tokens``
    the tokens made so far (None for each one in the simulation). ``num_computed`` positions have their K/V in the
    cache (``num_cached`` of them came from the prefix cache); the step feeds the next ``num_scheduled``."""

    rid: int
    prompt_len: int
    max_tokens: int  # it finishes after making this many tokens (or at eos)
    prompt: list | None = None
    tokens: list = field(default_factory=list)
    status: Status = Status.WAITING
    table: BlockTable = field(default_factory=BlockTable)
    num_computed: int = 0
    num_cached: int = 0
    num_scheduled: int = 0
    is_prefill: bool = True  # its prefill (or recomputation) is not all fed yet
    cpu_blocks: int = 0  # preempted by swap: blocks of it waiting in CPU memory
    preemptions: int = 0  # times it was preempted
    first_token_step: int = -1  # the step that made its first token (its prefill's last chunk)
    finish_step: int = -1
    arrival_step: int = 0  # the step it arrived before (serve: every request at step 0)
    first_token_seconds: float = float("nan")  # real serving: since its engine started (serve: since serve()
    finish_seconds: float = float("nan")  #        started, when every request had arrived)
    arrival_seconds: float = 0.0

    def __len__(self) -> int:
        """Positions it has: prompt + tokens made (the newest one's K/V is written by the next step)."""
        return self.prompt_len + len(self.tokens)

    @property
    def ids(self) -> list:
        return self.prompt + self.tokens

    @property
    def swapped(self) -> bool:
        return self.cpu_blocks > 0

    @property
    def admitted_step(self) -> int:
        """The step of its prefill that made its first token (a timeline's prefill column)."""
        return self.first_token_step


@dataclass(frozen=True)
class Batch:
    """One step's rows, in admission order: each feeds ``n_new[i]`` tokens and holds ``contexts[i]`` positions
    after the step. ``admitted``: requests admitted in this step (a static batch's size); ``running``: requests
    running in the step (its rows and those that wait in their slot for the budget)."""

    seqs: list
    n_new: list
    contexts: list
    admitted: int
    running: int

    def __len__(self) -> int:
        return len(self.seqs)

    def fed(self) -> dict:
        """What the step's forward pass fed: {(n_new, context): sequences}."""
        out = {}
        for key in zip(self.n_new, self.contexts):
            out[key] = out.get(key, 0) + 1
        return out


@dataclass(kw_only=True)
class SchedulerCounts:
    """What admission and preemption did in a run. ``SimResult`` and ``ServeResult`` are these counts and more;
    the ``Scheduler`` adds to them as it goes."""

    STEP_WORDS = ("steps", "tokens prefilled")  # a result's words for its steps and its prefill tokens in tables

    preemption: str = "recompute"  # what a preemption did: "recompute" or "swap" (PREEMPTIONS)
    steps: int = 0
    admissions: int = 0  # requests admitted into the batch (a preempted request's readmission counts again)
    prefills: int = 0  # prompts fed (a recomputation counts again; a swapped request's readmission does not)
    prefill_tokens: int = 0  # tokens fed by prefills: every prompt (less prefix-cache hits), plus what
    #                          recomputation fed again
    recomputed_tokens: int = 0  # recompute: tokens prefilled again after a preemption (prompt + tokens made)
    preemptions: int = 0
    swapped_out_blocks: int = 0  # swap: blocks copied to CPU memory at preemptions
    swapped_in_blocks: int = 0  # swap: blocks copied back when a preempted request resumed
    peak_cpu_blocks: int = 0  # swap: most blocks waiting in CPU memory at one time

    def moved_bytes(self) -> int | None:
        """Bytes swapping moved, both ways, when the run knows them (None: lengths only)."""
        return None

    def preemption_costs(self) -> dict:
        """What preemption cost in this run, counted (deterministic), for a table."""
        steps, prefilled = self.STEP_WORDS
        out = {"preemption": self.preemption, "preemptions": self.preemptions, steps: self.steps,
               prefilled: self.prefill_tokens, "of them recomputed": self.recomputed_tokens,
               "blocks to CPU": self.swapped_out_blocks, "blocks from CPU": self.swapped_in_blocks}
        if self.moved_bytes() is not None:
            out["bytes moved"] = self.moved_bytes()
        return out | {"most blocks on CPU": self.peak_cpu_blocks}


class Scheduler:
    """First come, first served admission into at most ``max_running`` rows, a step's batch under a token budget
    (``max_num_batched_tokens``, None: no limit), and preemption of the most recently admitted running request
    when the memory runs out, counted in ``counts`` (whose ``preemption`` says what a preemption does).
    ``waiting`` is the queue: ``seqs`` in order, preempted ones back at its head; ``running`` in admission order.
    ``continuous=False`` is static batching: a new batch only when the last one is done."""

    def __init__(self, memory, seqs, max_running: int, counts: SchedulerCounts, spare: int = 0,
                 max_num_batched_tokens: int | None = None, continuous: bool = True, eos_id: int | None = None):
        self.memory, self.max_running, self.counts, self.spare = memory, max_running, counts, spare
        self.budget, self.continuous, self.eos_id = max_num_batched_tokens, continuous, eos_id
        self.waiting: deque[Sequence] = deque(seqs)
        self.running: list[Sequence] = []
        self.cpu_blocks = 0  # swap: blocks of preempted requests waiting in CPU memory now

    def is_finished(self) -> bool:
        return not self.waiting and not self.running

    def schedule(self) -> Batch:
        """The step's batch: 1. admission, 2. what each row feeds (under the budget), 3. preemption until the
        rows fit; their memory taken and their prefills counted."""
        admitted = self._admit() if self.continuous or not self.running else []
        rows = self._feeds(self.running)
        while not self.memory.fits(rows):
            victim = next((s for s in reversed(rows) if s not in admitted), None)
            if victim is None:
                raise RuntimeError(f"the scheduler could not fit the requests it admitted ({len(self.waiting)} "
                                   f"waiting); this is a bug in lib.serving")
            rows.remove(victim)
            self.preempt(victim)
        self.memory.grow(rows)
        for s in rows:
            if s.is_prefill:
                self._prefilled(s)
        return Batch(rows, [s.num_scheduled for s in rows], [s.num_computed + s.num_scheduled for s in rows],
                     len(admitted), len(self.running))

    def _admit(self) -> list:
        """Admit waiting requests while a row is free and the memory takes the head of the queue. A swapped one
        comes back from CPU memory and continues with one token; the others prefill."""
        admitted = []
        while self.waiting and len(self.running) < self.max_running:
            s = self.waiting[0]
            if not self.memory.take(s, self.running, self.spare if self.running else 0):
                break
            self.waiting.popleft()
            s.status = Status.RUNNING
            s.is_prefill = not s.swapped
            s.num_computed = s.num_cached
            if s.swapped:  # its blocks come back from CPU memory; everything swapped out comes back
                self.memory.swap_in(s)
                self.counts.swapped_in_blocks += s.cpu_blocks
                self.cpu_blocks -= s.cpu_blocks
                s.cpu_blocks, s.num_computed = 0, len(s) - 1
            self.running.append(s)
            admitted.append(s)
            self.counts.admissions += 1
        if self.waiting and not self.running:  # every request fits alone (checked up front): never spin
            raise RuntimeError(f"the scheduler admitted nothing into an empty batch ({len(self.waiting)} waiting); "
                               f"this is a bug in lib.serving")
        return admitted

    def _feeds(self, running: list) -> list:
        """Set what each running request feeds this step (``num_scheduled``): a decode its one token first, then
        the prefills in admission order, a chunk each of what is left of the budget. Returns the rows that feed."""
        left = None if self.budget is None else self.budget - sum(not s.is_prefill for s in running)
        for s in running:
            s.num_scheduled = len(s) - s.num_computed if s.is_prefill else 1
            if s.is_prefill and left is not None:
                s.num_scheduled = min(s.num_scheduled, max(0, left))
                left -= s.num_scheduled
        return [s for s in running if s.num_scheduled]

    def _prefilled(self, s: Sequence):
        """Count a prefill chunk: a recomputation when the request had made tokens before. A prefill fed in chunks
        counts once, at its first chunk."""
        self.counts.prefills += s.num_computed == s.num_cached
        self.counts.prefill_tokens += s.num_scheduled
        if s.tokens:
            self.counts.recomputed_tokens += s.num_scheduled

    def preempt(self, s: Sequence):
        """Take ``s`` out of the running requests and put it at the head of the queue. Under "swap" its blocks go
        to CPU memory (when it has made tokens: a request that had not run yet has nothing to keep); otherwise
        they are freed and it prefills again when readmitted."""
        self.running.remove(s)
        if self.counts.preemption == "swap" and s.tokens:
            s.cpu_blocks = self.memory.swap_out(s)
            self.counts.swapped_out_blocks += s.cpu_blocks
            self.cpu_blocks += s.cpu_blocks
            self.counts.peak_cpu_blocks = max(self.counts.peak_cpu_blocks, self.cpu_blocks)
        else:
            self.memory.free(s)
        s.status, s.num_computed, s.num_cached, s.num_scheduled = Status.WAITING, 0, 0, 0
        s.preemptions += 1
        self.counts.preemptions += 1
        self.waiting.appendleft(s)

    def postprocess(self, batch: Batch, new_tokens: list):
        """After the step: each row's fed positions are computed; a row whose prefill is done (or that decoded)
        gets its new token, and one that reaches eos or its ``max_tokens`` finishes and frees its memory."""
        step = self.counts.steps
        for s, token in zip(batch.seqs, new_tokens):
            s.num_computed += s.num_scheduled
            if s.is_prefill:
                if s.num_computed < len(s):  # a chunk: the rest of its prompt comes in the next steps
                    continue
                s.is_prefill = False
                self.memory.prefilled(s)
            s.tokens.append(token)
            if s.first_token_step < 0:
                s.first_token_step = step
            if len(s.tokens) >= s.max_tokens or (self.eos_id is not None and token == self.eos_id):
                self.finish(s, step)
        self.counts.steps += 1

    def finish(self, s: Sequence, step: int):
        """``s`` is done at ``step`` (eos or max_tokens here; a stop sequence or an abort in ``Engine``): out of
        the running requests or the queue, its memory freed (a swapped one's copy in CPU memory dropped)."""
        if s.status is Status.RUNNING:
            self.running.remove(s)
            self.memory.free(s)
        elif s.status is Status.WAITING:
            self.waiting.remove(s)
            if s.swapped:
                self.memory.drop_swapped(s)
                self.cpu_blocks -= s.cpu_blocks
                s.cpu_blocks = 0
        s.status, s.finish_step = Status.FINISHED, step


def listed(items, name: str, kind, what: str) -> list:
    """``items`` (any iterable) as a list, every element a ``kind``, else a TypeError saying what is expected."""
    try:
        items = list(items)
    except TypeError:
        raise TypeError(f"{name} must be a list of {what}, got {type(items).__name__} {items!r:.60}") from None
    bad = next((x for x in items if not isinstance(x, kind)), None)
    if bad is not None:
        raise TypeError(f"{name} must be a list of {what}; one of them is {type(bad).__name__} {bad!r:.60}")
    return items
