"""FlashAttention and FlashDecoding on the real model (notebook 11): on a 512-token window of held-out text the
tiles give every layer's own attention, and at the full context a decode step's softmax sits mostly on the most
recent chunk of the cache (what the merge weights of notebook 11 show)."""
import functools

import torch

import lib
from lib import flash
from lib.corpus import heldout_text
from lib.lm import windows

torch.set_num_threads(1)


@functools.lru_cache(maxsize=None)
def window_record():
    model, tok = lib.load_demo("lm")
    window = windows(tok, heldout_text("en"), model.config.max_seq_len, 4)[1:2]
    record = lib.ForwardRecord(capture=True)
    with torch.no_grad():
        model(window, record=record)
    return model, window, record


def test_flash_gives_every_layer_of_the_real_model_over_its_whole_context():
    model, window, record = window_record()
    assert window.shape == (1, model.config.max_seq_len)
    for layer in range(model.config.n_layers):
        t = record.tensors[layer]
        out = lib.flash_attention(t["q"], t["k"], t["v"], block_size=64)
        assert torch.allclose(out.transpose(1, 2).reshape(t["mix"].shape), t["mix"], atol=1e-5, rtol=0)
        assert torch.allclose(out, flash.plain_attention(t["q"], t["k"], t["v"]), atol=1e-5, rtol=0)
    P = record.tensors[0]["attn_weights"]  # what the naive path holds: 4 heads x 512 x 512 fp32
    assert P.numel() * P.element_size() == 4 * 2**20 == 64 * (4 * 64 * 64 * 4)


def test_a_decode_step_at_the_full_context_weighs_the_latest_chunk_most():
    model, window, _ = window_record()
    cache = lib.KVCache(model.config, 1, model.config.max_seq_len)
    step = lib.ForwardRecord(capture=True)
    with torch.no_grad():
        model(window[:, :-1], cache=cache)
        model(window[:, -1:], cache=cache, record=step)
    q, keys, values = step.tensors[0]["q"], cache.keys(0), cache.values(0)
    partials = flash.split_k_partials(q, keys, values, chunk_size=128)
    lse = torch.logsumexp(torch.stack([s for _, s in partials]), dim=0)
    weights = torch.stack([torch.exp(s - lse)[0, :, 0] for _, s in partials])  # (chunks, heads)
    assert torch.allclose(weights.sum(0), torch.ones(model.config.n_heads), atol=1e-5)
    assert bool((weights[-1] >= 0.9).all()), weights  # the 128 most recent positions hold most of every head
    merged = flash.merge_partials(partials)
    assert torch.allclose(merged.transpose(1, 2).reshape(step.tensors[0]["mix"].shape), step.tensors[0]["mix"], atol=1e-5)
