"""StreamingLLM: ``KVCache(..., window=W, sinks=n, positions="cache")`` numbers positions within the cache (keys
cached before RoPE, rotated by their place at every pass), so ``model(...)`` and ``lib.generate`` go on past the
context window in flat memory; ``lib.sinks.stream_perplexity`` compares window only, window + sinks and
re-computation over a long stream. Checked against references written out here, from the model's weights."""
import math

import pytest
import torch

import lib
from helpers import ATOL, VARIANTS, randomized_model
from lib import KVCache, generate
from lib.corpus import heldout_text
from lib.model import apply_rope, rope_tables
from lib.sinks import stream_perplexity

torch.set_num_threads(1)

WAYS = ("window only", "window + sinks", "recompute")  # what stream_perplexity compares
ROPE_VARIANTS = {name: v for name, v in VARIANTS.items() if v.get("positions") == "rope"}  # MHA, GQA, MQA, sdpa


def rope_model(seed=0, **config):
    """A randomized model with rotary positions and a context of 24 positions (streams run far past it)."""
    return randomized_model(seed, **{"positions": "rope", "max_seq_len": 24, **config})


def stream(n=1, T=80, seed=0, vocab=50):
    return torch.randint(0, vocab, (n, T), generator=torch.Generator().manual_seed(seed))


def kept(t: int, window: int, sinks: int) -> list[int]:
    """The positions a step at position t sees: the sinks and the last window - sinks, t itself included."""
    return [j for j in range(t + 1) if j < sinks or j > t - (window - sinks)]


def streamed_logits(model, ids, window, sinks):
    """Feed ids (B, T) one token at a time through a positions='cache' ring: the logits of every position."""
    cache = KVCache(model.config, ids.shape[0], window, window=window, sinks=sinks, positions="cache")
    with torch.no_grad():
        return torch.cat([model(ids[:, t:t + 1], cache=cache) for t in range(ids.shape[1])], dim=1), cache


@torch.no_grad()
def written_out_stream(model, ids, window, sinks):
    """Teacher-forced logits (T, vocab) of one stream (T,), written out from the model's weights with no cache
    object: each token's K and V of every layer are computed once, when it is fed (before any rotation); the
    step at t attends over the kept tokens, rotated at 0..S-1, with its query at S-1."""
    c, out = model.config, []
    raw = [[] for _ in model.blocks]  # per layer, per position: (k, v), each (1, n_kv_heads, 1, head_dim)
    for t in range(ids.shape[0]):
        h = model.tok_emb.weight[ids[t]][None, None]  # (1, 1, d_model)
        places = torch.arange(len(kept(t, window, sinks)))[None]  # (1, S): positions within the cache
        cos, sin = rope_tables(c.head_dim, places, c.rope_theta)  # (1, 1, S, head_dim)
        for layer, block in enumerate(model.blocks):
            a, x = block.attn, block.norm1(h)
            q = a.q_proj(x).view(1, 1, c.n_heads, c.head_dim).transpose(1, 2)  # (1, n_heads, 1, head_dim)
            raw[layer].append(tuple(p(x).view(1, 1, c.n_kv_heads, c.head_dim).transpose(1, 2)
                                    for p in (a.k_proj, a.v_proj)))
            k = torch.cat([raw[layer][j][0] for j in kept(t, window, sinks)], dim=2)  # (1, n_kv_heads, S, head_dim)
            v = torch.cat([raw[layer][j][1] for j in kept(t, window, sinks)], dim=2)
            rep = c.n_heads // c.n_kv_heads
            k = apply_rope(k, cos, sin).repeat_interleave(rep, dim=1)  # (1, n_heads, S, head_dim)
            q = apply_rope(q, cos[:, :, -1:], sin[:, :, -1:])
            w = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(c.head_dim), dim=-1)  # (1, n_heads, 1, S)
            mix = (w @ v.repeat_interleave(rep, dim=1)).transpose(1, 2).reshape(1, 1, -1)  # (1, 1, n_heads * hd)
            h = h + a.o_proj(mix)
            h = h + block.mlp(block.norm2(h))
        out.append(model.lm_head(model.norm_f(h))[0, 0])
    return torch.stack(out)  # (T, vocab)


