"""FlashAttention and FlashDecoding (lib/flash.py): equal to plain attention for every shape, GQA, causal or
not, any tile size; the split-K merge; the bytes each moves, counted against the formula; clear errors."""
import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st

import lib
from lib import flash
from lib.flash import (Traffic, attention_bytes, flash_attention, flash_decoding, merge_partials,
                       merge_softmax_states, online_softmax_update, plain_attention, softmax_state,
                       split_k_partials, tile_schedule)
from lib.model import ForwardRecord

from helpers import make_model


def written_out(q, k, v, causal):
    """softmax(QKᵀ/√D + mask)·V exactly as lib/model.py's attention writes it (repeat K/V heads, tril mask)."""
    H, H_kv, Tq, Tk, D = q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3]
    keys, values = k.repeat_interleave(H // H_kv, dim=1), v.repeat_interleave(H // H_kv, dim=1)
    scores = q @ keys.transpose(-2, -1) / math.sqrt(D)
    if causal:
        mask = torch.ones(Tq, Tk, dtype=torch.bool).tril(diagonal=Tk - Tq)
        scores = scores.masked_fill(~mask, float("-inf"))
    return torch.softmax(scores, dim=-1) @ values


def sdpa(q, k, v, causal):
    Tq, Tk = q.shape[2], k.shape[2]
    mask = torch.ones(Tq, Tk, dtype=torch.bool).tril(diagonal=Tk - Tq) if causal else None
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)


@st.composite
def attention_shapes(draw):
    B = draw(st.integers(1, 2))
    H_kv = draw(st.integers(1, 3))
    H = H_kv * draw(st.integers(1, 3))
    Tk = draw(st.integers(1, 40))
    Tq = draw(st.integers(1, Tk))
    D = draw(st.integers(1, 12))
    block = draw(st.integers(1, 48))
    causal = draw(st.booleans())
    seed = draw(st.integers(0, 2 ** 16))
    return B, H, H_kv, Tq, Tk, D, block, causal, seed


def qkv(B, H, H_kv, Tq, Tk, D, seed, dtype=torch.float32, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, H, Tq, D, generator=g) * scale
    k = torch.randn(B, H_kv, Tk, D, generator=g) * scale
    v = torch.randn(B, H_kv, Tk, D, generator=g)
    return q.to(dtype), k.to(dtype), v.to(dtype)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(attention_shapes())
