"""Sliding-window attention (ModelConfig.sliding_window), the ring-buffer KVCache, and attention sinks
(KVCache(window=, sinks=), lib.sinks): cached = uncached, the memory stops growing, the errors say what to do."""
import itertools

import pytest
import torch
from hypothesis import given, settings, strategies as st

from helpers import ATOL, VARIANTS, make_model
from lib import ConcatKVCache, FastDecoder, KVCache, ModelConfig, generate, kv_cache_bytes, PRESETS
from lib.cache import Feed
from lib.generate import make_cache
from lib.model import ForwardRecord
from lib.paged import PagedKVCache
from lib.sinks import sink_share, streaming_drift


def feed_chunks(model, ids, cache, chunks):
    """Feed ids (B, T) through ``cache`` in passes of the given sizes; the logits of every position."""
    out, s = [], 0
    for n in chunks:
        out.append(model(ids[:, s:s + n], cache=cache))
        s += n
    assert s == ids.shape[1]
    return torch.cat(out, dim=1)


def split(T, sizes):
    """T positions cut into passes of the given sizes (cycled), the last one what is left."""
    chunks, left = [], T
    for n in itertools.cycle(sizes):
        chunks.append(min(n, left))
        left -= chunks[-1]
        if not left:
            return chunks


# ---------------------------------------------------------------------------------------------- config

def test_the_config_field_is_validated_and_serialized():
    c = ModelConfig(vocab_size=10, n_layers=1, d_model=8, n_heads=2)
    assert c.sliding_window is None
    w = c.replace(sliding_window=4)
    assert w.sliding_window == 4 and ModelConfig.from_dict(w.to_dict()) == w
    old = c.to_dict()
    del old["sliding_window"]  # a checkpoint saved before the field existed
    assert ModelConfig.from_dict(old).sliding_window is None
    for bad in (0, -3, 2.5, True, "4"):
        with pytest.raises(ValueError, match=r"ModelConfig.sliding_window must be None \(every earlier position\) "
                                             r"or an integer >= 1 .*got"):
            c.replace(sliding_window=bad)


# ------------------------------------------------------------------------------------------- the mask

@settings(max_examples=60, deadline=None)
@given(T=st.integers(1, 6), start=st.integers(0, 12), window=st.none() | st.integers(1, 9),
       cache_window=st.none() | st.integers(1, 9), sinks=st.integers(0, 4), drop=st.integers(0, 8))
def test_the_mask_is_the_rule_written_out(T, start, window, cache_window, sinks, drop):
    """Key j is visible from position p iff j <= p and (j > p - W + sinks or j < sinks), W the smaller window.
    Without a window one query sees every key (no mask); several get the causal mask, built once per pass."""
    sinks = 0 if cache_window is None else min(sinks, cache_window - 1)
    keys = [j for j in range(start + T) if j < sinks or j >= drop]  # some positions evicted, in order
    feed = Feed(torch.arange(start, start + T)[None], len(keys), key_positions=torch.tensor(keys),
                window=cache_window, sinks=sinks)
    mask = feed.mask(window)
    ws = [w for w in (window, cache_window) if w is not None]
    if not ws and T == 1:
        assert mask is None
        return
    want = [[j <= p and (not ws or j > p - min(ws) + sinks or j < sinks) for j in keys]
            for p in range(start, start + T)]
    assert mask.shape == (1, 1, T, len(keys)) and mask[0, 0].tolist() == want


# ------------------------------------------------------------------------ cached = uncached (windowed model)

@settings(max_examples=40, deadline=None)
@given(variant=st.sampled_from(sorted(VARIANTS)), window=st.integers(1, 12), T=st.integers(1, 30),
       sizes=st.lists(st.integers(1, 9), min_size=1, max_size=4), batch=st.integers(1, 2), seed=st.integers(0, 3))
