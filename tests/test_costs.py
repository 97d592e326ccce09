"""Tests of lib.costs (and lib.device's dtype table): published figures, formulas checked against torch, the
one step-cost function per operator, the context convention, the two crossovers, the generation schedule,
the model-name resolver, errors."""
import ast
import math
from fractions import Fraction
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

import lib
from lib.config import ModelConfig
from lib.model import MiniTransformer
from lib.costs import (FLOP_TERMS, OPERATORS, crossover_batch, crossover_context, decode_batch_for_intensity, decode_cost,
                       decode_intensity_limit, describe, forward_flops, generation_flops,
                       generation_steps, kv_bytes_per_token, kv_cache_bytes, kv_computations,
                       kv_memory_crossover_tokens, kv_read_crossover_tokens, kv_values_per_token,
                       param_count, pass_cost, prefill_cost, step_cost, streamed_weight_bytes,
                       total_kv_computations, weight_bytes)
from lib.demo import demo_config
from lib.presets import DEMO_CONFIGS, DEMOS, MLA_PRESETS, MODEL_NAMES, PRESETS, MLAConfig, model_config, resolve_model
from lib.device import COMPUTE_DTYPES, DTYPES, dtype_bytes, dtype_info, dtype_name, resolve_dtype
from lib.roofline import DEFAULT_GPU

TINY = ModelConfig(vocab_size=50, n_layers=2, d_model=16, n_heads=4, n_kv_heads=2, d_ff=24,
                   max_seq_len=64, positions="rope", norm="rmsnorm", activation="swiglu")


# ---------------------------------------------------------------------------------- a reference model
# Built from the parameter layout that lib.MiniTransformer promises, so the formulas can be checked
# against torch (parameter numel and FlopCounterMode) without depending on the real model's code.

