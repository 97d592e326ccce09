"""One scheduler for both halves of ``lib.serving``: who joins the batch, who is preempted when memory runs out,
and what preemption costs (vLLM's ``Scheduler``, in small). The memory simulation (``simulate``) and real
serving on a model (``serve``) run the same policy and count it in the same counters:

    every step:
        admitted = []
        while waiting and len(batch) + len(admitted) < max_running:     # first come, first served
            if not memory.take(waiting[0], batch + admitted, spare):    # the head waits, and nobody behind it
                break                                                   #   jumps ahead
            request = waiting.popleft()
            if request.swapped: memory.swap_in(request)                 # it continues where it stopped
            admitted.append(request)
        ... the step runs; each time the memory runs out:
            victim = batch.pop()                                        # the most recently admitted request
            "swap" (and it has made tokens): memory.swap_out(victim)    # its blocks to CPU memory
            else:                             memory.free(victim)       # readmitted, it prefills its prompt and
            waiting.appendleft(victim)                                  #   every token it had made again

``spare`` is the watermark: blocks admission leaves free for the running requests to grow into (none when
nothing runs, so a request that fits alone is always admitted). What ``memory`` is differs: the simulation's
counts positions and blocks (no tensors); real serving's is a ``lib.paged.PagedKVPool``. Each has four methods:

    take(request, batch, spare) -> bool   room for request next to batch, spare blocks left over; False, and
                                          nothing changed, when there is not
    free(request)                         its memory back to the pool
    swap_out(request) -> int              its blocks copied to CPU memory, then freed; how many
    swap_in(request)                      blocks again (take made sure they are there) and its K/V copied back

A request the scheduler handles has ``made`` (tokens it has made so far) and ``swapped`` (its blocks waiting in
CPU memory, 0 when none; the scheduler sets it).
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass

PREEMPTIONS = ("recompute", "swap")  # what happens to a preempted request's blocks
REQUEST_BYTES = 1024  # about what one request of a stream and its record in a run take


@dataclass(kw_only=True)
class SchedulerCounts:
    """What admission and preemption did in a run. ``SimResult`` and ``ServeResult`` are these counts and more;
    the ``Scheduler`` adds to them as it goes."""

    preemption: str = "recompute"  # what a preemption did: "recompute" or "swap" (PREEMPTIONS)
    admissions: int = 0  # requests admitted into the batch (a preempted request's readmission counts again)
    prefills: int = 0  # prompts fed (a recomputation counts again; a swapped request's readmission does not)
    prefill_tokens: int = 0  # tokens fed by prefills: every prompt (less prefix-cache hits), plus what
    #                          recomputation fed again
    recomputed_tokens: int = 0  # recompute: tokens prefilled again after a preemption (prompt + tokens made)
    preemptions: int = 0
    swapped_out_blocks: int = 0  # swap: blocks copied to CPU memory at preemptions
    swapped_in_blocks: int = 0  # swap: blocks copied back when a preempted request resumed
    peak_cpu_blocks: int = 0  # swap: most blocks waiting in CPU memory at one time


class Scheduler:
    """First come, first served admission into a batch of at most ``max_running`` requests, and preemption of
    the most recently admitted one when the memory runs out, counted in ``counts`` (whose ``preemption`` says
    what a preemption does). ``waiting`` is the queue: ``requests`` in order, preempted ones back at its head."""

    def __init__(self, memory, requests, max_running: int, counts: SchedulerCounts, spare: int = 0):
        self.memory, self.max_running, self.counts, self.spare = memory, max_running, counts, spare
        self.waiting = deque(requests)
        self.cpu_blocks = 0  # swap: blocks of preempted requests waiting in CPU memory now

    def admit(self, batch: list) -> tuple[list, list]:
        """Admit waiting requests next to ``batch`` (the running ones) while a slot is free and the memory takes
        the head of the queue. Returns (admitted, resumed): the admitted in order, and those of them that were
        swapped back in (they continue with one token; the others prefill)."""
        admitted, resumed = [], []
        while self.waiting and len(batch) + len(admitted) < self.max_running:
            s = self.waiting[0]
            if not self.memory.take(s, batch + admitted, self.spare if batch or admitted else 0):
                break
            self.waiting.popleft()
            if s.swapped:  # its blocks come back from CPU memory; everything swapped out comes back
                self.memory.swap_in(s)
                self.counts.swapped_in_blocks += s.swapped
                self.cpu_blocks -= s.swapped
                s.swapped = 0
                resumed.append(s)
            admitted.append(s)
            self.counts.admissions += 1
        if self.waiting and not batch and not admitted:  # every request fits alone (checked up front): never spin
            raise RuntimeError(f"the scheduler admitted nothing into an empty batch ({len(self.waiting)} waiting); "
                               f"this is a bug in lib.serving")
        return admitted, resumed

    def preempt(self, batch: list):
        """Take the most recently admitted request off the end of ``batch`` and put it at the head of the queue.
        Under "swap" its blocks go to CPU memory (when it has made tokens: a request that had not run yet has
        nothing to keep); otherwise they are freed and it prefills again when readmitted. Returns it."""
        victim = batch.pop()
        if self.counts.preemption == "swap" and victim.made:
            victim.swapped = self.memory.swap_out(victim)
            self.counts.swapped_out_blocks += victim.swapped
            self.cpu_blocks += victim.swapped
            self.counts.peak_cpu_blocks = max(self.counts.peak_cpu_blocks, self.cpu_blocks)
        else:
            self.memory.free(victim)
        self.counts.preemptions += 1
        self.waiting.appendleft(victim)
        return victim

    def prefilled(self, request, n_tokens: int, first: bool = True):
        """Count a prefill of ``n_tokens`` tokens: a recomputation when the request had made tokens before.
        A prefill fed in chunks (``serve(..., max_num_batched_tokens=)``) counts once, at its ``first`` chunk."""
        self.counts.prefills += first
        self.counts.prefill_tokens += n_tokens
        if request.made:
            self.counts.recomputed_tokens += n_tokens


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
