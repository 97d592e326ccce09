"""Analytic costs of a decoder-only Transformer: parameters, bytes, KV-cache size and FLOPs.

Everything here is arithmetic on shapes; no model is built. The formulas mirror ``lib.MiniTransformer``
exactly (``param_count(cfg) == sum(p.numel() for p in MiniTransformer(cfg).parameters())``) and the step
schedule of ``lib.generate`` (one forward pass per new token).

FLOP convention: one multiply-add = 2 FLOPs, and only matrix multiplications are counted. Norms, softmax,
activations, rotary embeddings, residual adds and sampling are ignored: they are O(T·d) per layer, small
next to the O(T·d²) projections and the O(T·t·d) attention.
"""
from __future__ import annotations

import math
import operator
from dataclasses import dataclass

import torch

from lib.config import ModelConfig

# ----------------------------------------------------------------------------------------------- dtypes

DTYPE_BYTES: dict[str, float] = {"fp64": 8, "fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
_ALIASES = {"float64": "fp64", "double": "fp64", "float32": "fp32", "float": "fp32", "float16": "fp16",
            "half": "fp16", "bfloat16": "bf16"}
_TORCH_NAMES = {torch.float64: "fp64", torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16",
                torch.int8: "int8", torch.uint8: "int8"}
for _attr, _name in (("float8_e4m3fn", "fp8"), ("float8_e5m2", "fp8"), ("float8_e4m3fnuz", "fp8"),
                     ("float8_e5m2fnuz", "fp8"), ("int4", "int4"), ("uint4", "int4")):
    if isinstance(getattr(torch, _attr, None), torch.dtype):  # newer dtypes only exist in newer torch
        _TORCH_NAMES[getattr(torch, _attr)] = _name
_ALLOWED_DTYPES = (f"strings {', '.join(DTYPE_BYTES)} (or float32/float16/bfloat16/half), "
                   "or a torch dtype such as torch.float16, torch.bfloat16, torch.float8_e4m3fn, torch.int8")


def _dtype_name(dtype) -> str:
    """The canonical short name ("fp16", "int4", ...) of a string or torch dtype."""
    if isinstance(dtype, torch.dtype):
        name = _TORCH_NAMES.get(dtype)
    elif isinstance(dtype, str):
        name = _ALIASES.get(dtype.lower(), dtype.lower())
        name = name if name in DTYPE_BYTES else None
    else:
        raise TypeError(f"dtype must be a string or a torch.dtype, got {type(dtype).__name__} {dtype!r}; "
                        f"allowed: {_ALLOWED_DTYPES}")
    if name is None:
        raise ValueError(f"unknown dtype {dtype!r}; allowed: {_ALLOWED_DTYPES}")
    return name


def _dtype_bits(dtype) -> int:
    return int(DTYPE_BYTES[_dtype_name(dtype)] * 8)


def dtype_bytes(dtype) -> float:
    """Bytes per stored number: fp32 4, fp16/bf16 2, fp8/int8 1, int4 0.5 (two values per byte)."""
    bits = _dtype_bits(dtype)
    return bits // 8 if bits % 8 == 0 else bits / 8


# ------------------------------------------------------------------------------------------- validation

def _count(value, name: str, minimum: int = 0) -> int:
    """An integer >= minimum (bools and floats are refused: 2.0 tokens is a bug, not a count)."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, got the bool {value!r}")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}") from None
    if value < minimum:
        what = "a positive integer (>= 1)" if minimum == 1 else f"an integer >= {minimum}"
        raise ValueError(f"{name} must be {what}, got {value}")
    return value


def _model_config(config, fn: str, allow_mla: bool = False) -> ModelConfig:
    if isinstance(config, ModelConfig) or (allow_mla and isinstance(config, MLAConfig)):
        return config
    wanted = "a ModelConfig or MLAConfig (e.g. PRESETS['gpt2'], MLA_PRESETS['deepseek-v3'])" if allow_mla \
        else "a ModelConfig (e.g. PRESETS['gpt2'])"
    extra = "; an MLAConfig only describes the KV cache, so it works with kv_bytes_per_token, " \
        "kv_cache_bytes and describe" if isinstance(config, MLAConfig) else ""
    raise TypeError(f"{fn}() needs {wanted}, got {type(config).__name__}{extra}")


# ----------------------------------------------------------------------------------- parameters, bytes

def param_count(config: ModelConfig) -> int:
    """Number of parameters of ``MiniTransformer(config)``, tied weights counted once.

    embeddings  vocab·d (+ max_seq_len·d for learned positions)
    per layer   2 norms + q,k,v,o projections + FFN (2 matrices, or 3 for SwiGLU)
    final norm, and lm_head vocab·d unless it is tied to the token embedding.
    """
    c = _model_config(config, "param_count")
    d, hd, ff = c.d_model, c.head_dim, c.d_ff
    norm = 2 * d if c.norm == "layernorm" else d  # LayerNorm: weight + bias; RMSNorm: weight only

    def linear(n_in, n_out, bias):
        return n_in * n_out + (n_out if bias else 0)

    attn = (linear(d, c.n_heads * hd, c.qkv_bias) + 2 * linear(d, c.n_kv_heads * hd, c.qkv_bias)
            + linear(c.n_heads * hd, d, c.bias))
    n_up = 2 if c.activation == "swiglu" else 1  # SwiGLU has a gate and an up projection
    ffn = n_up * linear(d, ff, c.bias) + linear(ff, d, c.bias)
    total = c.vocab_size * d + (c.max_seq_len * d if c.positions == "learned" else 0)
    total += c.n_layers * (2 * norm + attn + ffn) + norm
    if not c.tie_embeddings:
        total += c.vocab_size * d  # a separate lm_head matrix
    return total


def weight_bytes(config: ModelConfig, dtype=torch.float16) -> int:
    """Bytes to store the weights: param_count × bytes per value (rounded up for 4-bit types)."""
    return math.ceil(param_count(config) * _dtype_bits(dtype) / 8)


# ------------------------------------------------------------------------------------------ MLA (DeepSeek)

@dataclass(frozen=True)
class MLAConfig:
    """The cache-relevant shape of multi-head latent attention (DeepSeek-V2/V3).

    Instead of per-head K and V, each layer caches one compressed latent vector of ``kv_lora_rank``
    values plus one shared rotary key of ``qk_rope_head_dim`` values per token; K and V for all heads are
    re-expanded from the latent. Only the cache is modelled here, not the parameters.
    """

    n_layers: int
    kv_lora_rank: int
    qk_rope_head_dim: int
    n_heads: int = 128
    qk_nope_head_dim: int = 128
    v_head_dim: int = 128
    d_model: int = 7168

    def __post_init__(self):
        for name in ("n_layers", "kv_lora_rank", "qk_rope_head_dim", "n_heads", "qk_nope_head_dim",
                     "v_head_dim", "d_model"):
            _count(getattr(self, name), f"MLAConfig.{name}", minimum=1)

    @property
    def cached_values_per_layer(self) -> int:
        """Values cached per token per layer: kv_lora_rank + qk_rope_head_dim (576 for DeepSeek-V3)."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def mha_values_per_layer(self) -> int:
        """What full per-head K (nope + rope dims) and V would cache instead, for comparison."""
        return self.n_heads * (self.qk_nope_head_dim + self.qk_rope_head_dim + self.v_head_dim)


# ----------------------------------------------------------------------------------------------- KV cache

def _kv_values_per_token(config, fn: str) -> int:
    """Numbers cached per token of one sequence, all layers together."""
    c = _model_config(config, fn, allow_mla=True)
    if isinstance(c, MLAConfig):
        return c.n_layers * c.cached_values_per_layer
    return 2 * c.n_layers * c.n_kv_heads * c.head_dim


def kv_bytes_per_token(config, dtype=torch.float16) -> int:
    """KV-cache bytes for one token of one sequence.

    ModelConfig: 2 (K and V) × n_layers × n_kv_heads × head_dim × bytes — GQA/MQA shrink it via n_kv_heads.
    MLAConfig:   n_layers × (kv_lora_rank + qk_rope_head_dim) × bytes.
    """
    return math.ceil(_kv_values_per_token(config, "kv_bytes_per_token") * _dtype_bits(dtype) / 8)


def kv_cache_bytes(config, n_tokens: int, batch_size: int = 1, dtype=torch.float16) -> int:
    """KV-cache bytes for ``batch_size`` sequences of ``n_tokens`` each: per-token bytes × n_tokens × batch.

    The cache grows linearly in both context length and batch size, and does not depend on d_ff or vocab.
    """
    values = _kv_values_per_token(config, "kv_cache_bytes")
    n_tokens = _count(n_tokens, "n_tokens")
    batch_size = _count(batch_size, "batch_size")
    return math.ceil(values * n_tokens * batch_size * _dtype_bits(dtype) / 8)


def kv_equals_weights_tokens(config: ModelConfig, dtype=torch.float16) -> float:
    """Cached tokens (summed over the batch: batch × context) at which KV-cache bytes equal weight bytes."""
    return weight_bytes(config, dtype) / kv_bytes_per_token(config, dtype)


# ------------------------------------------------------------------------------------------------- FLOPs

FLOP_TERMS = ("qkv_proj", "attn_scores", "attn_values", "out_proj", "ffn", "lm_head")


def forward_flops(config: ModelConfig, n_new: int, n_past: int = 0, last_only: bool = False) -> dict[str, int]:
    """Matmul FLOPs of one forward pass feeding ``n_new`` tokens with ``n_past`` tokens already cached.

    Causal: new token i (0-based) sees keys = n_past + i + 1, so Σkeys = n_new·n_past + n_new(n_new+1)/2.
    Per layer (× n_layers):
      qkv_proj     2·n_new·d·(n_heads + 2·n_kv_heads)·head_dim
      attn_scores  2·n_heads·head_dim·Σkeys        (Q·Kᵀ; every query head, even under GQA)
      attn_values  2·n_heads·head_dim·Σkeys        (weights·V)
      out_proj     2·n_new·n_heads·head_dim·d
      ffn          2·n_new·d·d_ff·(3 if swiglu else 2)
    Once: lm_head   2·n_new·d·vocab (logits for every fed position, as ``model(ids)`` returns them), or
                    2·d·vocab with ``last_only=True`` (the last position only, as generation needs).
    Aggregates: projections = qkv + out, attention = scores + values, total = everything.
    A dense masked implementation also multiplies the future (masked) entries, n_new·(n_past + n_new) keys
    per query; that equals Σkeys only when n_new = 1 (decode). The causal count is the useful work.
    """
    c = _model_config(config, "forward_flops")
    n_new = _count(n_new, "n_new (tokens fed in this forward pass)", minimum=1)
    n_past = _count(n_past, "n_past (tokens already in the cache)")
    if not isinstance(last_only, bool):
        raise TypeError(f"last_only must be True or False, got {last_only!r}")
    L, d, hd, H, KV = c.n_layers, c.d_model, c.head_dim, c.n_heads, c.n_kv_heads
    keys = n_new * n_past + n_new * (n_new + 1) // 2
    f = {
        "qkv_proj": L * 2 * n_new * d * (H + 2 * KV) * hd,
        "attn_scores": L * 2 * H * hd * keys,
        "attn_values": L * 2 * H * hd * keys,
        "out_proj": L * 2 * n_new * H * hd * d,
        "ffn": L * 2 * n_new * d * c.d_ff * (3 if c.activation == "swiglu" else 2),
        "lm_head": 2 * (1 if last_only else n_new) * d * c.vocab_size,
    }
    f["projections"] = f["qkv_proj"] + f["out_proj"]
    f["attention"] = f["attn_scores"] + f["attn_values"]
    f["total"] = sum(f[k] for k in FLOP_TERMS)
    return f


# ------------------------------------------------------------------------------------ generation schedule

def _schedule(prompt_len, n_new, use_cache) -> list[tuple[int, int]]:
    """(n_fed, n_past) for each of the n_new forward passes of lib.generate."""
    prompt_len = _count(prompt_len, "prompt_len", minimum=1)
    n_new = _count(n_new, "n_new (tokens to generate)", minimum=1)  # lib.generate also needs >= 1
    if not isinstance(use_cache, bool):
        raise TypeError(f"use_cache must be True or False, got {use_cache!r}")
    if use_cache:  # step 0 = prefill of the whole prompt; then one token per step on top of the cache
        return [(prompt_len, 0) if s == 0 else (1, prompt_len + s - 1) for s in range(n_new)]
    return [(prompt_len + s, 0) for s in range(n_new)]  # no cache: re-feed everything generated so far


def generation_steps(config: ModelConfig, prompt_len: int, n_new: int, use_cache: bool) -> list[dict]:
    """Per forward pass of generating ``n_new`` tokens from a ``prompt_len``-token prompt.

    With cache:    step 0 feeds the prompt (prefill); step s ≥ 1 feeds 1 token, n_past = prompt_len + s − 1.
    Without cache: step s feeds the whole sequence so far, prompt_len + s tokens, n_past = 0.
    Each dict has step, n_fed, n_past, n_keys (context after the step), kv_computed (positions whose K, V
    are computed, per layer per sequence = n_fed), kv_read (positions read from the cache = n_past), and
    the forward_flops terms (lm_head on the last position only: generation needs no other logits).
    """
    _model_config(config, "generation_steps")
    rows = []
    for step, (n_fed, n_past) in enumerate(_schedule(prompt_len, n_new, use_cache)):
        rows.append({"step": step, "n_fed": n_fed, "n_past": n_past, "n_keys": n_past + n_fed,
                     "kv_computed": n_fed, "kv_read": n_past,
                     **forward_flops(config, n_fed, n_past, last_only=True)})
    return rows


def kv_computations(prompt_len: int, n_new: int, use_cache: bool) -> list[int]:
    """K/V vectors computed per step (per layer, per sequence): [prompt_len, 1, 1, ...] with the cache,
    [prompt_len, prompt_len+1, ...] without."""
    return [n_fed for n_fed, _ in _schedule(prompt_len, n_new, use_cache)]


def total_kv_computations(prompt_len: int, n_new: int, use_cache: bool) -> int:
    """Sum of kv_computations: prompt_len + n_new − 1 with the cache (= n for a 1-token prompt),
    n_new·prompt_len + n_new(n_new−1)/2 without (= n(n+1)/2 for a 1-token prompt)."""
    return sum(kv_computations(prompt_len, n_new, use_cache))


def generation_flops(config: ModelConfig, prompt_len: int, n_new: int, use_cache: bool) -> dict[str, int]:
    """forward_flops terms summed over every step of generation_steps."""
    rows = generation_steps(config, prompt_len, n_new, use_cache)
    keys = (*FLOP_TERMS, "projections", "attention", "total")
    return {k: sum(r[k] for r in rows) for k in keys}


# ----------------------------------------------------------------------------------------------- presets

def _llama(vocab, L, d, H, KV, ff, max_len, theta=10000.0, eps=1e-5, qkv_bias=False):
    return ModelConfig(vocab_size=vocab, n_layers=L, d_model=d, n_heads=H, n_kv_heads=KV, d_ff=ff,
                       max_seq_len=max_len, norm="rmsnorm", activation="swiglu", positions="rope",
                       rope_theta=theta, norm_eps=eps, bias=False, qkv_bias=qkv_bias, tie_embeddings=False)


def _gpt2(L, d, H):
    return ModelConfig(vocab_size=50257, n_layers=L, d_model=d, n_heads=H, d_ff=4 * d, max_seq_len=1024,
                       norm="layernorm", activation="gelu_tanh", positions="learned", norm_eps=1e-5,
                       bias=True, tie_embeddings=True)


# Shapes from each model's published config.json (Hugging Face hub).
PRESETS: dict[str, ModelConfig] = {
    "gpt2": _gpt2(12, 768, 12),
    "gpt2-medium": _gpt2(24, 1024, 16),
    "llama-2-7b": _llama(32000, 32, 4096, 32, 32, 11008, 4096),
    "llama-2-13b": _llama(32000, 40, 5120, 40, 40, 13824, 4096),
    "llama-2-70b": _llama(32000, 80, 8192, 64, 8, 28672, 4096),
    "llama-3-8b": _llama(128256, 32, 4096, 32, 8, 14336, 8192, theta=500000.0),
    "llama-3-70b": _llama(128256, 80, 8192, 64, 8, 28672, 8192, theta=500000.0),
    "mistral-7b": _llama(32000, 32, 4096, 32, 8, 14336, 32768),  # v0.1 (sliding window 4096 not modelled)
    "qwen2.5-7b": _llama(152064, 28, 3584, 28, 4, 18944, 32768, theta=1e6, eps=1e-6, qkv_bias=True),
}

MLA_PRESETS: dict[str, MLAConfig] = {
    "deepseek-v2": MLAConfig(n_layers=60, kv_lora_rank=512, qk_rope_head_dim=64, d_model=5120),
    "deepseek-v3": MLAConfig(n_layers=61, kv_lora_rank=512, qk_rope_head_dim=64, d_model=7168),
}


def _human(n: float, units, base: int, sep: str = "") -> str:
    for unit in units[:-1]:
        if abs(n) < base:
            return f"{n:.3g}{sep}{unit}"
        n /= base
    return f"{n:.3g}{sep}{units[-1]}"


def describe(config, name: str | None = None, dtype=torch.float16) -> str:
    """One line: name (looked up in the presets if not given), shapes, attention kind, params, KV per token."""
    _model_config(config, "describe", allow_mla=True)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"describe(name=...) must be a string or None, got {type(name).__name__}")
    if name is None:
        presets = {**PRESETS, **MLA_PRESETS}
        name = next((k for k, v in presets.items() if type(v) is type(config) and v == config), "custom")
    kv = (f"{_human(kv_bytes_per_token(config, dtype), ('B', 'KiB', 'MiB', 'GiB'), 1024, ' ')}"
          f"/token in {_dtype_name(dtype)}")
    if isinstance(config, MLAConfig):
        return (f"{name}: {config.n_layers} layers, d_model {config.d_model}, {config.n_heads} heads with "
                f"MLA (caches {config.kv_lora_rank} latent + {config.qk_rope_head_dim} rope values per layer); "
                f"KV cache {kv}")
    c = config
    params = _human(param_count(c), ("", "K", "M", "B", "T"), 1000)
    return (f"{name}: {c.n_layers} layers, d_model {c.d_model}, {c.n_heads} query heads / {c.n_kv_heads} KV "
            f"heads ({c.attention_kind}), head_dim {c.head_dim}, d_ff {c.d_ff} {c.activation}, "
            f"{c.positions} positions; {params} params, KV cache {kv}")