# ------------------------------------------------------------------------------------------ the forward pass
@pytest.mark.parametrize("variant", sorted(ROPE_VARIANTS))
@pytest.mark.parametrize("window,sinks", [(8, 0), (9, 3)])
def test_a_stream_equals_the_written_out_reference_far_past_the_context_window(variant, window, sinks):
    model = rope_model(1, **ROPE_VARIANTS[variant])
    ids = stream(n=2, T=50)  # 50 tokens, a context window of 24
    got, cache = streamed_logits(model, ids, window, sinks)
    assert cache.seq_len == 50 and cache.seq_len > model.config.max_seq_len
    for row in range(2):
        torch.testing.assert_close(got[row], written_out_stream(model, ids[row], window, sinks), atol=ATOL, rtol=0)


def test_with_one_layer_a_stream_is_the_kept_tokens_encoded_afresh_at_0_to_w_minus_1():
    """With one layer a key is its token's projection alone, so the ring is exactly StreamingLLM's from-scratch
    recomputation of [sinks + the last W - n tokens] at positions 0..W-1; with two layers it is not (a cached
    key of layer 2 was computed from context the window has dropped since)."""
    W, n = 10, 3
    for layers, same in ((1, True), (2, False)):
        model = rope_model(2, n_layers=layers)
        ids = stream(T=60, seed=layers)
        got = streamed_logits(model, ids, W, n)[0][0]  # (T, vocab)
        with torch.no_grad():
            afresh = torch.stack([model(ids[:, kept(t, W, n)])[0, -1] for t in range(60)])  # (T, vocab)
        torch.testing.assert_close(got[:W], afresh[:W], atol=ATOL, rtol=0)  # the ring not yet wrapped: the same
        assert ((got[W:] - afresh[W:]).abs().max() < ATOL) == same


def test_greedy_generation_streams_far_past_the_window_in_flat_memory_and_matches_the_reference():
    model = rope_model(3, n_layers=1, n_kv_heads=2)
    W, n, prompt = 12, 4, torch.tensor([[5, 6, 7]])
    cache = KVCache(model.config, 1, 24, window=W, sinks=n, positions="cache")
    nbytes = cache.nbytes
    out = generate(model, prompt, 400, cache=cache)  # 17 times the context window
    assert out.sequences.shape == (1, 403) and cache.seq_len == 402 and cache.nbytes == nbytes == cache.used_bytes
    seq = prompt[0].tolist()  # the reference: from scratch, [sinks + the last W - n tokens] at 0..W-1, every step
    with torch.no_grad():
        for _ in range(200):
            seq.append(int(model(torch.tensor([[seq[j] for j in kept(len(seq) - 1, W, n)]]))[0, -1].argmax()))
    assert out.sequences[0, :len(seq)].tolist() == seq


def test_parallel_samples_fork_the_stream_and_each_copy_keeps_numbering_within_itself():
    model = rope_model(13, n_kv_heads=2)
    cache = KVCache(model.config, 1, 24, window=8, sinks=2, positions="cache")
    out = generate(model, [3, 4, 5], 60, cache=cache, num_samples=3, temperature=1.0, seed=0)
    forked = out.cache
    assert out.sequences.shape == (3, 63) and forked.positions == "cache" and forked.seq_len == 62
    assert forked.nbytes == 3 * cache.nbytes and forked.next_positions == [7, 7, 7]


