"""The caches: real sizes, views, resets, and a clear error for every misuse."""
import pytest
import torch

from lib import ConcatKVCache, KVCache, MiniTransformer, ModelConfig, generate, kv_cache_bytes

CFG = ModelConfig(vocab_size=40, n_layers=3, d_model=24, n_heads=6, n_kv_heads=2, max_seq_len=32)


def storage_bytes(tensors):
    return sum(t.untyped_storage().nbytes() for t in tensors)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
@pytest.mark.parametrize("batch,max_len", [(1, 1), (2, 17), (4, 32)])
def test_nbytes_is_the_formula_and_the_real_storage(dtype, batch, max_len):
    cache = KVCache(CFG, batch, max_len, dtype=dtype)
    assert cache.nbytes == kv_cache_bytes(CFG, max_len, batch_size=batch, dtype=dtype)
    assert cache.nbytes == storage_bytes(cache.k + cache.v)
    assert cache.nbytes == 2 * CFG.n_layers * batch * CFG.n_kv_heads * max_len * CFG.head_dim * dtype.itemsize


def test_preallocated_shape_and_views():
    cache = KVCache(CFG, 2, 10)
    assert all(t.shape == (2, 2, 10, 4) for t in cache.k + cache.v)
    model = MiniTransformer(CFG).eval()
    with torch.no_grad():
        model(torch.randint(0, 40, (2, 4)), cache=cache)
    assert cache.seq_len == 4 and cache.max_len - cache.seq_len == 6
    k = cache.keys(1)
    assert k.shape == (2, 2, 4, 4)
    assert k.data_ptr() == cache.k[1].data_ptr()  # a view into the preallocated tensor, not a copy
    assert cache.used_bytes == cache.nbytes * 4 // 10


def test_concat_cache_grows_and_counts_its_copies():
    model = MiniTransformer(CFG).eval()
    cache = ConcatKVCache(CFG, 1)
    per_pos = 2 * CFG.n_kv_heads * CFG.head_dim * 4  # K and V of one position in one layer, fp32
    expected_copied = 0
    with torch.no_grad():
        model(torch.randint(0, 40, (1, 3)), cache=cache)
        expected_copied += CFG.n_layers * 3 * per_pos
        for n in range(4, 12):
            model(torch.randint(0, 40, (1, 1)), cache=cache)
            expected_copied += CFG.n_layers * n * per_pos  # the whole history is copied again
    assert cache.seq_len == 11
    assert cache.nbytes == kv_cache_bytes(CFG, 11, dtype=torch.float32) == storage_bytes(cache.k + cache.v)
    assert cache.bytes_copied == expected_copied
    # total copying grows like n^2: sum_{n=3..11} n positions per layer
    assert cache.bytes_copied == CFG.n_layers * per_pos * sum(range(3, 12))


def test_cache_is_not_part_of_the_model():
    model = MiniTransformer(CFG).eval()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    n_params = sum(p.numel() for p in model.parameters())
    r = generate(model, torch.randint(0, 40, (1, 5)), 10)
    assert r.cache.seq_len == 14
    assert set(model.state_dict()) == set(before)
    assert all(torch.equal(model.state_dict()[k], v) for k, v in before.items())
    assert sum(p.numel() for p in model.parameters()) == n_params
    assert not any("cache" in name for name, _ in model.named_buffers())
    assert not any("cache" in name.lower() for name in model.state_dict())
    # two requests, two caches
    r2 = generate(model, torch.randint(0, 40, (1, 5)), 10)
    assert r2.cache is not r.cache


def test_reset_empties_the_cache():
    model = MiniTransformer(CFG).eval()
    for cache in (KVCache(CFG, 1, 8), ConcatKVCache(CFG, 1, 8)):
        with torch.no_grad():
            model(torch.randint(0, 40, (1, 5)), cache=cache)
        cache.reset()
        assert cache.seq_len == 0
        assert cache.keys(0).shape == (1, 2, 0, 4)


