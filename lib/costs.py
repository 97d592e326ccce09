"""The one cost model of a decoder-only Transformer: parameters, memory, and what each forward pass costs.

Everything here is arithmetic on shapes; no model is built or run. The formulas mirror ``lib.MiniTransformer``
exactly (``param_count(cfg) == sum(p.numel() for p in MiniTransformer(cfg).parameters())``) and the step
schedule of ``lib.generate`` (one forward pass per new token). Every cost in the lab (the widgets' tables,
``lib.roofline``, the benchmark's bytes) is one of these functions, so it is counted one way only:

* **Context**: the positions the newest token attends to, itself included, i.e. the cache length *after*
  the step: ``n_past + n_new`` (``n_past + 1`` at decode; at most ``max_seq_len``). A prefill of a T-token
  prompt has context T.
* **One forward pass** (``step_cost``) is counted per operator, FLOPs and bytes side by side (``OPERATORS``):
  the weight products (``qkv_proj``, ``out_proj``, ``ffn``, ``lm_head``) read their weights; the norms read
  theirs and are not counted as FLOPs; attention (``attn_scores`` = Q·Kᵀ, ``attn_values`` = weights·V) reads
  the K and V of every position of the context, once per sequence (every key it attends to, the one just
  written included, as vLLM's kernels read it back from the cache); ``kv_write`` stores the K and V of the
  ``n_new`` new positions. A decode step at context t therefore reads t tokens of K/V and writes 1. The
  totals of a ``StepCost`` are the sums of its operators.
* **FLOPs**: matrix multiplications only, one multiply-add = 2 FLOPs, times the batch. Norms, softmax,
  activations, rotary embeddings, residual adds and sampling are O(T·d) per layer, small next to the
  O(T·d²) projections and the O(T·t·d) attention. A generation step computes logits for its last position
  only (``last_only=True``, as ``lib.generate`` does); ``forward_flops`` counts ``model(ids)``, which
  computes them for every fed position unless told otherwise.
* **Weights, two quantities**: ``weight_bytes`` is what is *stored* ("weights in memory": every parameter,
  a tied embedding once); ``streamed_weight_bytes`` is what one pass *reads* ("weights read per step",
  shared by the whole batch): every parameter except the lookup tables a pass only gathers a few rows from
  (a learned position table, an untied token embedding). A tied embedding is read whole by ``lm_head``.
* **Two crossovers**, accordingly: ``kv_memory_crossover_tokens`` (cached tokens whose KV cache takes as much
  memory as the weights) and ``kv_read_crossover_tokens`` (cached tokens whose K/V a decode step reads in as
  many bytes as it reads weights). The second comes earlier by exactly the lookup tables' size: 500 tokens
  for Llama-2-7B, whose untied 32,000 × 4,096 embedding holds as many bytes as 500 tokens of its KV cache.
* Not counted as bytes: activations (gathered embedding rows, hidden states, attention scores, logits). A
  fused kernel keeps most of them on chip, so an intensity here is what an ideal implementation reaches.

Models are given as a ``lib.ModelConfig`` or by name: a demo model ("chat", "draft", "tiny") or a ``PRESETS``
key; ``MLAConfig`` / ``MLA_PRESETS`` where only the KV cache is asked for. The names, the real models' shapes
and the resolver (``resolve_model``) are ``lib.presets``'; number formats come from ``lib.device.DTYPES``
(``dtype_info``)."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from fractions import Fraction

import torch

from . import checks
from .config import ModelConfig
from .device import dtype_info, dtype_name
from .i18n import say
from .presets import MLAConfig, model_config, resolve_model  # models by name: the one registry, lib/presets.py
from .text import fmt_bytes, fmt_count


GiB = 2 ** 30  # the binary gigabyte every memory size of lib is counted in (GPU memory, a cache, the weights)


def _bytes(values: int, dtype) -> int:
    """Bytes of ``values`` numbers in ``dtype``, rounded up to a whole byte (two int4 values share one)."""
    return math.ceil(values * dtype_info(dtype).bits / 8)


# ----------------------------------------------------------------------------------- parameters, bytes

def _parameters(c: ModelConfig) -> dict[str, int]:
    """Parameters of ``MiniTransformer(c)`` by group; ``lm_head`` is 0 when it is tied to ``tok_emb``.

    embeddings  tok_emb vocab·d, pos_emb max_seq_len·d (learned positions only)
    per layer   q,k,v projections (+ biases), o projection, FFN (2 matrices, or 3 for SwiGLU), 2 norms
    once        the final norm, and lm_head vocab·d unless it is tied to the token embedding.
    """
    d, hd, ff, L = c.d_model, c.head_dim, c.d_ff, c.n_layers
    norm = 2 * d if c.norm == "layernorm" else d  # LayerNorm: weight + bias; RMSNorm: weight only

    def linear(n_in, n_out, bias):
        return n_in * n_out + (n_out if bias else 0)

    n_up = 2 if c.activation == "swiglu" else 1  # SwiGLU has a gate and an up projection
    return {
        "tok_emb": c.vocab_size * d,
        "pos_emb": c.max_seq_len * d if c.positions == "learned" else 0,
        "qkv_proj": L * (linear(d, c.n_heads * hd, c.qkv_bias) + 2 * linear(d, c.n_kv_heads * hd, c.qkv_bias)),
        "out_proj": L * linear(c.n_heads * hd, d, c.bias),
        "ffn": L * (n_up * linear(d, ff, c.bias) + linear(ff, d, c.bias)),
        "norms": (2 * L + 1) * norm,
        "lm_head": 0 if c.tie_embeddings else c.vocab_size * d,
    }


def param_count(model) -> int:
    """Number of parameters of ``MiniTransformer(config)``, tied weights counted once."""
    return sum(_parameters(model_config(model)).values())


def weight_bytes(model, dtype=torch.float16) -> int:
    """**Weights in memory**: bytes to store every parameter (a tied embedding once), param_count × bytes
    per value (rounded up for 4-bit types)."""
    return _bytes(param_count(model), dtype)


def tensor_parallel_heads(model, tensor_parallel_size: int = 1) -> tuple[int, int]:
    """(query heads, KV heads) each GPU holds when ``tensor_parallel_size`` GPUs split every layer's heads, as
    vLLM does (``tensor_parallel_size``): the query heads evenly (the size must divide them); the KV heads evenly
    while there are at least as many as GPUs, else each KV head is replicated on size / n_kv_heads GPUs, one per
    GPU (the size must then be a multiple of n_kv_heads). vLLM's checks, with the sizes that would work."""
    c = model_config(model)
    tp = checks.integer(tensor_parallel_size, "tensor_parallel_size", 1, allowed="a number of GPUs >= 1")
    H, KV = c.n_heads, c.n_kv_heads

    def splits(n):
        return n <= H and H % n == 0 and (KV % n == 0 if n <= KV else n % KV == 0)

    if not splits(tp):
        allowed = ", ".join(str(n) for n in range(1, H + 1) if splits(n))
        why = (f"it does not divide the {H} query head(s)" if H % tp else
               f"the {KV} KV heads can neither be split evenly over {tp} GPUs nor each replicated on a whole "
               f"number of them")
        raise ValueError(f"tensor_parallel_size={tp} cannot split this model's attention ({H} query heads, {KV} KV "
                         f"heads): {why}; allowed: {allowed}")
    return H // tp, max(KV // tp, 1)


