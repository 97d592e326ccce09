"""QuantizedKVCache: int8 keys and values with a scale per (token, head), behind the cache protocol."""
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from helpers import VARIANTS, make_model
from lib.quant import QMAX, QuantizedKVCache, dequantize, measure, quantize
from lib.train import EXPECT_CHAT, SPECS


# ------------------------------------------------------------------------------- quantize / dequantize

@settings(max_examples=60, deadline=None, derandomize=True)
@given(shape=st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 5), st.integers(1, 17)),
       magnitude=st.sampled_from([1e-6, 1e-2, 1.0, 30.0, 1e4]), seed=st.integers(0, 2 ** 16))
def test_round_trip_error_is_at_most_half_a_scale_per_element(shape, magnitude, seed):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(shape, generator=g) * magnitude
    x[..., 0] *= 5  # one large element per vector: the others get a coarse grid
    q, scale = quantize(x)
    assert q.dtype == torch.int8 and q.shape == x.shape and scale.shape == (*shape[:-1], 1)
    assert scale.dtype == torch.float32 and bool((scale >= 0).all())
    assert int(q.abs().max()) <= QMAX
    back = dequantize(q, scale)
    bound = scale / 2 * (1 + 1e-5) + 1e-30  # half a step, up to the rounding of x / scale and q * scale
    assert bool(((back - x).abs() <= bound).all())
    # the largest magnitude of every vector lands on +-127: the whole int8 range is used
    assert bool((q.abs().amax(dim=-1) == QMAX).all())


def test_an_all_zero_vector_stays_zero_and_dtype_is_the_models():
    x = torch.zeros(1, 2, 3, 4)
    x[0, 1, 2] = torch.tensor([1.0, -2.0, 0.5, 0.0])
    q, scale = quantize(x)
    assert float(scale[0, 0, 0]) == 0.0 and not bool(q[0, 0].any())
    assert torch.equal(q[0, 1, 2], torch.tensor([64, -127, 32, 0], dtype=torch.int8))  # 1 / (2/127) = 63.5 -> 64
    assert dequantize(q, scale, torch.bfloat16).dtype == torch.bfloat16
    assert torch.isfinite(dequantize(q, scale)).all()


# ------------------------------------------------------------------------------------------ the protocol

def test_nbytes_is_data_plus_scales_exactly():
    c = lib.load_demo("chat")[0].config  # 4 layers, 4 KV heads, head_dim 16
    cache = QuantizedKVCache(c, 3, 10)
    data = 2 * c.n_layers * 3 * c.n_kv_heads * 10 * c.head_dim  # int8: one byte per number
    scales = 2 * c.n_layers * 3 * c.n_kv_heads * 10 * 4  # one fp32 per (sequence, head, position), K and V
    assert (cache.data_bytes, cache.scale_bytes, cache.nbytes) == (data, scales, data + scales)
    assert cache.nbytes == sum(t.numel() * t.element_size() for t in cache.tensors())
    fp16 = lib.KVCache(c, 3, 10, dtype=torch.float16).nbytes
    assert fp16 / cache.nbytes == pytest.approx(2 * 16 / (16 + 4))  # 1.6x smaller than fp16 at head_dim 16
    assert "nbytes=12,800" in repr(QuantizedKVCache(c, 1, 20)) and "scales=2,560" in repr(QuantizedKVCache(c, 1, 20))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_incremental_equals_one_pass_and_layer0_keys_are_quantized_fp32_keys(variant):
    """Each token is quantized once, alone: feeding a sequence in pieces gives the logits of feeding it at
    once (same cache kind), and layer 0's stored keys are exactly the fp32 cache's keys quantized."""
    model = make_model(**VARIANTS[variant])
    ids = torch.randint(0, model.config.vocab_size, (2, 9))
    one = QuantizedKVCache(model.config, 2, 9)
    whole = model(ids, cache=one).detach()
    steps = QuantizedKVCache(model.config, 2, 9)
    parts = [model(ids[:, :4], cache=steps)] + [model(ids[:, t:t + 1], cache=steps) for t in range(4, 9)]
    assert torch.allclose(torch.cat(parts, dim=1), whole, atol=1e-5)
    ref = lib.KVCache(model.config, 2, 9)
    exact = model(ids, cache=ref).detach()
    for kv_ref, kv_q in ((ref.keys(0), steps.keys(0)), (ref.values(0), steps.values(0))):
        assert torch.allclose(kv_q, dequantize(*quantize(kv_ref)), atol=1e-6)
    assert one.keys(1).shape == ref.keys(1).shape == (2, model.config.n_kv_heads, 9, model.config.head_dim)
    rel = float((whole - exact).abs().max() / exact.abs().max().detach())
    assert 0 < rel < 0.05  # int8 is an approximation, a close one