class RefModel(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c = c
        Norm = (lambda: nn.LayerNorm(c.d_model)) if c.norm == "layernorm" else (lambda: nn.RMSNorm(c.d_model))
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.pos_emb = nn.Embedding(c.max_seq_len, c.d_model) if c.positions == "learned" else None
        self.layers = nn.ModuleList()
        for _ in range(c.n_layers):
            layer = nn.Module()
            layer.norm1, layer.norm2 = Norm(), Norm()
            layer.q_proj = nn.Linear(c.d_model, c.n_heads * c.head_dim, bias=c.qkv_bias)
            layer.k_proj = nn.Linear(c.d_model, c.n_kv_heads * c.head_dim, bias=c.qkv_bias)
            layer.v_proj = nn.Linear(c.d_model, c.n_kv_heads * c.head_dim, bias=c.qkv_bias)
            layer.o_proj = nn.Linear(c.n_heads * c.head_dim, c.d_model, bias=c.bias)
            if c.activation == "swiglu":
                layer.gate = nn.Linear(c.d_model, c.d_ff, bias=c.bias)
            layer.up = nn.Linear(c.d_model, c.d_ff, bias=c.bias)
            layer.down = nn.Linear(c.d_ff, c.d_model, bias=c.bias)
            self.layers.append(layer)
        self.norm_f = Norm()
        self.lm_head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight

    def forward(self, ids, n_past=0):
        """Dense masked attention over n_past random cached positions + the new ones."""
        c, (B, T) = self.c, ids.shape
        x = self.tok_emb(ids)
        if self.pos_emb is not None:
            x = x + self.pos_emb(torch.arange(n_past, n_past + T))
        for layer in self.layers:
            h = layer.norm1(x)
            q = layer.q_proj(h).view(B, T, c.n_heads, c.head_dim).transpose(1, 2)
            k = layer.k_proj(h).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
            v = layer.v_proj(h).view(B, T, c.n_kv_heads, c.head_dim).transpose(1, 2)
            past = torch.zeros(B, c.n_kv_heads, n_past, c.head_dim)
            k, v = torch.cat([past, k], 2), torch.cat([past, v], 2)
            k, v = k.repeat_interleave(c.n_rep, 1), v.repeat_interleave(c.n_rep, 1)
            att = (q @ k.transpose(-2, -1)) / math.sqrt(c.head_dim)
            mask = torch.ones(T, n_past + T, dtype=torch.bool).tril(n_past)
            att = att.masked_fill(~mask, float("-inf")).softmax(-1)
            x = x + layer.o_proj((att @ v).transpose(1, 2).reshape(B, T, -1))
            h = layer.norm2(x)
            h = F.silu(layer.gate(h)) * layer.up(h) if c.activation == "swiglu" else F.gelu(layer.up(h))
            x = x + layer.down(h)
        return self.lm_head(self.norm_f(x))


@st.composite
def configs(draw):
    """Small random ModelConfigs covering every switch (MHA/GQA/MQA, norms, activations, biases, tying)."""
    n_heads = draw(st.integers(1, 6))
    head_dim = draw(st.sampled_from([2, 4, 8]))
    return ModelConfig(
        vocab_size=draw(st.integers(1, 60)), n_layers=draw(st.integers(1, 3)), d_model=n_heads * head_dim,
        n_heads=n_heads, n_kv_heads=draw(st.sampled_from([d for d in range(1, n_heads + 1) if n_heads % d == 0])),
        d_ff=draw(st.integers(1, 40)), max_seq_len=draw(st.integers(1, 32)),
        norm=draw(st.sampled_from(["layernorm", "rmsnorm"])),
        activation=draw(st.sampled_from(["gelu", "gelu_tanh", "silu", "swiglu"])),
        positions=draw(st.sampled_from(["learned", "rope"])), bias=draw(st.booleans()),
        qkv_bias=draw(st.sampled_from([None, True, False])), tie_embeddings=draw(st.booleans()))


# ------------------------------------------------------------------------------------------------ dtypes

@pytest.mark.parametrize("dtype, expected", [
    (torch.float32, 4), (torch.float16, 2), (torch.bfloat16, 2), (torch.float8_e4m3fn, 1),
    (torch.float8_e5m2, 1), (torch.int8, 1), (torch.float64, 8),
    ("fp32", 4), ("fp16", 2), ("bf16", 2), ("fp8", 1), ("int8", 1), ("int4", 0.5),
    ("FP16", 2), ("float16", 2), ("half", 2), ("bfloat16", 2), ("float32", 4)])
def test_dtype_bytes(dtype, expected):
    assert dtype_bytes(dtype) == expected


def test_dtype_table_and_int4():
    assert list(DTYPES) == ["fp64", "fp32", "bf16", "fp16", "fp8", "int8", "int4"]
    assert {k: d.bytes for k, d in DTYPES.items()} == \
        {"fp64": 8, "fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1, "int8": 1, "int4": 0.5}
    if hasattr(torch, "int4"):  # torch reports itemsize 1 for sub-byte dtypes; we count half a byte
        assert dtype_bytes(torch.int4) == 0.5
    assert COMPUTE_DTYPES == (torch.float32, torch.bfloat16, torch.float16)


@pytest.mark.parametrize("name", list(DTYPES))
def test_dtype_table_round_trips(name):
    """Every name, alias (any case) and torch dtype of a row leads back to that row; lib computes in exactly
    the rows marked so, and resolve_dtype refuses the others saying what it accepts."""
    d = DTYPES[name]
    assert dtype_info(name) is d and d.bits == d.bytes * 8
    for alias in (name, *d.aliases):
        assert dtype_name(alias) == dtype_name(alias.upper()) == name
    for t in d.torch_dtypes:
        assert dtype_name(t) == name
        if t.itemsize * 8 >= d.bits:  # torch stores int4 in whole bytes; the table counts half a byte
            assert t.itemsize * 8 == d.bits or d.bits < 8
    if d.computes:
        assert resolve_dtype(name) is d.torch_dtype and dtype_name(resolve_dtype(name)) == name
        assert all(resolve_dtype(a) is d.torch_dtype for a in d.aliases)
        assert lib.MiniTransformer(ModelConfig(vocab_size=5, n_layers=1, d_model=4, n_heads=1)).to(
            resolve_dtype(name)).tok_emb.weight.dtype is d.torch_dtype
    else:
        with pytest.raises(ValueError, match=rf"unsupported dtype '{name}'; allowed: torch.float32, torch.bfloat16, "
                                             r"torch.float16 \(or the strings fp32, float32, float, bf16"):
            resolve_dtype(name)


def test_dtype_names_are_unique_and_only_in_the_table():
    """One table: no alias or torch dtype in two rows, and no other module of lib spells an alias
    ("half", "bfloat16", ...) as a string: they all ask lib.device.dtype_info."""
    aliases = [a for d in DTYPES.values() for a in (d.name, *d.aliases)]
    torch_dtypes = [t for d in DTYPES.values() for t in d.torch_dtypes]
    assert len(aliases) == len(set(aliases)) and len(torch_dtypes) == len(set(torch_dtypes))
    spelled = {a for d in DTYPES.values() for a in d.aliases if a != "float"}  # "float" is also an English word
    root = Path(lib.__file__).parent
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "device.py" and path.parent == root:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and node.value in spelled:
                found.append(f"{path.relative_to(root)}:{node.lineno} {node.value!r}")
    assert not found, f"dtype aliases spelled outside lib/device.py (use lib.device.dtype_info): {found}"


@pytest.mark.parametrize("bad", ["fp7", "float8", "", torch.bool, torch.complex64])
def test_unknown_dtype_lists_allowed(bad):
    with pytest.raises(ValueError, match=r"unknown dtype .*; allowed: fp64 \(float64/double\), fp32 \(float32/float\), "
                                         r"bf16 \(bfloat16\), fp16 \(float16/half\), fp8, int8, int4, or a torch dtype"):
        dtype_bytes(bad)


@pytest.mark.parametrize("bad", [2, None, 2.0, object()])
def test_dtype_wrong_type(bad):
    with pytest.raises(TypeError, match=r"dtype must be a string or a torch.dtype.*allowed"):
        dtype_bytes(bad)


# --------------------------------------------------------------------------------------- parameters

PUBLISHED_PARAMS = {
    "gpt2": 124_439_808, "gpt2-medium": 354_823_168, "llama-2-7b": 6_738_415_616,
    "llama-2-13b": 13_015_864_320, "llama-2-70b": 68_976_648_192, "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496, "mistral-7b": 7_241_732_096, "qwen2.5-7b": 7_615_616_512,
}


@pytest.mark.parametrize("name", sorted(PUBLISHED_PARAMS))
def test_published_param_counts(name):
    assert param_count(PRESETS[name]) == PUBLISHED_PARAMS[name]


def test_presets_are_the_published_shapes():
    assert set(PUBLISHED_PARAMS) <= set(PRESETS)
    assert all(isinstance(c, ModelConfig) for c in PRESETS.values())
    g = PRESETS["gpt2"]
    assert (g.vocab_size, g.n_layers, g.d_model, g.n_heads, g.d_ff, g.max_seq_len) == (50257, 12, 768, 12, 3072, 1024)
    assert (g.norm, g.activation, g.positions, g.bias, g.tie_embeddings) == \
        ("layernorm", "gelu_tanh", "learned", True, True)
    l2 = PRESETS["llama-2-7b"]
    assert (l2.norm, l2.activation, l2.positions, l2.bias, l2.tie_embeddings) == \
        ("rmsnorm", "swiglu", "rope", False, False)
    assert (l2.n_kv_heads, l2.d_ff, l2.max_seq_len, l2.rope_theta, l2.norm_eps) == (32, 11008, 4096, 1e4, 1e-5)
    assert PRESETS["llama-2-70b"].attention_kind == "GQA" and PRESETS["llama-2-70b"].n_kv_heads == 8
    l3 = PRESETS["llama-3-8b"]
    assert (l3.vocab_size, l3.n_kv_heads, l3.d_ff, l3.max_seq_len, l3.rope_theta) == (128256, 8, 14336, 8192, 5e5)
    q = PRESETS["qwen2.5-7b"]
    assert (q.qkv_bias, q.bias, q.tie_embeddings, q.rope_theta, q.max_seq_len) == (True, False, False, 1e6, 32768)
    assert all(c.head_dim == 128 for n, c in PRESETS.items() if not n.startswith("gpt2"))


def test_param_count_matches_reference_model_examples():
    for c in (TINY, PRESETS["gpt2"].replace(n_layers=1, vocab_size=100)):
        assert param_count(c) == sum(p.numel() for p in RefModel(c).parameters())


@settings(max_examples=50, deadline=None)
@given(configs())
def test_param_count_matches_reference_model(c):
    assert param_count(c) == sum(p.numel() for p in RefModel(c).parameters())


@settings(max_examples=50, deadline=None)
@given(configs())
def test_param_count_matches_minitransformer(c):
    MiniTransformer = _lib_or_skip().MiniTransformer
    assert param_count(c) == sum(p.numel() for p in MiniTransformer(c).parameters())


def _lib_or_skip():
    try:
        import lib
        lib.MiniTransformer, lib.generate, lib.KVCache  # noqa: B018
    except (ImportError, AttributeError):
        pytest.skip("lib.MiniTransformer / generate / KVCache not available yet")
    return lib


def test_weight_bytes():
    assert weight_bytes(PRESETS["llama-2-7b"]) == 2 * 6_738_415_616  # the "7B ≈ 13.5 GB in fp16" figure
    assert weight_bytes(PRESETS["llama-2-7b"], "fp32") == 4 * 6_738_415_616
    assert weight_bytes(PRESETS["llama-2-7b"], "int4") == 6_738_415_616 // 2
    odd = ModelConfig(vocab_size=1, n_layers=1, d_model=1, n_heads=1, d_ff=1, max_seq_len=1, norm="rmsnorm",
                      bias=False, positions="learned")
    assert param_count(odd) % 2 == 1
    assert weight_bytes(odd, "int4") == (param_count(odd) + 1) // 2  # half a byte rounds up


# ---------------------------------------------------------------------------------------------- KV cache

KV_PER_TOKEN_FP16 = {
    "gpt2": 36_864, "gpt2-medium": 98_304, "llama-2-7b": 524_288, "llama-2-13b": 819_200,
    "llama-2-70b": 327_680, "llama-3-8b": 131_072, "llama-3-70b": 327_680, "mistral-7b": 131_072,
    "qwen2.5-7b": 57_344,
}


@pytest.mark.parametrize("name", sorted(KV_PER_TOKEN_FP16))
def test_kv_bytes_per_token_presets(name):
    c, fp16 = PRESETS[name], KV_PER_TOKEN_FP16[name]
    assert kv_bytes_per_token(c) == fp16 == 2 * c.n_layers * c.n_kv_heads * c.head_dim * 2
    assert kv_bytes_per_token(c, torch.bfloat16) == fp16
    assert kv_bytes_per_token(c, "fp32") == 2 * fp16
    assert kv_bytes_per_token(c, torch.float8_e4m3fn) == fp16 // 2
    assert kv_bytes_per_token(c, "int4") == fp16 // 4


def test_kv_known_figures():
    assert kv_bytes_per_token(PRESETS["llama-2-7b"]) == 524_288  # 0.5 MiB per token
    assert kv_cache_bytes(PRESETS["llama-2-7b"], 4096) == 2 * 1024**3  # full 4k context: 2 GiB
    assert kv_bytes_per_token(PRESETS["llama-3-8b"]) == 131_072  # GQA: 4x less than MHA with 32 heads
    assert kv_bytes_per_token(PRESETS["gpt2"]) == 36_864


def test_memory_crossover_with_a_cache_in_another_format():
    w = weight_bytes("llama-2-7b", "fp16")
    assert kv_memory_crossover_tokens("llama-2-7b", "fp16", kv_dtype="int8") == w / (256 * 1024)
    assert kv_memory_crossover_tokens("llama-2-7b", "fp16", kv_dtype=None) == kv_memory_crossover_tokens("llama-2-7b")


def test_mla():
    v3 = MLA_PRESETS["deepseek-v3"]
    assert v3.cached_values_per_layer == 512 + 64
    assert kv_bytes_per_token(v3, torch.bfloat16) == 61 * 576 * 2 == 70_272
    assert kv_bytes_per_token(MLA_PRESETS["deepseek-v2"], "bf16") == 60 * 576 * 2 == 69_120
    assert kv_cache_bytes(v3, 1000, 3, "bf16") == 70_272 * 3000
    assert v3.mha_values_per_layer == 2 * 128 * 128  # DeepSeek-V2's baseline: MHA with d_h = 128
    assert round(v3.mha_values_per_layer / v3.cached_values_per_layer, 1) == 56.9  # "about 57x", not 71x
    with pytest.raises(ValueError, match=r"MLAConfig.kv_lora_rank must be an integer >= 1, got 0"):
        MLAConfig(n_layers=1, kv_lora_rank=0, qk_rope_head_dim=64)
    with pytest.raises(TypeError, match=r"an MLAConfig describes only the KV cache .* so it works with "
                                        r"kv_bytes_per_token, kv_cache_bytes and describe; this needs a lib.ModelConfig"):
        param_count(v3)
    with pytest.raises(ValueError, match=r"'deepseek-v3' is an MLA preset: lib.costs models only its KV cache"):
        weight_bytes("deepseek-v3")
    assert kv_bytes_per_token("deepseek-v3", "bf16") == 70_272 and describe("deepseek-v3").startswith("deepseek-v3: ")


@settings(max_examples=50, deadline=None)
@given(configs(), st.integers(0, 10**6), st.integers(0, 512), st.sampled_from(["fp32", "fp16", "fp8", "int4"]))
def test_kv_cache_bytes_is_linear(c, n_tokens, batch, dtype):
    got = kv_cache_bytes(c, n_tokens, batch_size=batch, dtype=dtype)
    assert isinstance(got, int)
    assert got == kv_bytes_per_token(c, dtype) * n_tokens * batch
    assert got == 2 * c.n_layers * c.n_kv_heads * c.head_dim * n_tokens * batch * DTYPES[dtype].bytes
    assert kv_values_per_token(c) == 2 * c.n_layers * c.n_kv_heads * c.head_dim


@settings(max_examples=50, deadline=None)
@given(configs())
def test_kv_independent_of_ffn_and_vocab(c):
    assert kv_bytes_per_token(c) == kv_bytes_per_token(c.replace(d_ff=c.d_ff + 7, vocab_size=c.vocab_size + 3))


def test_kv_memory_crossover():
    c = PRESETS["llama-2-7b"]
    x = kv_memory_crossover_tokens(c)
    assert x == 6_738_415_616 * 2 / 524_288 == 25_705.015625  # ~25.7k tokens, e.g. batch 8 x 3.2k context
    assert kv_cache_bytes(c, math.floor(x)) < weight_bytes(c) <= kv_cache_bytes(c, math.ceil(x))
    assert kv_memory_crossover_tokens("llama-2-7b", "int4") == x  # the bytes per value cancel


@pytest.mark.parametrize("args, exc, msg", [
    ((-1,), ValueError, r"n_tokens must be an integer >= 0, got -1"),
    ((10, -2), ValueError, r"batch_size must be an integer >= 0, got -2"),
    ((1.5,), ValueError, r"n_tokens must be an integer >= 0, got 1.5"),
    ((True,), ValueError, r"n_tokens must be an integer >= 0, got True"),
    ((10, 1, "fp7"), ValueError, r"unknown dtype 'fp7'; allowed"),
])
def test_kv_cache_bytes_errors(args, exc, msg):
    with pytest.raises(exc, match=msg):
        kv_cache_bytes(PRESETS["gpt2"], *args)


def test_kv_cache_bytes_zero_is_zero():
    assert kv_cache_bytes(PRESETS["gpt2"], 0) == 0 == kv_cache_bytes(PRESETS["gpt2"], 5, batch_size=0)


COST_FUNCTIONS = [param_count, weight_bytes, streamed_weight_bytes, kv_bytes_per_token, describe,
                  lambda c: kv_cache_bytes(c, 1), lambda c: forward_flops(c, 1), lambda c: decode_cost(c, 2),
                  lambda c: generation_steps(c, 1, 1, True), kv_memory_crossover_tokens, kv_read_crossover_tokens]


@pytest.mark.parametrize("fn", COST_FUNCTIONS)
@pytest.mark.parametrize("bad", [None, {"vocab_size": 10}, 7])
def test_non_config_rejected(fn, bad):
    with pytest.raises(TypeError, match=r"model must be a lib.ModelConfig or a name \(chat, draft, tiny, chat-gqa, lm, lm-draft, gpt2, "
                                        rf".*\), got {type(bad).__name__}"):
        fn(bad)


@pytest.mark.parametrize("fn", COST_FUNCTIONS)
def test_every_cost_function_takes_a_name(fn):
    assert fn("llama-2-7b") == fn(PRESETS["llama-2-7b"]) and fn("tiny") == fn(demo_config("tiny"))
    with pytest.raises(ValueError, match=r"unknown model 'llama-9b'; allowed: a lib.ModelConfig or one of: chat, "
                                         r"draft, tiny, chat-gqa, lm, lm-draft, gpt2, gpt2-medium, llama-2-7b"):
        fn("llama-9b")


# ------------------------------------------------------------------------------------------------- FLOPs

def test_forward_flops_by_hand():
    c = PRESETS["gpt2"]
    f = forward_flops(c, 5, n_past=3)
    keys = 4 + 5 + 6 + 7 + 8  # token i sees 3 + i + 1 keys
    assert f["qkv_proj"] == 12 * 2 * 5 * 768 * 3 * 768
    assert f["attn_scores"] == f["attn_values"] == 12 * 2 * 12 * 64 * keys
    assert f["out_proj"] == 12 * 2 * 5 * 768 * 768
    assert f["ffn"] == 12 * 2 * 5 * 768 * 3072 * 2
    assert f["lm_head"] == 2 * 5 * 768 * 50257
    assert f["projections"] == f["qkv_proj"] + f["out_proj"]
    assert f["attention"] == f["attn_scores"] + f["attn_values"]
    assert f["total"] == sum(f[k] for k in FLOP_TERMS)
    # GQA shrinks K/V projections only; SwiGLU has three FFN matrices
    l3 = forward_flops(PRESETS["llama-3-8b"], 1)
    assert l3["qkv_proj"] == 32 * 2 * 4096 * (32 + 2 * 8) * 128
    assert l3["ffn"] == 32 * 2 * 4096 * 14336 * 3


@settings(max_examples=50, deadline=None)
@given(configs(), st.integers(1, 50), st.integers(1, 50), st.integers(0, 100))
def test_forward_flops_split_is_additive(c, a, b, past):
    """Feeding a+b tokens at once costs the same as feeding a, then b on top of the cache."""
    whole, first, second = forward_flops(c, a + b, past), forward_flops(c, a, past), forward_flops(c, b, past + a)
    assert all(whole[k] == first[k] + second[k] for k in whole)


def test_forward_flops_last_only_counts_one_lm_head_row():
    c = PRESETS["gpt2"]
    all_rows, last = forward_flops(c, 5, 3), forward_flops(c, 5, 3, last_only=True)
    assert last["lm_head"] == 2 * 768 * 50257 and all_rows["lm_head"] == 5 * last["lm_head"]
    assert all(all_rows[k] == last[k] for k in ("projections", "ffn", "attention"))
    assert last["total"] == all_rows["total"] - 4 * last["lm_head"]
    with pytest.raises(ValueError, match="last_only must be True or False, got 'yes'"):
        forward_flops(c, 5, 3, last_only="yes")


def test_lm_head_flops_of_the_real_model_match():
    """lib's own model under torch's FLOP counter: the lm_head matmul counts 1 row with last_only, T without."""
    model = MiniTransformer(TINY.replace(tie_embeddings=False))
    for last_only in (False, True):
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model(torch.zeros(1, 6, dtype=torch.long), last_only=last_only)
        linear = sum(v for k, v in counter.get_flop_counts()["Global"].items() if "mm" in str(k) and "bmm" not in str(k))
        f = forward_flops(TINY, 6, 0, last_only=last_only)
        assert linear == f["projections"] + f["ffn"] + f["lm_head"]


def _measured(c, n_new, n_past):
    """FLOPs counted by torch while running the reference model: {linear-ish total, attention matmuls}."""
    model = RefModel(c)
    with FlopCounterMode(display=False) as counter:
        model(torch.zeros(1, n_new, dtype=torch.long), n_past=n_past)
    ops = counter.get_flop_counts()["Global"]
    attn = sum(v for k, v in ops.items() if "bmm" in str(k) and "addmm" not in str(k))
    return sum(ops.values()) - attn, attn


@pytest.mark.parametrize("c", [TINY, TINY.replace(norm="layernorm", activation="gelu", positions="learned",
                                                  n_kv_heads=4, tie_embeddings=False)])
@pytest.mark.parametrize("n_new, n_past", [(1, 0), (1, 9), (7, 0), (4, 5)])
def test_forward_flops_match_torch_flop_counter(c, n_new, n_past):
    f = forward_flops(c, n_new, n_past)
    linear, attn = _measured(c, n_new, n_past)
    assert linear == f["projections"] + f["ffn"] + f["lm_head"]
    # the dense masked matmul also computes the future entries: n_new x (n_past + n_new) per head
    assert attn == 4 * c.n_layers * c.n_heads * c.head_dim * n_new * (n_past + n_new)
    assert (attn == f["attention"]) == (n_new == 1)


@pytest.mark.parametrize("args, exc, msg", [
    ((0,), ValueError, r"n_new \(tokens fed per sequence in this pass\) must be an integer >= 1, got 0"),
    ((3, -1), ValueError, r"n_past \(tokens already cached per sequence\) must be an integer >= 0, got -1"),
    ((2.0,), ValueError, r"n_new .* must be an integer >= 1, got 2.0"),
])
def test_forward_flops_errors(args, exc, msg):
    with pytest.raises(exc, match=msg):
        forward_flops(TINY, *args)


# ------------------------------------------------------------------------------------ generation schedule

def test_schedule_with_cache():
    rows = generation_steps(TINY, prompt_len=5, n_new=4, use_cache=True)
    assert [(r["step"], r["n_fed"], r["n_past"], r["n_keys"]) for r in rows] == \
        [(0, 5, 0, 5), (1, 1, 5, 6), (2, 1, 6, 7), (3, 1, 7, 8)]
    assert [r["kv_computed"] for r in rows] == [5, 1, 1, 1] == kv_computations(5, 4, True)
    assert [r["kv_read"] for r in rows] == [0, 5, 6, 7]
    assert all(r[k] == v for r in rows
               for k, v in forward_flops(TINY, r["n_fed"], r["n_past"], last_only=True).items())


def test_schedule_without_cache():
    rows = generation_steps(TINY, prompt_len=5, n_new=4, use_cache=False)
    assert [(r["step"], r["n_fed"], r["n_past"], r["n_keys"]) for r in rows] == \
        [(0, 5, 0, 5), (1, 6, 0, 6), (2, 7, 0, 7), (3, 8, 0, 8)]
    assert [r["kv_computed"] for r in rows] == [5, 6, 7, 8] == kv_computations(5, 4, False)
    assert [r["kv_read"] for r in rows] == [0, 0, 0, 0]


@pytest.mark.parametrize("use_cache", [True, False])
@pytest.mark.parametrize("prompt_len, n_new", [(1, 1), (1, 6), (5, 6), (3, 1)])
def test_schedule_matches_a_real_trace(use_cache, prompt_len, n_new):
    """The counts lib.generate records by instrumentation equal the analytic schedule."""
    lib = _lib_or_skip()
    torch.manual_seed(0)
    model = lib.MiniTransformer(TINY)
    trace = lib.generate(model, torch.arange(1, prompt_len + 1)[None], n_new, use_cache=use_cache, trace=True).trace
    rows = generation_steps(TINY, prompt_len, n_new, use_cache)
    assert len(trace) == len(rows) == n_new
    assert [s.n_fed for s in trace] == [r["n_fed"] for r in rows]
    assert [s.n_keys for s in trace] == [r["n_keys"] for r in rows]
    for layer in range(TINY.n_layers):
        assert trace.kv_computed(layer) == [r["kv_computed"] for r in rows]
        assert trace.kv_computed(layer) == kv_computations(prompt_len, n_new, use_cache)
        assert trace.kv_read(layer) == [r["kv_read"] for r in rows]


def test_kv_cache_bytes_matches_kvcache_nbytes():
    lib = _lib_or_skip()
    for dtype in (torch.float16, torch.float32, torch.bfloat16):
        assert lib.KVCache(TINY, 3, 40, dtype=dtype).nbytes == kv_cache_bytes(TINY, 40, 3, dtype)


@pytest.mark.parametrize("n", range(1, 201))
def test_total_kv_computations_one_token_prompt(n):
    assert total_kv_computations(1, n, use_cache=True) == n
    assert total_kv_computations(1, n, use_cache=False) == n * (n + 1) // 2


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 300), st.integers(1, 300))
def test_total_kv_computations_closed_forms(p, n):
    assert total_kv_computations(p, n, True) == p + n - 1
    assert total_kv_computations(p, n, False) == n * p + n * (n - 1) // 2
    assert len(kv_computations(p, n, True)) == len(kv_computations(p, n, False)) == n


