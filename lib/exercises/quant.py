"""Build-it exercises of notebook 05: int8 quantization of K/V vectors, and the KV-cache size formula."""
from __future__ import annotations

import torch

from ..costs import kv_cache_bytes
from ..presets import model_config
from ..quant import QMAX, dequantize, quantize
from ..i18n import t
from . import Case, exercise


def quantize_int8_solution(x):
    """x (..., head_dim) -> (q int8 (..., head_dim), scale fp32 (..., 1)): symmetric absmax per vector."""
    scale = x.float().abs().amax(dim=-1, keepdim=True) / 127  # one scale per (token, head)
    safe = torch.where(scale > 0, scale, torch.ones_like(scale))  # an all-zero vector: avoid 0 / 0
    q = torch.round(x.float() / safe).clamp(-127, 127).to(torch.int8)
    return q, scale


def _check_quantized(got, want) -> str | None:
    """What is wrong with the learner's (q, scale), said without the expected numbers."""
    if not isinstance(got, (tuple, list)) or len(got) != 2:
        return t("return a pair (q, scale): the int8 numbers and one scale per vector")
    q, scale = got
    q_ref, s_ref = want
    if not isinstance(q, torch.Tensor) or q.dtype != torch.int8:
        return t("q should be a tensor of dtype torch.int8, got {got}", got=getattr(q, 'dtype', type(q).__name__))
    if tuple(q.shape) != tuple(q_ref.shape):
        return t("q has shape {shape}: it should have the shape of x", shape=tuple(q.shape))
    if not isinstance(scale, torch.Tensor) or tuple(scale.shape) != tuple(s_ref.shape):
        return t("scale has shape {shape}: there is one scale per vector of head_dim numbers, kept as a last "
                 "dimension of size 1 so that q * scale broadcasts", shape=tuple(getattr(scale, 'shape', ())))
    if not torch.allclose(scale.float(), s_ref, rtol=1e-5, atol=1e-12):
        return t("the scales are off: each vector's scale maps its largest magnitude onto 127")
    if int(q.to(torch.int16).abs().max()) > QMAX:
        return t("q leaves the symmetric range -127..127")
    if int((q.to(torch.int16) - q_ref.to(torch.int16)).abs().max()) > 1:
        return t("some q are more than one step away from x / scale: round x / scale to the nearest integer")
    err = (dequantize(q, scale) - dequantize(q_ref, s_ref)).abs()
    if bool((err > s_ref / 2 * (1 + 1e-5) + 1e-30).any()):  # a rounding tie may go either way, nothing else
        return t("some q are rounded the wrong way: take the nearest integer of x / scale")
    return None


@exercise("int8_quantize", title="int8 quantization of keys and values, one scale per (token, head)",
          hints=("Which number of a vector must land exactly on ±127, and what happens to a vector that is all "
                 "zeros?",
                 "One scale per vector: the largest absolute value over the last dimension divided by 127 (amax "
                 "with keepdim=True keeps it broadcastable); then round and cast; keep the scale away from 0.",
                 "scale = the largest |x| of each vector (last dimension) / 127, kept with keepdim=True; "
                 "q = round(x / scale) as torch.int8; a vector of zeros needs a scale that does not divide by 0"),
          solution=quantize_int8_solution)
def int8_quantize_cases():
    g = torch.Generator().manual_seed(5)
    keys = torch.randn(1, 2, 4, 8, generator=g) * 3  # (B, n_kv_heads, T, head_dim)
    keys[0, 1, 2, 5] = -40.0  # one outlier: its vector gets a coarse grid, the others do not
    with_zero = torch.randn(2, 1, 3, 16, generator=g)
    with_zero[1, 0, 1] = 0.0
    demo_keys = torch.randn(1, 4, 6, 16, generator=g) * 0.5
    return [Case(t("keys of shape {shape}: {what}", shape=tuple(x.shape), what=t(what)), (x,), expected=quantize(x), compare=_check_quantized)
            for x, what in ((keys, "one vector holds a large outlier"),
                            (with_zero, "one vector is all zeros"),
                            (demo_keys, "the chat model's shape: 4 KV heads, head_dim 16"))]


def kv_bytes_solution(config, n_tokens, batch, bytes_per_number):
    """2 (K and V) x layers x KV heads x head_dim x bytes per number x tokens x batch, rounded up to a byte."""
    import math
    return math.ceil(2 * config.n_layers * config.n_kv_heads * config.head_dim * bytes_per_number * n_tokens * batch)


@exercise("kv_bytes", title="the KV-cache size formula",
          hints=("What does the cache store for one token in one layer, and how many numbers is that?",
                 "Per token and layer: a key and a value for every KV head (n_kv_heads, not n_heads: GQA shares "
                 "them), head_dim numbers each; then multiply by the bytes of one number, the tokens and the "
                 "batch.",
                 "2 (K and V) x layers x KV heads (config.n_kv_heads, not n_heads) x head_dim x bytes per number "
                 "x tokens x batch; int4 is half a byte per number"),
          solution=kv_bytes_solution)
def kv_bytes_cases():
    rows = [("chat", 64, 1, 4, "fp32"), ("chat-gqa", 64, 4, 2, "fp16"), ("llama-2-7b", 4096, 8, 2, "fp16"),
            ("llama-3-8b", 8192, 3, 1, "int8"), ("mistral-7b", 1001, 1, 0.5, "int4")]
    return [Case(t("{name}, {tokens} tokens x batch {batch}, {fmt}", name=name, tokens=f"{tokens:,}", batch=batch,
                   fmt=fmt), (model_config(name), tokens, batch, b),
                 expected=kv_cache_bytes(name, tokens, batch, fmt))
            for name, tokens, batch, b, fmt in rows]