def test_flash_equals_plain_attention_for_every_shape(shape):
    B, H, H_kv, Tq, Tk, D, block, causal, seed = shape
    q, k, v = qkv(B, H, H_kv, Tq, Tk, D, seed)
    got = flash_attention(q, k, v, causal=causal, block_size=block)
    assert got.shape == q.shape and got.dtype == q.dtype
    torch.testing.assert_close(got, written_out(q, k, v, causal), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(got, sdpa(q, k, v, causal), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(plain_attention(q, k, v, causal), written_out(q, k, v, causal), atol=1e-5, rtol=1e-5)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(attention_shapes())
def test_the_loop_moves_the_bytes_the_formula_says(shape):
    B, H, H_kv, Tq, Tk, D, block, causal, seed = shape
    q, k, v = qkv(B, H, H_kv, Tq, Tk, D, seed)
    counted = Traffic()
    flash_attention(q, k, v, causal=causal, block_size=block, traffic=counted)
    assert counted == attention_bytes("flash", B, H, Tq, Tk, D, causal=causal, block_size=block)
    counted = Traffic()
    plain_attention(q, k, v, causal=causal, traffic=counted)
    assert counted == attention_bytes("plain", B, H, Tq, Tk, D, causal=causal)


@pytest.mark.parametrize("dtype, atol", [(torch.float16, 2e-3), (torch.bfloat16, 1.6e-2)])
def test_half_precision_inputs_accumulate_in_fp32(dtype, atol):
    q, k, v = qkv(2, 4, 2, 70, 100, 16, seed=3, dtype=dtype)
    got = flash_attention(q, k, v, block_size=32)
    assert got.dtype == dtype
    want = written_out(q.float(), k.float(), v.float(), True)
    torch.testing.assert_close(got.float(), want, atol=atol, rtol=0)
    # 16-bit exp sums would drift further: the error stays at the output's rounding, not the sum's
    assert (got.float() - want).abs().max() <= want.abs().max() * torch.finfo(dtype).eps * 2
    counted = Traffic()
    flash_attention(q, k, v, block_size=32, traffic=counted)
    assert counted == attention_bytes("flash", 2, 4, 70, 100, 16, block_size=32, itemsize=2)


def test_fp64_inputs_stay_fp64():
    q, k, v = qkv(1, 4, 2, 10, 17, 8, seed=4, dtype=torch.float64)
    want = written_out(q, k, v, True)
    torch.testing.assert_close(flash_attention(q, k, v, block_size=3), want, atol=1e-12, rtol=1e-12)
    torch.testing.assert_close(flash_decoding(q[:, :, -1:], k, v, chunk_size=5), want[:, :, -1:], atol=1e-12, rtol=1e-12)
    counted = Traffic()
    flash_decoding(q[:, :, -1:], k, v, chunk_size=5, traffic=counted)
    assert counted == attention_bytes("flash_decoding", 1, 4, 1, 17, 8, chunk_size=5, itemsize=8)


def test_large_scores_do_not_overflow():
    q, k, v = qkv(1, 2, 2, 20, 20, 8, seed=1, scale=30.0)  # scores in the hundreds: exp() alone would overflow
    got = flash_attention(q, k, v, block_size=6)
    assert torch.isfinite(got).all()
    torch.testing.assert_close(got, written_out(q, k, v, True), atol=1e-5, rtol=1e-5)


def test_one_tile_or_one_key_per_tile_give_the_same_answer():
    q, k, v = qkv(1, 2, 1, 9, 13, 4, seed=5)
    one = flash_attention(q, k, v, block_size=100)
    torch.testing.assert_close(flash_attention(q, k, v, block_size=1), one, atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(one, plain_attention(q, k, v), atol=1e-6, rtol=1e-5)


def test_tiles_above_the_diagonal_are_skipped():
    assert tile_schedule(4, 4, 2) == [["mask", "skip"], ["full", "mask"]]
    # one position per tile: the diagonal tile holds a query and its own key, nothing to mask
    assert tile_schedule(4, 4, 1) == [["full" if j <= i else "skip" for j in range(4)] for i in range(4)]
    assert tile_schedule(2, 6, 2) == [["full", "full", "mask"]]  # two queries at the end of a cache
    assert tile_schedule(4, 4, 2, causal=False) == [["full", "full"], ["full", "full"]]
    # the loop visits exactly the tiles the schedule does not skip: K bytes = visited keys
    sched = tile_schedule(64, 64, 16)
    visited = sum(kind != "skip" for row in sched for kind in row)
    assert visited == 4 * 5 // 2 and sum(row.count("mask") for row in sched) == 4
    counted = Traffic()
    flash_attention(*qkv(1, 1, 1, 64, 64, 8, seed=0), block_size=16, traffic=counted)
    assert counted.reads["K"] == visited * 16 * 8 * 4


def test_tile_kinds_at_the_diagonal():
    assert flash.tile_kind(3, 4, 3, 4, 0, True) == "full"
    assert flash.tile_kind(3, 4, 4, 5, 0, True) == "skip"
    assert flash.tile_kind(0, 2, 0, 2, 0, True) == "mask"


@settings(max_examples=100, deadline=None, derandomize=True)
@given(st.integers(1, 200), st.integers(0, 200), st.integers(1, 80), st.booleans())
def test_the_closed_form_counts_the_keys_each_query_tile_loads(Tq, extra, bs, causal):
    Tk = Tq + extra
    by_tiles = sum(min(k0 + bs, Tk) - k0 for row in tile_schedule(Tq, Tk, bs, causal)
                   for k0, kind in zip(range(0, Tk, bs), row) if kind != "skip")
    assert flash.flash_keys_loaded(Tq, Tk, bs, causal) == by_tiles


def test_the_formula_is_instant_for_huge_shapes_and_listing_refuses_them():
    t = attention_bytes("flash", 1, 1, 10 ** 12, 10 ** 12, 1, block_size=1)  # 10^12 query tiles, no loop
    assert t.reads["K"] == 4 * 10 ** 12 * (10 ** 12 + 1) // 2
    with pytest.raises(ValueError, match=r"make 1,000,000,000,000 tiles \(at most 1,000,000\); use a larger block_size"):
        tile_schedule(10 ** 6, 10 ** 6, 1)


def test_plain_attention_refuses_a_score_matrix_larger_than_memory():
    q = torch.zeros(1, 1, 1, 1).expand(1, 10 ** 6, 10 ** 6, 1)  # a view: no memory behind it
    with pytest.raises(ValueError, match=r"plain_attention's score and probability matrices would take"):
        plain_attention(q, q, q, causal=False)


def test_never_builds_the_score_matrix_but_plain_does():
    B, H, T, D = 1, 4, 256, 16
    plain, fl = attention_bytes("plain", B, H, T, T, D), attention_bytes("flash", B, H, T, T, D, block_size=64)
    assert "S" not in fl.reads and "P" not in fl.writes
    assert plain.writes["S"] == B * H * T * T * 4
    # flash reads K once per query tile up to the diagonal: 1 + 2 + 3 + 4 tiles of 64 keys
    assert fl.reads["K"] == B * H * (1 + 2 + 3 + 4) * 64 * D * 4
    assert fl.total < plain.total


# --------------------------------------------------------------------------------------- the online softmax

def test_online_update_over_tiles_equals_one_softmax():
    g = torch.Generator().manual_seed(0)
    scores, values = torch.randn(3, 10, generator=g) * 4, torch.randn(10, 5, generator=g)
    m, l, acc = torch.full((3,), float("-inf")), torch.zeros(3), torch.zeros(3, 5)
    for j in range(0, 10, 3):
        m, l, acc = online_softmax_update(m, l, acc, scores[:, j:j + 3], values[j:j + 3])
    torch.testing.assert_close(acc / l[:, None], torch.softmax(scores, -1) @ values)
    torch.testing.assert_close(m, scores.max(-1).values)
    torch.testing.assert_close(l, torch.exp(scores - m[:, None]).sum(-1))


@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(1, 20), st.integers(1, 6), st.integers(0, 2 ** 16), st.floats(0.1, 50.0))
def test_merging_two_states_equals_the_state_of_both(n, split_seed, seed, scale):
    g = torch.Generator().manual_seed(seed)
    scores, values = torch.randn(4, n + 1, generator=g) * scale, torch.randn(n + 1, 3, generator=g)
    cut = 1 + split_seed % n if n > 1 else 1
    m, l, acc = merge_softmax_states(softmax_state(scores[:, :cut], values[:cut]),
                                     softmax_state(scores[:, cut:], values[cut:]))
    whole = softmax_state(scores, values)
    torch.testing.assert_close(m, whole[0])
    torch.testing.assert_close(acc / l[:, None], whole[2] / whole[1][:, None], atol=1e-5, rtol=1e-5)


def test_merging_with_an_empty_state_changes_nothing():
    state = softmax_state(torch.tensor([[1.0, 3.0]]), torch.tensor([[1.0], [2.0]]))
    empty = (torch.tensor([float("-inf")]), torch.zeros(1), torch.zeros(1, 1))
    for merged in (merge_softmax_states(state, empty), merge_softmax_states(empty, state)):
        for a, b in zip(merged, state):
            torch.testing.assert_close(a, b)
    both = merge_softmax_states(empty, empty)
    assert torch.isneginf(both[0]).all() and (both[1] == 0).all() and not torch.isnan(both[2]).any()


# ----------------------------------------------------------------------------------------------- FlashDecoding

@settings(max_examples=40, deadline=None, derandomize=True)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 3), st.integers(1, 60), st.integers(1, 10),
       st.integers(1, 70), st.integers(0, 2 ** 16))