@settings(max_examples=50, deadline=None)
@given(configs(), st.integers(1, 20), st.integers(1, 20))
def test_cache_never_costs_more_and_prefill_matches(c, p, n):
    cached, uncached = generation_steps(c, p, n, True), generation_steps(c, p, n, False)
    assert cached[0] == uncached[0]  # step 0 is the same full forward over the prompt
    assert [r["n_keys"] for r in cached] == [r["n_keys"] for r in uncached] == list(range(p, p + n))
    assert all(a["total"] <= b["total"] for a, b in zip(cached, uncached))
    # same final context; the cache only removes recomputation of history
    g_c, g_u = generation_flops(c, p, n, True), generation_flops(c, p, n, False)
    # generation applies lm_head to the last position of every pass only, cache or not
    assert g_c["lm_head"] == g_u["lm_head"] == 2 * n * c.d_model * c.vocab_size


@pytest.mark.parametrize("args, exc, msg", [
    ((0, 3, True), ValueError, r"prompt_len must be an integer >= 1, got 0"),
    ((2, -1, True), ValueError, r"n_new \(tokens to generate\) must be an integer >= 1, got -1"),
    ((2, 0, False), ValueError, r"n_new \(tokens to generate\) must be an integer >= 1, got 0"),
    ((2, 3, 1), ValueError, r"use_cache must be True or False, got 1"),
    ((2, 3, "yes"), ValueError, r"use_cache must be True or False, got 'yes'"),
    ((2.5, 3, True), ValueError, r"prompt_len must be an integer >= 1, got 2.5"),
])
def test_generation_errors(args, exc, msg):
    for call in (lambda: generation_steps(TINY, *args), lambda: kv_computations(*args),
                 lambda: total_kv_computations(*args), lambda: generation_flops(TINY, *args)):
        with pytest.raises(exc, match=msg):
            call()


