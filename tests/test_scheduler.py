"""lib.serving's Scheduler on its own: schedule() gives a step's batch (FCFS admission, decodes and prefill chunks
under the token budget, preemption of the newest running request when the pool cannot grow) and postprocess()
appends, finishes and frees. The memories are the two lib.serving uses: the simulation's block counts and a real
PagedKVPool."""
import pytest
from hypothesis import given, settings, strategies as st

import lib
from lib.blocks import BlockAllocator, BlockTable, blocks_for
from lib.paged import PagedKVPool, forward_paged
from lib.sampling import choose
from lib.serving import Scheduler, SchedulerCounts, Sequence, ServeRequest, Status, demo_requests, serve
from lib.serving.engine import _PoolMemory
from lib.serving.memory import _PagedMemory


def blocks_scheduler(lengths, n_blocks, block_size, budget=None, max_running=256, preemption="recompute"):
    """A Scheduler over the simulation's block memory, one Sequence per (prompt_len, max_tokens)."""
    memory = _PagedMemory([], n_blocks * block_size, block_size)
    seqs = [Sequence(i, p, o) for i, (p, o) in enumerate(lengths)]
    sched = Scheduler(memory, seqs, max_running, SchedulerCounts(preemption=preemption),
                      max_num_batched_tokens=budget)
    return sched, memory, seqs


def step(sched):
    batch = sched.schedule()
    sched.postprocess(batch, [None] * len(batch))
    return batch


def test_blocks_for_rounds_up():
    assert [blocks_for(n, 4) for n in (0, 1, 4, 5, 8, 9)] == [0, 1, 1, 2, 2, 3]
    alloc, table = BlockAllocator(10, 16), BlockTable()
    alloc.reserve(table, 100)
    assert len(table.blocks) == blocks_for(100, 16) == 7


def test_admission_is_first_come_first_served():
    # blocks of 2, 4 blocks: A (3 + its token) takes 2, B (5 + 1) needs 3 and does not fit; C (1 + 1) would, but
    # nobody jumps ahead of the head of the queue
    sched, memory, (a, b, c) = blocks_scheduler([(3, 5), (5, 2), (1, 2)], n_blocks=4, block_size=2)
    batch = sched.schedule()
    assert batch.seqs == [a] and batch.admitted == 1 and list(sched.waiting) == [b, c]
    assert (a.status, b.status, c.status) == (Status.RUNNING, Status.WAITING, Status.WAITING)
    assert batch.n_new == [3] and batch.contexts == [3] and batch.fed() == {(3, 3): 1}
    assert memory.alloc.n_free == 2


def test_a_step_respects_the_token_budget_decodes_first_then_prefill_chunks():
    # budget 4: step 0 feeds A's 3-token prompt and the first token of B's 6; step 1 A decodes (1), B gets a
    # chunk of 3; step 2: A decodes, B's last 2 tokens, C's first 1 token
    sched, _, (a, b, c) = blocks_scheduler([(3, 9), (6, 9), (5, 9)], n_blocks=40, block_size=2, budget=4)
    shapes = []
    for _ in range(4):
        batch = step(sched)
        assert sum(batch.n_new) <= 4
        shapes.append([(s.rid, n) for s, n in zip(batch.seqs, batch.n_new)])
    assert shapes == [[(0, 3), (1, 1)], [(0, 1), (1, 3)], [(0, 1), (1, 2), (2, 1)], [(0, 1), (1, 1), (2, 2)]]
    assert len(a.tokens) == 4 and len(b.tokens) == 2 and c.tokens == [] and c.is_prefill
    assert c.num_computed == 3 and sched.counts.prefills == 3  # a prefill fed in chunks counts once


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 12), st.integers(1, 8)), min_size=1, max_size=8), st.integers(3, 9),
       st.sampled_from([1, 2, 4]))
