"""The serving simulation (counts worked out by hand, invariants on every step) and real serving on the
demo model (same tokens as lib.generate, static vs continuous batching counts)."""
import statistics

import pytest
from hypothesis import example, given, settings, strategies as st

import lib
from lib.corpus import read_corpus
from lib.blocks import BlockAllocator, BlockTable
from lib.serving import (POLICIES, PREEMPTIONS, ContiguousAllocator, ServeRequest, SimRequest, block_size_tradeoff,
                         compare_policies, demo_requests, preemption_seconds, request_stream, reservation, serve,
                         simulate, text_stream)
from lib.text import text_table


# ------------------------------------------------------------------------------------------- the stream

def test_request_stream_is_seeded_bounded_and_near_its_means():
    a, b, c = request_stream(2000, seed=1), request_stream(2000, seed=1), request_stream(2000, seed=2)
    assert a == b and a != c
    assert all(1 <= r.prompt_len <= 2047 and 1 <= r.output_len and r.total_len <= 2048 for r in a)
    # log-normal with the mean put at 160 / 340 before clipping: the sample means land near them
    assert 140 < statistics.mean(r.prompt_len for r in a) < 180
    assert 300 < statistics.mean(r.output_len for r in a) < 380
    # long-tailed: the median is well below the mean (exp(-sigma^2/2) = 0.61 of it for sigma = 1)
    assert statistics.median(r.output_len for r in a) < 0.75 * statistics.mean(r.output_len for r in a)
    assert [r.rid for r in a[:3]] == [0, 1, 2]


def test_request_stream_errors():
    with pytest.raises(ValueError, match=r"n must be an integer >= 1, got 0"):
        request_stream(0)
    with pytest.raises(ValueError, match=r"sigma must be a finite number > 0 and <= 5, got -1"):
        request_stream(5, sigma=-1)
    with pytest.raises(ValueError, match=r"max_len must be an integer >= 2, got 1"):
        request_stream(5, max_len=1)


def test_reservations():
    r = SimRequest(0, prompt_len=100, output_len=25)
    assert reservation(r, "max", 2048) == 2048
    assert reservation(r, "pow2", 2048) == 100 + 32  # the output rounded up to a power of two
    assert reservation(SimRequest(0, 100, 32), "pow2") == 132
    assert reservation(SimRequest(0, 2000, 40), "pow2", 2048) == 2048  # never past the context
    assert reservation(r, "oracle") == 125
    with pytest.raises(ValueError, match=r"reservation is for the contiguous policies \('max', 'pow2', 'oracle'\), "
                                         r"got 'paged'"):
        reservation(r, "paged")


# ------------------------------------------------------------------------------------- contiguous allocator

def test_first_fit_and_merging():
    a = ContiguousAllocator(10)
    assert [a.allocate(3), a.allocate(3), a.allocate(3)] == [0, 3, 6]
    assert a.allocate(2) is None and a.n_free == 1
    a.free(3, 3)
    assert a.allocate(4) is None and a.largest_hole == 3  # 4 free positions, but not in one piece
    a.free(0, 3)
    assert a.holes == [(0, 6), (9, 1)]
    a.free(6, 3)
    assert a.holes == [(0, 10)]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(1, 12)), max_size=60))
def test_contiguous_regions_never_overlap(ops):
    a = ContiguousAllocator(40)
    live = []
    for alloc, size in ops:
        if alloc or not live:
            start = a.allocate(size)
            if start is not None:
                live.append((start, size))
        else:
            a.free(*live.pop(size % len(live)))
        taken = sorted(p for s, z in live for p in range(s, s + z))
        assert len(taken) == len(set(taken)) and all(0 <= p < 40 for p in taken)
        assert a.n_free == 40 - len(taken)
        assert all(h[0] + h[1] < n[0] for h, n in zip(a.holes, a.holes[1:]))  # sorted, merged holes


# ------------------------------------------------------------------------------------------ the simulation