# ------------------------------------------------------------------------------------ C8, with the numbers

def test_c8_per_step_scaling():
    """Per decode step with a cache: attention ∝ t, projections/FFN constant.
    Without: attention ∝ t(t+1)/2 ~ t², projections/FFN ∝ t."""
    c = PRESETS["llama-3-8b"]
    unit = 4 * c.n_layers * c.n_heads * c.head_dim  # scores + values FLOPs per (query, key) pair
    cached = generation_steps(c, 1, 64, True)[1:]  # decode steps only
    assert all(r["attention"] == unit * r["n_keys"] for r in cached)  # linear in t
    assert len({r["projections"] for r in cached}) == len({r["ffn"] for r in cached}) == 1  # constant
    per_token = forward_flops(c, 1)
    uncached = generation_steps(c, 1, 64, False)
    for r in uncached:
        t = r["n_keys"]
        assert r["attention"] == unit * t * (t + 1) // 2
        assert r["projections"] == t * per_token["projections"] and r["ffn"] == t * per_token["ffn"]
    # doubling t: 2x attention with cache, ~4x without (exactly (2t+1)/(t+1) * 2)
    t1, t2 = uncached[31], uncached[63]
    assert t2["attention"] / t1["attention"] == pytest.approx(64 * 65 / (32 * 33))


