"""ModelConfig: defaults, validation with errors that say what is allowed, frozen copies."""
import dataclasses

import pytest

from lib import PRESETS, ModelConfig


def test_defaults_and_attention_kinds():
    c = ModelConfig(vocab_size=10, n_layers=1, d_model=8, n_heads=4)
    assert (c.n_kv_heads, c.head_dim, c.d_ff, c.attention_kind) == (4, 2, 32, "MHA")
    assert ModelConfig(vocab_size=10, n_layers=1, d_model=8, n_heads=4, n_kv_heads=2).attention_kind == "GQA"
    assert ModelConfig(vocab_size=10, n_layers=1, d_model=8, n_heads=4, n_kv_heads=1).attention_kind == "MQA"


def test_kv_values_per_token_is_the_configs_own():
    """2 (K and V) x layers x K/V heads x head_dim: the KV-cache formula on the config it reads, shared by
    lib.costs (which multiplies by bytes per value) and the caches' memory checks."""
    c = ModelConfig(vocab_size=10, n_layers=3, d_model=8, n_heads=4, n_kv_heads=2)
    assert c.kv_values_per_token == 2 * 3 * 2 * 2 == 24
    assert PRESETS["llama-2-7b"].kv_values_per_token * 2 == 512 * 1024  # 512 KiB per token in fp16
    assert PRESETS["llama-3-8b"].kv_values_per_token == PRESETS["llama-3-8b"].replace(n_kv_heads=32).kv_values_per_token // 4


@pytest.mark.parametrize("kw,msg", [
    (dict(d_model=10, n_heads=4), r"d_model=10 is not divisible by n_heads=4"),
    (dict(n_heads=4, n_kv_heads=3), r"n_heads=4 is not a multiple of n_kv_heads=3.*allowed n_kv_heads: \[1, 2, 4\]"),
    (dict(norm="batchnorm"), r"ModelConfig.norm='batchnorm' is not supported; allowed: layernorm, rmsnorm"),
    (dict(activation="relu"), r"allowed: gelu, gelu_tanh, silu, swiglu"),
    (dict(positions="alibi"), r"allowed: learned, rope"),
    (dict(n_layers=0), r"ModelConfig.n_layers must be an integer >= 1, got 0"),
    (dict(positions="rope", d_model=12, n_heads=4), r"rotary positions need an even head_dim, got head_dim=3"),
])
def test_config_errors(kw, msg):
    base = dict(vocab_size=10, n_layers=1, d_model=8, n_heads=2)
    base.update(kw)
    with pytest.raises(ValueError, match=msg):
        ModelConfig(**base)


def test_config_is_frozen_and_replace_makes_a_validated_copy():
    gpt2 = PRESETS["gpt2"]
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"cannot change 'n_layers'; .*config.replace\(n_layers=...\)"):
        gpt2.n_layers = 2  # would have changed the preset for every later user in the process
    with pytest.raises(dataclasses.FrozenInstanceError, match=r"cannot change 'd_model'"):
        del gpt2.d_model
    assert gpt2.n_layers == 12
    small = gpt2.replace(n_layers=2)
    assert (small.n_layers, gpt2.n_layers) == (2, 12) and small.d_ff == gpt2.d_ff
    with pytest.raises(ValueError, match=r"n_heads=5 is not a multiple of n_kv_heads"):
        gpt2.replace(n_heads=5, n_kv_heads=2, head_dim=64)  # validated again, as a new config is
    assert len({gpt2, gpt2.replace(), small}) == 2  # hashable, equal by value


def test_replace_derives_again_what_was_derived_and_keeps_what_was_set():
    base = ModelConfig(vocab_size=10, n_layers=1, d_model=64, n_heads=8)  # MHA, head_dim 8, d_ff 256
    c = base.replace(n_heads=4)
    assert (c.n_kv_heads, c.head_dim, c.d_ff) == (4, 16, 256)  # still MHA; head_dim follows
    c = base.replace(d_model=32)
    assert (c.head_dim, c.d_ff) == (4, 128)
    gqa = base.replace(n_kv_heads=2)
    assert gqa.replace(n_heads=4).n_kv_heads == 2  # set by hand: kept (and validated)
    wide = ModelConfig(vocab_size=10, n_layers=1, d_model=64, n_heads=8, head_dim=16, d_ff=100)
    assert (wide.replace(n_heads=4).head_dim, wide.replace(d_model=32).d_ff) == (16, 100)
    assert base.replace(bias=False).qkv_bias is False
    qwen = base.replace(bias=False, qkv_bias=True)
    assert qwen.replace(n_layers=2).qkv_bias is True and qwen.replace(bias=True).qkv_bias is True
    assert base.replace(n_heads=4, n_kv_heads=1).attention_kind == "MQA"  # what is given wins


@pytest.mark.parametrize("kw,msg", [
    (dict(positions="rope", rope_theta=0), r"ModelConfig.rope_theta must be a finite number > 0, got 0"),
    (dict(norm_eps=-1), r"ModelConfig.norm_eps must be a finite number > 0, got -1"),
    (dict(norm_eps=float("nan")), r"ModelConfig.norm_eps must be a finite number > 0, got nan"),
    (dict(bias="no"), r"ModelConfig.bias must be True or False, got 'no'"),
    (dict(tie_embeddings=None), r"ModelConfig.tie_embeddings must be True or False, got None"),
    (dict(qkv_bias=1), r"ModelConfig.qkv_bias must be True or False, got 1"),
    (dict(d_model=8.0), r"ModelConfig.d_model must be an integer >= 1, got 8.0"),
    (dict(n_layers=True), r"ModelConfig.n_layers must be an integer >= 1, got True"),
    (dict(attn_impl="flash"), r"ModelConfig.attn_impl='flash' is not supported; allowed: manual, sdpa"),
])
def test_every_field_is_validated(kw, msg):
    """A value that would give NaN logits later (theta 0, a negative eps) or silently mean something else
    ("no" is truthy) is refused when the config is made."""
    with pytest.raises(ValueError, match=msg):
        ModelConfig(**{**dict(vocab_size=10, n_layers=1, d_model=8, n_heads=2), **kw})


def test_numpy_integers_are_integers():
    import numpy as np
    c = ModelConfig(vocab_size=np.int64(10), n_layers=np.int32(1), d_model=8, n_heads=2)
    assert type(c.vocab_size) is int and c.vocab_size == 10 and c == ModelConfig(vocab_size=10, n_layers=1, d_model=8, n_heads=2)