def test_max_reservation_by_hand():
    reqs = [SimRequest(0, 1, 2), SimRequest(1, 2, 2), SimRequest(2, 1, 1)]
    r = simulate(reqs, "max", kv_tokens=8, max_len=4)
    # step 0: A and B each reserve 4 positions (C waits); step 1: both decode and finish; step 2: C runs
    assert r.steps == 3 and r.running == [2, 2, 1] and r.waiting == [1, 1, 0]
    assert r.tokens == [5, 7, 2] and r.future == [2, 0, 0] and r.never == [1, 1, 2] and r.free == [0, 0, 4]
    assert r.shares()["tokens"] == (5 + 7) / 16  # saturated steps only
    assert r.shares(saturated=False)["never"] == pytest.approx((1 + 1 + 2) / 24)


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_paged_with_preemption_by_hand(preemption):
    reqs = [SimRequest(0, 3, 2), SimRequest(1, 1, 3)]
    r = simulate(reqs, "paged", kv_tokens=8, block_size=2, watermark=0.0, preemption=preemption)
    # step 0: A takes 2 blocks (3 prompt + 1 token), B 1 block; step 1: A takes the last block, B finds none
    # and is preempted; step 2: B comes back with 2 blocks (recompute: its prompt and its 1 token prefilled
    # again; swap: its 1 block copied back from the CPU); step 3: B finishes
    assert r.steps == 4 and r.preemptions == 1 and r.preemption == preemption
    assert r.running == [2, 1, 1, 1] and r.waiting == [0, 1, 0, 0]
    assert r.tokens == [6, 5, 3, 4] and r.future == [0, 0, 1, 0] and r.never == [0, 1, 0, 0]
    assert r.free == [2, 2, 4, 4]
    if preemption == "recompute":
        assert (r.prefill_tokens, r.recomputed_tokens) == (3 + 1 + 2, 2)
        assert (r.swapped_out_blocks, r.swapped_in_blocks, r.peak_cpu_blocks) == (0, 0, 0) and r.swap_bytes(10) == 0
    else:
        assert (r.prefill_tokens, r.recomputed_tokens) == (3 + 1, 0)
        assert (r.swapped_out_blocks, r.swapped_in_blocks, r.peak_cpu_blocks) == (1, 1, 1)
        assert r.swap_bytes(10) == 2 * 2 * 10  # one block of 2 positions out and back, 10 bytes a position
    costs = r.preemption_costs()
    assert list(costs) == ["preemption", "preemptions", "steps", "tokens prefilled", "of them recomputed",
                           "blocks to CPU", "blocks from CPU", "most blocks on CPU"]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 40), st.integers(1, 40)), min_size=1, max_size=25),
       st.sampled_from([1, 2, 4, 8]), st.integers(10, 40), st.sampled_from([0.0, 0.2]))