@pytest.mark.parametrize("n, tol", [(500, 0.02), (2000, 0.005)])
def test_c8_totals_scaling(n, tol):
    """Over n steps: attention n² with cache vs n³ without; projections/FFN n vs n²."""
    c = PRESETS["gpt2"]
    ratio = {}
    for use_cache in (True, False):
        small, big = generation_flops(c, 1, n, use_cache), generation_flops(c, 1, 2 * n, use_cache)
        ratio[use_cache] = {k: big[k] / small[k] for k in ("attention", "projections", "ffn")}
    assert ratio[True]["attention"] == pytest.approx(4, rel=tol)
    assert ratio[False]["attention"] == pytest.approx(8, rel=tol)
    assert ratio[True]["projections"] == pytest.approx(2, rel=tol) and ratio[True]["ffn"] == pytest.approx(2, rel=tol)
    assert ratio[False]["projections"] == pytest.approx(4, rel=tol) and ratio[False]["ffn"] == pytest.approx(4, rel=tol)
    # exact closed forms with a 1-token prompt: Σ t and Σ t(t+1)/2
    unit = 4 * c.n_layers * c.n_heads * c.head_dim
    assert generation_flops(c, 1, n, True)["attention"] == unit * n * (n + 1) // 2
    assert generation_flops(c, 1, n, False)["attention"] == unit * n * (n + 1) * (n + 2) // 6


# ------------------------------------------------------------------------------------------------ describe

def test_describe():
    s = describe(PRESETS["llama-3-8b"])
    assert s.startswith("llama-3-8b: 32 layers, d_model 4096, 32 query heads / 8 KV heads (GQA)")
    assert "8.03B params" in s and "128 KiB/token in fp16" in s
    assert describe(PRESETS["gpt2"]).startswith("gpt2: 12 layers") and "(MHA)" in describe(PRESETS["gpt2"])
    assert describe(TINY).startswith("custom: ") and describe(TINY, name="tiny").startswith("tiny: ")
    assert "MLA" in describe(MLA_PRESETS["deepseek-v3"]) and "68.6 KiB/token in bf16" in \
        describe(MLA_PRESETS["deepseek-v3"], dtype="bf16")
    assert "(MQA)" in describe(TINY.replace(n_kv_heads=1))
    with pytest.raises(TypeError, match=r"name=.*must be a string or None"):
        describe(TINY, name=3)


# ------------------------------------------------------------------------------------ the model resolver

def test_resolver_names_and_configs():
    assert MODEL_NAMES == (*DEMOS, *PRESETS) == ("chat", "draft", "tiny", "chat-gqa", "lm", "lm-draft", *PRESETS)
    assert resolve_model("llama-2-7b") == ("llama-2-7b", PRESETS["llama-2-7b"])
    assert model_config("llama-2-7b") is PRESETS["llama-2-7b"]
    for name in DEMOS:  # read from the checkpoint's metadata, no weights: the config load_demo builds
        assert resolve_model(name) == (name, lib.load_demo(name)[0].config) == (name, demo_config(name))
        assert resolve_model(demo_config(name))[0] == name  # a config is named after the model it equals
    assert resolve_model(PRESETS["gpt2"])[0] == "gpt2" and resolve_model(TINY) == ("custom", TINY)
    assert resolve_model("mine", extra={"mine": TINY}) == ("mine", TINY)
    assert resolve_model(TINY, extra={"m": TINY})[0] == "m"
    assert resolve_model("deepseek-v3", allow_mla=True) == ("deepseek-v3", MLA_PRESETS["deepseek-v3"])
    assert resolve_model(MLA_PRESETS["deepseek-v2"], allow_mla=True)[0] == "deepseek-v2"


def test_one_registry_of_names_that_needs_no_demo_weights(monkeypatch, tmp_path):
    import lib.demo
    import lib.presets
    assert (lib.PRESETS, lib.costs.MLAConfig, lib.DEMOS, lib.costs.resolve_model) == \
        (lib.presets.PRESETS, lib.presets.MLAConfig, lib.presets.DEMOS, lib.presets.resolve_model)
    for shim in ("PRESETS", "MLA_PRESETS", "MODEL_NAMES", "dtype_bytes"):  # one home each: lib.presets, lib.device
        assert not hasattr(lib.costs, shim), shim
    assert set(lib.presets.DEMO_CONFIGS) == set(DEMOS)
    monkeypatch.setattr(lib.demo, "ASSETS", tmp_path)  # no demo weights on disk: naming one opens no file
    lib.demo.demo_config.cache_clear()
    try:
        assert resolve_model("llama-2-7b") == ("llama-2-7b", PRESETS["llama-2-7b"])
        assert resolve_model(PRESETS["gpt2"])[0] == "gpt2" and resolve_model(TINY) == ("custom", TINY)
        assert kv_cache_bytes("gpt2", 10) == 10 * 36_864 and model_config(TINY) is TINY
        assert resolve_model("chat") == ("chat", DEMO_CONFIGS["chat"]) and kv_cache_bytes("chat", 1) == 2 * 4 * 64 * 2
        with pytest.raises(FileNotFoundError, match=r"rebuild them with `python -m lib.train chat`"):
            lib.demo.demo_config("chat")  # the checkpoint itself is still needed to read it
    finally:
        lib.demo.demo_config.cache_clear()


def test_each_shipped_checkpoint_carries_the_shape_presets_names():
    for name in DEMOS:  # lib.presets' data and the file's metadata are one shape (rebuild or edit one: both)
        if lib.demo.demo_path(name).is_file():
            assert demo_config(name) == DEMO_CONFIGS[name], name