@pytest.mark.parametrize("variant", sorted(ROPE_VARIANTS))
def test_before_the_ring_wraps_it_generates_what_an_ordinary_cache_does(variant):
    model = rope_model(4, **ROPE_VARIANTS[variant])
    prompt = stream(n=2, T=5, seed=4)
    ring = KVCache(model.config, 2, 24, window=16, sinks=2, positions="cache")
    a = generate(model, prompt, 12, cache=ring, trace=True)  # 16 positions at most: nothing evicted yet
    b = generate(model, prompt, 12, trace=True)
    assert torch.equal(a.sequences, b.sequences)
    for sa, sb in zip(a.trace.steps, b.trace.steps):
        torch.testing.assert_close(sa.logits, sb.logits, atol=ATOL, rtol=0)


def test_prefill_of_several_tokens_numbers_them_on_from_the_kept_keys():
    """A pass of several tokens gets places S-T..S-1 after the S-T keys it is handed (StreamingLLM's prefill):
    the same as one token at a time while the ring has not wrapped, and past the window a pass whose S keys
    do not fit the context window is refused, saying within the cache."""
    model = rope_model(5)
    ids = stream(T=40, seed=5)
    one = streamed_logits(model, ids[:, :16], 16, 2)[0]
    cache = KVCache(model.config, 1, 24, window=16, sinks=2, positions="cache")
    with torch.no_grad():
        chunked = torch.cat([model(ids[:, :9], cache=cache), model(ids[:, 9:16], cache=cache)], dim=1)
        torch.testing.assert_close(chunked, one, atol=ATOL, rtol=0)
        with pytest.raises(ValueError, match=r"^sequence too long for the context window: positions within the "
                                             r"cache 15\.\.28 were asked for, but this model has max_seq_len=24"):
            model(ids[:, 16:30], cache=cache)  # wrapped: 15 kept keys (sinks 0, 1 and 3..15) + 14 fed = 29 places
        assert cache.seq_len == 16 and cache.next_positions == [15]  # refused, nothing changed
        logits = model(ids[:, 16:25], cache=cache)  # 15 + 9 = 24 places: fits
    assert logits.shape == (1, 9, 50) and torch.isfinite(logits).all() and cache.seq_len == 25


def test_the_keys_are_cached_before_rotation_and_keys_returns_them_in_text_order():
    model = rope_model(6)
    ids = stream(T=30, seed=6)
    cache = streamed_logits(model, ids, 8, 2)[1]
    held = cache.held_positions().tolist()
    assert held == [0, 1] + list(range(24, 30))
    with torch.no_grad():
        x = model.blocks[0].norm1(model.tok_emb.weight[ids[0, held]])  # (8, d_model): layer 0's input at those
        raw = model.blocks[0].attn.k_proj(x).view(8, model.config.n_kv_heads, -1).transpose(0, 1)[None]
    torch.testing.assert_close(cache.keys(0), raw, atol=ATOL, rtol=0)


# ------------------------------------------------------------------------------------------------- errors
def test_without_the_option_the_context_window_error_is_as_before():
    model = rope_model(7)
    for cache in (None, KVCache(model.config, 1, 24, window=8, sinks=2)):
        with pytest.raises(ValueError, match=r"^a prompt of 3 tokens leaves room for at most 22 new token\(s\) in "
                                             r"the context window \(max_seq_len=24\), but max_new_tokens=30$"):
            generate(model, [1, 2, 3], 30, cache=cache)
    ring = KVCache(model.config, 1, 24, window=8, sinks=2)
    with pytest.raises(ValueError, match=r"^sequence too long for the context window: positions 24\.\.24 were asked "
                                         r"for, but this model has max_seq_len=24 \(positions 0\.\.23\)$"):
        with torch.no_grad():
            for t in range(25):
                model(torch.tensor([[t % 50]]), cache=ring)
    with pytest.raises(ValueError, match=r"^the prompt has 25 tokens but the model's context window holds "
                                         r"max_seq_len=24; shorten the prompt$"):
        generate(model, [1] * 25, 5, cache=KVCache(model.config, 1, 24, window=8, positions="cache"))


