"""The paged KV cache: same numbers as the contiguous cache, blocks shared and copied on write, reference
counts that return every block, prefix caching, and clear errors when the pool runs dry."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

import lib
from helpers import ATOL, VARIANTS, make_model
from lib import KVCache, MiniTransformer, ModelConfig, generate
from lib.blocks import BlockAllocator, BlockTable, PoolExhaustedError
from lib.paged import PagedKVCache, PagedKVPool, decode_step, forward_paged, prefill


def generate_paged(model, prompt, max_new_tokens, *, n=1, block_size=16, pool=None, **kw):
    """lib.generate on a PagedKVCache: a private pool with room for every sample, unless pool= is given."""
    B = 1 if isinstance(prompt, list) or prompt.dim() == 1 else prompt.shape[0]
    if pool is None:
        pool = PagedKVPool.for_model(model, B * n * -(-model.config.max_seq_len // block_size), block_size)
    return generate(model, prompt, max_new_tokens, cache=PagedKVCache(model.config, B, pool=pool), num_samples=n,
                    **kw)


def model_and_pool(n_blocks: int, block_size: int):
    """A randomized model and a pool of ``n_blocks`` blocks of ``block_size`` positions for it."""
    model = make_model()
    return model, PagedKVPool.for_model(model, n_blocks, block_size)


def assert_allocator_consistent(alloc: BlockAllocator, tables):
    """Every reference held by a live table is counted, and a block is free exactly when nobody holds it."""
    counts = [0] * alloc.n_blocks
    for t in tables:
        for b in t.blocks:
            counts[b] += 1
    assert counts == alloc.refcounts
    assert set(alloc.free_blocks()) == {b for b in range(alloc.n_blocks) if counts[b] == 0}
    assert alloc.n_free + alloc.n_used == alloc.n_blocks


# ---------------------------------------------------------------------------------------- equivalence

@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("block_size", [1, 3, 16])
@pytest.mark.parametrize("batch", [1, 3])
def test_paged_logits_equal_the_contiguous_cache(variant, block_size, batch):
    """Prefill then decode step by step, crossing block boundaries: every logit matches KVCache."""
    model = make_model(**VARIANTS[variant])
    x = torch.randint(0, 50, (batch, 21))
    contiguous = KVCache(model.config, batch, 21)
    paged = PagedKVCache(model.config, batch, 21, block_size=block_size)
    with torch.no_grad():
        for lo, hi in [(0, 5)] + [(t, t + 1) for t in range(5, 17)] + [(17, 21)]:  # prefill, decodes, a chunk
            a = model(x[:, lo:hi], cache=contiguous)
            b = model(x[:, lo:hi], cache=paged)
            torch.testing.assert_close(b, a, atol=ATOL, rtol=0)
            assert paged.seq_len == contiguous.seq_len == hi
    for layer in range(model.config.n_layers):  # layer 0's K/V bit for bit; later layers up to float rounding
        tol = 0 if layer == 0 else ATOL  # (a gathered copy and a strided view can take different matmul kernels)
        torch.testing.assert_close(paged.keys(layer), contiguous.keys(layer), atol=tol, rtol=0)
        torch.testing.assert_close(paged.values(layer), contiguous.values(layer), atol=tol, rtol=0)
    assert [len(t) for t in paged.block_table()] == [-(-21 // block_size)] * batch


@pytest.mark.parametrize("variant", ["mha-learned-layernorm-gelu", "gqa-rope-rmsnorm-swiglu"])
def test_every_prompt_length_and_block_size(variant):
    model = make_model(**VARIANTS[variant])
    for block_size in (1, 2, 3, 5, 8, 16):
        for prompt_len in (1, block_size - 1, block_size, block_size + 1, 2 * block_size + 1):
            if prompt_len < 1:
                continue
            prompt = torch.randint(0, 50, (2, prompt_len))
            a = generate(model, prompt, 6)
            b = generate_paged(model, prompt, 6, block_size=block_size)
            assert torch.equal(a.sequences, b.sequences), (block_size, prompt_len)


def test_pages_are_scattered_yet_the_answer_is_the_same():
    """Blocks handed out in a scrambled order (as in a busy pool) change nothing but the addresses."""
    model = make_model(**VARIANTS["gqa-rope-rmsnorm-swiglu"])
    pool = PagedKVPool(model.config, 14, block_size=3)
    busy = [pool.new_table() for _ in range(4)]
    for t in busy:  # interleave other sequences' blocks, then free two of them
        pool.reserve(t, 7)
    pool.free(busy[1]), pool.free(busy[3])
    x = torch.randint(0, 50, (1, 14))
    cache = pool.cache([pool.new_table()])
    with torch.no_grad():
        out = model(x[:, :9], cache=cache)
        out2 = model(x[:, 9:], cache=cache)
        ref = model(x)
    torch.testing.assert_close(torch.cat([out, out2], 1), ref, atol=ATOL, rtol=0)
    assert cache.block_table()[0] == [9, 10, 11, 3, 4]  # freed blocks first, the last freed first: scattered


@pytest.mark.parametrize("variant", VARIANTS)
def test_generate_paged_equals_generate_greedy_and_sampled(variant):
    model = make_model(**VARIANTS[variant])
    prompt = torch.randint(0, 50, (3, 4))
    for kw in (dict(), dict(temperature=0.9, seed=7), dict(temperature=1.3, top_k=5, top_p=0.9, seed=1),
               dict(eos_id=3, temperature=1.0, seed=2)):
        a = generate(model, prompt, 20, **kw)
        b = generate_paged(model, prompt, 20, block_size=4, **kw)
        assert torch.equal(a.sequences, b.sequences), kw


def test_demo_model_on_a_paged_cache():
    model, tok = lib.load_demo("chat")
    for text, expected in (("<s>", "人工智能<eos>"), ("<s>深", "度学习<eos>"), ("<s>hello", " world<eos>")):
        r = generate_paged(model, tok.encode(text), 20, eos_id=tok.eos_id, block_size=2)
        assert tok.decode(r.new_tokens[0].tolist()) == expected


# ------------------------------------------------------------------------------- ragged decode (batching)

@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("block_size", [1, 3, 16])
def test_decode_step_of_different_lengths_equals_one_at_a_time(variant, block_size):
    model = make_model(**VARIANTS[variant])
    pool = PagedKVPool.for_model(model, 60, block_size)
    prompts = [torch.randint(0, 50, (n,)).tolist() for n in (1, 4, 7, 16, 2)]
    tables = [pool.new_table(str(i)) for i in range(len(prompts))]
    for t, p in zip(tables, prompts):
        prefill(model, pool, t, p)
    seqs = [list(p) for p in prompts]
    for _ in range(5):
        new = torch.randint(0, 50, (len(seqs),)).tolist()
        logits = decode_step(model, pool, tables, new)  # (B, vocab) in one batched step
        for i, tok in enumerate(new):
            seqs[i].append(tok)
            with torch.no_grad():
                ref = model(torch.tensor([seqs[i]]))[0, -1]
            torch.testing.assert_close(logits[i], ref, atol=ATOL, rtol=0)
    assert [t.n_tokens for t in tables] == [len(s) for s in seqs]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("block_size", [1, 3, 16])
def test_a_mixed_batch_of_prompts_and_decodes_equals_one_at_a_time(variant, block_size):
    """The continuous-batching pass: new requests feed whole prompts (or the rest of one, in chunks) while
    running ones feed one token, all in one forward; every sequence gets the logits it would get alone."""
    model = make_model(**VARIANTS[variant])
    pool = PagedKVPool.for_model(model, 80, block_size)
    seqs = [torch.randint(0, 50, (n,)).tolist() for n in (3, 9, 1, 5)]
    tables = [pool.new_table(str(i)) for i in range(4)]
    forward_paged(model, pool, tables[:2], [seqs[0], seqs[1][:4]])  # two prompts (one only in part)
    for _ in range(3):
        feeds = [[int(torch.randint(0, 50, ()))], seqs[1][tables[1].n_tokens:tables[1].n_tokens + 2] or
                 [int(torch.randint(0, 50, ()))], seqs[2] if tables[2].n_tokens == 0 else [7],
                 seqs[3] if tables[3].n_tokens == 0 else [int(torch.randint(0, 50, ()))]]
        logits = forward_paged(model, pool, tables, feeds)
        for i, f in enumerate(feeds):
            if len(seqs[i]) < tables[i].n_tokens:
                seqs[i] = seqs[i] + f
            full = seqs[i][:tables[i].n_tokens]
            with torch.no_grad():
                ref = model(torch.tensor([full]))[0, -1]
            torch.testing.assert_close(logits[i], ref, atol=ATOL, rtol=0)
    assert_allocator_consistent(pool.allocator, tables)


def test_forward_paged_errors():
    model, pool = model_and_pool(20, 4)
    t = pool.new_table()  # an empty sequence
    with pytest.raises(ValueError, match=r"got 2 token list\(s\) for 1 sequence\(s\); give one per sequence"):
        forward_paged(model, pool, [t], [[1], [2]])
    with pytest.raises(ValueError, match=r"every sequence must feed at least one token"):
        forward_paged(model, pool, [t], [[]])
    with pytest.raises(ValueError, match=r"sequence too long for the context window: positions 0..40 were asked for, "
                                         r"but this model has max_seq_len=40"):
        forward_paged(model, pool, [t], [list(range(41))])
    assert t.n_tokens == 0 and pool.allocator.n_free == 20  # a refused pass changes nothing


def test_decode_step_errors():
    model, pool = model_and_pool(4, 4)
    t = pool.new_table()
    with pytest.raises(ValueError, match=r"hold at least one token; prefill new ones first"):
        decode_step(model, pool, [t], [1])
    prefill(model, pool, t, [1, 2, 3])
    with pytest.raises(ValueError, match=r"decode_step got 2 token\(s\) for 1 sequence\(s\); give one per sequence"):
        decode_step(model, pool, [t], [1, 2])
    with pytest.raises(ValueError, match=r"needs at least one sequence"):
        decode_step(model, pool, [], [])
    half = PagedKVPool(model.config, 4, 4, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"the pool holds torch.float16 on cpu but the model computes in "
                                         r"torch.float32 on cpu; build the pool with PagedKVPool.for_model"):
        decode_step(model, half, [t], [1])


# ----------------------------------------------------------------------------------- sharing and copy-on-write

def test_fork_shares_blocks_and_the_first_write_copies():
    model = make_model(**VARIANTS["gqa-rope-rmsnorm-swiglu"])
    pool = PagedKVPool.for_model(model, 20, block_size=4)
    parent = pool.cache([pool.new_table("p")])
    x = torch.randint(0, 50, (1, 6))  # 6 tokens: block 0 full, block 1 half full
    with torch.no_grad():
        model(x, cache=parent)
    keys_before = [parent.keys(l).clone() for l in range(2)]
    kids = parent.fork(3)
    a = pool.allocator
    assert kids.block_table() == [parent.block_table()[0]] * 3
    assert [a.refcounts[b] for b in parent.block_table()[0]] == [4, 4]
    assert kids.nbytes == 2 * pool.block_nbytes  # the shared blocks count once
    nxt = torch.randint(0, 50, (3, 1))
    with torch.no_grad():
        out = model(nxt, cache=kids)
    # the full block stays shared; the half-full one was copied for each child (the parent still holds it)
    assert a.n_copies == 3
    assert len({t[0] for t in kids.block_table()}) == 1 and len({t[1] for t in kids.block_table()}) == 3
    for l in range(2):  # the parent's keys are untouched by its children's writes
        assert torch.equal(parent.keys(l), keys_before[l])
    # each child equals a sequence computed from scratch
    with torch.no_grad():
        for i in range(3):
            ref = model(torch.cat([x, nxt[i:i + 1]], 1))[:, -1]
            torch.testing.assert_close(out[i:i + 1, -1], ref, atol=ATOL, rtol=0)
    parent.release()
    kids.release()
    assert a.n_free == 20 and a.refcounts == [0] * 20


def test_last_holder_writes_in_place_and_full_blocks_are_never_copied():
    model, pool = model_and_pool(12, 4)
    one = pool.cache([pool.new_table()])
    with torch.no_grad():
        model(torch.randint(0, 50, (1, 8)), cache=one)  # exactly two full blocks
        two = one.fork(2)
        one.release()
        model(torch.randint(0, 50, (2, 1)), cache=two)
    assert pool.allocator.n_copies == 0  # the next token starts a new block: nothing shared is written
    three = pool.cache([pool.new_table()])
    with torch.no_grad():
        model(torch.randint(0, 50, (1, 5)), cache=three)
        forks = three.fork(2)
        three.release()  # now the two forks are the only holders of the half-full block
        model(torch.randint(0, 50, (2, 1)), cache=forks)
    assert pool.allocator.n_copies == 1  # the first writer copies, the last holder writes in place


def test_parallel_sampling_shares_the_prompt_and_matches_generate():
    model = make_model(**VARIANTS["mqa-rope-layernorm-silu"])
    prompt = torch.randint(0, 50, (1, 10))
    a = generate(model, prompt.expand(4, -1), 12, temperature=1.5, seed=3)
    pool = PagedKVPool.for_model(model, 40, block_size=4)
    b = generate_paged(model, prompt, 12, temperature=1.5, seed=3, n=4, pool=pool)
    assert torch.equal(a.sequences, b.sequences)
    assert len({tuple(s.tolist()) for s in b.new_tokens}) > 1  # the samples did diverge
    tables = b.cache.block_table()
    assert len({t[0] for t in tables}) == len({t[1] for t in tables}) == 1  # the prompt's full blocks: one copy
    separate = 4 * -(-(10 + 11) // 4)
    assert pool.allocator.n_used == len({blk for t in tables for blk in t}) < separate
    b.cache.release()
    assert pool.allocator.n_free == 40


def test_select_reorders_rows_like_beam_search():
    model = make_model(**VARIANTS["mha-learned-layernorm-gelu"])
    x = torch.randint(0, 50, (3, 5))
    pool = PagedKVPool.for_model(model, 30, block_size=2)
    cache = pool.cache([pool.new_table() for _ in range(3)])
    with torch.no_grad():
        model(x, cache=cache)
        beams = cache.select([2, 2, 0])
        cache.release()
        y = torch.randint(0, 50, (3, 1))
        out = model(y, cache=beams)
        ref = model(torch.cat([x[[2, 2, 0]], y], 1))[:, -1:]
    torch.testing.assert_close(out, ref, atol=ATOL, rtol=0)
    beams.release()
    assert_allocator_consistent(pool.allocator, [])


# ------------------------------------------------------------------------------------------ prefix caching

def test_prefix_cache_reuses_full_blocks_and_gives_the_same_logits():
    model = make_model(**VARIANTS["gqa-learned-qkvbias"])
    pool = PagedKVPool.for_model(model, 16, block_size=4, record_events=True)
    prompt = torch.randint(0, 50, (11,)).tolist()
    first = pool.new_table("a")
    la = prefill(model, pool, first, prompt, prefix_cache=True)
    assert pool.allocator.n_prefix_hits == 0
    second = pool.new_table("b")
    lb = prefill(model, pool, second, prompt[:9] + [7, 8], prefix_cache=True)  # shares the first 8 tokens
    assert second.blocks[:2] == first.blocks[:2] and second.blocks[2] != first.blocks[2]
    assert pool.allocator.n_prefix_hits == 2
    with torch.no_grad():
        ref = model(torch.tensor([prompt[:9] + [7, 8]]))[0, -1]
    torch.testing.assert_close(lb, ref, atol=ATOL, rtol=0)
    torch.testing.assert_close(la, model(torch.tensor([prompt]))[0, -1].detach(), atol=ATOL, rtol=0)
    # freed blocks stay findable until they are reused for something else
    pool.free(first), pool.free(second)
    third = pool.new_table("c")
    assert pool.match_prefix(third, prompt) == 8 and pool.allocator.refcounts[third.blocks[0]] == 1
    pool.free(third)
    hog = pool.new_table("hog")
    pool.reserve(hog, 16 * 4)  # take every block: the cached prefix is evicted
    pool.free(hog)
    assert pool.match_prefix(pool.new_table(), prompt) == 0
    ops = {op for op, _, _ in pool.allocator.events}
    assert {"alloc", "hit", "free", "evict"} <= ops


def test_prefix_never_covers_the_whole_prompt():
    alloc = BlockAllocator(8, 4)
    t = BlockTable()
    alloc.reserve(t, 8)
    t.n_tokens = 8
    alloc.register_prefix(t, range(8))
    u = BlockTable()
    assert alloc.match_prefix(u, list(range(8))) == 4  # the last token must still be computed
    with pytest.raises(ValueError, match=r"match_prefix needs an empty block table"):
        alloc.match_prefix(u, list(range(8)))
    with pytest.raises(ValueError, match=r"register_prefix needs the ids of all 8 cached tokens, got 3"):
        alloc.register_prefix(t, [1, 2, 3])


def test_a_cropped_block_is_dropped_from_the_prefix_index():
    model, pool = model_and_pool(8, 4)
    t = pool.new_table()
    ids = list(range(1, 10))
    prefill(model, pool, t, ids, prefix_cache=True)  # blocks 0, 1 full and indexed
    cache = pool.cache([t])
    cache.crop(6)
    with torch.no_grad():
        model(torch.tensor([[20, 21]]), cache=cache)  # overwrites positions 6, 7 of the indexed block 1
    u = pool.new_table()
    assert pool.match_prefix(u, ids) == 4  # block 1 no longer claims to hold ids[:8]


# --------------------------------------------------------------------------------- reference counts (property)

@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["new", "grow", "fork", "free", "crop"]), st.integers(0, 50)),
                min_size=1, max_size=40))
def test_reference_counts_always_add_up(ops):
    alloc = BlockAllocator(24, 3)
    live = []
    for op, arg in ops:
        if op == "new" or not live:
            live.append(BlockTable())
            continue
        t = live[arg % len(live)]
        if op == "grow":
            n = arg % 7 + 1
            try:
                alloc.reserve(t, n)
                t.n_tokens += n
            except PoolExhaustedError as e:
                assert e.needed > e.free == alloc.n_free
        elif op == "fork":
            live.append(alloc.fork(t))
        elif op == "free":
            alloc.free(t)
            live.remove(t)
        else:
            alloc.truncate(t, arg % (t.n_tokens + 1))
        assert_allocator_consistent(alloc, live)
    for t in live:
        alloc.free(t)
    assert alloc.n_free == 24 and alloc.refcounts == [0] * 24


# ------------------------------------------------------------------------------------------ errors and bytes

def test_pool_exhausted_is_a_clear_error_and_changes_nothing():
    model, pool = model_and_pool(3, 4)
    cache = pool.cache([pool.new_table("req-7")])
    with torch.no_grad():
        model(torch.randint(0, 50, (1, 10)), cache=cache)  # 3 blocks: the pool is full
        with pytest.raises(PoolExhaustedError, match=r"KV block pool exhausted: appending 3 token\(s\) to 1 "
                                                     r"sequence\(s\) needs 1 free block\(s\) of 4 tokens, but only 0 "
                                                     r"of 3 are free\. Release finished sequences, preempt a running "
                                                     r"one, let the request wait, or build a pool with more blocks "
                                                     r"\(n_blocks >= 4 would do\)"):
            model(torch.randint(0, 50, (1, 3)), cache=cache)
    assert cache.seq_len == 10 and cache.block_table() == [[0, 1, 2]] and pool.allocator.n_free == 0
    t = pool.new_table("b")
    with pytest.raises(PoolExhaustedError, match=r"sequence 'b' needs 1 free block\(s\)") as e:
        pool.reserve(t, 1)
    assert (e.value.needed, e.value.free, e.value.n_blocks) == (1, 0, 3) and t.blocks == []
    decode_step(model, pool, cache.tables, [1])  # positions 10 and 11 still fit in the last block
    decode_step(model, pool, cache.tables, [2])
    with pytest.raises(PoolExhaustedError, match=r"appending 1 token\(s\) to 1 sequence\(s\) needs 1 free"):
        decode_step(model, pool, cache.tables, [3])
    assert cache.tables[0].n_tokens == 12


def test_construction_and_misuse_errors():
    cfg = make_model().config
    with pytest.raises(ValueError, match=r"n_blocks must be an integer from 1 to 1,048,576 \(each block.s "
                                         r"bookkeeping is a Python object\), got 0"):
        BlockAllocator(0)
    with pytest.raises(ValueError, match=r"block_size must be an integer >= 1, got 2.5"):
        PagedKVPool(cfg, 4, 2.5)
    with pytest.raises(TypeError, match=r"built from a lib.ModelConfig"):
        PagedKVPool({"n_layers": 2}, 4)
    with pytest.raises(TypeError, match=r"pool must be a lib.paged.PagedKVPool, got KVCache"):
        PagedKVCache(cfg, 1, pool=KVCache(cfg, 1, 4))
    pool = PagedKVPool(cfg, 8, 2)
    a, b = pool.new_table(), pool.new_table()
    pool.reserve(a, 3)
    a.n_tokens = 3
    ragged = pool.cache([a, b])  # sequences of different lengths: fine, but they have no single seq_len
    assert ragged.seq_lens == [3, 0]
    with pytest.raises(ValueError, match=r"hold different numbers of positions \[3, 0\]; read cache.seq_lens"):
        ragged.seq_len
    with pytest.raises(ValueError, match=r"batch_size=2 but 1 block table\(s\) were given"):
        PagedKVCache(cfg, 2, pool=pool, tables=[a])
    with pytest.raises(ValueError, match=r"dtype mismatch: the pool stores torch.float32, got dtype=torch.float16"):
        PagedKVCache(cfg, 1, pool=pool, dtype=torch.float16)
    two = pool.cache([pool.fork(a), pool.fork(a)])
    four = two.fork(2)  # every row twice, sharing its blocks
    assert four.block_table() == [two.block_table()[0]] * 2 + [two.block_table()[1]] * 2
    four.release()
    with pytest.raises(ValueError, match=r"fork's number of copies must be an integer >= 1, got 0"):
        two.fork(0)
    with pytest.raises(ValueError, match=r"rows must be a non-empty list of sequence indices from 0 to 1, got \[2\]"):
        two.select([2])
    with pytest.raises(ValueError, match=r"truncate's n_tokens must be a length from 0 to the table's 3 tokens, got 4"):
        pool.allocator.truncate(a, 4)
    two_prompts = generate_paged(make_model(), torch.tensor([[1, 2, 3], [4, 5, 6]]), 2, n=2, block_size=2)
    assert two_prompts.sequences[:, :3].tolist() == [[1, 2, 3]] * 2 + [[4, 5, 6]] * 2  # each prompt twice
    with pytest.raises(ValueError, match=r"the table already holds 3 tokens; the prompt has 3"):
        prefill(make_model(), pool, a, [1, 2, 3])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_bytes_are_blocks_held(dtype):
    cfg = ModelConfig(vocab_size=40, n_layers=3, d_model=24, n_heads=6, n_kv_heads=2, max_seq_len=32)
    pool = PagedKVPool(cfg, 10, 4, dtype=dtype)
    assert pool.nbytes == 10 * pool.block_nbytes == sum(t.untyped_storage().nbytes() for t in pool.k + pool.v)
    assert pool.block_nbytes == lib.kv_cache_bytes(cfg, 4, dtype=dtype)
    model = MiniTransformer(cfg).to(dtype).eval()
    cache = pool.cache([pool.new_table(), pool.new_table()])
    with torch.no_grad():
        model(torch.randint(0, 40, (2, 6)), cache=cache)
    assert cache.nbytes == 4 * pool.block_nbytes  # 2 sequences x 2 blocks
    assert cache.used_bytes == lib.kv_cache_bytes(cfg, 6, batch_size=2, dtype=dtype)  # 12 of 16 slots hold tokens


def test_swap_out_and_in_keep_a_sequences_keys_and_values_in_other_blocks():
    """What serve's preemption by swapping needs: a table's blocks to CPU memory and freed, then new blocks with
    the same keys and values, and decoding continues as if nothing had happened."""
    model, pool = model_and_pool(6, 2)
    t = pool.new_table("a")
    prefill(model, pool, t, [1, 2, 3, 4, 5])  # 3 blocks
    keys, values = pool.cache([t]).kv(0)
    assert pool.swap_out(t) == 3 and (t.blocks, t.n_tokens) == ([], 0) and pool.allocator.n_free == 6
    other = pool.new_table("b")
    prefill(model, pool, other, [7, 8, 9])  # takes the freed blocks 0 and 1 (and overwrites them)
    assert pool.swap_in(t) == 3 and t.n_tokens == 5 and set(t.blocks).isdisjoint(other.blocks)
    k, v = pool.cache([t]).kv(0)
    assert torch.equal(k, keys) and torch.equal(v, values)
    after = decode_step(model, pool, [t], [6])[0]
    alone = model(torch.tensor([[1, 2, 3, 4, 5, 6]]))[0, -1]
    torch.testing.assert_close(after, alone, atol=ATOL, rtol=0)
    assert_allocator_consistent(pool.allocator, [t, other])
    with pytest.raises(ValueError, match=r"swap_in: nothing of BlockTable\(a: .*\) is in CPU memory; swap_out"):
        pool.swap_in(t)
    pool.swap_out(t)
    with pytest.raises(ValueError, match=r"swap_out: .* is in CPU memory already; swap_in it before"):
        pool.swap_out(t)
    full = pool.new_table("c")
    pool.reserve(full, 8)  # every free block
    with pytest.raises(PoolExhaustedError):
        pool.swap_in(t)
    assert (t.blocks, t.n_tokens) == ([], 0)  # nothing changed: the copy waits on the CPU
    pool.free(full)
    assert pool.swap_in(t) == 3 and t.n_tokens == 6


def test_private_pool_matches_kvcache_signature():
    cfg = make_model().config
    cache = PagedKVCache(cfg, 2, 10, block_size=4)  # the same positional arguments as lib.KVCache
    assert cache.pool.n_blocks == 2 * 3 and cache.max_len == 10 and cache.seq_len == 0
    with torch.no_grad():
        make_model()(torch.randint(0, 50, (2, 10)), cache=cache)
    with pytest.raises(ValueError, match=r"KV cache is full: it holds 10 of max_len=10 positions"):
        make_model()(torch.randint(0, 50, (2, 1)), cache=cache)
    cache.reset()
    assert cache.seq_len == 0 and cache.pool.allocator.n_free == 6


def test_a_failed_generate_gives_back_every_block_it_took():
    """A shared pool too small for the whole run: PoolExhaustedError part-way, and the pool is as before
    (the cache passed in holds again what it held), also when the prompt itself does not fit."""
    model, pool = model_and_pool(2, 4)
    for prompt, n in (([1, 2, 3], 20), ([1, 2, 3, 4, 5, 6, 7, 8, 9, 10], 2), ([1, 2, 3], 3)):
        cache = PagedKVCache(model.config, 1, pool=pool)
        with pytest.raises(PoolExhaustedError, match=r"KV block pool exhausted"):
            generate(model, prompt, n, cache=cache, num_samples=3 if n == 3 else 1)
        assert pool.allocator.n_used == 0 and cache.seq_lens == [0]
    cache = PagedKVCache(model.config, 1, pool=pool)
    model(torch.tensor([[1, 2, 3]]), cache=cache)  # a cache that already holds three tokens
    with pytest.raises(PoolExhaustedError):
        generate(model, [4, 5], 20, cache=cache)
    assert cache.seq_len == 3 and pool.allocator.n_used == 1


def test_paged_cache_is_not_part_of_the_model():
    model = make_model()
    names = set(model.state_dict())
    generate_paged(model, torch.randint(0, 50, (1, 4)), 5)
    assert set(model.state_dict()) == names and not list(model.buffers())


def test_paged_cache_on_each_device(device):
    model = make_model(**VARIANTS["gqa-rope-rmsnorm-swiglu"]).to(device)
    prompt = torch.randint(0, 50, (2, 5), device=device)
    a = generate(model, prompt, 8)
    b = generate_paged(model, prompt, 8, block_size=3)
    assert torch.equal(a.sequences, b.sequences) and b.cache.pool.k[0].device.type == device.type


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_ragged_batch_without_a_cache_equals_each_row_alone(variant):
    """The same right-padded batch with lengths=, no cache: every row's logits are its own, and padding
    never leaks into a real position (it sits after every real token, and attention is causal)."""
    model = make_model(**VARIANTS[variant])
    rows = [torch.randint(0, 50, (n,)).tolist() for n in (6, 2, 4)]
    x = torch.tensor([r + [0] * (6 - len(r)) for r in rows])
    with torch.no_grad():
        full = model(x, lengths=[6, 2, 4])
        last = model(x, lengths=[6, 2, 4], last_only=True)
        for b, r in enumerate(rows):
            alone = model(torch.tensor([r]))[0]
            torch.testing.assert_close(full[b, :len(r)], alone, atol=ATOL, rtol=0)
            torch.testing.assert_close(last[b, 0], alone[-1], atol=ATOL, rtol=0)
    with pytest.raises(ValueError, match=r"lengths must give each of the 3 row\(s\) its number of real tokens, "
                                         r"from 1 to T=6, the longest filling all of input_ids; got \[6, 0, 4\]"):
        model(x, lengths=[6, 0, 4])
    with pytest.raises(ValueError, match=r"the longest filling all of input_ids; got \[5, 2, 4\]"):
        model(x, lengths=[5, 2, 4])
    with pytest.raises(ValueError, match=r"KVCache holds sequences of one length, so every row must feed the same "
                                         r"number of tokens \(got lengths \[6, 2, 4\]\); use lib.paged.PagedKVCache"):
        model(x, cache=KVCache(model.config, 3, 10), lengths=[6, 2, 4])


@pytest.mark.parametrize("variant", ["mha-learned-layernorm-gelu", "gqa-rope-rmsnorm-swiglu", "odd-sizes"])
def test_fastdecoder_runs_the_same_ragged_pass(variant):
    """FastDecoder is the model's own forward pass with packed products: ragged paged batches work unchanged."""
    model = make_model(**VARIANTS[variant])
    fast = lib.FastDecoder(model, 2)
    plain_pool, fast_pool = PagedKVPool.for_model(model, 30, 4), PagedKVPool.for_model(model, 30, 4)
    plain_t = [plain_pool.new_table() for _ in range(3)]
    fast_t = [fast_pool.new_table() for _ in range(3)]
    for feeds in ([[1, 2, 3], [4], [5, 6]], [[7], [8, 9, 10, 11], [12]], [[13], [14], [15]]):
        torch.testing.assert_close(forward_paged(fast, fast_pool, fast_t, feeds),
                                   forward_paged(model, plain_pool, plain_t, feeds), atol=ATOL, rtol=0)
    assert [t.n_tokens for t in fast_t] == [5, 6, 4] and [t.blocks for t in fast_t] == [t.blocks for t in plain_t]


