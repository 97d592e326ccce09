"""Every model the lab knows by name, in one registry: the shipped demo models, real models' published shapes
(``PRESETS``) and DeepSeek's latent-attention caches (``MLA_PRESETS``), and the one resolver that turns a name
or a config into ``(name, config)``.

    resolve_model("llama-2-7b")          -> ("llama-2-7b", PRESETS["llama-2-7b"])
    resolve_model("chat")                -> ("chat", DEMO_CONFIGS["chat"])  the shape chat.safetensors carries
    resolve_model(PRESETS["gpt2"])       -> ("gpt2", ...)         a config is named after the model it equals
    resolve_model(ModelConfig(...))      -> ("custom", ...)
    model_config(model)                  -> the config alone (no name looked up)

The flow goes one way: ``lib.costs``, ``lib.demo`` and the widgets read this module; it reads only ``lib.config``
(and ``lib.checks``). The demo models' shapes are data here (``DEMO_CONFIGS``, the configs their checkpoints
carry; a test holds each shipped file to its row), so naming a model opens no file and every name works without
the demo weights on disk.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import checks
from .config import ModelConfig

# The shipped demo models (``assets/<name>.safetensors``); ``lib.demo`` loads them. Two kinds, each for what it
# can show: toys that memorised a few lines (``python -m lib.train``), exact and printable, for mechanisms; and a
# real small language model with its draft, trained on real English and Chinese text (``python -m lib.train_lm``),
# for phenomena (sampling tails, nameable heads, speculative α, int8 error, speed and memory at long context).
TOYS = {
    "chat": "the main demo: 4 layers, d_model 64, 4 heads; <s> -> 人工智能<eos>, <s>深 -> 度学习<eos>",
    "draft": "a 1-layer, d_model 32 sibling on the same vocabulary, the draft for speculative decoding",
    "tiny": "the worked case: 2 layers, hidden size 4, one head; <s> -> 深度学习<eos>",
    "chat-gqa": "chat's shape with grouped-query attention: 4 query heads share 2 K/V heads (half chat's KV cache)",
}
REAL = {
    "lm": "the real small language model: 4 layers, d_model 256, 4 heads, context 512, trained on Shakespeare and "
          "Tang poems / Song ci, one token per character",
    "lm-draft": "its draft for speculative decoding: 2 layers, d_model 128, the same vocabulary and text",
}
DEMOS = {**TOYS, **REAL}

# Their shapes: the ModelConfig fields that differ from the defaults, as ``python -m lib.train`` and
# ``python -m lib.train_lm`` built them (vocab_size: the toys' 131 characters, the real corpus's 3,934).
_LM = dict(vocab_size=3934, max_seq_len=512, norm="rmsnorm", activation="swiglu", positions="rope")
DEMO_SHAPES: dict[str, dict] = {
    "chat": dict(vocab_size=131, n_layers=4, d_model=64, n_heads=4, max_seq_len=64),
    "draft": dict(vocab_size=131, n_layers=1, d_model=32, n_heads=2, max_seq_len=64),
    "tiny": dict(vocab_size=131, n_layers=2, d_model=4, n_heads=1, d_ff=16, max_seq_len=16, tie_embeddings=False),
    "chat-gqa": dict(vocab_size=131, n_layers=4, d_model=64, n_heads=4, n_kv_heads=2, max_seq_len=64),
    "lm": dict(n_layers=4, d_model=256, n_heads=4, **_LM),
    "lm-draft": dict(n_layers=2, d_model=128, n_heads=2, **_LM),
}


# ------------------------------------------------------------------------------------------ MLA (DeepSeek)

@dataclass(frozen=True)
class MLAConfig:
    """The cache-relevant shape of multi-head latent attention (DeepSeek-V2/V3).

    Instead of per-head K and V, each layer caches one compressed latent vector of ``kv_lora_rank``
    values plus one shared rotary key of ``qk_rope_head_dim`` values per token. In decode, engines absorb the
    up-projections from the latent to keys and to values into the query and output projections, so the scores
    and the mix are computed against the latent itself and per-head K and V are never built; in prefill, where
    many queries share each key, they rebuild per-head K and V from the latent and run ordinary attention
    (cheaper there). Either way the cache holds only the latent. Only the cache is modelled here, not the
    parameters."""

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
            checks.integer(getattr(self, name), f"MLAConfig.{name}", 1)

    @property
    def cached_values_per_layer(self) -> int:
        """Values cached per token per layer: kv_lora_rank + qk_rope_head_dim (576 for DeepSeek-V3)."""
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def kv_values_per_token(self) -> int:
        """Values cached per token of one sequence, all layers together: n_layers × cached_values_per_layer
        (``ModelConfig.kv_values_per_token``'s counterpart)."""
        return self.n_layers * self.cached_values_per_layer

    @property
    def mha_values_per_layer(self) -> int:
        """The baseline of DeepSeek-V2's own comparison: MHA with the same heads and its per-head dimension
        d_h (``qk_nope_head_dim``, 128) caches 2 × n_heads × d_h values per token and layer (32,768), about 57x
        what MLA caches. (Counting MLA's decoupled 64 rotary dimensions into every key, 192 + 128 per head, would
        give 71x: that is MLA's own key layout uncompressed, not MHA of the same model.)"""
        return 2 * self.n_heads * self.qk_nope_head_dim


# ----------------------------------------------------------------------------------------------- presets

def llama(vocab, L, d, H, KV, ff, max_len, theta=10000.0, eps=1e-5, qkv_bias=False) -> ModelConfig:
    """A Llama-family shape (RMSNorm, SwiGLU, rotary positions, no biases, untied embeddings): ``vocab`` tokens,
    ``L`` layers of width ``d``, ``H`` query and ``KV`` key/value heads, FFN width ``ff``, context ``max_len``."""
    return ModelConfig(vocab_size=vocab, n_layers=L, d_model=d, n_heads=H, n_kv_heads=KV, d_ff=ff,
                       max_seq_len=max_len, norm="rmsnorm", activation="swiglu", positions="rope",
                       rope_theta=theta, norm_eps=eps, bias=False, qkv_bias=qkv_bias, tie_embeddings=False)


def gpt2(L, d, H) -> ModelConfig:
    """A GPT-2 shape (LayerNorm, tanh-GELU, learned positions, biases, tied embeddings, 1,024 positions)."""
    return ModelConfig(vocab_size=50257, n_layers=L, d_model=d, n_heads=H, d_ff=4 * d, max_seq_len=1024,
                       norm="layernorm", activation="gelu_tanh", positions="learned", norm_eps=1e-5,
                       bias=True, tie_embeddings=True)


# Shapes from each model's published config.json (Hugging Face hub).
PRESETS: dict[str, ModelConfig] = {
    "gpt2": gpt2(12, 768, 12),
    "gpt2-medium": gpt2(24, 1024, 16),
    "llama-2-7b": llama(32000, 32, 4096, 32, 32, 11008, 4096),
    "llama-2-13b": llama(32000, 40, 5120, 40, 40, 13824, 4096),
    "llama-2-70b": llama(32000, 80, 8192, 64, 8, 28672, 4096),
    "llama-3-8b": llama(128256, 32, 4096, 32, 8, 14336, 8192, theta=500000.0),
    "llama-3-70b": llama(128256, 80, 8192, 64, 8, 28672, 8192, theta=500000.0),
    # Mistral-7B v0.2: v0.1's shapes with no sliding window and RoPE base 1e6 (v0.1 = this with sliding_window=4096)
    "mistral-7b": llama(32000, 32, 4096, 32, 8, 14336, 32768, theta=1e6),
    "qwen2.5-7b": llama(152064, 28, 3584, 28, 4, 18944, 32768, theta=1e6, eps=1e-6, qkv_bias=True),
}

MLA_PRESETS: dict[str, MLAConfig] = {
    "deepseek-v2": MLAConfig(n_layers=60, kv_lora_rank=512, qk_rope_head_dim=64, d_model=5120),
    "deepseek-v3": MLAConfig(n_layers=61, kv_lora_rank=512, qk_rope_head_dim=64, d_model=7168),
}

# ------------------------------------------------------------------------------------------- model names

DEMO_CONFIGS: dict[str, ModelConfig] = {name: ModelConfig(**shape) for name, shape in DEMO_SHAPES.items()}
MODEL_NAMES = (*DEMOS, *PRESETS)  # the names lib.costs' functions accept instead of a ModelConfig
_MLA_USES = "kv_bytes_per_token, kv_cache_bytes and describe"


def _name_of(config, extra: dict) -> str:
    """The name a config is known by (an extra name, a preset, a demo model), else "custom"."""
    if isinstance(config, MLAConfig):
        return next((k for k, v in MLA_PRESETS.items() if v == config), "custom")
    return next((k for k, v in {**extra, **PRESETS, **DEMO_CONFIGS}.items() if v == config), "custom")


def resolve_model(model, *, allow_mla: bool = False, extra: dict | None = None) -> tuple[str, ModelConfig]:
    """(name, config) of a model given as a ``lib.ModelConfig`` (named after the preset or demo model it equals,
    else "custom") or by name: a demo model ("chat", "draft", "tiny", ..., its shape from
    ``DEMO_CONFIGS``: no file opened) or a ``PRESETS`` key. ``allow_mla``: also an ``MLAConfig`` or an
    ``MLA_PRESETS`` key (for the KV cache only). ``extra``: more {name: ModelConfig} a caller offers
    (the cost-curve widget's "larger")."""
    extra = {} if extra is None else extra
    names = (*extra, *MODEL_NAMES, *(MLA_PRESETS if allow_mla else ()))
    if isinstance(model, ModelConfig) or (allow_mla and isinstance(model, MLAConfig)):
        return _name_of(model, extra), model
    if isinstance(model, MLAConfig):
        raise TypeError(f"an MLAConfig describes only the KV cache of multi-head latent attention (lib.costs does "
                        f"not model its weights or FLOPs), so it works with {_MLA_USES}; this needs a "
                        f"lib.ModelConfig or one of: {', '.join(names)}")
    if isinstance(model, str):
        if model in extra:
            return model, extra[model]
        if model in PRESETS:
            return model, PRESETS[model]
        if model in DEMOS:
            return model, DEMO_CONFIGS[model]
        if model in MLA_PRESETS:
            if allow_mla:
                return model, MLA_PRESETS[model]
            raise ValueError(f"{model!r} is an MLA preset: lib.costs models only its KV cache, not its weights or "
                             f"FLOPs, so it works with {_MLA_USES}; here choose one of: {', '.join(names)}")
        raise ValueError(f"unknown model {model!r}; allowed: a lib.ModelConfig or one of: {', '.join(names)}")
    raise TypeError(f"model must be a lib.ModelConfig or a name ({', '.join(names)}), got {type(model).__name__}")


def model_config(model, *, allow_mla: bool = False, extra: dict | None = None) -> ModelConfig:
    """The config of a model given as a config or a name (``resolve_model`` without the name: a config is
    returned as it is, without looking up what it is called)."""
    if isinstance(model, ModelConfig) or (allow_mla and isinstance(model, MLAConfig)):
        return model
    return resolve_model(model, allow_mla=allow_mla, extra=extra)[1]