def test_overflow_is_a_clear_error():
    model = MiniTransformer(CFG).eval()
    cache = KVCache(CFG, 1, 6)
    with torch.no_grad():
        model(torch.randint(0, 40, (1, 4)), cache=cache)
        with pytest.raises(ValueError, match=r"KV cache is full: it holds 4 of max_len=6 positions and this forward "
                                             r"would add 3 more; make a cache with max_len >= 7"):
            model(torch.randint(0, 40, (1, 3)), cache=cache)
    assert cache.seq_len == 4  # nothing was written


def test_batch_dtype_device_and_shape_mismatches_are_clear_errors():
    model = MiniTransformer(CFG).eval()
    x = torch.randint(0, 40, (2, 3))
    with pytest.raises(ValueError, match=r"batch size mismatch: the cache holds 1 sequence\(s\) but the input has 2"):
        model(x, cache=KVCache(CFG, 1, 8))
    with pytest.raises(ValueError, match=r"dtype mismatch: the cache is in torch.float16 but the model in "
                                         r"torch.float32"):
        model(x, cache=KVCache(CFG, 2, 8, dtype=torch.float16))
    other = CFG.replace(n_kv_heads=3)
    with pytest.raises(ValueError, match=r"this cache was made for 3 layers x 3 KV heads"):
        model(x, cache=KVCache(other, 2, 8))


def test_device_mismatch_and_missing_device_are_clear_errors():
    with pytest.raises(ValueError, match=r"device 'nonexistent' |is not a device name"):
        KVCache(CFG, 1, 4, device="nonexistent")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"device 'cuda' is not available here .*available: .*cpu"):
            KVCache(CFG, 1, 4, device="cuda")
    else:
        model = MiniTransformer(CFG).eval()
        with pytest.raises(ValueError, match=r"device mismatch: the cache is in cuda:0 but the model in cpu"):
            model(torch.randint(0, 40, (1, 3)), cache=KVCache(CFG, 1, 4, device="cuda"))


def test_bad_construction_arguments():
    with pytest.raises(ValueError, match=r"max_len=33 is longer than the model's context window \(max_seq_len=32\)"):
        KVCache(CFG, 1, 33)
    with pytest.raises(ValueError, match=r"batch_size must be an integer >= 1, got 0"):
        KVCache(CFG, 0, 4)
    with pytest.raises(ValueError, match=r"floating-point torch dtype"):
        KVCache(CFG, 1, 4, dtype=torch.int8)
    with pytest.raises(TypeError, match=r"built from a lib.ModelConfig"):
        KVCache({"n_layers": 2}, 1, 4)
    with pytest.raises(IndexError, match=r"layer must be an integer from 0 to 2 \(the cache holds 3 layers\), got 3"):
        KVCache(CFG, 1, 4).keys(3)


def test_cache_on_each_device(device):
    model = MiniTransformer(CFG).to(device).eval()
    cache = KVCache(CFG, 1, 8, device=device)
    with torch.no_grad():
        out = model(torch.randint(0, 40, (1, 5), device=device), cache=cache)
    assert out.device.type == device.type and cache.keys(0).device.type == device.type
    if device.type == "cuda":  # what the allocator handed out matches the formula
        torch.cuda.synchronize()
        before = torch.cuda.memory_allocated(device)
        c2 = KVCache(CFG, 4, 32, device=device)
        assert torch.cuda.memory_allocated(device) - before >= c2.nbytes


@pytest.mark.parametrize("kind", [KVCache, ConcatKVCache])
def test_crop_forgets_the_tail_and_decoding_continues_exactly(kind):
    """Dropping positions (as speculative decoding does with rejected drafts) leaves a cache that is
    indistinguishable from one that never saw them."""
    torch.manual_seed(0)
    model = MiniTransformer(CFG).eval()
    x = torch.randint(0, 40, (1, 10))
    with torch.no_grad():
        a = kind(CFG, 1, 12)
        model(x[:, :8], cache=a)
        a.crop(5)
        assert a.seq_len == 5 and a.keys(2).shape[2] == 5
        out_a = model(x[:, 5:9], cache=a)
        b = kind(CFG, 1, 12)
        model(x[:, :5], cache=b)
        out_b = model(x[:, 5:9], cache=b)
    torch.testing.assert_close(out_a, out_b, atol=1e-6, rtol=0)
    for layer in range(CFG.n_layers):
        torch.testing.assert_close(a.keys(layer), b.keys(layer))
    with pytest.raises(ValueError, match=r"crop's length must be from 0 to the current seq_len=9, got 10"):
        a.crop(10)