def weight_bytes_per_gpu(model, tensor_parallel_size: int = 1, dtype=torch.float16) -> int:
    """Weights in memory on *each* GPU under tensor parallelism (``tensor_parallel_heads``): the embedding,
    ``lm_head``, query and output projections and the FFN are split in ``tensor_parallel_size`` parts (rounded up);
    the K and V projections follow the KV heads a GPU holds (whole ones when they are replicated); the norms and a
    learned position table are on every GPU. Size 1 gives ``weight_bytes``."""
    c = model_config(model)
    tp = checks.integer(tensor_parallel_size, "tensor_parallel_size", 1, allowed="a number of GPUs >= 1")
    _, kv_per_gpu = tensor_parallel_heads(c, tp)
    p = _parameters(c)
    kv_proj = c.n_layers * 2 * (c.d_model * c.n_kv_heads * c.head_dim + (c.n_kv_heads * c.head_dim if c.qkv_bias else 0))
    split = p["tok_emb"] + p["lm_head"] + p["qkv_proj"] - kv_proj + p["out_proj"] + p["ffn"]
    whole = p["norms"] + p["pos_emb"]
    return _bytes(math.ceil(split / tp) + kv_proj // c.n_kv_heads * kv_per_gpu + whole, dtype)


def _streamed_values(c: ModelConfig) -> dict[str, int]:
    """Weight values each operator of a pass reads: its own parameters; ``lm_head`` the vocab × d matrix it
    multiplies by (the token embedding itself when tied). The lookup tables are only gathered from."""
    p = _parameters(c)
    return {op: p[op] for op in ("qkv_proj", "out_proj", "ffn", "norms")} | {"lm_head": c.vocab_size * c.d_model}


def streamed_weight_bytes(model, dtype=torch.float16) -> int:
    """**Weights read per step**: the bytes of weights one forward pass streams from memory, once for the whole
    batch. Every parameter except the lookup tables a pass only gathers rows from (the learned position table,
    an untied token embedding); less than ``weight_bytes`` by those tables. Equals
    ``step_cost(...).streamed_weight_bytes`` at any context and batch."""
    return sum(_bytes(v, dtype) for v in _streamed_values(model_config(model)).values())


# ----------------------------------------------------------------------------------------------- KV cache

def kv_values_per_token(model) -> int:
    """Numbers cached per token of one sequence, all layers together: 2 (K and V) × n_layers × n_kv_heads ×
    head_dim, or n_layers × (kv_lora_rank + qk_rope_head_dim) for MLA (``ModelConfig.kv_values_per_token``,
    ``MLAConfig.kv_values_per_token``, for a model given by name too)."""
    return model_config(model, allow_mla=True).kv_values_per_token


def kv_bytes_per_token(config, dtype=torch.float16) -> int:
    """KV-cache bytes for one token of one sequence.

    ModelConfig: 2 (K and V) × n_layers × n_kv_heads × head_dim × bytes — GQA/MQA shrink it via n_kv_heads.
    MLAConfig:   n_layers × (kv_lora_rank + qk_rope_head_dim) × bytes.
    """
    return _bytes(kv_values_per_token(config), dtype)


def kv_cache_bytes(config, n_tokens: int, batch_size: int = 1, dtype=torch.float16) -> int:
    """KV-cache bytes for ``batch_size`` sequences of ``n_tokens`` each: per-token bytes × n_tokens × batch.

    The cache grows linearly in both context length and batch size, and does not depend on d_ff or vocab.
    A config with a ``sliding_window`` W keeps at most W tokens per sequence (a ring buffer, as
    ``lib.KVCache`` does): past W tokens the bytes stop growing.
    """
    values = kv_values_per_token(config)
    n_tokens = checks.integer(n_tokens, "n_tokens", 0)
    window = getattr(model_config(config, allow_mla=True), "sliding_window", None)
    if window is not None:
        n_tokens = min(n_tokens, window)
    batch_size = checks.integer(batch_size, "batch_size", 0)
    return _bytes(values * n_tokens * batch_size, dtype)


# ------------------------------------------------------------------------------ one forward pass (step)

OPERATORS = ("norms", "qkv_proj", "kv_write", "attn_scores", "attn_values", "out_proj", "ffn", "lm_head")
FLOP_TERMS = ("qkv_proj", "attn_scores", "attn_values", "out_proj", "ffn", "lm_head")  # operators with FLOPs


@dataclass(frozen=True)
class OpCost:
    """What one operator of a forward pass costs, whole batch: FLOPs, and the bytes it reads and writes."""

    flops: int = 0
    streamed_weight_bytes: int = 0  # weights read, once for the whole batch
    kv_read_bytes: int = 0  # cached keys (attn_scores) or values (attn_values) read
    kv_write_bytes: int = 0  # keys and values stored (kv_write)

    @property
    def bytes(self) -> int:
        return self.streamed_weight_bytes + self.kv_read_bytes + self.kv_write_bytes


@dataclass(frozen=True)
class StepCost:
    """What one forward pass costs, per operator (``by_operator``, keys ``OPERATORS``) and in total, whole batch.

    ``context`` = n_past + n_new, the positions the newest token attends to (itself included)."""

    phase: str  # "decode": one new token per sequence on top of a cache; else "prefill"
    batch: int
    n_new: int  # tokens fed per sequence
    n_past: int  # tokens cached per sequence before the pass
    dtype: str  # weights (and, unless kv_dtype says otherwise, the KV cache) stored in this dtype ("fp16", ...)
    by_operator: dict = field(hash=False)  # {operator: OpCost}, in OPERATORS order
    kv_dtype: str | None = None  # the KV cache's dtype when it differs from the weights' (None: the same)

    def _sum(self, what: str) -> int:
        return sum(getattr(op, what) for op in self.by_operator.values())

    @property
    def context(self) -> int:
        """Positions the newest token attends to, itself included: the cache length after the pass."""
        return self.n_past + self.n_new

    @property
    def flops(self) -> int:
        return self._sum("flops")

    @property
    def streamed_weight_bytes(self) -> int:
        """Weights read by the pass (``lib.costs.streamed_weight_bytes``), once for the whole batch."""
        return self._sum("streamed_weight_bytes")

    @property
    def kv_read_bytes(self) -> int:
        """K and V of every position of the context, per sequence: kv_cache_bytes(context, batch)."""
        return self._sum("kv_read_bytes")

    @property
    def kv_write_bytes(self) -> int:
        """K and V of the new positions: kv_cache_bytes(n_new, batch)."""
        return self._sum("kv_write_bytes")

    @property
    def bytes(self) -> int:
        """All bytes moved: weights read + KV read + KV write."""
        return self._sum("bytes")

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte."""
        return self.flops / self.bytes

    @property
    def kv_read_share(self) -> float:
        """Share of all bytes that are KV-cache reads."""
        return self.kv_read_bytes / self.bytes

    @property
    def tokens(self) -> int:
        """Tokens processed by the pass, whole batch: batch × n_new."""
        return self.batch * self.n_new


def step_cost(model, context: int, n_new: int = 1, batch: int = 1, dtype=torch.float16,
              last_only: bool = True, kv_dtype=None) -> StepCost:
    """What one forward pass costs, per operator: ``batch`` sequences each feed ``n_new`` tokens, and the
    newest attends to ``context`` positions (itself included; ``n_past = context - n_new`` were cached).

    Per operator (L layers, B sequences, H query / KV key-value heads of head_dim hd, Σkeys = the keys the new
    queries see, causally: n_new·n_past + n_new(n_new+1)/2):
      norms        0 FLOPs;                          reads the norm weights
      qkv_proj     2·B·n_new·d·(H + 2·KV)·hd·L;     reads W_q, W_k, W_v (+ biases)
      kv_write     0 FLOPs;                          writes K, V of n_new positions per sequence
      attn_scores  2·B·H·hd·Σkeys·L (Q·Kᵀ);          reads K of the context's positions per sequence
      attn_values  2·B·H·hd·Σkeys·L (weights·V);     reads V of the context's positions per sequence
      out_proj     2·B·n_new·H·hd·d·L;              reads W_o (+ bias)
      ffn          2·B·n_new·d·d_ff·(3 if swiglu else 2)·L; reads the FFN matrices (+ biases)
      lm_head      2·B·rows·d·vocab, rows = 1 with ``last_only`` (as generation needs) else n_new;
                   reads the vocab × d output matrix (the token embedding itself when tied)
    Weights are read once for the whole batch; K/V are per sequence. Every query head multiplies, even under
    GQA, so FLOPs use H and bytes use KV. A dense masked implementation also multiplies the masked future
    entries, n_new·context keys per query; that equals Σkeys only when n_new = 1 (decode).

    ``dtype`` is the weights' number format and, unless ``kv_dtype`` is given, the KV cache's. Quantized weights
    (``dtype="int8"`` or ``"int4"``) with a 16-bit cache: ``kv_dtype="bf16"``. The FLOPs stay the same (the
    weights are dequantized and multiplied in 16 bits; that extra work is not counted).
    """
    c = model_config(model)
    context = checks.integer(context, "context (positions the newest token attends to, itself included)", 1)
    n_new = checks.integer(n_new, "n_new (tokens fed per sequence in this pass)", 1)
    batch = checks.integer(batch, "batch", 1)
    if n_new > context:
        raise ValueError(f"n_new={n_new} is more than context={context}: the context counts the cached positions "
                         f"and the new ones, so it is at least n_new")
    checks.flag(last_only, "last_only")
    n_past = context - n_new
    L, d, hd, H, KV = c.n_layers, c.d_model, c.head_dim, c.n_heads, c.n_kv_heads
    keys = n_new * n_past + n_new * (n_new + 1) // 2
    kv = dtype if kv_dtype is None else kv_dtype
    w = {op: _bytes(v, dtype) for op, v in _streamed_values(c).items()}
    kv_read = kv_cache_bytes(c, context, batch, kv)  # K and V: the first half keys, the rest values
    ops = {
        "norms": OpCost(streamed_weight_bytes=w["norms"]),
        "qkv_proj": OpCost(batch * L * 2 * n_new * d * (H + 2 * KV) * hd, w["qkv_proj"]),
        "kv_write": OpCost(kv_write_bytes=kv_cache_bytes(c, n_new, batch, kv)),
        "attn_scores": OpCost(batch * L * 2 * H * hd * keys, kv_read_bytes=kv_read // 2),
        "attn_values": OpCost(batch * L * 2 * H * hd * keys, kv_read_bytes=kv_read - kv_read // 2),
        "out_proj": OpCost(batch * L * 2 * n_new * H * hd * d, w["out_proj"]),
        "ffn": OpCost(batch * L * 2 * n_new * d * c.d_ff * (3 if c.activation == "swiglu" else 2), w["ffn"]),
        "lm_head": OpCost(batch * 2 * (1 if last_only else n_new) * d * c.vocab_size, w["lm_head"]),
    }
    return StepCost(phase="decode" if n_new == 1 and n_past > 0 else "prefill", batch=batch, n_new=n_new,
                    n_past=n_past, dtype=dtype_name(dtype), by_operator=ops,
                    kv_dtype=None if kv_dtype is None or dtype_name(kv) == dtype_name(dtype) else dtype_name(kv))


def pass_cost(model, n_new: int, n_past: int = 0, batch: int = 1, dtype=torch.float16,
              last_only: bool = True) -> StepCost:
    """``step_cost`` for a pass given as (tokens fed, tokens already cached), as a Trace or
    ``generation_steps`` records it: context = n_past + n_new."""
    n_new = checks.integer(n_new, "n_new (tokens fed per sequence in this pass)", 1)
    n_past = checks.integer(n_past, "n_past (tokens already cached per sequence)", 0)
    return step_cost(model, n_past + n_new, n_new, batch, dtype, last_only)


def prefill_cost(model, prompt_len: int, batch: int = 1, dtype=torch.float16) -> StepCost:
    """The prefill: the whole ``prompt_len``-token prompt of every sequence in one pass, empty cache
    (context = prompt_len; logits for the last position only, as generation needs)."""
    prompt_len = checks.integer(prompt_len, "prompt_len", 1)
    return step_cost(model, prompt_len, prompt_len, batch, dtype)


def decode_cost(model, context: int, batch: int = 1, dtype=torch.float16, kv_dtype=None) -> StepCost:
    """One decode step: one new token per sequence attending to ``context`` positions, itself included
    (``context - 1`` cached before the step). It reads ``context`` tokens of K/V per sequence and writes 1.
    ``kv_dtype``: the cache's number format when it differs from the weights' ``dtype`` (``step_cost``)."""
    return step_cost(model, context, 1, batch, dtype, kv_dtype=kv_dtype)


def forward_flops(config, n_new: int, n_past: int = 0, last_only: bool = False) -> dict[str, int]:
    """Matmul FLOPs of one forward pass feeding ``n_new`` tokens with ``n_past`` tokens already cached, batch 1,
    per operator of ``step_cost`` (keys ``FLOP_TERMS``), plus projections = qkv + out, attention = scores +
    values, total = everything. ``last_only=False`` (the default) counts lm_head for every fed position, as
    ``model(ids)`` returns them; ``True`` for the last position only, as generation needs."""
    n_new = checks.integer(n_new, "n_new (tokens fed per sequence in this pass)", 1)
    n_past = checks.integer(n_past, "n_past (tokens already cached per sequence)", 0)
    ops = step_cost(config, n_past + n_new, n_new, 1, "fp32", last_only).by_operator
    f = {k: ops[k].flops for k in FLOP_TERMS}
    f["projections"] = f["qkv_proj"] + f["out_proj"]
    f["attention"] = f["attn_scores"] + f["attn_values"]
    f["total"] = sum(f[k] for k in FLOP_TERMS)
    return f


# ---------------------------------------------------------------------------- KV cache vs the weights

def kv_memory_crossover_tokens(model, dtype=torch.float16, kv_dtype=None) -> float:
    """**KV cache memory = weight memory** at this many cached tokens, summed over the batch (batch × context):
    ``weight_bytes / kv_bytes_per_token``. About 25,705 for Llama-2-7B. ``kv_dtype``: the cache's number
    format when it differs from the weights' (None: ``dtype``)."""
    return weight_bytes(model, dtype) / kv_bytes_per_token(model_config(model), dtype if kv_dtype is None else kv_dtype)


def kv_read_crossover_tokens(model, dtype=torch.float16) -> float:
    """**KV bytes read = weight bytes read** by one decode step at this many cached tokens, summed over the batch
    (batch × context): ``streamed_weight_bytes / kv_bytes_per_token``. About 25,205 for Llama-2-7B: earlier than
    the memory crossover, because the lookup tables are stored but not read. It depends only on the shapes:
    the bytes per value cancel (up to int4's rounding)."""
    return streamed_weight_bytes(model, dtype) / kv_bytes_per_token(model_config(model), dtype)


def crossover_context(model, batch: int = 1, dtype=torch.float16) -> int:
    """Smallest context at which a decode step with ``batch`` sequences reads more KV bytes than weight bytes
    (batch × context × kv_per_token > streamed weights). May exceed the model's max_seq_len."""
    c = model_config(model)
    batch = checks.integer(batch, "batch", 1)
    return streamed_weight_bytes(c, dtype) // (batch * kv_bytes_per_token(c, dtype)) + 1


def crossover_batch(model, context: int, dtype=torch.float16) -> int:
    """Smallest batch at which a decode step at ``context`` reads more KV bytes than weight bytes."""
    c = model_config(model)
    context = checks.integer(context, "context (positions the newest token attends to, itself included)", 1)
    return streamed_weight_bytes(c, dtype) // (context * kv_bytes_per_token(c, dtype)) + 1


# --------------------------------------------------------------------------- decode and the batch size

def decode_intensity_limit(model, context: int, dtype=torch.float16) -> float:
    """Decode intensity as batch → ∞ at ``context``: FLOPs per sequence / KV bytes per sequence (read
    ``context`` tokens, write 1). The weights are shared by the batch, the KV cache is not, so batching can
    push decode up to here and no further."""
    one = decode_cost(model, context, 1, dtype)
    return one.flops / (one.kv_read_bytes + one.kv_write_bytes)


def decode_batch_for_intensity(model, context: int, target: float, dtype=torch.float16) -> int | None:
    """Smallest batch at which a decode step at ``context`` reaches arithmetic intensity ``target``
    (e.g. a machine's ridge point), or None when no batch does (target >= decode_intensity_limit).

    Exact: with F the FLOPs per sequence, W the weight bytes read and k the KV bytes per sequence,
    B·F / (W + B·k) >= target  <=>  B·(F − target·k) >= target·W, solved in rational arithmetic."""
    one = decode_cost(model, context, 1, dtype)
    target = Fraction(checks.number(target, "target intensity (FLOP/byte)", above=0))
    room = one.flops - target * (one.kv_read_bytes + one.kv_write_bytes)
    if room <= 0:
        return None
    return math.ceil(target * one.streamed_weight_bytes / room)


# ------------------------------------------------------------------------------------ generation schedule

def _schedule(prompt_len, n_new, use_cache) -> list[tuple[int, int]]:
    """(n_fed, n_past) for each of the n_new forward passes of lib.generate."""
    prompt_len = checks.integer(prompt_len, "prompt_len", 1)
    n_new = checks.integer(n_new, "n_new (tokens to generate)", 1)  # lib.generate also needs >= 1
    checks.flag(use_cache, "use_cache")
    if use_cache:  # step 0 = prefill of the whole prompt; then one token per step on top of the cache
        return [(prompt_len, 0) if s == 0 else (1, prompt_len + s - 1) for s in range(n_new)]
    return [(prompt_len + s, 0) for s in range(n_new)]  # no cache: re-feed everything generated so far


def generation_steps(config, prompt_len: int, n_new: int, use_cache: bool) -> list[dict]:
    """Per forward pass of generating ``n_new`` tokens from a ``prompt_len``-token prompt.

    With cache:    step 0 feeds the prompt (prefill); step s ≥ 1 feeds 1 token, n_past = prompt_len + s − 1.
    Without cache: step s feeds the whole sequence so far, prompt_len + s tokens, n_past = 0.
    Each dict has step, n_fed, n_past, n_keys (the context: positions the newest token attends to, itself
    included), kv_computed (positions whose K, V are computed, per layer per sequence = n_fed), kv_read
    (positions whose K, V were computed by earlier steps and are reused from the cache = n_past; the
    attention reads kv_read + kv_computed = n_keys positions), and the forward_flops terms (lm_head on the
    last position only: generation needs no other logits).
    """
    c = model_config(config)
    rows = []
    for step, (n_fed, n_past) in enumerate(_schedule(prompt_len, n_new, use_cache)):
        rows.append({"step": step, "n_fed": n_fed, "n_past": n_past, "n_keys": n_past + n_fed,
                     "kv_computed": n_fed, "kv_read": n_past,
                     **forward_flops(c, n_fed, n_past, last_only=True)})
    return rows


def kv_computations(prompt_len: int, n_new: int, use_cache: bool) -> list[int]:
    """K/V vectors computed per step (per layer, per sequence): [prompt_len, 1, 1, ...] with the cache,
    [prompt_len, prompt_len+1, ...] without."""
    return [n_fed for n_fed, _ in _schedule(prompt_len, n_new, use_cache)]


def total_kv_computations(prompt_len: int, n_new: int, use_cache: bool) -> int:
    """Sum of kv_computations: prompt_len + n_new − 1 with the cache (= n for a 1-token prompt),
    n_new·prompt_len + n_new(n_new−1)/2 without (= n(n+1)/2 for a 1-token prompt)."""
    return sum(kv_computations(prompt_len, n_new, use_cache))


def generation_flops(config, prompt_len: int, n_new: int, use_cache: bool) -> dict[str, int]:
    """forward_flops terms summed over every step of generation_steps."""
    rows = generation_steps(config, prompt_len, n_new, use_cache)
    keys = (*FLOP_TERMS, "projections", "attention", "total")
    return {k: sum(r[k] for r in rows) for k in keys}


# ----------------------------------------------------------------------------------------------- describe

def describe(config, name: str | None = None, dtype=torch.float16) -> str:
    """One line: name (looked up in the presets and demo models if not given), shapes, attention kind, params,
    KV per token; in the current language (``lib.i18n.say``)."""
    found, config = resolve_model(config, allow_mla=True)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"describe(name=...) must be a string or None, got {type(name).__name__}")
    name = found if name is None else name
    kv = f"{fmt_bytes(kv_bytes_per_token(config, dtype), 3)}/token in {dtype_name(dtype)}"
    if isinstance(config, MLAConfig):
        return say(f"{name}: {config.n_layers} layers, d_model {config.d_model}, {config.n_heads} heads with "
                   f"MLA (caches {config.kv_lora_rank} latent + {config.qk_rope_head_dim} rope values per layer); "
                   f"KV cache {kv}")
    c = config
    params = fmt_count(param_count(c))
    return say(f"{name}: {c.n_layers} layers, d_model {c.d_model}, {c.n_heads} query heads / {c.n_kv_heads} KV "
               f"heads ({c.attention_kind}), head_dim {c.head_dim}, d_ff {c.d_ff} {c.activation}, "
               f"{c.positions} positions; {params} params, KV cache {kv}")
