"""Build-it exercises of the paged KV cache: find a token's slot through a block table, and count the blocks a
sequence takes (notebook 09); one step of a continuous-batching scheduler over the block pool (notebook 10). The
hidden cases come from ``lib.blocks.BlockTable.locate``, ``lib.serving.block_size_tradeoff`` and one step of lib's
``Scheduler`` (``schedule()`` then ``postprocess()`` over the simulation's block memory, as ``lib.serving.simulate``
runs them)."""
from __future__ import annotations

import copy

from ..blocks import BlockTable, blocks_for
from ..serving import Scheduler, SchedulerCounts, Sequence, Status, block_size_tradeoff
from ..serving.memory import _PagedMemory
from ..i18n import t
from . import Case, Mismatch, compare, exercise


def _locate_solution(block_table, block_size, position):
    block = block_table[position // block_size]  # which entry of the table: the logical block
    offset = position % block_size  # where in that physical block
    return block, offset, block * block_size + offset  # the flat slot, as vLLM's slot_mapping writes it


@exercise("block_table_lookup", title="Block-table lookup",
          hints=("Which logical block holds the position, and where inside that block is it?",
                 "Integer division and remainder by block_size split a position into (logical block, offset); the "
                 "table maps the logical block to a physical one.",
                 "position // block_size says which entry of the table (the logical block) to read; "
                 "position % block_size is the offset inside that physical block; the flat slot counts whole "
                 "blocks of block_size slots before it."),
          solution=_locate_solution)
def _locate_cases():
    situations = [
        ("a position in the middle of the third logical block", [7, 2, 9], 16, 37),
        ("the very first position of a sequence", [3], 4, 0),
        ("the first position of a new block", [4, 11, 6], 5, 10),
        ("the last slot of a block", [4, 11, 6], 5, 14),
        ("blocks of a single position", [5, 0, 8, 1], 1, 2),
    ]
    for description, blocks, block_size, position in situations:
        block, offset = BlockTable(list(blocks)).locate(position, block_size)
        yield Case(t("{what} (table {blocks}, blocks of {size}, position {position})", what=t(description),
                     blocks=blocks, size=block_size, position=position),
                   args=(list(blocks), block_size, position), expected=(block, offset, block * block_size + offset))


def _blocks_solution(n_tokens, block_size):
    blocks = blocks_for(n_tokens, block_size)  # round up: a partly filled last block is still a whole block
    return blocks, blocks * block_size - n_tokens


@exercise("blocks_for_sequence", title="Blocks a sequence takes",
          hints=("Does a block that holds only a few of the tokens still count as a block?",
                 "Blocks are handed out whole: the count is the length over the block size, rounded up (-(-n // "
                 "b) or math.ceil); the slots of those blocks that hold no token are the empty ones.",
                 "divide the length by the block size and round UP (a partly filled last block is still a whole "
                 "block); the empty slots are the blocks' slots minus the tokens."),
          solution=_blocks_solution)
def _blocks_cases():
    for description, n_tokens, block_size in [
        ("a sequence that ends inside a block", 100, 16),
        ("a sequence that fills its blocks exactly", 64, 16),
        ("a single token", 1, 16),
        ("one token past a block boundary", 17, 4),
        ("blocks of a single position", 37, 1),
    ]:
        cost = block_size_tradeoff([n_tokens], [block_size])[0]
        yield Case(t("{what} ({n} tokens, blocks of {size})", what=t(description), n=n_tokens, size=block_size),
                   args=(n_tokens, block_size),
                   expected=(cost.table_entries, cost.empty_slots))


# ------------------------------------------------------------------ 10: one step of the scheduler

def scheduler_step_solution(running, waiting, free, block_size):
    """One step over the block pool. ``running`` and ``waiting``: lists of {"rid", "length", "blocks"} (running
    in admission order, waiting in queue order); ``free``: the free block ids. Returns (running, waiting, free)."""
    running, waiting, free = list(running), list(waiting), list(free)
    admitted = []
    while waiting:  # 1. admission, first come first served: the head waits, and nobody behind it jumps ahead
        need = blocks_for(waiting[0]["length"] + 1, block_size)  # its prompt and the first token its prefill makes
        if need > len(free):
            break
        r = waiting.pop(0)
        admitted.append({"rid": r["rid"], "length": r["length"] + 1, "blocks": [free.pop(0) for _ in range(need)]})
    i = 0
    while i < len(running):  # 2. one more token for every request that was running (admission order)
        r = running[i]
        if r["length"] % block_size == 0:  # its last block is full: it needs a new one
            if not free:  # none free: preempt the most recently admitted (recompute: all its blocks back)
                victim = running.pop()
                free.extend(victim["blocks"])
                waiting.insert(0, {"rid": victim["rid"], "length": victim["length"], "blocks": []})
                if victim is r:
                    break
                continue  # try r again, now with a free block
            r["blocks"] = r["blocks"] + [free.pop(0)]
        r["length"] += 1
        i += 1
    return running + admitted, waiting, free


def _step_truth(running, waiting, n_blocks, block_size):
    """What lib's scheduler does in one step from this state (``Scheduler.schedule`` and ``postprocess`` over the
    simulation's block memory, as ``simulate`` runs them): the running requests' (rid, length, blocks held) in
    order, the waiting ones' (rid, length) in queue order, and how many blocks are free after it."""
    memory = _PagedMemory([], n_blocks * block_size, block_size)
    big = 10 ** 6  # no request finishes, and no limit on the running ones
    sched = Scheduler(memory, [Sequence(r["rid"], r["length"], big) for r in waiting], big,
                      SchedulerCounts(preemption="recompute"))
    for r in running:  # a running request of length L: a prompt of L - 1 and the token it made (not fed yet)
        s = Sequence(r["rid"], r["length"] - 1, big, tokens=[None], status=Status.RUNNING, is_prefill=False,
                     num_computed=r["length"] - 1)
        memory.alloc.reserve(s.table, len(s))  # the simulation holds the slot of the newest token too
        s.table.n_tokens = len(s)
        sched.running.append(s)
    batch = sched.schedule()
    sched.postprocess(batch, [None] * len(batch))  # lengths only, as the simulation: a token with no id
    return ([(s.rid, len(s), len(s.table.blocks)) for s in sched.running], [(s.rid, len(s)) for s in sched.waiting],
            memory.alloc.n_free)


def _step_compare(running, waiting, free, block_size):
    n_blocks = len(free) + sum(len(r["blocks"]) for r in running)
    want_running, want_waiting, want_free = _step_truth(running, waiting, n_blocks, block_size)
    before = {r["rid"]: list(r["blocks"]) for r in running}

    def check(got, want):
        if not isinstance(got, (tuple, list)) or len(got) != 3:
            raise Mismatch(t("return the three lists (running, waiting, free), got {got}", got=type(got).__name__))
        g_running, g_waiting, g_free = (list(x) for x in got)
        for what, xs in ((t("running"), g_running), (t("waiting"), g_waiting)):
            if any(not isinstance(r, dict) or not {"rid", "length", "blocks"} <= set(r) for r in xs):
                raise Mismatch(t("every request in {what} must stay a dict with the keys rid, length and blocks",
                                 what=what))
        compare([r["rid"] for r in g_running], [r for r, _, _ in want_running],
                what=t("the order of the running requests (rids)"))
        compare([r["rid"] for r in g_waiting], [r for r, _ in want_waiting],
                what=t("the order of the waiting queue (rids)"))
        for r, (rid, length, n) in zip(g_running, want_running):
            compare(r["length"], length, what=t("the length of running request {rid}", rid=rid))
            if len(r["blocks"]) != n:
                return t("running request {rid} holds {got} blocks for its {length} positions: a block holds "
                         "block_size positions, and a request takes a new one only when its last is full",
                         rid=rid, got=len(r["blocks"]), length=length)
            old = before.get(rid)
            if old is not None and list(r["blocks"][:len(old)]) != old:
                return t("running request {rid}'s old blocks changed: a request keeps its blocks and appends new "
                         "ones at the end", rid=rid)
        for r, (rid, length) in zip(g_waiting, want_waiting):
            compare(r["length"], length, what=t("the length of waiting request {rid}", rid=rid))
            if r["blocks"]:
                return t("waiting request {rid} still holds blocks: a preempted request (recompute) gives all of "
                         "them back", rid=rid)
        held = [b for r in g_running for b in r["blocks"]] + list(g_free)
        if sorted(held) != list(range(n_blocks)):
            return t("the blocks do not add up: every block of the pool must be in exactly one running request's "
                     "table or in the free list (a block lost, or counted twice)")
        if len(g_free) != want_free:
            return t("{n} blocks are free after your step, which is not the expected number", n=len(g_free))
        return None
    return check


@exercise("scheduler_step", title="One step of a continuous-batching scheduler",
          hints=("Within one step, who goes first: the queue waiting to be admitted, or the requests already "
                 "running? And what happens when a running request needs a block and none is free?",
                 "Admission is first come first served and stops at the first request that does not fit; a "
                 "running request needs a new block exactly when its length is a multiple of block_size; "
                 "preemption takes the last request of the running list.",
                 "first admit from the front of the queue while the head's length + 1 positions fit in free blocks "
                 "(stop at the first that does not); then give every request that was running one more position, "
                 "taking a block when length % block_size == 0; when none is free, pop the last running request, "
                 "put its blocks back on the free list and it at the front of the queue, and try again."),
          solution=scheduler_step_solution)
def _step_cases():
    situations = [  # (what, running [(rid, length)], waiting [(rid, length)], free blocks, block size)
        ("an empty queue: every running request grows", [("A", 5), ("B", 3)], [], 2, 4),
        ("growth across a block boundary", [("A", 8), ("B", 6)], [], 1, 4),
        ("admission limited by blocks, first come first served", [("A", 5)], [("C", 6), ("D", 3), ("E", 2)], 3, 4),
        ("the head of the queue does not fit, a shorter request behind it would", [("A", 2)], [("C", 9), ("D", 1)],
         2, 4),
        ("a preemption: a block is needed and none is free", [("A", 8), ("B", 5)], [("C", 7)], 0, 4),
        ("the request that needs the block is itself the most recently admitted", [("A", 5), ("B", 8)], [], 0, 4),
    ]
    for description, running, waiting, n_free, bs in situations:
        next_block = iter(range(100))
        run = [{"rid": rid, "length": n, "blocks": [next(next_block) for _ in range(blocks_for(n, bs))]}
               for rid, n in running]
        free = [next(next_block) for _ in range(n_free)]
        queue = [{"rid": rid, "length": n, "blocks": []} for rid, n in waiting]
        expected = _step_truth(run, queue, len(free) + sum(len(r["blocks"]) for r in run), bs)
        yield Case(t("{what} (blocks of {size}, {n_free} free)", what=t(description), size=bs, n_free=n_free),
                   args=(copy.deepcopy(run), copy.deepcopy(queue), list(free), bs), expected=expected,
                   compare=_step_compare(copy.deepcopy(run), copy.deepcopy(queue), list(free), bs))
