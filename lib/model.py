"""MiniTransformer: a small decoder-only Transformer written out in plain PyTorch.

One forward pass, for input tokens x of shape (B, T):

    h = tok_emb(x) (+ pos_emb)                      # (B, T, d_model)
    for each layer:                                 # pre-norm residual blocks
        h = h + attention(norm1(h), cache)          #   tokens look at earlier tokens
        h = h + ffn(norm2(h))                       #   each token on its own
    logits = lm_head(norm_f(h))                     # (B, T, vocab_size)

The KV cache is *not* part of the model: it is an object passed into ``forward`` (see ``lib.cache``), so
``state_dict()`` and ``parameters()`` hold weights only. Passing a ``ForwardRecord`` makes every attention
layer report what it really computed (how many K/V vectors, how many it read from the cache, its weights).
The causal mask (and a sliding window's) is built once per pass (``Feed.mask``: by order for sequences in step,
from the positions the cache reports otherwise) and handed to every layer; a block called on its own builds the
causal one itself. Rotary angles (``Rope``) are the fed tokens' positions in the text, computed once per pass; a
cache that numbers positions within itself (``KVCache(..., positions="cache")``, StreamingLLM) hands back keys
not yet rotated, and attention rotates them at their places in it, 0..S-1.
"""
from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
import torch.nn as nn
import torch.nn.functional as F

from . import checks, i18n
from .cache import Feed
from .config import ModelConfig


@dataclass
class ForwardRecord:
    """What one forward pass did, filled in by the attention layers themselves (instrumentation).
    kv_computed[layer] / kv_read[layer]: positions whose K/V this layer computed / took from the cache (per
    sequence); attention[layer]: the newest query's weights (B, n_heads, n_keys). ``capture=True`` also keeps
    every intermediate tensor per layer in ``tensors[layer]`` (q, k, v after rotary, attention weights, mix,
    attention output, FFN output, hidden state) and ``tensors["embedding"]``.

    A recorded pass always runs attention written out (scores, mask, softmax, weighted sum), because the
    weights it reports exist only there: a model configured with ``attn_impl="sdpa"`` (the fused kernel, which
    never forms them) switches to the written-out path while it records. Same maths, so its logits equal an
    unrecorded pass's within float rounding (``tests/test_model.py`` checks it)."""

    capture: bool = False
    kv_computed: dict = field(default_factory=dict)
    kv_read: dict = field(default_factory=dict)
    attention: dict = field(default_factory=dict)
    tensors: dict = field(default_factory=dict)

    def put(self, layer, **tensors):
        if self.capture:
            self.tensors.setdefault(layer, {}).update({k: v.detach() for k, v in tensors.items()})


@contextmanager
def eval_mode(model):
    """``with eval_mode(model):`` runs the block with the model in eval mode, then puts it back in the mode it
    was in (training or not), even when the block fails. Generation and measuring run a model so; whether it
    trains is its owner's business. ``model``: anything with ``.training``, ``.eval()`` and ``.train(mode)``
    (a ``MiniTransformer``, a ``FastDecoder``)."""
    was_training = model.training
    modules = getattr(model, "modules", None)
    if not was_training and modules is not None and not any(m.training for m in modules()):
        yield model  # in eval mode throughout already: nothing to switch (a switch walks every module, twice a step)
        return
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


class RMSNorm(nn.Module):
    """x / rms(x) * weight — LayerNorm without the mean subtraction and the bias (Llama)."""

    def __init__(self, dim: int, eps: float = 1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x):
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return xf.to(x.dtype) * self.weight


def make_norm(config: ModelConfig) -> nn.Module:
    if config.norm == "rmsnorm":
        return RMSNorm(config.d_model, config.norm_eps)
    return nn.LayerNorm(config.d_model, eps=config.norm_eps)


def rope_tables(head_dim: int, positions: torch.Tensor, theta: float):
    """cos and sin of the rotary angles at ``positions`` (B or 1, T), each (B or 1, 1, T, head_dim) so they
    broadcast over the heads; 'rotate half' layout (Llama / HF). Computed in fp32 on the fly (cheap), so a
    model cast to fp16/bf16 still gets exact angles."""
    exponents = torch.arange(0, head_dim, 2, device=positions.device, dtype=torch.float32) / head_dim
    inv_freq = 1.0 / (theta ** exponents)  # (head_dim/2,)
    angles = positions.float()[..., None] * inv_freq  # (B, T, head_dim/2)
    angles = torch.cat([angles, angles], dim=-1)[:, None]  # (B, 1, T, head_dim)
    return angles.cos(), angles.sin()