def test_rollback_after_a_failed_pass_leaves_the_cache_as_it_was():
    model = make_model(**VARIANTS["gqa-rope-rmsnorm-swiglu"])
    ids = torch.randint(0, 50, (1, 6))
    cache = QuantizedKVCache(model.config, 1, 12)
    model(ids[:, :4], cache=cache)
    before = [t.clone() for t in cache.tensors()]
    blocks = model.blocks
    broken = torch.nn.ModuleList(list(blocks[:1]) + [None])  # the second layer fails mid-pass
    model.blocks = broken
    with pytest.raises(TypeError):
        model(ids[:, 4:], cache=cache)
    model.blocks = blocks
    assert cache.seq_len == 4 and cache._pending == 0
    assert all(torch.equal(a[:, :, :4], b[:, :, :4]) for a, b in zip(before, cache.tensors()))
    fresh = QuantizedKVCache(model.config, 1, 12)
    model(ids[:, :4], cache=fresh)
    assert torch.equal(model(ids[:, 4:], cache=cache), model(ids[:, 4:], cache=fresh))


def test_crop_forgets_the_tail_and_the_next_pass_rewrites_it():
    model = make_model()
    ids = torch.randint(0, 50, (1, 8))
    cache = QuantizedKVCache(model.config, 1, 8)
    model(ids, cache=cache)
    cache.crop(5)
    assert cache.seq_len == 5 and cache.keys(0).shape[2] == 5
    again = model(ids[:, 5:], cache=cache)
    fresh = QuantizedKVCache(model.config, 1, 8)
    assert torch.allclose(again, model(ids, cache=fresh)[:, 5:], atol=1e-5)
    with pytest.raises(ValueError, match=r"crop's length must be from 0 to the current seq_len=8, got 9"):
        cache.crop(9)
    cache.reset()
    assert cache.seq_len == 0 and not any(bool(t.any()) for t in cache.tensors())


def test_select_and_fork_copy_the_int8_rows_as_they_are():
    model = make_model(**VARIANTS["mqa-rope-layernorm-silu"])
    ids = torch.randint(0, 50, (3, 5))
    cache = QuantizedKVCache(model.config, 3, 10)
    model(ids, cache=cache)
    picked = cache.select([2, 0])
    assert isinstance(picked, QuantizedKVCache) and picked.seq_len == 5 and picked.batch_size == 2
    for mine, theirs in zip(cache.tensors(), picked.tensors()):
        assert torch.equal(theirs[:, :, :5], mine[[2, 0], :, :5])
    forked = cache.fork(2)
    assert forked.batch_size == 6 and torch.equal(forked.keys(1)[4], cache.keys(1)[2])
    nxt = torch.randint(0, 50, (3, 1))
    assert torch.allclose(model(nxt.repeat_interleave(2, 0), cache=forked),
                          model(nxt, cache=cache).repeat_interleave(2, 0), atol=1e-6)
    with pytest.raises(ValueError, match=r"rows must be a non-empty list of sequence indices from 0 to 2, got \[3\]"):
        cache.select([3])


def test_errors_say_what_is_allowed():
    c = make_model().config
    for bits in (4, 16, "8", 8.0):
        with pytest.raises(ValueError, match=r"bits must be 8 \(QuantizedKVCache stores int8 with a scale per token "
                                             r"and head; 4-bit packing is not implemented\), got"):
            QuantizedKVCache(c, 1, 4, bits=bits)
    model = make_model()
    cache = QuantizedKVCache(c, 1, 4)
    model(torch.zeros(1, 3, dtype=torch.long), cache=cache)
    with pytest.raises(ValueError, match=r"KV cache is full: it holds 3 of max_len=4 positions and this forward "
                                         r"would add 2 more; make a cache with max_len >= 5 or reset\(\) it"):
        model(torch.zeros(1, 2, dtype=torch.long), cache=cache)
    assert cache.seq_len == 3
    with pytest.raises(ValueError, match=r"dtype mismatch: the cache is in torch.float32 but the model in "
                                         r"torch.bfloat16"):
        model.to(torch.bfloat16)(torch.zeros(1, 1, dtype=torch.long), cache=cache)
    with pytest.raises(TypeError, match=r"a KV cache is built from a lib.ModelConfig, got str"):
        QuantizedKVCache("chat", 1, 4)


def test_bf16_model_gets_bf16_keys_and_the_cache_is_no_module_buffer():
    model, tok = lib.load_demo("chat", dtype="bf16")
    cache = QuantizedKVCache(model.config, 1, 10, dtype=torch.bfloat16)
    keys_before = set(model.state_dict())
    out = lib.generate(model, tok.encode("<s>"), 9, eos_id=tok.eos_id, cache=cache)
    assert tok.decode(out.sequences[0]) == "<s>人工智能<eos>"
    assert cache.keys(0).dtype == torch.bfloat16 and cache.k_q[0].dtype == torch.int8
    assert set(model.state_dict()) == keys_before


# --------------------------------------------------------------------------------- on the demo models