@pytest.mark.parametrize("call, exc, msg", [
    (lambda: resolve_model("gpt-5"), ValueError,
     "unknown model 'gpt-5'; allowed: a lib.ModelConfig or one of: chat, draft, tiny, chat-gqa, lm, lm-draft, gpt2, gpt2-medium, llama-2-7b, "
     "llama-2-13b, llama-2-70b, llama-3-8b, llama-3-70b, mistral-7b, qwen2.5-7b"),
    (lambda: resolve_model("gpt-5", extra={"larger": TINY}), ValueError, "one of: larger, chat, draft, tiny, chat-gqa, lm, lm-draft, gpt2,"),
    (lambda: resolve_model("gpt-5", allow_mla=True), ValueError, "qwen2.5-7b, deepseek-v2, deepseek-v3"),
    (lambda: resolve_model(7), TypeError, "model must be a lib.ModelConfig or a name (chat, draft, tiny, chat-gqa, lm, lm-draft, gpt2"),
    (lambda: resolve_model("deepseek-v3"), ValueError,
     "'deepseek-v3' is an MLA preset: lib.costs models only its KV cache, not its weights or FLOPs, so it works "
     "with kv_bytes_per_token, kv_cache_bytes and describe; here choose one of: chat, draft, tiny, chat-gqa, lm, lm-draft, gpt2"),
    (lambda: resolve_model(MLA_PRESETS["deepseek-v3"]), TypeError, "an MLAConfig describes only the KV cache"),
    (lambda: demo_config("huge"), ValueError, "unknown demo model 'huge'; available: chat, draft, tiny"),
])
def test_resolver_errors_list_the_allowed_names(call, exc, msg):
    with pytest.raises(exc) as e:
        call()
    assert msg in str(e.value)


# -------------------------------------------------------------------- one step: per operator, one convention

# 1 layer, d_model 4, 1 head, d_ff 8, vocab 10, 16 learned positions, tied: small enough to count by hand.
# parameters: embeddings 10·4 + positions 16·4 = 104; layer: 2 LayerNorms 2·8 = 16, q/k/v/o 4·(4·4 + 4) = 80,
# FFN (4·8 + 8) + (8·4 + 4) = 76 -> 172; final norm 8; lm_head tied. Total 284 (1136 bytes in fp32).
# A pass reads all of them but the position table (16·4 = 64, only gathered): 220 -> 880 bytes in fp32.
HAND = ModelConfig(vocab_size=10, n_layers=1, d_model=4, n_heads=1, d_ff=8, max_seq_len=16)
HAND_W32, HAND_KV32 = 880, 2 * 1 * 1 * 4 * 4  # weights read per step; K and V of one token, 32 bytes


def test_hand_counted_config():
    assert param_count(HAND) == 284 and weight_bytes(HAND, "fp32") == 1136
    assert streamed_weight_bytes(HAND, "fp32") == HAND_W32 and kv_bytes_per_token(HAND, "fp32") == HAND_KV32


def test_decode_step_by_hand_per_operator():
    # decode at context 4: the new token attends to 4 positions (3 cached + itself).
    # qkv 2·4·(1+2)·4 = 96, scores 2·4·4 = 32, values 32, out 2·4·4 = 32, FFN 2·4·8·2 = 128, lm_head 2·4·10 = 80
    c = decode_cost(HAND, context=4, batch=1, dtype="fp32")
    assert (c.phase, c.batch, c.n_new, c.n_past, c.context, c.dtype) == ("decode", 1, 1, 3, 4, "fp32")
    ops = c.by_operator
    assert list(ops) == list(OPERATORS)
    assert {k: op.flops for k, op in ops.items()} == {"norms": 0, "qkv_proj": 96, "kv_write": 0, "attn_scores": 32,
                                                     "attn_values": 32, "out_proj": 32, "ffn": 128, "lm_head": 80}
    assert {k: op.streamed_weight_bytes for k, op in ops.items()} == {
        "norms": 4 * 24, "qkv_proj": 4 * 60, "kv_write": 0, "attn_scores": 0, "attn_values": 0, "out_proj": 4 * 20,
        "ffn": 4 * 76, "lm_head": 4 * 40}  # lm_head reads the tied 10 x 4 token table whole
    # context 4 read, 1 written: K in the scores, V in the weighted sum, 16 bytes per token each
    assert (ops["attn_scores"].kv_read_bytes, ops["attn_values"].kv_read_bytes, ops["kv_write"].kv_write_bytes) == \
        (4 * 16, 4 * 16, 32)
    assert (c.flops, c.streamed_weight_bytes, c.kv_read_bytes, c.kv_write_bytes, c.bytes) == (400, 880, 128, 32, 1040)
    assert c.intensity == 400 / 1040 and c.kv_read_share == 128 / 1040 and c.tokens == 1


@settings(max_examples=60, deadline=None)
@given(configs(), st.integers(1, 40), st.integers(0, 40), st.integers(1, 6),
       st.sampled_from(["fp32", "bf16", "fp8", "int4"]), st.booleans())
def test_step_totals_are_the_sums_of_the_operators(c, n_new, n_past, batch, dtype, last_only):
    s = step_cost(c, n_past + n_new, n_new, batch, dtype, last_only)
    ops = s.by_operator.values()
    assert s.flops == sum(op.flops for op in ops) and s.bytes == sum(op.bytes for op in ops)
    assert s.bytes == s.streamed_weight_bytes + s.kv_read_bytes + s.kv_write_bytes
    assert s.streamed_weight_bytes == sum(op.streamed_weight_bytes for op in ops) == streamed_weight_bytes(c, dtype)
    assert s.kv_read_bytes == kv_cache_bytes(c, n_past + n_new, batch, dtype)  # the whole context, per sequence
    assert s.kv_write_bytes == kv_cache_bytes(c, n_new, batch, dtype)  # the new positions
    f = forward_flops(c, n_new, n_past, last_only=last_only)
    assert all(s.by_operator[k].flops == batch * f[k] for k in FLOP_TERMS) and s.flops == batch * f["total"]
    assert s == pass_cost(c, n_new, n_past, batch, dtype, last_only)


@settings(max_examples=50, deadline=None)
@given(configs(), st.sampled_from(["fp64", "fp32", "bf16", "fp8"]))
def test_weights_read_are_the_stored_weights_minus_the_lookup_tables(c, dtype):
    lookup = (c.max_seq_len * c.d_model if c.positions == "learned" else 0) + \
        (0 if c.tie_embeddings else c.vocab_size * c.d_model)
    assert streamed_weight_bytes(c, dtype) == weight_bytes(c, dtype) - lookup * DTYPES[dtype].bytes
    assert kv_memory_crossover_tokens(c, dtype) - kv_read_crossover_tokens(c, dtype) == \
        pytest.approx(lookup * DTYPES[dtype].bytes / kv_bytes_per_token(c, dtype))


@settings(max_examples=40, deadline=None)
@given(configs(), st.integers(1, 60), st.integers(1, 5))
def test_decode_at_context_t_reads_t_tokens_and_writes_one(c, t, batch):
    d = decode_cost(c, t, batch, "fp32")
    per_token = kv_bytes_per_token(c, "fp32")
    assert (d.n_new, d.n_past, d.context) == (1, t - 1, t)
    assert d.kv_read_bytes == batch * t * per_token and d.kv_write_bytes == batch * per_token
    # the attention multiplies over exactly those t keys, for every query head
    assert d.by_operator["attn_scores"].flops == batch * 2 * c.n_layers * c.n_heads * c.head_dim * t
    assert d == pass_cost(c, 1, t - 1, batch, "fp32") == step_cost(c, t, 1, batch, "fp32")
    p = prefill_cost(c, t, batch, "fp32")  # a prefill of t tokens: context t, reads and writes t tokens
    assert (p.context, p.kv_read_bytes, p.kv_write_bytes) == (t, batch * t * per_token, batch * t * per_token)


@pytest.mark.parametrize("prompt", ["<s>", "<s>深度"])
def test_context_is_the_cache_length_after_the_step_of_a_real_run(prompt):
    """The convention against lib.generate: each traced step's context is the positions its query attended to
    and the cache length after the step; the step reads those positions' K/V and writes the new ones."""
    model, tok = lib.load_demo("tiny")
    trace = lib.generate(model, tok.encode(prompt), 6, trace=True).trace
    for s in trace:
        cost = pass_cost("tiny", s.n_fed, s.kv_read[0], 1, "fp32")
        assert cost.context == s.n_keys == s.cache_len == s.kv_read[0] + s.kv_computed[0]
        assert cost.kv_read_bytes == lib.kv_cache_bytes(model.config, s.cache_len, 1, torch.float32)
        assert cost.kv_write_bytes == lib.kv_cache_bytes(model.config, s.n_fed, 1, torch.float32)