class Rope(NamedTuple):
    """One pass's rotary angles, each (B or 1, 1, n, head_dim). ``cos`` and ``sin`` at the fed tokens'
    positions rotate the queries and, before they are cached, the new keys. A cache that keeps its keys
    unrotated and numbers positions within itself (``KVCache(..., positions="cache")``, StreamingLLM) gets
    ``keys`` too: (cos, sin) at 0..S-1 for the S keys it hands back, after which the T queries sit at S-T..S-1."""

    cos: torch.Tensor
    sin: torch.Tensor
    keys: tuple | None = None

    @classmethod
    def of(cls, feed: Feed, head_dim: int, theta: float) -> "Rope":
        if not feed.rope_in_cache:
            return cls(*rope_tables(head_dim, feed.positions, theta))
        S, T = feed.n_keys, feed.positions.shape[1]
        places = torch.arange(S, device=feed.positions.device)[None]  # (1, S): 0..S-1 within the cache
        return cls(*rope_tables(head_dim, places[:, S - T:], theta), keys=rope_tables(head_dim, places, theta))


def apply_rope(x, cos, sin):
    """Rotate pairs (x_i, x_{i+d/2}) of x (B, H, T, head_dim) by position-dependent angles (B, 1, T, head_dim)."""
    half = x.shape[-1] // 2
    rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
    return x * cos.to(x.dtype) + rotated * sin.to(x.dtype)


class Attention(nn.Module):
    """Causal self-attention with n_kv_heads key/value heads shared by groups of query heads (MHA/GQA/MQA)."""

    def __init__(self, config: ModelConfig, layer: int):
        super().__init__()
        c = config
        self.layer = layer
        self.n_heads, self.n_kv_heads, self.head_dim = c.n_heads, c.n_kv_heads, c.head_dim
        self.q_proj = nn.Linear(c.d_model, c.n_heads * c.head_dim, bias=c.qkv_bias)
        self.k_proj = nn.Linear(c.d_model, c.n_kv_heads * c.head_dim, bias=c.qkv_bias)
        self.v_proj = nn.Linear(c.d_model, c.n_kv_heads * c.head_dim, bias=c.qkv_bias)
        self.o_proj = nn.Linear(c.n_heads * c.head_dim, c.d_model, bias=c.bias)
        self.impl = c.attn_impl

    def qkv(self, x):
        """The three projections of the fed tokens: q (B, T, n_heads * head_dim), k and v (B, T, n_kv_heads * head_dim)."""
        return self.q_proj(x), self.k_proj(x), self.v_proj(x)

    def forward(self, x, rope=None, mask=None, cache=None, record: ForwardRecord | None = None, packed=None):
        B, T, _ = x.shape
        hd = self.head_dim
        w = self if packed is None else packed  # the products: this layer's nn.Linear, or FastDecoder's copies
        # 1. project only the tokens fed in this pass
        q, k, v = w.qkv(x)
        q = q.view(B, T, self.n_heads, hd).transpose(1, 2)  # (B, n_heads, T, head_dim)
        k = k.view(B, T, self.n_kv_heads, hd).transpose(1, 2)  # (B, n_kv_heads, T, head_dim)
        v = v.view(B, T, self.n_kv_heads, hd).transpose(1, 2)  # (B, n_kv_heads, T, head_dim)
        if rope is not None:  # rotary positions: rotate q and k by angles that depend on the position
            q = apply_rope(q, rope.cos, rope.sin)
            k = k if rope.keys is not None else apply_rope(k, rope.cos, rope.sin)  # cached rotated, or not yet
        # 2. the cache appends the new K/V and hands back every key and value so far
        keys, values = (k, v) if cache is None else cache.update(self.layer, k, v)  # (B, n_kv_heads, S, head_dim)
        if rope is not None and rope.keys is not None:  # StreamingLLM: each key rotated at its place in the cache
            keys = apply_rope(keys, *rope.keys)  # (B, n_kv_heads, S, head_dim)
            k = keys[:, :, -T:]  # the fed tokens' keys as attention uses them (for the record)
        if record is not None:
            record.kv_computed[self.layer] = T
            record.kv_read[self.layer] = keys.shape[2] - T  # positions taken from the cache
        # 3. each K/V head serves n_heads // n_kv_heads query heads
        rep = self.n_heads // self.n_kv_heads
        if rep > 1:
            keys = keys.repeat_interleave(rep, dim=1)  # (B, n_heads, S, head_dim)
            values = values.repeat_interleave(rep, dim=1)
        # 4. mask: (B or 1, 1, T, S), built once per pass (a query sees only keys at its position or before;
        #    with a sliding window only the last W); None when every key is visible (one query at the end).
        #    A block called on its own (no pass, no mask) with several queries is still causal:
        S = keys.shape[2]
        if mask is None and T > 1:
            mask = torch.ones(T, S, dtype=torch.bool, device=x.device).tril(diagonal=S - T)  # (T, S)
        if self.impl == "sdpa" and record is None:  # the fused kernel: same maths, the weights never formed
            out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask)
            weights = None
        else:  # written out: scores, mask, softmax, weighted sum (always when recording: it reports the weights)
            scores = (q @ keys.transpose(-2, -1)) / math.sqrt(hd)  # (B, n_heads, T, S)
            if mask is not None:
                scores = scores.masked_fill(~mask, float("-inf"))
            weights = torch.softmax(scores.float(), dim=-1).to(q.dtype)  # each row sums to 1
            out = weights @ values  # (B, n_heads, T, head_dim)
        mix = out.transpose(1, 2).reshape(B, T, self.n_heads * hd)  # (B, T, n_heads * head_dim)
        out = w.o_proj(mix)  # (B, T, d_model)
        if record is not None:
            record.attention[self.layer] = weights[:, :, -1, :].detach()  # (B, n_heads, S)
            record.put(self.layer, q=q, k=k, v=v, attn_weights=weights, mix=mix, attn_out=out)
        return out


