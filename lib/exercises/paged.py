"""Build-it exercises of the paged KV cache: find a token's slot through a block table, count the blocks a
sequence takes, write a pass's keys into the pool through the slot mapping, look a new request's prefix up in the
prefix cache (notebook 09); one step of a continuous-batching scheduler over the block pool (notebook 10).
The hidden cases come from ``lib.blocks.BlockTable.locate``, ``lib.serving.block_size_tradeoff``, one step of lib's
``Scheduler`` (``schedule()`` then ``postprocess()`` over the simulation's block memory, as ``lib.serving.simulate``
runs them) and ``lib.blocks.BlockAllocator.match_prefix`` over the index ``register_prefix`` built."""
from __future__ import annotations

import copy

import torch

from ..blocks import BlockTable, blocks_for
from ..demo import load_demo
from ..serving import Scheduler, SchedulerCounts, Sequence, Status, block_size_tradeoff
from ..serving.memory import _PagedMemory
from ..i18n import ordinal, t
from . import Case, Mismatch, _describe, compare, exercise


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


# ------------------------------------------------------------------ 09: a paged write through the slot mapping

def paged_write_solution(pool_k, block_table, start, k_new):
    """Write k_new (n_kv_heads, T, head_dim), the keys of positions start .. start + T - 1, into the pool
    (n_blocks, n_kv_heads, block_size, head_dim) at the slots the block table gives; return the pool."""
    block_size = pool_k.shape[2]
    for i in range(k_new.shape[1]):
        position = start + i
        block = block_table[position // block_size]  # logical block -> physical block
        pool_k[block, :, position % block_size] = k_new[:, i]  # the offset inside that block
    return pool_k


def _paged_write_compare(start, k_new, block_size):
    """Name where the learner's write went: each new position in its slot, nothing else touched."""
    def check(got, want):
        if not isinstance(got, torch.Tensor) or tuple(got.shape) != tuple(want.shape):
            compare(got, want, what=t("the pool your write returns"))  # raises Mismatch: not a tensor, or its shape
        T = k_new.shape[1]
        for i in range(T):
            p = start + i
            col = k_new[:, i]
            slots = [(b, o) for b in range(got.shape[0]) for o in range(block_size)
                     if torch.equal(got[b, :, o], col)]
            right = [(b, o) for b, o in slots if torch.equal(want[b, :, o], col)]
            if right:
                continue
            nth = ordinal(i + 1)
            if not slots:
                return t("position {p} (the {nth} new token) is nowhere in the pool your write returns: write "
                         "k_new[:, {i}] into its slot", p=p, nth=nth, i=i)
            b, o = slots[0]
            if b == p // block_size:
                return t("your write put position {p} in block {b}, which is its logical block number "
                         "(position // block_size): look that entry up in the block table for the physical block",
                         p=p, b=b)
            if o != p % block_size:
                return t("your write put position {p} at offset {o} of block {b}: the offset inside a block is "
                         "the position % block_size, counted from the block's first slot, not from the first new "
                         "token", p=p, o=o, b=b)
            return t("your write put position {p} (the {nth} new token) in block {b}, at offset {o}: the block "
                     "table sends it elsewhere", p=p, nth=nth, b=b, o=o)
        touched = (got != want).any(dim=(1, 3)).nonzero().tolist()
        if touched:
            b, o = touched[0]
            return t("your write changed block {b}, offset {o}, a slot no new token belongs to: a write touches "
                     "only the new tokens' slots (other sequences' keys live in the same pool)", b=b, o=o)
        return None
    return check


@exercise("paged_write", title="Write a pass's keys into the pool through the slot mapping",
          hints=("The new tokens sit at positions start, start + 1, …: which physical block and which slot in it "
                 "does each one go to?",
                 "A position's logical block is position // block_size and its offset position % block_size; "
                 "the block table turns the logical block into a physical one of the pool (vLLM's slot_mapping "
                 "is the same pair, flattened).",
                 "for each i in range(T): p = start + i; pool_k[block_table[p // block_size], :, p % block_size] = "
                 "k_new[:, i]; then return pool_k (block_size is pool_k.shape[2])."),
          solution=paged_write_solution)
def _paged_write_cases():
    model, tok = load_demo("lm")
    config = model.config
    g = torch.Generator().manual_seed(11)
    for start, T, table, what in ((0, 7, [5, 2], t("a prefill of 7 tokens into blocks that are not in order")),
                                  (6, 3, [3, 9, 1], t("3 tokens from position 6, across a block boundary")),
                                  (8, 1, [4, 0, 7], t("one decode token at the first slot of a new block")),
                                  (5, 2, [11, 6], t("2 tokens in the middle of a block"))):
        pool = torch.randn(12, config.n_kv_heads, 4, config.head_dim, generator=g)  # other sequences' keys
        k_new = torch.randn(config.n_kv_heads, T, config.head_dim, generator=g)
        bt = BlockTable(list(table))
        want = pool.clone()
        for i in range(T):  # lib's BlockTable.locate is the slot mapping
            block, offset = bt.locate(start + i, 4)
            want[block, :, offset] = k_new[:, i]
        yield Case(t("{what}: block table {table}, blocks of 4, a pool of 12 blocks", what=what, table=table),
                   args=(pool, list(table), start, k_new), expected=want,
                   compare=_paged_write_compare(start, k_new, 4))


# ------------------------------------------------------------------ 09: the prefix-cache lookup

def prefix_lookup_solution(index, token_ids, block_size):
    """The cached blocks a new request reuses: walk its full blocks while the index holds the prefix up to the
    block's end; never the block that holds the last token (its logits must still be computed)."""
    blocks = []
    for i in range((len(token_ids) - 1) // block_size):  # full blocks that end before the last token
        block = index.get(tuple(token_ids[:(i + 1) * block_size]))  # the key: every token up to the block's end
        if block is None:
            break  # the first miss ends the prefix
        blocks.append(block)
    return blocks


def _prefix_lookup_compare(index, token_ids, block_size):
    """Name the typical slips: the last token's block reused, blocks keyed by their own tokens, a walk that goes
    on past a miss."""
    def check(got, want):
        if not isinstance(got, (list, tuple)) or not all(isinstance(b, int) and not isinstance(b, bool) for b in got):
            return t("the blocks your lookup reuses are {got}; a list of block ids (ints) was expected",
                     got=_describe(got))
        got = list(got)
        if got == want:
            return None
        n_full = (len(token_ids) - 1) // block_size
        if len(got) == n_full + 1 and got[:len(want)] == want and len(token_ids) % block_size == 0:
            return t("your lookup reused the block that holds the last token: the model must still compute that "
                     "token's logits, so the lookup stops one block short when the prompt fills its last block")
        own = [index.get(tuple(token_ids[i * block_size:(i + 1) * block_size])) for i in range(n_full)]
        if got != want and got == own[:len(got)]:
            i = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
            return t("your lookup keyed block {i} by its own tokens: a block's key is the whole prefix up to its "
                     "end (every token before it too), so the same tokens after a different start do not match",
                     i=i)
        if len(got) > len(want) and got[:len(want)] == want:
            return t("your lookup went on after the first block the index does not hold: the {nth} block misses, "
                     "so the reused prefix ends before it", nth=ordinal(len(want) + 1))
        return t("your lookup reuses {n} block(s), {got}, which is not the cached prefix", n=len(got), got=got)
    return check


@exercise("prefix_lookup", title="Look a new request's prefix up in the prefix cache",
          hints=("Which of the new request's blocks could an earlier request have computed already, and what "
                 "must be true of every token before such a block?",
                 "A block is reused when the index holds the prefix up to its end (index maps a tuple of token ids "
                 "to a block); walk the full blocks in order, stop at the first miss, and never reuse the block "
                 "of the last token: its logits still have to be computed.",
                 "for i in range((len(token_ids) - 1) // block_size): look up index.get(tuple(token_ids[:(i + 1) "
                 "* block_size])); stop at the first None, else append the block; return the list."),
          solution=prefix_lookup_solution)
def _prefix_lookup_cases():
    from ..blocks import BlockAllocator
    model, tok = load_demo("lm")
    alloc = BlockAllocator(24, block_size=4)
    served = [tok.encode(text) for text in ("<s>To be, or not to be, that is", "<s>静夜思\n李白\n床前明月光，疑是地上霜。")]
    for ids in served:  # two requests served before: their full blocks are in the index
        table = BlockTable()
        alloc.reserve(table, len(ids))
        table.n_tokens = len(ids)
        alloc.register_prefix(table, ids)
    full = dict(alloc._by_prefix)  # lib's prefix index: prefix tuple -> block (vLLM keys it by a hash of it)
    evicted = {k: b for k, b in full.items() if k != tuple(served[1][:12])}  # the poem's 3rd block evicted since
    for ids, index, what in (
            (tok.encode("<s>To be, or not to die"), full, t("shares its first blocks with an earlier request")),
            (served[0][:28], full, t("is an earlier prompt's first 28 tokens: its last block is full and cached")),
            (tok.encode("<s>be, or not to be, that is"), full, t("holds an earlier request's tokens after a different "
                                                                "start")),
            (served[1], evicted, t("is an earlier prompt whose 3rd block was evicted since")),
            (tok.encode("<s>人工智能"), full, t("shares nothing with the cache"))):
        probe = BlockAllocator(24, block_size=4)  # lib's lookup over the same index
        probe._by_prefix, probe._prefix_of = dict(index), {b: k for k, b in index.items()}
        for b in index.values():  # the cached blocks are still held by the earlier requests
            probe.refcounts[b] = 1
            probe._free.pop(b, None)
        want = BlockTable()
        probe.match_prefix(want, ids)
        yield Case(t("a prompt of {n} tokens that {what} (blocks of 4)", n=len(ids), what=what),
                   args=(dict(index), list(ids), 4), expected=list(want.blocks),
                   compare=_prefix_lookup_compare(index, ids, 4))