def test_step_cost_reuses_lib_costs_for_real_shapes():
    for name in ("llama-2-7b", "llama-3-8b", "qwen2.5-7b"):
        cfg = PRESETS[name]
        c = pass_cost(name, n_new=5, n_past=100, batch=3, dtype="bf16")
        assert c.flops == 3 * forward_flops(cfg, 5, 100, last_only=True)["total"]
        # untied embedding (vocab × d) only gathered; RoPE, so no position table
        assert c.streamed_weight_bytes == weight_bytes(cfg, "bf16") - 2 * cfg.vocab_size * cfg.d_model
        assert c.kv_read_bytes == lib.kv_cache_bytes(cfg, 105, 3, "bf16")
        assert c.kv_write_bytes == lib.kv_cache_bytes(cfg, 5, 3, "bf16")
        assert c.phase == "prefill"  # several tokens fed: a chunk of prefill on top of a cached prefix


def test_prefill_by_hand_with_a_batch():
    # prompt of 4 tokens: causal keys 1+2+3+4 = 10. Per sequence: qkv 2·4·4·3·4 = 384, scores 2·4·10 = 80,
    # values 80, out 2·4·4·4 = 128, FFN 2·4·4·8·2 = 512, lm_head for the last position 2·4·10 = 80 -> 1264
    c = prefill_cost(HAND, prompt_len=4, batch=2, dtype="fp32")
    assert (c.phase, c.n_new, c.n_past, c.context) == ("prefill", 4, 0, 4)
    assert c.flops == 2 * (384 + 80 + 80 + 128 + 512 + 80) == 2528
    assert (c.streamed_weight_bytes, c.kv_read_bytes, c.kv_write_bytes) == (880, 2 * 4 * 32, 2 * 4 * 32)
    assert c.intensity == 2528 / 1392 and c.tokens == 8
    every_row = step_cost(HAND, 4, 4, 2, "fp32", last_only=False)  # model(ids): logits for every position
    assert every_row.flops == c.flops + 2 * 3 * 80 and every_row.bytes == c.bytes


def test_dtype_halves_the_bytes_not_the_flops():
    c32, c16 = decode_cost(HAND, 4, 1, "fp32"), decode_cost(HAND, 4, 1, torch.bfloat16)
    assert c16.flops == c32.flops and c16.bytes * 2 == c32.bytes and c16.dtype == "bf16"
    assert c16.intensity == pytest.approx(2 * c32.intensity)


def test_batch_one_decode_is_about_one_flop_per_byte_in_16_bit():
    # 2 FLOPs per weight (one multiply-add) over 2 bytes per weight: C11's "memory-bound" at batch 1
    for name in ("llama-2-7b", "llama-3-8b", "mistral-7b", "qwen2.5-7b"):
        c = decode_cost(name, 512, 1, "fp16")
        assert 0.9 < c.intensity < 1.1
        assert c.kv_read_share < 0.05  # ... and mostly reading the weights, not the KV cache


def test_one_token_on_an_empty_cache_is_a_prefill():
    assert pass_cost(HAND, 1, 0).phase == prefill_cost(HAND, 1).phase == "prefill"  # the prompt "<s>"
    assert pass_cost(HAND, 1, 1).phase == decode_cost(HAND, 2).phase == "decode"


def test_streamed_weights_leave_out_only_the_lookup_tables():
    chat = model_config("chat")  # tied embedding (read whole by lm_head), learned positions
    assert streamed_weight_bytes("chat", "fp32") == 4 * (param_count(chat) - chat.max_seq_len * chat.d_model)
    tiny = model_config("tiny")  # untied: the token embedding is a lookup table too
    assert not tiny.tie_embeddings
    assert streamed_weight_bytes(tiny, "fp32") == 4 * (1608 - 16 * 4 - 131 * 4) == 4080
    gpt2 = PRESETS["gpt2"]
    assert streamed_weight_bytes(gpt2, "int4") == -(-(param_count(gpt2) - 1024 * 768) // 2)
    assert streamed_weight_bytes("llama-2-7b") == 13_214_687_232 < weight_bytes("llama-2-7b") == 13_476_831_232
    with pytest.raises(ValueError, match="unknown dtype 'fp5'"):
        streamed_weight_bytes(gpt2, "fp5")


@pytest.mark.parametrize("call, exc, msg", [
    (lambda: decode_cost(HAND, 0), ValueError,
     r"context \(positions the newest token attends to, itself included\) must be an integer >= 1, got 0"),
    (lambda: prefill_cost(HAND, 0), ValueError, "prompt_len must be an integer >= 1, got 0"),
    (lambda: decode_cost(HAND, 3, batch=0), ValueError, "batch must be an integer >= 1, got 0"),
    (lambda: decode_cost(HAND, 3, batch=2.0), ValueError, "batch must be an integer >= 1, got 2.0"),
    (lambda: pass_cost(HAND, 1, -1), ValueError, r"n_past \(tokens already cached per sequence\) must be an integer "
                                                 r">= 0, got -1"),
    (lambda: step_cost(HAND, 3, 5), ValueError, "n_new=5 is more than context=3: the context counts the cached "
                                                "positions and the new ones"),
    (lambda: step_cost(HAND, 3, last_only=1), ValueError, "last_only must be True or False, got 1"),
    (lambda: decode_cost(HAND, 3, dtype="fp12"), ValueError, "unknown dtype 'fp12'; allowed"),
])
def test_bad_counts_and_dtypes_say_what_is_allowed(call, exc, msg):
    with pytest.raises(exc, match=msg):
        call()


# ------------------------------------------------------------------- KV cache vs the weights: two crossovers

def test_read_crossover_by_hand():
    # weights read 880 B, KV 32 B per token: equal at 27.5 tokens; 27 read 864 B (< 880), 28 read 896 B (>)
    assert kv_read_crossover_tokens(HAND, "fp32") == 27.5
    read = lambda t: decode_cost(HAND, t, 1, "fp32").kv_read_bytes
    assert read(27) < HAND_W32 < read(28)
    assert crossover_context(HAND, batch=1, dtype="fp32") == 28
    assert crossover_context(HAND, batch=4, dtype="fp32") == 7  # 4 × 7 = 28
    assert crossover_context(HAND, batch=5, dtype="fp32") == 6  # 5 × 5 = 25 is not enough
    assert crossover_batch(HAND, context=10, dtype="fp32") == 3
    assert crossover_context(HAND, batch=100, dtype="fp32") == 1
    # the bytes per value cancel: the same crossover in every dtype (int4 rounds each operator up to whole bytes)
    for dtype in ("fp16", "bf16", "fp8", "int8"):
        assert kv_read_crossover_tokens(HAND, dtype) == 27.5 and crossover_context(HAND, 1, dtype) == 28


def test_the_two_crossovers_for_the_presets():
    for name, cfg in PRESETS.items():
        read, memory = kv_read_crossover_tokens(cfg, "fp16"), kv_memory_crossover_tokens(cfg, "fp16")
        assert read == streamed_weight_bytes(cfg, "fp16") / kv_bytes_per_token(cfg, "fp16")
        assert crossover_context(cfg, 1, "fp16") == math.floor(read) + 1
        # the lookup tables are stored but not read: an earlier crossover than the memory one (C13)
        assert read < memory, name
    # llama-2-7b: the untied 32,000 x 4,096 embedding table is exactly 500 tokens' worth of its KV cache
    assert (kv_memory_crossover_tokens("llama-2-7b"), kv_read_crossover_tokens("llama-2-7b")) == (25_705.015625,
                                                                                                 25_205.015625)
    assert crossover_context("llama-2-7b", 1, "fp16") == 25206 > PRESETS["llama-2-7b"].max_seq_len
    assert crossover_context("llama-2-7b", 64, "fp16") == 394


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 4), heads=st.sampled_from([(4, 4), (4, 2), (4, 1), (2, 1)]),
       head_dim=st.sampled_from([2, 4, 8]), vocab=st.integers(5, 300), batch=st.integers(1, 40),
       dtype=st.sampled_from(["fp32", "fp16", "fp8", "int4"]))