def test_every_step_stays_within_budget_and_pool(lengths, budget, block_size):
    n_blocks = max(blocks_for(p + o, block_size) for p, o in lengths) + 2
    sched, memory, seqs = blocks_scheduler(lengths, n_blocks, block_size, budget=budget, max_running=3)
    for _ in range(500):
        if sched.is_finished():
            break
        batch = step(sched)
        assert sum(batch.n_new) <= budget and len(sched.running) <= 3
        held = sum(len(s.table.blocks) for s in sched.running)
        assert held + memory.alloc.n_free == n_blocks  # every block is a running request's or free
    assert sched.is_finished()
    assert [len(s.tokens) for s in seqs] == [o for _, o in lengths] and all(s.status == Status.FINISHED for s in seqs)
    assert memory.alloc.n_free == n_blocks


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_the_newest_running_request_is_preempted_when_the_pool_cannot_grow(preemption):
    # blocks of 2, 3 blocks: A (1 + 1) and B (1 + 1) take one each, C (3 + 1) waits; step 1: A and B each need a
    # second block, one is free: B, the newest, is preempted and goes back to the head of the queue
    sched, memory, (a, b, c) = blocks_scheduler([(1, 4), (1, 4), (3, 1)], n_blocks=3, block_size=2,
                                                preemption=preemption)
    step(sched)
    assert sched.running == [a, b] and list(sched.waiting) == [c]
    batch = step(sched)
    assert batch.seqs == [a] and list(sched.waiting) == [b, c]
    assert b.status == Status.WAITING and b.preemptions == 1 and sched.counts.preemptions == 1
    assert b.table.blocks == [] and len(a.table.blocks) == 2 and memory.alloc.n_free == 1
    assert b.swapped == (preemption == "swap") and b.cpu_blocks == (1 if preemption == "swap" else 0)
    assert len(b.tokens) == 1  # the token it made is kept: recompute prefills prompt + it again
    while not sched.is_finished():
        step(sched)
    counts = sched.counts
    if preemption == "recompute":
        assert counts.recomputed_tokens == 2 and counts.prefill_tokens == 1 + 1 + 3 + 2
    else:
        assert counts.swapped_out_blocks == counts.swapped_in_blocks == 1 and counts.recomputed_tokens == 0


def test_finishing_frees_the_blocks():
    sched, memory, (a, b) = blocks_scheduler([(3, 1), (2, 3)], n_blocks=8, block_size=2)
    batch = sched.schedule()
    assert memory.alloc.n_free == 8 - 2 - 2  # each holds its prompt and its first token's slot
    sched.postprocess(batch, [None, None])
    assert a.status == Status.FINISHED and a.finish_step == a.first_token_step == 0 and a.table.blocks == []
    assert sched.running == [b] and memory.alloc.n_free == 6
    step(sched)
    step(sched)
    assert b.status == Status.FINISHED and b.finish_step == 2 and memory.alloc.n_free == 8 and sched.is_finished()


def test_eos_finishes_a_request_before_its_max_tokens():
    sched, _, (a,) = blocks_scheduler([(2, 9)], n_blocks=8, block_size=2)
    sched.eos_id = 7
    for token in (3, 7):
        sched.postprocess(sched.schedule(), [token])
    assert a.tokens == [3, 7] and a.status == Status.FINISHED and sched.is_finished()


def test_the_scheduler_loop_by_hand_gives_the_tokens_of_generate(chat):
    """The loop serve() runs, written out over a real PagedKVPool in a pool small enough to preempt, under a
    token budget: every request gets the tokens lib.generate gives it alone."""
    model, tok = chat
    requests = demo_requests(tok, n=8, seed=1)
    pool = PagedKVPool.for_model(model, n_blocks=10, block_size=4)
    seqs = [Sequence(r.rid, len(r.prompt), r.max_new_tokens, r.prompt, table=pool.new_table()) for r in requests]
    sched = Scheduler(_PoolMemory(pool, prefix_cache=False), seqs, 4, SchedulerCounts(), max_num_batched_tokens=6,
                      eos_id=tok.eos_id)
    while not sched.is_finished():
        batch = sched.schedule()
        feeds = [s.ids[s.num_computed:s.num_computed + s.num_scheduled] for s in batch.seqs]
        assert sum(map(len, feeds)) <= 6
        logits = forward_paged(model, pool, [s.table for s in batch.seqs], feeds)  # (B, vocab_size)
        sched.postprocess(batch, choose(logits).tolist())
    assert sched.counts.preemptions > 0 and pool.allocator.n_free == 10
    for r, s in zip(requests, seqs):
        assert s.tokens == lib.generate(model, r.prompt, r.max_new_tokens, eos_id=tok.eos_id).new_tokens[0].tolist()


def test_serve_records_are_its_sequences_and_one_preemption_costs(chat):
    model, tok = chat
    requests = demo_requests(tok, n=6, seed=2, max_new_tokens=16)
    res = serve(model, requests, max_batch=3, eos_id=tok.eos_id, block_size=4, n_blocks=8, preemption="swap")
    assert all(isinstance(s, Sequence) and s.status == Status.FINISHED and not s.swapped for s in res.records)
    assert [s.rid for s in res.records] == [r.rid for r in requests]
    assert sum(s.preemptions for s in res.records) == res.preemptions > 0
    assert list(res.preemption_costs()) == ["preemption", "preemptions", "forward passes", "prefill tokens",
                                            "of them recomputed", "blocks to CPU", "blocks from CPU", "bytes moved",
                                            "most blocks on CPU"]
    assert res.steps == len(res.batch_rows) and max(s.finish_step for s in res.records) == res.steps - 1
    one = serve(model, [ServeRequest(0, requests[0].prompt, 3)], eos_id=None)
    assert len(one.records[0].tokens) == 3 and one.records[0].first_token_seconds <= one.records[0].finish_seconds