def test_windowed_cache_equals_uncached(variant, window, T, sizes, batch, seed):
    """A ring of `window` slots, fed in any chunks (a prefill longer than the window, chunks on a cache that
    already holds tokens), gives the uncached windowed model's logits; it never holds more than the window."""
    model = make_model(seed, sliding_window=window, **VARIANTS[variant])
    ids = torch.randint(0, model.config.vocab_size, (batch, T), generator=torch.Generator().manual_seed(seed))
    cache = KVCache(model.config, batch, 35)
    with torch.no_grad():
        got = feed_chunks(model, ids, cache, split(T, sizes))
        want = model(ids)
    torch.testing.assert_close(got, want, atol=ATOL, rtol=0)
    assert cache.seq_len == T and cache.slots == window
    assert cache.nbytes == KVCache(model.config, batch, window).nbytes  # allocated once, for the window only
    full = ConcatKVCache(model.config, batch, 35)
    with torch.no_grad():
        feed_chunks(model, ids, full, [T])
    for layer in range(model.config.n_layers):  # keys(layer): the held positions, oldest first
        assert cache.keys(layer).shape[2] == min(T, window)
        torch.testing.assert_close(cache.keys(layer), full.keys(layer)[:, :, -window:], atol=ATOL, rtol=0)
        torch.testing.assert_close(cache.values(layer), full.values(layer)[:, :, -window:], atol=ATOL, rtol=0)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_window_as_long_as_the_sequence_changes_nothing(variant):
    plain = make_model(2, **VARIANTS[variant])
    ids = torch.randint(0, plain.config.vocab_size, (2, 20), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        want = plain(ids)
        for window in (20, 33):
            windowed = make_model(2, sliding_window=window, **VARIANTS[variant])  # same seed: the same weights
            torch.testing.assert_close(windowed(ids), want, atol=ATOL, rtol=0)
            torch.testing.assert_close(feed_chunks(windowed, ids, KVCache(windowed.config, 2, 30), [7, 1, 12]),
                                       want, atol=ATOL, rtol=0)
        short = make_model(2, sliding_window=5, **VARIANTS[variant])
        assert (short(ids) - want).abs().max() > 1e-3  # a shorter window does change the numbers


@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_generate_with_a_window_sizes_the_ring_and_matches_no_cache(variant):
    model = make_model(3, sliding_window=6, **VARIANTS[variant])
    prompt = torch.randint(0, model.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(3))
    cached = generate(model, prompt, 20)
    assert torch.equal(cached.sequences, generate(model, prompt, 20, use_cache=False).sequences)
    assert cached.cache.max_len == 28 and cached.cache.slots == 6  # positions counted, only 6 slots allocated
    assert cached.cache.nbytes == KVCache(model.config, 2, 6).nbytes
    for kind in ("concat", "paged"):  # they keep every position (no memory saved) and stay correct by the mask
        assert torch.equal(generate(model, prompt, 20, cache_kind=kind).sequences, cached.sequences)
    fast = FastDecoder(model)
    cache = KVCache(model.config, 2, 30)
    with torch.no_grad():
        torch.testing.assert_close(feed_chunks(fast, prompt, cache, [5, 1, 3]), model(prompt), atol=ATOL, rtol=0)


def test_concat_and_paged_caches_keep_every_position():
    model = make_model(0, sliding_window=4)
    ids = torch.randint(0, 50, (1, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = model(ids)
        for cache in (ConcatKVCache(model.config, 1, 20), PagedKVCache(model.config, 1, 20, block_size=4)):
            torch.testing.assert_close(feed_chunks(model, ids, cache, [6, 1, 9]), want, atol=ATOL, rtol=0)
            assert cache.keys(0).shape[2] == 16  # correct through the mask, but not memory-saving


def test_the_ring_memory_is_flat_while_the_full_cache_grows():
    model = make_model(0, sliding_window=8)
    ring, full = KVCache(model.config, 1, 40), ConcatKVCache(model.config, 1, 40)
    rows = []
    with torch.no_grad():
        for t in range(30):
            tok = torch.tensor([[t % 50]])
            model(tok, cache=ring)
            model(tok, cache=full)
            rows.append((ring.nbytes, ring.used_bytes, full.nbytes))
    per_position = kv_cache_bytes(model.config, 1, dtype=torch.float32)
    assert {r[0] for r in rows} == {8 * per_position}
    assert [r[1] for r in rows] == [min(t + 1, 8) * per_position for t in range(30)]
    assert [r[2] for r in rows] == [(t + 1) * per_position for t in range(30)]


def test_the_trace_shows_attention_over_positions_with_zeros_outside_the_window():
    model = make_model(0, sliding_window=3)
    out = generate(model, [1, 2, 3, 4, 5], 6, trace=True)
    for step in out.trace.steps[1:]:
        att = step.attention[0, 0, 0]  # layer 0, batch 0, head 0: over positions 0..newest
        newest = att.shape[0] - 1
        assert torch.all(att[:newest - 2] == 0) and torch.all(att[newest - 2:] > 0)
        assert abs(float(att.sum()) - 1) < 1e-5
    assert out.trace.steps[-1].kv_read == [2] * model.config.n_layers  # the 2 older positions in its window


def test_a_failed_pass_leaves_the_ring_as_it_was():
    model = make_model(0, sliding_window=4)
    ids = torch.randint(0, 50, (1, 12), generator=torch.Generator().manual_seed(0))
    cache = KVCache(model.config, 1, 20)
    with torch.no_grad():
        model(ids[:, :7], cache=cache)
        before = [cache.keys(l).clone() for l in range(2)]
        original = model.blocks[1].forward
        model.blocks[1].forward = lambda *a, **k: (_ for _ in ()).throw(RuntimeError("boom"))
        with pytest.raises(RuntimeError, match="boom"):
            model(ids[:, 7:10], cache=cache)  # layer 0 handed over its keys, then the pass failed
        model.blocks[1].forward = original
        assert cache.seq_len == 7 and all(torch.equal(cache.keys(l), b) for l, b in zip(range(2), before))
        torch.testing.assert_close(feed_chunks(model, ids[:, 7:], cache, [5]), model(ids)[:, 7:], atol=ATOL, rtol=0)


def test_select_and_fork_copy_the_ring():
    model = make_model(0, sliding_window=5)
    ids = torch.randint(0, 50, (2, 14), generator=torch.Generator().manual_seed(0))
    cache = KVCache(model.config, 2, 20)
    with torch.no_grad():
        model(ids[:, :9], cache=cache)
        picked = cache.select([1, 1, 0])
        assert picked.seq_len == 9 and picked.slots == 5
        rows = ids[[1, 1, 0]]
        torch.testing.assert_close(model(rows[:, 9:], cache=picked), model(rows)[:, 9:], atol=ATOL, rtol=0)
    samples = generate(model, ids[:, :9], 6, temperature=1.0, seed=0, num_samples=3)
    assert samples.sequences.shape == (6, 15) and samples.cache.slots == 5


def test_crop_on_a_ring_goes_back_only_where_nothing_was_overwritten():
    model = make_model(0, sliding_window=4)
    cache = KVCache(model.config, 1, 20)
    with torch.no_grad():
        model(torch.tensor([[1, 2, 3]]), cache=cache)
        cache.crop(1)  # nothing overwritten yet: fine
        assert cache.seq_len == 1
        model(torch.tensor([[2, 3, 4, 5, 6, 7]]), cache=cache)
    with pytest.raises(ValueError, match=r"this sliding-window cache holds only 4 of its 7 positions \(a ring\): "
                                         r"the others are overwritten, so it cannot go back to seq_len=5; crop to 0"):
        cache.crop(5)
    cache.crop(0)
    assert cache.seq_len == 0 and cache.held_positions().tolist() == []


def test_cache_window_and_sinks_errors():
    full = ModelConfig(vocab_size=10, n_layers=1, d_model=8, n_heads=2, max_seq_len=32)
    with pytest.raises(ValueError, match=r"window must be None \(the model's sliding_window\) or an integer >= 1, "
                                         r"got 0"):
        KVCache(full, 1, 16, window=0)
    with pytest.raises(ValueError, match=r"and <= the model's sliding_window=4 \(it never looks further back\), "
                                         r"got 8"):
        KVCache(full.replace(sliding_window=4), 1, 16, window=8)
    with pytest.raises(ValueError, match=r"sinks=2 needs a window: a cache that keeps every position"):
        KVCache(full, 1, 16, sinks=2)
    with pytest.raises(ValueError, match=r"sinks must be from 0 to window - 1 = 3 .*got sinks=4 with window=4"):
        KVCache(full, 1, 16, window=4, sinks=4)
    with pytest.raises(ValueError, match=r"sinks must be an integer >= 0, got -1"):
        KVCache(full, 1, 16, window=4, sinks=-1)


# ------------------------------------------------------------------------------------ attention sinks

@pytest.mark.parametrize("variant", sorted(VARIANTS))
def test_a_window_cache_on_a_full_model_equals_the_windowed_model(variant):
    """KVCache(window=W) on a model trained without a window computes what the model with sliding_window=W does."""
    full = make_model(4, **VARIANTS[variant])
    windowed = make_model(4, sliding_window=5, **VARIANTS[variant])
    ids = torch.randint(0, full.config.vocab_size, (2, 25), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        got = feed_chunks(full, ids, KVCache(full.config, 2, 30, window=5), [9, 1, 1, 14])
        torch.testing.assert_close(got, windowed(ids), atol=ATOL, rtol=0)


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("window,sinks", [(4, 1), (6, 2), (5, 4), (3, 1)])
def test_sinks_any_chunking_gives_the_same_numbers(variant, window, sinks):
    model = make_model(5, **VARIANTS[variant])
    ids = torch.randint(0, model.config.vocab_size, (2, 26), generator=torch.Generator().manual_seed(5))
    results = []
    with torch.no_grad():
        for chunks in ([26], [1] * 26, [7, 1, 5, 3, 10], [2, 9, 15]):
            cache = KVCache(model.config, 2, 30, window=window, sinks=sinks)
            results.append(feed_chunks(model, ids, cache, chunks))
            assert cache.held_positions().tolist() == list(range(sinks)) + list(range(26 - window + sinks, 26))
            assert cache.nbytes == KVCache(model.config, 2, window).nbytes
    for r in results[1:]:
        torch.testing.assert_close(r, results[0], atol=ATOL, rtol=0)


def test_sink_share_is_the_attention_on_the_first_positions():
    model = make_model(0)
    ids = torch.randint(0, 50, (1, 20), generator=torch.Generator().manual_seed(0))
    share = sink_share(model, ids, n_sinks=2, from_position=5)
    rec = ForwardRecord(capture=True)
    with torch.no_grad():
        model(ids, record=rec)
    for layer in range(2):
        w = rec.tensors[layer]["attn_weights"][0]  # (heads, T, T)
        torch.testing.assert_close(share[layer], w[:, 5:, :2].sum(-1).mean(-1), atol=1e-6, rtol=0)
    assert share.shape == (2, 4) and bool((share > 0).all() and (share < 1).all())
    with pytest.raises(ValueError, match=r"n_sinks must be an integer from 1 to 19 \(the sequence has 20 positions\)"):
        sink_share(model, ids, n_sinks=20)
    with pytest.raises(ValueError, match=r"input_ids \(one sequence\)"):
        sink_share(model, [1, 2, 99])


def test_streaming_drift_against_the_full_cache():
    model = make_model(0)
    ids = torch.randint(0, 50, (1, 30), generator=torch.Generator().manual_seed(0))
    full = streaming_drift(model, ids)
    assert full["max_logit_diff"] == 0 and full["agreement"] == 1 and full["window"] is None
    assert streaming_drift(model, ids, window=30)["nll"] == pytest.approx(full["nll"], abs=1e-5)
    small = streaming_drift(model, ids, window=6, sinks=1)
    with torch.no_grad():  # its nll, computed here from the windowed model's own logits (no sinks: window only)
        logits = make_model(0, sliding_window=6)(ids)
    want = -torch.log_softmax(logits[0, :-1], -1).gather(1, ids[0, 1:, None]).mean()
    assert streaming_drift(model, ids, window=6)["nll"] == pytest.approx(float(want), abs=1e-5)
    assert small["cache_bytes"] == KVCache(model.config, 1, 6).nbytes and small["max_logit_diff"] > 0
    with pytest.raises(ValueError, match="at least 2 tokens"):
        streaming_drift(model, [3])


def test_the_cost_model_caps_a_windowed_cache_at_the_window():
    mistral = PRESETS["mistral-7b"]
    assert mistral.sliding_window is None  # the preset is v0.2: v0.1's shapes without its 4096 window
    v01 = mistral.replace(sliding_window=4096)
    assert kv_cache_bytes(v01, 32768) == kv_cache_bytes(v01, 4096) == kv_cache_bytes(mistral, 4096)
    assert kv_cache_bytes(v01, 1000) == kv_cache_bytes(mistral, 1000)
    assert kv_cache_bytes(mistral, 32768) == 8 * kv_cache_bytes(mistral, 4096)


def test_the_quantized_cache_keeps_every_position_and_follows_the_window_mask():
    from lib.quant import QuantizedKVCache
    model = make_model(0, sliding_window=4)
    ids = torch.randint(0, 50, (1, 16), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        want = model(ids)
        cache = QuantizedKVCache(model.config, 1, 20)
        got = feed_chunks(model, ids, cache, [6, 1, 9])
    assert cache.keys(0).shape[2] == 16
    # int8 storage: close to the fp32 forward, not equal; far from the same model without its window
    assert (got - want).abs().max() < 0.05
    unwindowed = make_model(0)
    with torch.no_grad():
        assert (unwindowed(ids) - want).abs().max() > 10 * (got - want).abs().max()


def test_a_failed_generate_on_a_wrapped_ring_empties_it_and_says_so():
    model = make_model(0, sliding_window=4)
    cache = KVCache(model.config, 1, 20)
    ids = torch.randint(0, 50, (1, 8), generator=torch.Generator().manual_seed(0))
    generate(model, ids, 3, cache=cache)
    assert cache.seq_len == 10
    with pytest.raises(ValueError, match="KV cache is full") as info:
        generate(model, ids[:, :2], 30, cache=cache)  # fails once the ring has wrapped past where it started
    assert cache.seq_len == 0
    if hasattr(info.value, "__notes__"):  # Python >= 3.11
        assert "the cache was emptied" in info.value.__notes__[0]