# the FFN's non-linearity for each ModelConfig.activation but SwiGLU (which multiplies silu(gate) by up)
NONLINEARITY = {"gelu": F.gelu, "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"), "silu": F.silu}


class FeedForward(nn.Module):
    """Two linear layers around a non-linearity, applied to every position separately (SwiGLU: three)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        c = config
        self.activation = c.activation
        if c.activation == "swiglu":
            self.gate_proj = nn.Linear(c.d_model, c.d_ff, bias=c.bias)
        self.up_proj = nn.Linear(c.d_model, c.d_ff, bias=c.bias)
        self.down_proj = nn.Linear(c.d_ff, c.d_model, bias=c.bias)

    def gate_up(self, x):
        """SwiGLU's two input projections, gate and up, each (B, T, d_ff)."""
        return self.gate_proj(x), self.up_proj(x)

    def forward(self, x, packed=None):  # (B, T, d_model) -> (B, T, d_model)
        w = self if packed is None else packed  # the products: this layer's nn.Linear, or FastDecoder's copies
        if self.activation == "swiglu":
            gate, up = w.gate_up(x)
            h = F.silu(gate) * up
        else:
            h = NONLINEARITY[self.activation](w.up_proj(x))
        return w.down_proj(h)  # h: (B, T, d_ff)


class Block(nn.Module):
    """One decoder layer: pre-norm attention and FFN, each added back onto the residual stream."""

    def __init__(self, config: ModelConfig, layer: int):
        super().__init__()
        self.norm1 = make_norm(config)
        self.attn = Attention(config, layer)
        self.norm2 = make_norm(config)
        self.mlp = FeedForward(config)

    def forward(self, h, rope=None, mask=None, cache=None, record=None, packed=None):
        p = None if packed is None else packed.layers[self.attn.layer]
        h = h + self.attn(self.norm1(h), rope, mask, cache, record, p)
        ffn_out = self.mlp(self.norm2(h), p)
        h = h + ffn_out
        if record is not None:
            record.put(self.attn.layer, ffn_out=ffn_out, hidden=h)
        return h