def test_bad_settings_say_what_was_wrong_and_what_is_allowed():
    rope = rope_model(8).config
    learned = randomized_model(8, max_seq_len=24).config  # positions="learned"
    with pytest.raises(ValueError, match=r"needs rotary positions; this model has positions='learned'.*"
                                         r"Use a model with positions='rope', or keep positions='text'"):
        KVCache(learned, 1, 24, window=8, positions="cache")
    with pytest.raises(ValueError, match=r"positions='cache' needs a window.*give window="):
        KVCache(rope, 1, 24, positions="cache")
    with pytest.raises(ValueError, match=r"window must be <= max_len=16 .*max_seq_len=24"):
        KVCache(rope, 1, 16, window=20, positions="cache")
    with pytest.raises(ValueError, match=r"sinks must be from 0 to window - 1 = 7"):
        KVCache(rope, 1, 24, window=8, sinks=8, positions="cache")
    with pytest.raises(ValueError, match=r"positions='in-text' is not supported; allowed: text, cache"):
        KVCache(rope, 1, 24, window=8, positions="in-text")
    # a cache made for a rotary config of the same shapes, fed to a model with learned positions
    cache = KVCache(rope, 1, 24, window=8, positions="cache")
    with pytest.raises(ValueError, match=r"this model has positions='learned'"):
        randomized_model(8, max_seq_len=24)(torch.tensor([[1, 2]]), cache=cache)
    assert cache.seq_len == 0


def test_a_stream_runs_on_every_device(device):
    model = rope_model(9, n_kv_heads=2).to(device)
    cache = KVCache(model.config, 2, 24, window=8, sinks=2, positions="cache", device=device)
    out = generate(model, stream(n=2, T=4, seed=9).to(device), 60, cache=cache)
    cpu = generate(model.cpu(), stream(n=2, T=4, seed=9), 60,
                   cache=KVCache(model.config, 2, 24, window=8, sinks=2, positions="cache"))
    assert out.sequences.device.type == device.type and torch.equal(out.sequences.cpu(), cpu.sequences)


# ------------------------------------------------------------------------------------- stream_perplexity
def nll_of(logits, targets):
    return -torch.log_softmax(logits, dim=-1).gather(-1, targets[..., None])[..., 0]


def test_stream_perplexity_equals_the_written_out_references():
    model = rope_model(10, n_kv_heads=2)
    ids, W, n = stream(n=2, T=40, seed=10), 8, 3
    got = stream_perplexity(model, ids, W, n, stride=1, batch=5)
    positions = list(range(W, 39))
    assert got["positions"] == positions and (got["window"], got["sinks"], got["stride"]) == (W, n, 1)
    with torch.no_grad():
        for name, sinks in (("window only", 0), ("window + sinks", n)):
            ref = torch.stack([nll_of(written_out_stream(model, row, W, sinks)[:-1], row[1:]) for row in ids])  # (2, 39)
            torch.testing.assert_close(torch.tensor(got[name]["nll_by_position"]), ref[:, positions].mean(0),
                                       atol=ATOL, rtol=0)
            assert got[name]["nll"] == pytest.approx(float(ref[:, positions].mean()), abs=ATOL)
        afresh = torch.stack([nll_of(model(ids[:, t - W + 1:t + 1])[:, -1], ids[:, t + 1]) for t in positions], 1)
    torch.testing.assert_close(torch.tensor(got["recompute"]["nll_by_position"]), afresh.mean(0), atol=ATOL, rtol=0)
    for way in WAYS:
        assert got[way]["perplexity"] == pytest.approx(math.exp(got[way]["nll"]))
        assert got[way]["cache_bytes"] == KVCache(model.config, 2, W).nbytes  # W positions of both rows: flat
    assert got["full_cache_bytes"] == KVCache(model.config, 2, 24).nbytes * 40 // 24


