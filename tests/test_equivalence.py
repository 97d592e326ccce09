"""Cached and uncached generation are the same computation: same tokens, same logits, same attention, for
every kind of cache (contiguous, torch.cat, paged) behind the one forward pass."""
import pytest
import torch
from hypothesis import given, settings, strategies as st

from helpers import ATOL, VARIANTS, make_model
from lib import ConcatKVCache, KVCache, MiniTransformer, generate
from lib.paged import PagedKVCache


def assert_same_run(a, b):
    assert torch.equal(a.sequences, b.sequences)
    assert len(a.trace) == len(b.trace)
    for sa, sb in zip(a.trace, b.trace):
        torch.testing.assert_close(sa.logits, sb.logits, atol=ATOL, rtol=0)
        torch.testing.assert_close(sa.attention, sb.attention, atol=ATOL, rtol=0)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("cache_kind", ["static", "concat", "paged"])
@pytest.mark.parametrize("batch", [1, 3])
def test_cached_equals_uncached(variant, cache_kind, batch):
    model = make_model(**VARIANTS[variant])
    prompt = torch.randint(0, model.config.vocab_size, (batch, 5))
    a = generate(model, prompt, 12, use_cache=True, cache_kind=cache_kind, trace=True)
    b = generate(model, prompt, 12, use_cache=False, trace=True)
    assert a.sequences.shape == (batch, 17)
    assert_same_run(a, b)


@pytest.mark.parametrize("variant", ["mha-learned-layernorm-gelu", "gqa-rope-rmsnorm-swiglu"])
def test_every_prompt_length_up_to_the_context(variant):
    model = make_model(**VARIANTS[variant])
    L = model.config.max_seq_len
    for prompt_len in range(1, L + 1):
        n_new = min(3, L - prompt_len + 1)  # the longest forward pass then spans exactly max_seq_len at most
        prompt = torch.randint(0, 50, (2, prompt_len))
        a = generate(model, prompt, n_new, use_cache=True, trace=True)
        b = generate(model, prompt, n_new, use_cache=False, trace=True)
        assert_same_run(a, b)


def test_prefill_in_chunks_equals_one_forward():
    """Feeding a sequence in pieces through a cache gives the logits of one full causal forward."""
    model = make_model(**VARIANTS["gqa-rope-rmsnorm-swiglu"])
    x = torch.randint(0, 50, (2, 20))
    full = model(x)
    for cache in (KVCache(model.config, 2, 20), ConcatKVCache(model.config, 2), PagedKVCache(model.config, 2, 20, block_size=3)):
        parts = [model(x[:, a:b], cache=cache) for a, b in ((0, 7), (7, 8), (8, 15), (15, 20))]
        torch.testing.assert_close(torch.cat(parts, dim=1), full, atol=ATOL, rtol=0)
        assert cache.seq_len == 20


def test_sampling_with_seed_is_identical_with_and_without_cache():
    model = make_model(**VARIANTS["mha-learned-layernorm-gelu"])
    prompt = torch.randint(0, 50, (2, 3))
    kw = dict(temperature=0.8, top_k=20, top_p=0.9, seed=123, trace=True)
    a = generate(model, prompt, 15, use_cache=True, **kw)
    b = generate(model, prompt, 15, use_cache=False, **kw)
    assert_same_run(a, b)
    c = generate(model, prompt, 15, use_cache=True, **kw)
    assert torch.equal(a.sequences, c.sequences)


def test_fused_attention_matches_written_out():
    for variant in VARIANTS.values():
        manual = make_model(**variant)
        fused = MiniTransformer(manual.config.replace(attn_impl="sdpa")).eval()
        fused.load_state_dict(manual.state_dict())
        x = torch.randint(0, manual.config.vocab_size, (2, 16))
        torch.testing.assert_close(fused(x), manual(x), atol=ATOL, rtol=0)
        a = generate(manual, x[:, :4], 10)
        b = generate(fused, x[:, :4], 10)
        assert torch.equal(a.sequences, b.sequences)


@settings(max_examples=25, deadline=None)
@given(
    n_layers=st.integers(1, 3),
    kv_heads_and_heads=st.sampled_from([(1, 1), (2, 2), (1, 4), (2, 4), (4, 4), (3, 6)]),
    head_dim=st.sampled_from([2, 4, 8]),
    positions=st.sampled_from(["learned", "rope"]),
    norm=st.sampled_from(["layernorm", "rmsnorm"]),
    activation=st.sampled_from(["gelu", "gelu_tanh", "silu", "swiglu"]),
    batch=st.integers(1, 3),
    prompt_len=st.integers(1, 10),
    n_new=st.integers(1, 8),
    cache_kind=st.sampled_from(["static", "concat", "paged"]),
    seed=st.integers(0, 2**16),
)
def test_property_cached_equals_uncached(n_layers, kv_heads_and_heads, head_dim, positions, norm, activation,
                                         batch, prompt_len, n_new, cache_kind, seed):
    n_kv, n_heads = kv_heads_and_heads
    model = make_model(seed=seed, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv, d_model=n_heads * head_dim,
                       positions=positions, norm=norm, activation=activation, max_seq_len=20)
    g = torch.Generator().manual_seed(seed)
    prompt = torch.randint(0, 50, (batch, prompt_len), generator=g)
    a = generate(model, prompt, n_new, use_cache=True, cache_kind=cache_kind, trace=True)
    b = generate(model, prompt, n_new, use_cache=False, trace=True)
    assert_same_run(a, b)


def test_fresh_cache_per_request_equals_reset_cache():
    model = make_model()
    x1, x2 = torch.randint(0, 50, (1, 6)), torch.randint(0, 50, (1, 9))
    reused = KVCache(model.config, 1, 12)
    model(x1, cache=reused)
    reused.reset()
    assert reused.seq_len == 0 and reused.keys(0).shape[2] == 0
    out_reused = model(x2, cache=reused)
    fresh = KVCache(model.config, 1, 12)
    out_fresh = model(x2, cache=fresh)
    assert torch.equal(out_reused, out_fresh)
    for layer in range(model.config.n_layers):
        assert torch.equal(reused.keys(layer), fresh.keys(layer))
        assert torch.equal(reused.values(layer), fresh.values(layer))