class MiniTransformer(nn.Module):
    """A decoder-only Transformer: ``model(input_ids, cache=None)`` -> logits (B, T, vocab_size)."""

    def __init__(self, config: ModelConfig):
        super().__init__()
        if not isinstance(config, ModelConfig):
            raise TypeError(f"MiniTransformer needs a lib.ModelConfig, got {type(config).__name__}")
        self.config = config
        self.tok_emb = nn.Embedding(config.vocab_size, config.d_model)
        if config.positions == "learned":
            self.pos_emb = nn.Embedding(config.max_seq_len, config.d_model)
        self.blocks = nn.ModuleList(Block(config, i) for i in range(config.n_layers))
        self.norm_f = make_norm(config)
        self.lm_head = nn.Linear(config.d_model, config.vocab_size, bias=False)
        if config.tie_embeddings:
            self.lm_head.weight = self.tok_emb.weight
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2: scale the residual projections by depth
            if name.endswith(("o_proj.weight", "down_proj.weight")):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layers))

    @staticmethod
    def _init_weights(module):
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    @property
    def device(self) -> torch.device:
        return self.tok_emb.weight.device

    @property
    def dtype(self) -> torch.dtype:
        return self.tok_emb.weight.dtype

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def check_input(self, input_ids, cache=None, lengths=None, record=None, *, ids: bool = True):
        """Raise a clear error unless ``input_ids`` (B, T) can be fed (with ``cache`` and ``record``; ``lengths``:
        real tokens per row of a right-padded ragged batch). The lengths as a list, or None when every row feeds T.
        Checking the ids reads their range from the device (a host sync); ``ids=False`` skips it, for a caller
        that checked them already (``lib.generate``: the prompt once; every later token is the model's choice)."""
        c = self.config
        if ids:
            checks.token_tensor(input_ids, c.vocab_size, self.device)
        checks.forward_extras(cache, record)
        B, T = input_ids.shape
        lengths = None if lengths is None else checks.ragged_lengths(lengths, B, T)
        within = "" if cache is None or cache.positions == "text" else " within the cache"  # StreamingLLM's
        for b, start in enumerate([0] * B if cache is None else cache.next_positions):
            n = T if lengths is None else lengths[b]
            if start + n > c.max_seq_len:
                raise ValueError(i18n.t(
                    "sequence too long for the context window{row}: positions{within} {first}..{end} were asked for, "
                    "but this model has max_seq_len={max_seq_len} (positions 0..{last})",
                    row=i18n.t(" (row {b})", b=b) if B > 1 else "", within=i18n.t(within) if within else "",
                    first=start, end=start + n - 1, max_seq_len=c.max_seq_len, last=c.max_seq_len - 1))
        return lengths

    def forward(self, input_ids, cache=None, record: ForwardRecord | None = None, *, last_only: bool = False,
                lengths=None, packed=None, checked: bool = False):
        """Logits for every fed position, (B, T, vocab_size); with ``last_only=True`` only each sequence's
        last one, (B, 1, vocab_size), which is all that generation needs (lm_head then runs on one position).

        With a cache, positions continue from what it holds and the new K/V are appended to it; a pass that
        fails leaves the cache as it was. ``lengths``: a ragged batch, right-padded to T, where row b feeds
        ``lengths[b]`` real tokens (its padding is never attended to; a ``PagedKVCache`` stores only the real
        ones). ``packed``: packed copies of the weights to multiply with (``lib.FastDecoder``'s). ``checked=True``:
        the caller has checked ``input_ids`` already (ids of this model, on its device), so the pass does not
        read them back from the device; it still checks what changes from pass to pass (the positions)."""
        lengths = self.check_input(input_ids, cache, lengths, record, ids=not checked)
        B, T = input_ids.shape
        if cache is None:
            feed = Feed.ragged([0] * B, lengths or [T] * B, input_ids.device)
        else:
            feed = cache.begin(self, B, T, lengths)  # (B, T) positions, and the mask
        try:
            h = self.tok_emb(input_ids)  # (B, T, d_model)
            rope = None
            if self.config.positions == "learned":
                h = h + self.pos_emb(feed.positions)  # (B or 1, T, d_model), broadcast over the batch
            else:  # the fed tokens' angles (and, for a cache that numbers within itself, its keys')
                rope = Rope.of(feed, self.config.head_dim, self.config.rope_theta)
            if record is not None and record.capture:
                record.tensors["embedding"] = h.detach()
            mask = feed.mask(self.config.sliding_window)  # (B or 1, 1, T, S) or None: once, for every layer
            for block in self.blocks:
                h = block(h, rope, mask, cache, record, packed)
        except BaseException:
            if cache is not None:
                cache.rollback()  # a failed pass (an error, Ctrl-C) leaves the cache as it was
            raise
        if cache is not None:
            cache.commit()
        if record is not None and feed.key_positions is not None:  # a ring's keys: weights over positions 0..
            record.attention = {l: a.new_zeros(*a.shape[:-1], int(feed.key_positions[-1]) + 1)
                                .index_copy_(-1, feed.key_positions, a) for l, a in record.attention.items()}
        if last_only:
            h = feed.last(h)  # (B, 1, d_model)
        head = self.lm_head if packed is None else packed.lm_head
        return head(self.norm_f(h))  # (B, T or 1, vocab_size)