def test_parallel_samples_share_the_prompt_and_equal_generate_on_repeated_prompts():
    model = make_model()
    prompt = torch.randint(0, 50, (1, 9))
    for kind in ("static", "concat", "paged"):
        a = generate(model, prompt, 8, temperature=1.2, seed=4, num_samples=3, cache_kind=kind, trace=True)
        b = generate(model, prompt.repeat(3, 1), 8, temperature=1.2, seed=4, cache_kind=kind)
        assert torch.equal(a.sequences, b.sequences) and a.sequences.shape == (3, 17)
        assert a.trace[0].input_ids.shape == (3, 9) and a.trace[0].attention.shape[1] == 3
        assert len(set(map(tuple, a.sequences[:, 9:].tolist()))) > 1  # the samples differ
    paged = generate_paged(model, prompt, 8, temperature=1.2, seed=4, n=3, block_size=4).cache
    assert len({t.blocks[0] for t in paged.tables}) == len({t.blocks[1] for t in paged.tables}) == 1  # shared
    assert len({t.blocks[2] for t in paged.tables}) == 3  # the half-full block was copied on write
    with pytest.raises(ValueError, match=r"num_samples must be an integer >= 1, got 0"):
        generate(model, prompt, 3, num_samples=0)


def test_locate_maps_positions_onto_the_tables_blocks():
    t = BlockTable([7, 2, 9], 40)
    assert t.locate(37, 16) == (9, 5) and t.locate(0, 16) == (7, 0) and t.locate(16, 16) == (2, 0)
    assert t.locate(47, 16) == (9, 15)
    # every slot of the table's blocks is one position's, exactly once
    assert sorted(t.locate(p, 4) for p in range(12)) == sorted((b, o) for b in (7, 2, 9) for o in range(4))
    with pytest.raises(ValueError, match=r"position must be a position from 0 to 47 \(the table has 3 block\(s\) "
                                         r"of 16\), got 48"):
        t.locate(48, 16)
    with pytest.raises(ValueError, match=r"block_size must be an integer >= 1, got 0"):
        t.locate(3, 0)


