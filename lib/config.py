"""ModelConfig: every shape and switch of a decoder-only Transformer, in one validated dataclass."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from . import checks

NORMS = ("layernorm", "rmsnorm")
ACTIVATIONS = ("gelu", "gelu_tanh", "silu", "swiglu")
POSITIONS = ("learned", "rope")
ATTN_IMPLS = ("manual", "sdpa")


@dataclass(frozen=True)
class ModelConfig:
    """Shapes of a decoder-only Transformer. Frozen: a config is validated once, when it is made, and a model
    built from it (or ``lib.PRESETS``, shared by everyone) cannot be changed under it; ``replace(...)`` makes a
    changed, validated copy.

    ``n_kv_heads=None`` means ``n_heads`` (multi-head attention); fewer key/value heads than query heads
    gives grouped-query attention (GQA), exactly one gives multi-query attention (MQA).
    ``head_dim`` defaults to ``d_model // n_heads``; ``d_ff`` defaults to ``4 * d_model``.
    ``sliding_window=W`` lets each query see only the last W positions, itself included (Mistral); a
    ``KVCache`` for it then keeps only W positions per layer (a ring buffer). None: every earlier position.
    """

    vocab_size: int
    n_layers: int
    d_model: int
    n_heads: int
    n_kv_heads: int | None = None
    d_ff: int | None = None
    max_seq_len: int = 256
    norm: str = "layernorm"
    activation: str = "gelu"
    positions: str = "learned"
    rope_theta: float = 10000.0
    norm_eps: float = 1e-5
    bias: bool = True  # biases on every linear layer (GPT-2 style); Llama has none
    qkv_bias: bool | None = None  # None: same as `bias` (Qwen2 has q/k/v biases only)
    tie_embeddings: bool = True  # lm_head shares the token-embedding matrix
    head_dim: int | None = None
    attn_impl: str = "manual"  # "manual" (written out, weights visible) or "sdpa" (fused fast path)
    sliding_window: int | None = None  # each query sees the last W positions (None: all earlier ones)

    def __post_init__(self):
        def fill(name, value):  # a default that depends on other fields (the dataclass is frozen)
            object.__setattr__(self, name, value)

        for name in ("vocab_size", "n_layers", "d_model", "n_heads", "max_seq_len"):
            fill(name, checks.integer(getattr(self, name), f"ModelConfig.{name}", 1))
        fill("n_kv_heads", checks.integer(self.n_heads if self.n_kv_heads is None else self.n_kv_heads,
                                          "ModelConfig.n_kv_heads", 1))
        if self.head_dim is None:
            if self.d_model % self.n_heads:
                raise ValueError(
                    f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}; "
                    "choose n_heads that divides d_model (or give head_dim explicitly)")
            fill("head_dim", self.d_model // self.n_heads)
        fill("head_dim", checks.integer(self.head_dim, "ModelConfig.head_dim", 1))
        if self.n_heads % self.n_kv_heads:
            raise ValueError(
                f"n_heads={self.n_heads} is not a multiple of n_kv_heads={self.n_kv_heads}; each key/value "
                f"head must serve a whole group of query heads (allowed n_kv_heads: "
                f"{[d for d in range(1, self.n_heads + 1) if self.n_heads % d == 0]})")
        fill("d_ff", checks.integer(4 * self.d_model if self.d_ff is None else self.d_ff, "ModelConfig.d_ff", 1))
        for name, allowed in (("norm", NORMS), ("activation", ACTIVATIONS), ("positions", POSITIONS),
                              ("attn_impl", ATTN_IMPLS)):
            checks.choice(getattr(self, name), f"ModelConfig.{name}", allowed)
        if self.positions == "rope" and self.head_dim % 2:
            raise ValueError(f"rotary positions need an even head_dim, got head_dim={self.head_dim}")
        fill("rope_theta", checks.number(self.rope_theta, "ModelConfig.rope_theta", above=0))
        fill("norm_eps", checks.number(self.norm_eps, "ModelConfig.norm_eps", above=0))
        fill("qkv_bias", self.bias if self.qkv_bias is None else self.qkv_bias)
        for name in ("bias", "qkv_bias", "tie_embeddings"):
            checks.flag(getattr(self, name), f"ModelConfig.{name}")
        if self.sliding_window is not None:
            fill("sliding_window", checks.integer(self.sliding_window, "ModelConfig.sliding_window", 1, allowed=(
                "None (every earlier position) or an integer >= 1 (the positions a query sees, itself included)")))

    @property
    def n_rep(self) -> int:
        """How many query heads share one key/value head (1 for MHA, n_heads for MQA)."""
        return self.n_heads // self.n_kv_heads

    @property
    def kv_values_per_token(self) -> int:
        """Numbers a KV cache holds per token of one sequence, all layers together: 2 (K and V) × n_layers ×
        n_kv_heads × head_dim (GQA / MQA shrink it through n_kv_heads). The KV-cache formula's one home:
        ``lib.costs`` multiplies it by bytes per value, the caches check their memory with it."""
        return 2 * self.n_layers * self.n_kv_heads * self.head_dim

    @property
    def attention_kind(self) -> str:
        return "MHA" if self.n_kv_heads == self.n_heads else "MQA" if self.n_kv_heads == 1 else "GQA"

    def replace(self, **changes) -> "ModelConfig":
        """A copy with some fields changed (validated again). A field that held its default derived from
        others is derived again when those change and it is not given: ``n_kv_heads`` of a multi-head
        config follows ``n_heads`` (it stays MHA), ``head_dim`` follows ``d_model // n_heads``, ``d_ff``
        follows ``4 * d_model``, ``qkv_bias`` follows ``bias``. A value set otherwise is kept."""
        d = dataclasses.asdict(self)
        derived = {"n_kv_heads": (("n_heads",), self.n_kv_heads == self.n_heads),
                   "head_dim": (("d_model", "n_heads"), self.head_dim == self.d_model // self.n_heads),
                   "d_ff": (("d_model",), self.d_ff == 4 * self.d_model),
                   "qkv_bias": (("bias",), self.qkv_bias == self.bias)}
        for name, (sources, was_default) in derived.items():
            if was_default and name not in changes and any(src in changes for src in sources):
                d[name] = None
        d.update(changes)
        return ModelConfig(**d)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "ModelConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(d) - known)
        if unknown:
            raise ValueError(f"unknown ModelConfig fields {unknown}; known fields: {sorted(known)}")
        return cls(**d)


def _refuse_change(self, name, *value):
    raise dataclasses.FrozenInstanceError(
        f"ModelConfig is frozen (validated once; models and lib.PRESETS share it): cannot change {name!r}; "
        f"make a changed copy with config.replace({name}=...)")


# The frozen dataclass's own refusal says only "cannot assign to field"; this one says what to do instead.
ModelConfig.__setattr__ = _refuse_change
ModelConfig.__delattr__ = _refuse_change