def test_stream_perplexity_with_a_stride_scores_every_stride_th_position_of_the_same_stream():
    model = rope_model(11)
    ids = stream(T=41, seed=11)
    every, some = stream_perplexity(model, ids, 10, 2), stream_perplexity(model, ids[0].tolist(), 10, 2, stride=7)
    assert some["positions"] == [10, 17, 24, 31, 38]
    for way in WAYS:
        picked = [every[way]["nll_by_position"][every["positions"].index(t)] for t in some["positions"]]
        assert some[way]["nll_by_position"] == pytest.approx(picked, abs=ATOL)


def test_texts_streamed_side_by_side_give_each_its_own_perplexity():
    """Notebook 12 streams its English and its Chinese text as two rows of one stream: each row's perplexity is
    the one that text gets streamed alone."""
    model = rope_model(13, n_kv_heads=2)
    ids = stream(n=2, T=30, seed=13)
    both = stream_perplexity(model, ids, 8, 2, stride=3)
    for way in WAYS:
        alone = [stream_perplexity(model, row.tolist(), 8, 2, stride=3)[way]["perplexity"] for row in ids]
        assert both[way]["perplexity_by_row"] == pytest.approx(alone, rel=1e-5)
        assert math.log(both[way]["perplexity"]) == pytest.approx(
            sum(math.log(p) for p in both[way]["perplexity_by_row"]) / 2, rel=1e-6)


def test_stream_perplexity_refuses_what_it_cannot_measure():
    model = rope_model(12)
    with pytest.raises(ValueError, match=r"the stream has 9 tokens, but window=8 needs at least window \+ 2 = 10"):
        stream_perplexity(model, list(range(9)), 8, 2)
    with pytest.raises(ValueError, match=r"sinks must be from 0 to window - 1 = 7.*got sinks=8"):
        stream_perplexity(model, list(range(30)), 8, 8)
    with pytest.raises(ValueError, match=r"window must be an integer from 1 to the model's max_seq_len=24, got 30"):
        stream_perplexity(model, list(range(40)), 30, 2)
    with pytest.raises(ValueError, match=r"stride must be an integer >= 1, got 0"):
        stream_perplexity(model, list(range(30)), 8, 2, stride=0)
    with pytest.raises(ValueError, match=r"needs rotary positions; this model has positions='learned'"):
        stream_perplexity(randomized_model(12, max_seq_len=24), list(range(30)), 8, 2)


# ------------------------------------------------------------------- the real model (assets/lm.safetensors)
@pytest.fixture(scope="module")
def lm():
    return lib.load_demo("lm")


def test_the_real_model_generates_past_its_context_window_in_flat_memory(lm):
    model, tok = lm
    prompt = tok.encode(heldout_text("en")[:500])  # 500 tokens of a 512-position context window
    cache = KVCache(model.config, 1, 512, window=64, sinks=4, positions="cache")
    out = generate(model, prompt, 40, cache=cache, trace=True)
    assert out.sequences.shape == (1, 540) and cache.seq_len == 539 > model.config.max_seq_len
    assert {s.cache_bytes for s in out.trace.steps} == {KVCache(model.config, 1, 64).nbytes}
    assert all(torch.isfinite(s.logits).all() for s in out.trace.steps)
    assert out.trace.steps[-1].kv_read == [63] * model.config.n_layers  # the sinks and the last 59, then itself


def test_the_real_model_s_stream_perplexity_is_finite_for_every_way(lm):
    model, tok = lm
    for lang in ("en", "zh"):
        got = stream_perplexity(model, tok.encode(heldout_text(lang)[:80]), 32, 4, stride=8)
        assert got["positions"] == [32, 40, 48, 56, 64, 72]
        for way in WAYS:
            assert math.isfinite(got[way]["nll"]) and got[way]["nll"] > 0 and len(got[way]["nll_by_position"]) == 6
            assert got[way]["cache_bytes"] == KVCache(model.config, 1, 32).nbytes < got["full_cache_bytes"]