def test_a_mixed_step_as_vllms_flat_batch_and_its_slot_mapping():
    from lib.paged import flat_batch
    model, pool = model_and_pool(12, 4)
    a, b, c = pool.new_table("a"), pool.new_table("b"), pool.new_table("c")
    forward_paged(model, pool, [a, b], [list(range(1, 7)), [3, 4, 5]])  # two prompts, interleaved blocks
    forward_paged(model, pool, [a], [[7, 8, 9]])
    feeds = [[2], [6], [1, 2, 3, 4, 5]]  # a and b decode one token each, c's prompt is prefilled: one step
    forward_paged(model, pool, [a, b, c], feeds)
    step = flat_batch(pool, [a, b, c], [1, 1, 5])
    assert step.query_start_loc == [0, 1, 2, 7] and step.flat_tokens == 7 and step.padded_tokens == 15
    assert step.seq_lens == [10, 4, 5] and step.positions == [9, 3, 0, 1, 2, 3, 4]
    want = [blk * 4 + off for t, p in zip((a, b, c, c, c, c, c), step.positions) for blk, off in [t.locate(p, 4)]]
    assert step.slot_mapping == want
    # the slot is where the key lies: the pool seen as one row per slot, (n_blocks * block_size, n_kv_heads, head_dim)
    for layer in range(model.config.n_layers):
        rows = pool.k[layer].transpose(1, 2).flatten(0, 1)
        keys_c = pool.gather(layer, pool.table_tensor([c], 5), 5)[0][0].transpose(0, 1)  # (5, n_kv_heads, head_dim)
        assert torch.equal(rows[step.slot_mapping[2:]], keys_c)
    with pytest.raises(ValueError, match=r"query_lens\[1\] must be from 1 to the 4 positions table 1 holds"):
        flat_batch(pool, [a, b], [1, 5])
    with pytest.raises(ValueError, match="one query length per block table"):
        flat_batch(pool, [a, b], [1])