class Interrupt(Exception):
    pass


@pytest.mark.parametrize("kind", ["static", "concat", "paged"])
def test_a_pass_interrupted_part_way_leaves_the_cache_as_it_was(kind):
    """An error (or Ctrl-C) in layer 2 of a pass: the cache rolls back what layers 0 and 1 wrote, so the
    step can be run again and gives exactly the logits of a run that was never interrupted."""
    from lib.paged import PagedKVCache, PagedKVPool
    torch.manual_seed(0)
    model = MiniTransformer(CFG).eval()
    make = {"static": lambda: KVCache(CFG, 2, 20), "concat": lambda: ConcatKVCache(CFG, 2, 20),
            "paged": lambda: PagedKVCache(CFG, 2, 20, pool=PagedKVPool(CFG, 12, 4))}[kind]
    x = torch.randint(0, 40, (2, 9))
    clean, cache = make(), make()
    with torch.no_grad():
        model(x[:, :5], cache=clean)
        model(x[:, :5], cache=cache)
        before = [cache.keys(l).clone() for l in range(CFG.n_layers)]
        used = cache.pool.allocator.n_used if kind == "paged" else None

        def boom(*_):
            raise Interrupt("stopped in layer 2")

        handle = model.blocks[2].register_forward_pre_hook(boom)
        with pytest.raises(Interrupt):
            model(x[:, 5:9], cache=cache)
        handle.remove()
        assert cache.seq_len == 5 and [cache.keys(l).shape[2] for l in range(CFG.n_layers)] == [5] * CFG.n_layers
        assert all(torch.equal(cache.keys(l), before[l]) for l in range(CFG.n_layers))
        if kind == "paged":
            assert cache.pool.allocator.n_used == used  # the blocks the failed pass took went back
        torch.testing.assert_close(model(x[:, 5:9], cache=cache), model(x[:, 5:9], cache=clean), atol=0, rtol=0)


def test_the_cache_classes_beside_transformers_hold_what_they_say():
    from lib.hf import CACHE_CLASSES, cache_class_rows
    model = MiniTransformer(ModelConfig(vocab_size=30, n_layers=2, d_model=16, n_heads=4, max_seq_len=40)).eval()
    rows = cache_class_rows(model, [1, 2, 3], 17, window=8, block_size=16)  # 19 positions (the last token is not fed)
    c = model.config
    per_token = kv_cache_bytes(c, 1, dtype=torch.float32)
    held = {r["lib"]: (r["bytes held"], r["bytes of tokens"]) for r in rows}
    assert [r["transformers"] for r in rows] == [h for h, *_ in CACHE_CLASSES] and {r["positions"] for r in rows} == {19}
    assert held["ConcatKVCache"] == (19 * per_token, 19 * per_token)  # grows by torch.cat: holds only its tokens
    assert held["KVCache"] == (40 * per_token, 19 * per_token)  # preallocated to max_seq_len
    assert held["KVCache(window=8)"] == (8 * per_token, 8 * per_token)  # a ring of 8 slots
    assert held["PagedKVCache"] == (32 * per_token, 19 * per_token)  # 2 blocks of 16 taken as it grew
    # int8 numbers and one fp32 scale per (token, head): 2 (K, V) x layers x 19 tokens x heads x (head_dim + 4) bytes
    assert held["QuantizedKVCache"][1] == 2 * c.n_layers * 19 * c.n_kv_heads * (c.head_dim + 4)