@pytest.mark.parametrize("name", ["chat", "draft", "tiny", "chat-gqa"])
def test_generate_with_it_gives_every_demo_phrase(name):
    model, tok = lib.load_demo(name)
    for prompt, phrase in SPECS[name].expect.items():
        ids = tok.encode(prompt)
        n = min(24, model.config.max_seq_len - len(ids) + 1)
        cache = QuantizedKVCache(model.config, 1, len(ids) + n - 1)
        out = lib.generate(model, ids, n, eos_id=tok.eos_id, cache=cache, trace=True)
        assert tok.decode(out.new_tokens[0]) == phrase
        assert out.trace.cache_kind == "int8" and out.trace.steps[-1].cache_bytes == cache.nbytes


def test_parallel_samples_fork_it():
    model, tok = lib.load_demo("chat")
    cache = QuantizedKVCache(model.config, 1, 12)
    out = lib.generate(model, tok.encode("<s>"), 8, temperature=1.0, seed=0, num_samples=3, cache=cache,
                       eos_id=tok.eos_id)
    assert out.sequences.shape[0] == 3 and isinstance(out.cache, QuantizedKVCache) and out.cache.batch_size == 3


def test_measure_on_chat_bytes_error_and_agreement():
    model, tok = lib.load_demo("chat")
    m = measure(model, tok, list(EXPECT_CHAT))
    c = model.config
    assert m.n_positions == 26  # <s>attention + is all you need<eos>, minus the last token (never fed)
    assert m.fp32_bytes == lib.kv_cache_bytes(c, 26, 1, torch.float32) == 2 * m.fp16_bytes
    assert m.int8_bytes == 2 * c.n_layers * c.n_kv_heads * 26 * (c.head_dim + 4)
    assert (m.vs_fp32, m.vs_fp16) == (pytest.approx(3.2), pytest.approx(1.6))
    assert m.tokens_same == m.tokens_total == sum(len(tok.encode(p)) for p in EXPECT_CHAT.values())
    assert 0 < m.max_logit_error < m.min_top2_gap / 2  # far from flipping any greedy choice
    with pytest.raises(ValueError, match=r"the model must be in fp32, not torch.bfloat16"):
        measure(model.to(torch.bfloat16), tok, ["<s>"])


# ------------------------------------------------------------------------------------- the exercises

def test_the_exercises_solution_is_lib_quantize_and_wrong_tries_get_told_what_is_wrong():
    import lib.exercises as ex
    from lib.exercises.quant import quantize_int8_solution
    x = torch.randn(2, 3, 5, 16)
    for got, want in zip(quantize_int8_solution(x), quantize(x)):
        assert torch.equal(got, want)
    no_keepdim = lambda x: (torch.round(x / (x.abs().amax(-1) / 127)[..., None]).to(torch.int8), x.abs().amax(-1) / 127)
    assert "kept as a last dimension of size 1" in ex.check("int8_quantize", no_keepdim, quiet=True).message
    by_128 = lambda x: quantize_int8_solution(x * 127 / 128)  # scales over 128: a different grid
    assert "the scales are off" in ex.check("int8_quantize", by_128, quiet=True).message
    floor = lambda x: (torch.trunc(x / quantize(x)[1].clamp_min(1e-30)).to(torch.int8), quantize(x)[1])
    assert "rounded the wrong way" in ex.check("int8_quantize", floor, quiet=True).message
    n_heads = lambda c, n, b, p: 2 * c.n_layers * c.n_heads * c.head_dim * p * n * b
    assert "case 2 of 5 (chat-gqa" in ex.check("kv_bytes", n_heads, quiet=True).message


@settings(max_examples=25, deadline=None, derandomize=True)
@given(variant=st.sampled_from(list(VARIANTS)), batch=st.integers(1, 3), length=st.integers(1, 12),
       cut=st.integers(1, 12), seed=st.integers(0, 1000))
def test_property_any_split_of_the_feed_gives_the_one_pass_logits(variant, batch, length, cut, seed):
    """Against its reference (the same cache fed everything at once): any prefill length, then one token at a
    time, gives the same logits; layer 0 holds exactly the fp32 keys quantized."""
    model = make_model(seed % 3, **VARIANTS[variant])
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, model.config.vocab_size, (batch, length), generator=g)
    cut = min(cut, length)
    with torch.no_grad():
        whole = model(ids, cache=QuantizedKVCache(model.config, batch, length))
        cache = QuantizedKVCache(model.config, batch, length)
        parts = [model(ids[:, :cut], cache=cache)] + [model(ids[:, t:t + 1], cache=cache) for t in range(cut, length)]
        ref = lib.KVCache(model.config, batch, length)
        model(ids, cache=ref)
    assert cache.seq_len == length and torch.allclose(torch.cat(parts, dim=1), whole, atol=1e-5)
    assert torch.allclose(cache.keys(0), dequantize(*quantize(ref.keys(0))), atol=1e-6)