def test_crossover_is_exact(layers, heads, head_dim, vocab, batch, dtype):
    n_heads, n_kv = heads
    cfg = ModelConfig(vocab_size=vocab, n_layers=layers, d_model=n_heads * head_dim, n_heads=n_heads,
                      n_kv_heads=n_kv, max_seq_len=32)
    t = crossover_context(cfg, batch, dtype)
    w = streamed_weight_bytes(cfg, dtype)
    assert decode_cost(cfg, t, batch, dtype).kv_read_bytes > w
    if t > 1:
        assert decode_cost(cfg, t - 1, batch, dtype).kv_read_bytes <= w
    b = crossover_batch(cfg, t, dtype)
    assert b <= batch and decode_cost(cfg, t, b, dtype).kv_read_bytes > w
    if b > 1:
        assert decode_cost(cfg, t, b - 1, dtype).kv_read_bytes <= w


# ----------------------------------------------------------------------------- decode and the batch size

def test_decode_limit_and_batch_for_intensity_by_hand():
    # context 4: F = 400 FLOPs per sequence, W = 880 B, k = 4 tokens read + 1 written = 160 B per sequence
    assert decode_intensity_limit(HAND, 4, "fp32") == 400 / 160
    # B·400 / (880 + 160·B) >= 2  <=>  80·B >= 1760  <=>  B >= 22
    assert decode_batch_for_intensity(HAND, 4, 2, "fp32") == 22
    assert decode_cost(HAND, 4, 22, "fp32").intensity >= 2 > decode_cost(HAND, 4, 21, "fp32").intensity
    assert decode_batch_for_intensity(HAND, 4, 0.1, "fp32") == 1
    assert decode_batch_for_intensity(HAND, 4, 400 / 160, "fp32") is None  # the limit itself is never reached
    assert decode_batch_for_intensity(HAND, 4, 4, "fp32") is None


@settings(max_examples=40, deadline=None)
@given(name=st.sampled_from(["llama-2-7b", "llama-3-8b", "qwen2.5-7b", "gpt2"]), context=st.integers(1, 4096),
       target=st.floats(1.5, 400))
def test_batch_for_intensity_is_the_smallest(name, context, target):
    b = decode_batch_for_intensity(name, context, target, "bf16")
    exact = lambda batch: Fraction(decode_cost(name, context, batch, "bf16").flops,
                                   decode_cost(name, context, batch, "bf16").bytes)
    if b is None:
        assert decode_intensity_limit(name, context, "bf16") <= target * (1 + 1e-12)
    else:
        assert exact(b) >= Fraction(target)
        assert b == 1 or exact(b - 1) < Fraction(target)


def test_batching_raises_decode_intensity_toward_the_limit():
    xs = [decode_cost("llama-3-8b", 2048, b, "bf16").intensity for b in (1, 4, 16, 64, 256, 1024)]
    assert xs == sorted(xs)
    assert xs[-1] < decode_intensity_limit("llama-3-8b", 2048, "bf16")
    # MHA (llama-2-7b) reads 4× the KV bytes of GQA with 8 KV heads (llama-3-8b): a far lower ceiling
    assert decode_intensity_limit("llama-2-7b", 2048) < decode_intensity_limit("llama-3-8b", 2048) / 3
    ridge = DEFAULT_GPU.ridge  # the H100 SXM's, 295.3 FLOP/byte
    assert decode_batch_for_intensity("llama-3-8b", 2048, ridge, "bf16") is None
    assert decode_batch_for_intensity("llama-3-8b", 128, ridge, "bf16") == 440


def test_target_intensity_errors():
    with pytest.raises(ValueError, match=r"target intensity .* must be a finite number > 0, got 0"):
        decode_batch_for_intensity(HAND, 3, 0)
    with pytest.raises(ValueError, match=r"target intensity .* must be a finite number > 0, got '200'"):
        decode_batch_for_intensity(HAND, 3, "200")


# ------------------------------------------------------------- quantized weights beside a 16-bit KV cache

def test_quantized_weights_shrink_only_the_weight_bytes():
    base = decode_cost("llama-2-7b", 2048, 1, "bf16")
    assert decode_cost("llama-2-7b", 2048, 1, "bf16", kv_dtype="bf16") == base  # the same dtype: the same cost
    for w, share in (("int8", 2), ("int4", 4)):
        c = decode_cost("llama-2-7b", 2048, 1, w, kv_dtype="bf16")
        assert c.flops == base.flops  # dequantized, then multiplied in 16 bits: the same FLOPs (not counting dequant)
        assert c.streamed_weight_bytes * share == base.streamed_weight_bytes == lib.costs.streamed_weight_bytes(
            "llama-2-7b", "bf16")
        assert (c.kv_read_bytes, c.kv_write_bytes) == (base.kv_read_bytes, base.kv_write_bytes)
        assert (c.dtype, c.kv_dtype) == (w, "bf16")
        assert base.intensity < c.intensity < share * base.intensity  # the KV bytes stay: less than 2x / 4x
    # without kv_dtype the cache follows the weights, as before
    assert decode_cost("llama-2-7b", 2048, 1, "int8").kv_read_bytes * 2 == base.kv_read_bytes


# --------------------------------------------------------------------------------- tensor parallelism

def test_tensor_parallel_heads_split_evenly_or_replicate_kv_heads():
    from lib.costs import tensor_parallel_heads, weight_bytes, weight_bytes_per_gpu
    assert [tensor_parallel_heads("llama-3-8b", tp) for tp in (1, 2, 4, 8, 16)] == [
        (32, 8), (16, 4), (8, 2), (4, 1), (2, 1)]  # 8 KV heads: split while >= TP, then one replicated per GPU
    assert tensor_parallel_heads("llama-2-7b", 4) == (8, 8)
    for name in ("llama-3-8b", "qwen2.5-7b", "gpt2", "chat", "llama-3-70b"):
        assert weight_bytes_per_gpu(name, 1, "bf16") == weight_bytes(name, "bf16")
    w1, w2, w4 = (weight_bytes_per_gpu("llama-3-8b", tp, "bf16") for tp in (1, 2, 4))
    assert w1 / 2 <= w2 < w1 / 2 + 1e6 and w1 / 4 <= w4 < w1 / 4 + 1e6  # only the norms are on every GPU
    # replicated KV heads: each GPU keeps one whole KV head's projections, more than 1/TP of them
    c = model_config("llama-3-8b")
    kv_proj = 2 * c.n_layers * c.d_model * c.head_dim * 2  # one KV head's K and V projections, bf16
    assert weight_bytes_per_gpu("llama-3-8b", 16, "bf16") > weight_bytes("llama-3-8b", "bf16") / 16 + kv_proj / 2


@pytest.mark.parametrize("name, tp, match", [
    ("llama-3-8b", 3, r"tensor_parallel_size=3 .*32 query heads.*allowed: 1, 2, 4, 8, 16, 32"),
    ("qwen2.5-7b", 8, r"does not divide the 28 query head.*allowed: 1, 2, 4, 28"),
    ("llama-3-8b", 0, r"tensor_parallel_size must be a number of GPUs >= 1"),
])
def test_a_tensor_parallel_size_that_cannot_split_the_heads_is_refused(name, tp, match):
    with pytest.raises(ValueError, match=match):
        lib.costs.tensor_parallel_heads(name, tp)