@example(lengths=[(1, 6), (21, 6), (8, 2)], block_size=2, n_blocks=17, watermark=0.0)  # 18 blocks on the CPU
def test_swap_and_recompute_schedule_alike_and_count_their_costs(lengths, block_size, n_blocks, watermark):
    """The simulation tracks lengths only, so the two ways to preempt make the same schedule; what differs is
    the bill: recomputation prefills every preempted request's prompt and tokens again, swapping copies each
    preempted request's blocks out and back."""
    reqs = [SimRequest(i, p, o) for i, (p, o) in enumerate(lengths)]
    kv = n_blocks * block_size
    if max(-(-r.total_len // block_size) for r in reqs) > n_blocks:
        return
    rc, sw = (simulate(reqs, "paged", kv_tokens=kv, block_size=block_size, watermark=watermark, preemption=p)
              for p in ("recompute", "swap"))
    for field in ("steps", "preemptions", "running", "waiting", "tokens", "future", "never", "free"):
        assert getattr(rc, field) == getattr(sw, field), field
    prompts = sum(r.prompt_len for r in reqs)
    assert sw.prefill_tokens == prompts and sw.recomputed_tokens == 0
    assert rc.prefill_tokens == prompts + rc.recomputed_tokens
    assert (rc.recomputed_tokens > 0) == (rc.preemptions > 0)
    assert sw.swapped_out_blocks == sw.swapped_in_blocks  # everything swapped out comes back
    assert (sw.swapped_out_blocks > 0) == (sw.preemptions > 0)
    # the CPU may hold more than the GPU pool (requests swapped out at different times, their GPU blocks reused
    # meanwhile), but never more than every request's blocks at once
    assert sw.peak_cpu_blocks <= sw.swapped_out_blocks
    assert sw.peak_cpu_blocks <= sum(-(-r.total_len // block_size) for r in reqs)
    # a preempted request had at least one position per block: recomputation feeds at least as many positions
    # as swapping moves blocks, and at most a block's worth per block
    assert sw.swapped_out_blocks <= rc.recomputed_tokens <= block_size * sw.swapped_out_blocks


@pytest.mark.parametrize("preemption", ["recompute", "swap"])
def test_step_seconds_charge_every_prefill_and_decode_by_the_roofline(preemption):
    from lib.costs import step_cost, streamed_weight_bytes
    from lib.presets import PRESETS
    from lib.roofline import DEFAULT_GPU, Machine
    reqs = [SimRequest(0, 3, 2), SimRequest(1, 1, 3)]  # the schedule of test_paged_with_preemption_by_hand
    r = simulate(reqs, "paged", kv_tokens=8, block_size=2, preemption=preemption)
    # step 0: both prefill; 1: A decodes over its 4 positions (B is preempted); 2: B comes back (recompute: its
    # prompt and its 1 token prefilled again; swap: it decodes on) and A is done; 3: B decodes over 3 positions
    back = {(2, 2): 1} if preemption == "recompute" else {(1, 2): 1}
    assert r.passes == [{(3, 3): 1, (1, 1): 1}, {(1, 4): 1}, back, {(1, 3): 1}]
    assert sum(n_new * n for fed in r.passes for (n_new, _), n in fed.items()) == \
        r.prefill_tokens + sum(q.output_len for q in reqs) - r.prefills  # each prefill makes a token unfed
    cfg, slow = PRESETS["llama-2-13b"], Machine("slow", peak_gflops=1.0, bandwidth_gbs=1.0)
    alone = slow.seconds(step_cost(cfg, 4, 1))  # one sequence in a step: exactly step_cost's roofline time
    assert r.step_seconds(cfg, slow)[1] == alone
    both = [step_cost(cfg, 3, 3), step_cost(cfg, 1, 1)]  # two in one pass: FLOPs and K/V add, weights read once
    flops, kv = sum(c.flops for c in both), sum(c.kv_read_bytes + c.kv_write_bytes for c in both)
    assert r.step_seconds(cfg, slow)[0] == max(flops / 1e9, (streamed_weight_bytes(cfg) + kv) / 1e9)
    assert r.seconds(cfg) == sum(r.step_seconds(cfg, DEFAULT_GPU))
    with pytest.raises(TypeError, match=r"machine must be a lib.roofline.Machine"):
        r.seconds(cfg, "H100")


def test_a_small_watermark_trades_a_few_steps_for_far_fewer_preemptions():
    stream = text_stream(120)
    runs = {w: simulate(stream, "paged", kv_tokens=8192, watermark=w) for w in (0.0, 0.02)}  # 82 -> 34
    assert runs[0.02].preemptions < runs[0.0].preemptions / 2
    assert runs[0.02].recomputed_tokens < runs[0.0].recomputed_tokens / 2


def test_preemption_seconds_by_hand():
    from lib.costs import kv_bytes_per_token, param_count
    from lib.presets import PRESETS
    from lib.roofline import DEFAULT_GPU, Machine
    reqs = [SimRequest(0, 3, 2), SimRequest(1, 1, 3)]
    rc, sw = (simulate(reqs, "paged", kv_tokens=8, block_size=2, preemption=p) for p in ("recompute", "swap"))
    cfg = PRESETS["llama-2-13b"]
    slow = Machine("slow", peak_gflops=1.0, bandwidth_gbs=1.0)
    assert preemption_seconds(rc, cfg, machine=slow) == {"recompute": 2 * param_count(cfg) * 2 / 1e9, "swap": 0.0}
    t = preemption_seconds(sw, cfg, link_gbs=2.0)
    assert t == {"recompute": 0.0, "swap": 2 * 2 * kv_bytes_per_token(cfg) / 2e9}  # 1 block of 2, out and back
    assert preemption_seconds(rc, cfg)["recompute"] == 4 * param_count(cfg) / (DEFAULT_GPU.peak_gflops * 1e9)
    with pytest.raises(ValueError, match=r"link_gbs must be a finite number > 0 and <= 1000000.0, got 0"):
        preemption_seconds(sw, cfg, link_gbs=0)
    with pytest.raises(TypeError, match=r"preemption_seconds takes a SimResult from simulate, got dict"):
        preemption_seconds({}, cfg)
    with pytest.raises(TypeError, match=r"machine must be a lib.roofline.Machine"):
        preemption_seconds(rc, cfg, machine="H100")


def test_block_size_tradeoff_counts_what_an_allocator_hands_out():
    lengths = [1, 5, 16, 17, 100]
    rows = block_size_tradeoff(lengths, [1, 4, 16, 64])
    for row in rows:
        alloc = BlockAllocator(200, row.block_size)
        tables = [BlockTable() for _ in lengths]
        for t, n in zip(tables, lengths):
            alloc.reserve(t, n)
        assert row.table_entries == sum(len(t.blocks) for t in tables) == alloc.n_used
        assert row.empty_slots == alloc.n_used * row.block_size - sum(lengths)
        assert row.table_bytes() == 4 * row.table_entries and row.table_bytes(8) == 8 * row.table_entries
    by_hand = {1: (0, 139), 4: (3 + 3 + 0 + 3 + 0, 1 + 2 + 4 + 5 + 25), 16: (15 + 11 + 0 + 15 + 12, 1 + 1 + 1 + 2 + 7),
               64: (63 + 59 + 48 + 47 + 28, 1 + 1 + 1 + 1 + 2)}
    assert {r.block_size: (r.empty_slots, r.table_entries) for r in rows} == by_hand
    assert rows[0].row() == {"block size": 1, "empty slots": 0, "empty %": 0.0, "table entries": 139,
                             "entries / sequence": 27.8}
    assert rows[1].empty_share == 9 / 148


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 3000), min_size=1, max_size=40))
def test_block_size_tradeoff_trades_waste_for_entries(lengths):
    rows = block_size_tradeoff(lengths)
    assert [r.block_size for r in rows] == list(range(1, 65))
    assert rows[0].empty_slots == 0 and rows[0].table_entries == sum(lengths)
    for a, b in zip(rows, rows[1:]):
        assert b.table_entries <= a.table_entries  # bigger blocks: never a longer table
    for r in rows:
        assert 0 <= r.empty_slots <= (r.block_size - 1) * len(lengths)  # only last blocks have empty slots
        assert r.tokens == sum(lengths) and r.slots == r.tokens + r.empty_slots


def test_block_size_tradeoff_errors():
    with pytest.raises(ValueError, match=r"block_size_tradeoff needs at least one sequence length"):
        block_size_tradeoff([])
    with pytest.raises(ValueError, match=r"each length must be an integer >= 1, got 0"):
        block_size_tradeoff([3, 0])
    with pytest.raises(ValueError, match=r"each block size must be an integer >= 1, got 0"):
        block_size_tradeoff([3], [0, 4])
    with pytest.raises(TypeError, match=r"lengths must be a list of positive integers, got int 5"):
        block_size_tradeoff(5)


@pytest.fixture(scope="module")
def results():
    return compare_policies(request_stream(150, seed=0), kv_tokens=8192)


def test_every_step_accounts_for_the_whole_budget(results):
    for res in results.values():
        for i in range(res.steps):
            assert res.tokens[i] + res.future[i] + res.never[i] + res.free[i] == res.kv_tokens
            assert min(res.tokens[i], res.future[i], res.never[i], res.free[i]) >= 0
        assert abs(sum(res.shares().values()) - 1) < 1e-12


def test_what_each_policy_wastes(results):
    mx, p2, orc, pg = (results[p] for p in POLICIES)
    assert max(mx.running) == 8192 // 2048  # four max-length regions fill the budget exactly
    assert all(f == 0 for f, w in zip(mx.free, mx.waiting) if w)
    assert all(n == 0 for n in orc.never)  # knowing the length: no internal fragmentation...
    assert orc.shares()["free"] > 0.05  # ...but holes between variable-size regions (external fragmentation)
    # paged: the empty slots are only in each sequence's last block
    assert all(f + n < 16 * r for f, n, r in zip(pg.future, pg.never, pg.running))
    assert pg.preemptions > 0 and sum(x.preemptions for x in (mx, p2, orc)) == 0
    shares = [x.shares()["tokens"] for x in (mx, p2, orc, pg)]
    assert shares == sorted(shares) and shares[-1] > 0.9 and shares[0] < 0.35
    assert pg.mean_running() > 2.5 * mx.mean_running() and pg.steps < mx.steps


def test_every_request_is_served_completely(results):
    """Every request in the batch at a step made exactly one token in it (prefill or decode; a preempted one
    is out of the batch), so the batch sizes add up to the output lengths under every policy."""
    outputs = sum(r.output_len for r in request_stream(150, seed=0))
    for res in results.values():
        assert res.n_requests == 150 and sum(res.running) == outputs
        assert res.running[-1] >= 1 and res.waiting[-1] == 0


def test_summary_and_table(results):
    row = results["paged"].summary()
    assert list(row) == ["policy", "tokens %", "reserved, later %", "reserved, never %", "free %",
                         "tokens / allocated %", "mean batch", "max batch", "steps", "preemptions"]
    assert row["tokens %"] == round(100 * results["paged"].shares()["tokens"], 1)
    text = text_table([r.summary() for r in results.values()])
    assert text.splitlines()[0].split()[:3] == ["policy", "tokens", "%"] and len(text.splitlines()) == 6


def test_simulation_errors():
    reqs = [SimRequest(0, 10, 10)]
    with pytest.raises(ValueError, match=r"policy='lru' is not supported; allowed: max, pow2, oracle, paged"):
        simulate(reqs, "lru")
    with pytest.raises(ValueError, match=r"kv_tokens=30 must be a positive multiple of block_size=16"):
        simulate(reqs, "paged", kv_tokens=30)
    with pytest.raises(ValueError, match=r"a request reserves 2048 positions under 'max' but the budget is only "
                                         r"kv_tokens=1024; raise kv_tokens"):
        simulate(reqs, "max", kv_tokens=1024)
    with pytest.raises(ValueError, match=r"a request needs 2 blocks but the pool has only 1; raise kv_tokens"):
        simulate(reqs, "paged", kv_tokens=16)
    with pytest.raises(ValueError, match=r"request 0 needs 20 positions, more than max_len=16"):
        simulate(reqs, "paged", max_len=16)
    with pytest.raises(ValueError, match=r"preemption='evict' is not supported; allowed: recompute, swap"):
        simulate(reqs, "paged", preemption="evict")


# ------------------------------------------------------------------------------------------ real serving

@pytest.fixture(scope="module")
def requests(chat):
    return demo_requests(chat[1], n=12, seed=3)


def reference(model, tok, reqs):
    return [lib.generate(model, r.prompt, r.max_new_tokens, eos_id=tok.eos_id).new_tokens[0].tolist() for r in reqs]


@pytest.fixture(scope="module")
def expected(chat, requests):
    return reference(*chat, requests)


@pytest.mark.parametrize("policy", ["static", "continuous"])
@pytest.mark.parametrize("kw", [dict(), dict(block_size=3), dict(block_size=2, prefix_cache=True)])
def test_serving_gives_the_tokens_of_generate(chat, requests, expected, policy, kw):
    model, tok = chat
    res = serve(model, requests, policy, max_batch=4, eos_id=tok.eos_id, **kw)
    assert [r.tokens for r in res.records] == expected
    assert all(r.tokens[-1] == tok.eos_id for r in res.records)  # each completion ran to <eos>
    assert res.tokens == sum(len(e) for e in expected)
    assert res.prefills == len(requests) and res.preemptions == 0
    prompt_tokens = sum(len(r.prompt) for r in requests)
    if kw.get("prefix_cache"):
        assert res.prefix_hit_blocks > 0 and res.prefill_tokens == prompt_tokens - 2 * res.prefix_hit_blocks
    else:
        assert res.prefix_hit_blocks == 0 and res.prefill_tokens == prompt_tokens


def test_preemption_recomputes_and_still_gives_the_same_tokens(chat, requests, expected):
    model, tok = chat
    res = serve(model, requests, "continuous", max_batch=6, eos_id=tok.eos_id, block_size=4, n_blocks=12)
    assert res.preemptions > 0 and res.prefills == len(requests) + res.preemptions
    assert res.prefill_tokens > sum(len(r.prompt) for r in requests)  # recomputation costs prefill work
    assert [r.tokens for r in res.records] == expected
    assert max(res.blocks_used) <= 12


@pytest.mark.parametrize("prefix_cache", [False, True])
def test_swap_and_recompute_give_the_same_tokens_and_count_their_costs(chat, requests, expected, prefix_cache):
    model, tok = chat
    kw = dict(max_batch=6, eos_id=tok.eos_id, block_size=4, n_blocks=12, prefix_cache=prefix_cache)
    rc, sw = (serve(model, requests, "continuous", preemption=p, **kw) for p in PREEMPTIONS)
    assert [r.tokens for r in rc.records] == [r.tokens for r in sw.records] == expected
    assert rc.preemption == "recompute" and sw.preemption == "swap"
    assert rc.preemptions > 0 and sw.preemptions > 0
    if not prefix_cache:  # the same admissions and preemptions (a swapped request needs the blocks a recomputed
        #                  one would; with a prefix cache, a recomputation shares cached blocks and needs fewer)...
        assert rc.preemptions == sw.preemptions and rc.batch_rows == sw.batch_rows and rc.steps == sw.steps
    # ...and different bills: recomputation prefills again, swapping copies blocks out and back
    assert rc.recomputed_tokens > 0 and (rc.swapped_out_blocks, rc.swapped_in_blocks, rc.swap_bytes) == (0, 0, 0)
    assert sw.recomputed_tokens == 0 and sw.swapped_out_blocks == sw.swapped_in_blocks > 0
    if not prefix_cache:
        assert rc.prefill_tokens == sw.prefill_tokens + rc.recomputed_tokens
    pool_block = 2 * model.config.n_layers * model.config.n_kv_heads * 4 * model.config.head_dim * 4  # fp32
    assert sw.swap_bytes == (sw.swapped_out_blocks + sw.swapped_in_blocks) * pool_block
    assert 0 < sw.peak_cpu_blocks <= sw.swapped_out_blocks
    if not prefix_cache:
        assert sw.prefill_tokens == sum(len(r.prompt) for r in requests)
    assert rc.preemption_costs()["of them recomputed"] == rc.recomputed_tokens
    assert sw.preemption_costs()["bytes moved"] == sw.swap_bytes


def test_continuous_batching_keeps_the_batch_full(chat, requests):
    model, tok = chat
    st_, co = (serve(model, requests, p, max_batch=4, eos_id=tok.eos_id) for p in ("static", "continuous"))
    assert st_.tokens == co.tokens
    # every row of a forward pass gets one token: the same rows in total...
    assert sum(st_.batch_rows) == sum(co.batch_rows) == co.tokens
    assert sum(st_.fed_tokens) == sum(co.fed_tokens)  # ...and the same tokens fed...
    assert co.steps < st_.steps  # ...in fewer forward passes
    assert max(co.batch_rows) == max(st_.batch_rows) == 4
    assert co.mean_ttft_steps() < st_.mean_ttft_steps()
    assert sum(st_.idle_slots) > sum(co.idle_slots)
    # static: a batch is admitted only when the previous one is done, so admissions come in groups of max_batch
    admitted = sorted({r.admitted_step for r in st_.records})
    assert len(admitted) == -(-len(requests) // 4)
    # the counts are deterministic: a second run gives the same summary
    assert serve(model, requests, "continuous", max_batch=4, eos_id=tok.eos_id).summary() == co.summary()
    t = co.timings()
    assert t["tokens/s"] > 0 and set(t) == {"policy", "seconds", "tokens/s", "ms per pass", "mean TTFT (ms)",
                                            "mean latency (ms)"}


def test_demo_requests_are_seeded_corpus_prefixes(chat):
    tok = chat[1]
    a, b = demo_requests(tok, 20, seed=5), demo_requests(tok, 20, seed=5)
    assert [r.prompt for r in a] == [r.prompt for r in b]
    assert all(r.prompt[0] == tok.bos_id and len(r.prompt) >= 2 for r in a)
    lines = read_corpus()
    assert all(any(line.startswith(tok.decode(r.prompt[1:])) for line in lines) for r in a)


def test_serving_errors(chat, requests):
    model, tok = chat
    with pytest.raises(ValueError, match=r"policy='dynamic' is not supported; allowed: static, continuous"):
        serve(model, requests, "dynamic")
    with pytest.raises(TypeError, match=r"requests must be a list of ServeRequest objects \(see demo_requests\); "
                                        r"one of them is list \[1, 2, 3\]"):
        serve(model, [[1, 2, 3]])
    with pytest.raises(ValueError, match=r"request 9: a prompt of 3 token\(s\) with max_new_tokens=70 does not fit "
                                         r"the context window \(max_seq_len=64\)"):
        serve(model, [ServeRequest(9, [1, 5, 6], 70)])
    with pytest.raises(ValueError, match=r"a request may need 9 blocks of 4 tokens \(prompt \+ max_new_tokens\) but "
                                         r"the pool has n_blocks=5; give n_blocks >= 9 or lower max_new_tokens"):
        serve(model, [ServeRequest(0, [1, 5], 32)], block_size=4, n_blocks=5)
    with pytest.raises(ValueError, match=r"max_batch must be an integer >= 1, got 0"):
        serve(model, requests, max_batch=0)
    with pytest.raises(ValueError, match=r"preemption='evict' is not supported; allowed: recompute, swap"):
        serve(model, requests, preemption="evict")


# ------------------------------------------------------------------------------------------ chunked prefill

@pytest.mark.parametrize("kw", [dict(), dict(prefix_cache=True, block_size=2), dict(block_size=4, n_blocks=14)])
def test_chunked_prefill_gives_the_same_tokens_within_its_budget(chat, requests, expected, kw):
    model, tok = chat
    res = serve(model, requests, "continuous", max_batch=4, eos_id=tok.eos_id, max_num_batched_tokens=6, **kw)
    assert [r.tokens for r in res.records] == expected
    assert max(res.fed_tokens) <= 6 and res.max_num_batched_tokens == 6
    plain = serve(model, requests, "continuous", max_batch=4, eos_id=tok.eos_id, **kw)
    assert max(plain.fed_tokens) > 6  # the budget did cut prompts into chunks
    assert res.prefills == len(requests) + res.preemptions  # a prefill fed in chunks counts once
    if not kw:
        assert res.prefill_tokens == plain.prefill_tokens == sum(len(r.prompt) for r in requests)
    assert sum(sum(fed.values()) for fed in res.passes) == sum(res.batch_rows)


def test_chunked_prefill_errors(chat, requests):
    model, tok = chat
    with pytest.raises(ValueError, match=r"max_num_batched_tokens must be None \(no limit\) or an integer >= "
                                         r"max_batch=4: every running decode feeds one token a pass, got 3"):
        serve(model, requests, max_batch=4, max_num_batched_tokens=3)
    with pytest.raises(ValueError, match=r"works with preemption='recompute' only"):
        serve(model, requests, max_batch=4, max_num_batched_tokens=8, preemption="swap")


def test_prefill_is_compute_bound_and_decode_memory_bound_on_a_gpu(chat):
    cfg13 = lib.PRESETS["llama-2-13b"]
    p = lib.serving.predicted_latency(cfg13, 448, 16)
    assert (p.ttft_bound, p.tpot_bound) == ("compute-bound", "memory-bound")
    weights = lib.costs.streamed_weight_bytes(cfg13) / (lib.roofline.DEFAULT_GPU.bandwidth_gbs * 1e9)
    assert weights < p.tpot_seconds < 1.05 * weights  # a decode step reads the weights, little else
    assert p.ttft_seconds > p.tpot_seconds and p.row("x")["prefill bound"] == "compute-bound"
    assert 1.4 < p.ratio < 1.6  # notebook 10: "only about 1.5 times as long as that read" (26 GB of weights)
    assert 25e9 < lib.costs.streamed_weight_bytes(cfg13) < 27e9
    m = lib.serving.measure_latency(chat[0], 32, 4, repeats=1)
    assert m.ttft_seconds > 0 and m.tpot_seconds > 0 and m.prompt_len == 32 and "prefill bound" not in m.row("x")
    with pytest.raises(ValueError, match=r"n_new must be an integer >= 2"):
        lib.serving.predicted_latency(cfg13, 448, 1)