def test_split_k_merge_equals_plain(B, H_kv, rep, Tk, D, chunk, seed):
    q, k, v = qkv(B, H_kv * rep, H_kv, 1, Tk, D, seed)
    want = written_out(q, k, v, False)
    torch.testing.assert_close(flash_decoding(q, k, v, chunk_size=chunk), want, atol=1e-5, rtol=1e-5)
    parts = split_k_partials(q, k, v, chunk)
    assert len(parts) == -(-Tk // chunk)
    # each partial is its chunk's own attention; their log-sum-exps add up to the whole one's
    out0, lse0 = parts[0]
    torch.testing.assert_close(out0, written_out(q, k[:, :, :chunk], v[:, :, :chunk], False), atol=1e-5, rtol=1e-5)
    scores = q @ k.repeat_interleave(rep, 1).transpose(-2, -1) / math.sqrt(D)
    torch.testing.assert_close(torch.logsumexp(torch.stack([s for _, s in parts]), 0),
                               torch.logsumexp(scores, -1), atol=1e-5, rtol=1e-5)
    counted = Traffic()
    flash_decoding(q, k, v, chunk_size=chunk, traffic=counted)
    assert counted == attention_bytes("flash_decoding", B, H_kv * rep, 1, Tk, D, chunk_size=chunk)


def test_decode_traffic_is_the_cache():
    # one decode step over 4096 cached positions: K and V are nearly all the bytes, flash or not
    B, H, T, D = 1, 8, 4096, 64
    plain, dec = attention_bytes("plain", B, H, 1, T, D), attention_bytes("flash_decoding", B, H, 1, T, D)
    cache = plain.reads["K"] + plain.reads["V"]
    assert cache == dec.reads["K"] + dec.reads["V"] == 2 * B * H * T * D * 4
    assert cache / plain.total > 0.9 and cache / dec.total > 0.9


# ------------------------------------------------------------------------------------ the model's own attention

@pytest.mark.parametrize("block", [1, 4, 64])
def test_flash_on_the_chat_models_real_q_k_v_equals_its_attention(chat, block):
    model, tok = chat
    ids = torch.tensor([tok.encode("<s>人工智能")])
    record = ForwardRecord(capture=True)
    with torch.no_grad():
        model(ids, record=record)
    for layer in range(model.config.n_layers):
        t = record.tensors[layer]
        out = flash_attention(t["q"], t["k"], t["v"], block_size=block)  # (B, H, T, D)
        mix = out.transpose(1, 2).reshape(t["mix"].shape)
        torch.testing.assert_close(mix, t["mix"], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kv_heads", [4, 2, 1])
def test_flash_decoding_over_a_real_cache_equals_the_models_step(kv_heads):
    model = make_model(seed=2, n_heads=4, n_kv_heads=kv_heads, positions="rope")
    cache = lib.KVCache(model.config, 1, 30)
    with torch.no_grad():
        model(torch.tensor([[1, 5, 7, 9, 11, 3, 2, 8, 4, 6, 10, 12, 13]]), cache=cache)  # prefill 13 positions
        record = ForwardRecord(capture=True)
        model(torch.tensor([[14]]), cache=cache, record=record)  # one decode step
    for layer in range(model.config.n_layers):
        t = record.tensors[layer]
        out = flash_decoding(t["q"], cache.keys(layer), cache.values(layer), chunk_size=4)
        torch.testing.assert_close(out.transpose(1, 2).reshape(t["mix"].shape), t["mix"], atol=1e-5, rtol=1e-5)
        # and a prefill that continues the cache: the last 3 queries against all 14 keys
        q = torch.randn(1, 4, 3, model.config.head_dim)
        torch.testing.assert_close(flash_attention(q, cache.keys(layer), cache.values(layer), block_size=2),
                                   plain_attention(q, cache.keys(layer), cache.values(layer)), atol=1e-5, rtol=1e-5)


def test_public_name():
    assert lib.flash_attention is flash_attention and "flash_attention" in lib.__all__


# ----------------------------------------------------------------------------------------------------- errors

def test_errors_name_the_argument_and_the_shapes():
    q, k, v = qkv(1, 4, 2, 5, 8, 6, seed=0)
    with pytest.raises(ValueError, match=r"block_size must be an integer >= 1, got 0"):
        flash_attention(q, k, v, block_size=0)
    with pytest.raises(ValueError, match=r"block_size must be an integer >= 1, got 2.5"):
        flash_attention(q, k, v, block_size=2.5)
    with pytest.raises(ValueError, match=r"H=3 must be a multiple of the key/value heads H_kv=2 .*q \(1, 3, 5, 6\)"):
        flash_attention(q[:, :3], k, v)
    with pytest.raises(ValueError, match=r"Tq must be <= Tk, got q \(1, 4, 9, 6\), k \(1, 2, 8, 6\)"):
        flash_attention(torch.randn(1, 4, 9, 6), k, v)
    with pytest.raises(ValueError, match=r"k and v must have the same shape .*v \(1, 2, 7, 6\)"):
        flash_attention(q, k, v[:, :, :7])
    with pytest.raises(ValueError, match=r"same head_dim \(dimension 3\), got q \(1, 4, 5, 5\)"):
        flash_attention(q[..., :5], k, v)
    with pytest.raises(ValueError, match=r"same batch size \(dimension 0\)"):
        flash_attention(torch.cat([q, q]), k, v)
    with pytest.raises(ValueError, match=r"q must have 4 dimensions, \(batch, heads, positions, head_dim\), got shape \(4, 5, 6\)"):
        flash_attention(q[0], k, v)
    with pytest.raises(TypeError, match=r"k must be a torch.Tensor, got list"):
        flash_attention(q, [1, 2], v)
    with pytest.raises(ValueError, match=r"one dtype and one device"):
        flash_attention(q.double(), k, v)
    with pytest.raises(ValueError, match=r"floating-point tensor, got dtype torch.int64"):
        flash_attention(q.long(), k, v)
    with pytest.raises(ValueError, match=r"causal must be True or False, got 1"):
        flash_attention(q, k, v, causal=1)
    # without a mask more queries than keys is cross-attention, and allowed
    assert flash_attention(torch.randn(1, 4, 9, 6), k, v, causal=False).shape == (1, 4, 9, 6)


def test_decode_and_formula_errors():
    q, k, v = qkv(1, 2, 2, 3, 8, 4, seed=0)
    with pytest.raises(ValueError, match=r"one decode step: q must hold one query per sequence, shape \(B, H, 1, D\), got shape \(1, 2, 3, 4\)"):
        flash_decoding(q, k, v)
    with pytest.raises(ValueError, match=r"chunk_size must be an integer >= 1, got -1"):
        flash_decoding(q[:, :, :1], k, v, chunk_size=-1)
    with pytest.raises(ValueError, match=r"non-empty list of \(out, lse\) pairs of tensors"):
        merge_partials([])
    with pytest.raises(ValueError, match=r"every out \(B, H, 1, D\) and lse \(B, H, 1\) of the same shapes"):
        merge_partials([(torch.zeros(1, 2, 1, 4), torch.zeros(1, 2, 1)), (torch.zeros(1, 2, 1, 4), torch.zeros(2))])
    with pytest.raises(ValueError, match=r"algorithm='fused' is not supported; allowed: plain, flash, flash_decoding"):
        attention_bytes("fused", 1, 1, 1, 1, 1)
    with pytest.raises(ValueError, match=r"q_len must be <= k_len .* got q_len=5, k_len=4"):
        attention_bytes("flash", 1, 1, 5, 4, 1)
    with pytest.raises(ValueError, match=r"flash_decoding is one decode step: q_len must be 1, got 2"):
        attention_bytes("flash_decoding", 1, 1, 2, 4, 1)
    with pytest.raises(ValueError, match=r"Tq must be <= Tk, got Tq=5, Tk=4"):
        tile_schedule(5, 4)


def test_the_traffic_table_sums_its_rows():
    t = attention_bytes("plain", 1, 1, 2, 2, 2)
    table = t.table()
    assert table.splitlines()[0].split() == ["tensor", "bytes", "read", "bytes", "written"]
    assert f"{t.total:,} bytes moved" in table and t.total == 4 * (2 * 2 + 2 * 2 + 4 * 4 + 2 * 2 + 2 * 2)


def test_on_every_available_device(device):
    q, k, v = (t.to(device) for t in qkv(2, 4, 2, 33, 40, 8, seed=9))
    got = flash_attention(q, k, v, block_size=16)
    assert got.device.type == device.type
    torch.testing.assert_close(got.cpu(), written_out(q.cpu(), k.cpu(), v.cpu(), True), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(flash_decoding(q[:, :, -1:], k, v, chunk_size=16).cpu(),
                               got[:, :, -1:].cpu(), atol=1e-5, rtol=1e-5)


# ------------------------------------------------------------------------------ flash_tiles: the loop, step by step

def test_flash_tiles_walks_the_schedule_and_its_outputs_are_flash_attention():
    q, k, v = qkv(1, 4, 2, 20, 20, 8, seed=3)
    steps = list(flash.flash_tiles(q, k, v, block_size=8))
    sched = flash.tile_schedule(20, 20, block_size=8)
    assert [s.kind for s in steps] == [kind for row in sched for kind in row]  # every tile, skipped ones included
    assert [(s.q0, s.k0) for s in steps] == [(i, j) for i in (0, 8, 16) for j in (0, 8, 16)]
    out = torch.cat([s.out for s in steps if s.last], dim=2)
    assert torch.equal(out, flash_attention(q, k, v, block_size=8))  # the same loop: bit for bit
    torch.testing.assert_close(out, plain_attention(q, k, v), atol=1e-6, rtol=1e-5)
    for before, step in zip(steps, steps[1:]):
        if step.kind == "skip" and step.q0 == before.q0:  # a skipped tile changes nothing
            assert torch.equal(step.m, before.m) and torch.equal(step.l, before.l)
    # the running state after the diagonal tile is the softmax over every key the row sees
    row = steps[4]  # query tile 1 (rows 8..15) after key tile 1: the diagonal
    assert row.kind == "mask" and row.q0 == 8 and row.k0 == 8
    scores = (q[:, :, 8:16] @ k.repeat_interleave(2, 1)[:, :, :16].transpose(-2, -1)) / math.sqrt(8)
    scores = scores.masked_fill(torch.ones(8, 16, dtype=torch.bool).tril(8).logical_not(), float("-inf"))
    torch.testing.assert_close(row.m, scores.max(-1).values)
    torch.testing.assert_close(row.l, torch.exp(scores - row.m[..., None]).sum(-1))


def test_flash_tiles_counts_the_same_traffic():
    q, k, v = qkv(1, 2, 2, 16, 16, 4, seed=1)
    a, b = Traffic(), Traffic()
    list(flash.flash_tiles(q, k, v, block_size=4, traffic=a))
    flash_attention(q, k, v, block_size=4, traffic=b)
    assert a == b == attention_bytes("flash", 1, 2, 16, 16, 4, block_size=4)
