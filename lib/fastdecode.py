"""A decode step that keeps every CPU core streaming weights: ``FastDecoder(model)``.

Why it exists. A decode step feeds one token, so every linear layer is a matrix-vector product: each weight
is read once and used for one multiply-add. The step is bound by how fast the weights come out of memory,
not by arithmetic (notebook 06, the roofline). On the 2-core machine this project is built on, PyTorch's
one-token ``F.linear`` (``x @ W.T`` with W stored (out, in)) streams a GPT-2-sized model at about 15 GB/s
with one thread and no faster with two, while a plain sum over memory reads 25 to 39 GB/s on two cores
(a shared machine: it varies; ``python -m tools.bench`` measures both): one core alone cannot pull all of
the bandwidth.

What it changes, and nothing else:

1. Layout. Every weight is stored transposed, (in, out), so the product is ``x @ W``: it walks the weight
   row after row and adds ``x[i] * W[i, :]`` into the output, one long contiguous stream.
2. Split. Every weight is cut into ``shards`` slices stacked into one tensor, and the product is one
   ``torch.bmm`` over the stack. PyTorch runs the batch of a ``bmm`` in parallel, so with two threads each
   core reads its own half of every weight at the same time. Wide layers are cut by output columns (each
   slice computes part of the output); the two narrow ones, attention's o_proj and the FFN's down_proj
   (d_model outputs), are cut by input rows (each slice computes a partial sum over its part of the input,
   and the partial sums are added), because the product streams faster when each slice keeps a wide
   output. This is Megatron-style tensor parallelism, here across the cores of one CPU.
3. Fused projections. q, k and v are one packed weight (and SwiGLU's gate and up another), so a layer
   runs four products instead of six (seven with SwiGLU).

It is not a second forward pass: ``FastDecoder(model)(ids, cache)`` runs ``model.forward(..., packed=fast)``,
the model's own blocks, norms, rotary angles, attention, activations and KV cache, with only the matrix
products (``Attention.qkv``/``o_proj``, ``FeedForward.up_proj``/``gate_up``/``down_proj``, ``lm_head``) taken
from the packed copies. The arithmetic is the model's own; only the order of the additions inside each dot product differs, so logits agree to float
rounding (about 1e-6) and greedy tokens are the same (``tests/test_fastdecode.py`` checks both against
the plain model over MHA/GQA/MQA, learned/RoPE positions, LayerNorm/RMSNorm, every activation, biases,
tied and untied heads).

Use it in place of the model; ``lib.generate`` accepts it::

    fast = FastDecoder(model)                       # packs a transposed, split copy of the weights
    out = lib.generate(fast, ids, 200)              # same tokens as lib.generate(model, ids, 200)

Every pass runs on the packed weights (the prefill too), except one that records attention
(``record=``, as ``generate(..., trace=True)`` does) or a model in training mode: those are handed to
the plain model, so traces and widgets still work. The
packed copy costs as much memory as the weights themselves, and it does not follow later changes to the
model's weights: a call after such a change raises an error that asks for a new ``FastDecoder``.
The notebooks keep showing the plain model (``lib.model``); this module is only about speed.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F

from . import checks
from .model import ForwardRecord, MiniTransformer


class StaleWeightsError(RuntimeError):
    """The model's weights changed after a ``FastDecoder`` packed its copy of them."""


class PackedLinear:
    """One linear layer (or several fused ones that share their input), stored for a fast one-token product,
    cut into ``shards`` slices that the cores read side by side (one ``torch.bmm``, batched over the slices).

    ``split="cols"`` (column-parallel): slice s holds output columns ``s*n .. (s+1)*n - 1`` of ``W`` stored
    (in, out), as a (shards, in, n) stack; the slices' outputs are laid side by side.
    ``split="rows"`` (row-parallel): slice s holds input rows ``s*k .. (s+1)*k - 1``, as (shards, k, out);
    each slice multiplies its part of ``x`` and the partial outputs are summed. Layers with a narrow output
    (attention's o_proj, the FFN's down_proj: d_model columns) use it, because the product streams faster
    when each slice keeps a wide output. A size that does not divide evenly is padded with zeros.
    ``__call__(x)`` takes (..., in) — every token flattened into one batch — and returns (..., out), plus the bias."""

    def __init__(self, weights: list, biases: list, shards: int, split: str = "cols"):
        if split not in ("cols", "rows"):
            raise ValueError(f"split must be 'cols' or 'rows', got {split!r}")
        w = torch.cat([t.detach() for t in weights], dim=0)  # (out, in): the torch layout, fused along out
        self.out_features, self.in_features = w.shape
        self.shards, self.split = shards, split
        wt = w.t()  # (in, out): the product becomes x @ wt, one contiguous stream of rows
        if split == "cols":
            n = math.ceil(self.out_features / shards)
            self.pad = n * shards - self.out_features
            wt = F.pad(wt, (0, self.pad))  # zero columns at the end
            self.weight = wt.reshape(self.in_features, shards, n).permute(1, 0, 2).contiguous()  # (shards, in, n)
        else:
            k = math.ceil(self.in_features / shards)
            self.pad = k * shards - self.in_features
            wt = F.pad(wt, (0, 0, 0, self.pad))  # zero rows at the end (they meet zero-padded inputs)
            self.weight = wt.reshape(shards, k, self.out_features).contiguous()  # (shards, k, out)
        self.bias = None
        if any(b is not None for b in biases):
            self.bias = torch.cat([torch.zeros(t.shape[0], dtype=w.dtype, device=w.device) if b is None
                                   else b.detach() for t, b in zip(weights, biases)])  # (out,)
            if split == "cols":  # per slice, so that the product adds it (one op fewer per call)
                self.slice_bias = F.pad(self.bias, (0, self.pad)).reshape(shards, 1, -1).contiguous()

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        lead = x.shape[:-1]
        y = self._product(x.reshape(-1, self.in_features))  # (B*T, out)
        return y.view(*lead, self.out_features)

    def _product(self, x: torch.Tensor) -> torch.Tensor:
        B, P = x.shape[0], self.shards
        if P == 1:  # one slice: a plain x @ W (still the faster, transposed layout)
            w = self.weight[0]
            if self.split == "rows" and self.pad:
                x = F.pad(x, (0, self.pad))
            return x @ w if self.bias is None else torch.addmm(self.bias, x, w)
        if self.split == "cols":
            xs = x.unsqueeze(0).expand(P, B, self.in_features)  # every slice sees all of x (a view)
            y = torch.bmm(xs, self.weight) if self.bias is None else torch.baddbmm(self.slice_bias, xs, self.weight)
            y = y.transpose(0, 1).reshape(B, -1)  # (B, shards * n), slice after slice
            return y[:, :self.out_features] if self.pad else y
        else:
            if self.pad:
                x = F.pad(x, (0, self.pad))
            xs = x.reshape(B, P, -1).transpose(0, 1)  # (shards, B, k): slice s gets its part of x
            y = torch.bmm(xs, self.weight).sum(0)  # (B, out): the partial products added up
        return y if self.bias is None else y + self.bias

    @property
    def nbytes(self) -> int:
        n = self.weight.numel() * self.weight.element_size()
        return n + (0 if self.bias is None else self.bias.numel() * self.bias.element_size())


def _packed(layers, shards, split="cols"):
    return PackedLinear([l.weight for l in layers], [l.bias for l in layers], shards, split)


class PackedLayer:
    """One decoder layer's products on packed weights, with the names the model's layers call
    (``Attention.qkv``, ``o_proj``; ``FeedForward.up_proj`` or ``gate_up``, ``down_proj``): q, k and v are one
    fused product, and so are SwiGLU's gate and up."""

    def __init__(self, block, shards: int):
        a, m = block.attn, block.mlp
        self.sizes = [a.q_proj.out_features, a.k_proj.out_features, a.v_proj.out_features]
        self.fused_qkv = _packed([a.q_proj, a.k_proj, a.v_proj], shards)
        self.o_proj = _packed([a.o_proj], shards, "rows")
        self.up_proj = _packed([m.gate_proj, m.up_proj] if m.activation == "swiglu" else [m.up_proj], shards)
        self.down_proj = _packed([m.down_proj], shards, "rows")

    def qkv(self, x):
        return self.fused_qkv(x).split(self.sizes, dim=-1)  # q, k, v side by side in one product

    def gate_up(self, x):
        return self.up_proj(x).chunk(2, dim=-1)  # gate and up were packed side by side

    @property
    def nbytes(self) -> int:
        return sum(p.nbytes for p in (self.fused_qkv, self.o_proj, self.up_proj, self.down_proj))


class FastDecoder:
    """``model`` with a packed, split copy of its weights (see the module docstring). Acts like the model for
    ``lib.generate``: ``config``, ``device``, ``dtype``, ``eval()``, and ``__call__(input_ids, cache=None,
    record=None, last_only=False, lengths=None, checked=False)`` -> logits, which is the model's own forward
    pass with ``packed=self``: the same blocks, norms, attention and cache, only the matrix products swapped.

    shards: how many slices every weight is cut into; ``None`` means ``torch.get_num_threads()`` at the time
    of packing (one slice per core that will run the product)."""

    def __init__(self, model: MiniTransformer, shards: int | None = None):
        if not isinstance(model, MiniTransformer):
            raise TypeError(f"FastDecoder wraps a lib.MiniTransformer, got {type(model).__name__}")
        if shards is None:
            shards = torch.get_num_threads()
        shards = checks.integer(shards, "shards", 1, allowed="a positive integer (or None for the torch thread count)")
        self.model = model
        self.config = model.config
        self.shards = shards
        with torch.no_grad():
            self.layers = [PackedLayer(block, shards) for block in model.blocks]
            self.lm_head = _packed([model.lm_head], shards)
        self._params = list(model.parameters())
        self._versions = self._weight_versions()

    # -- what lib.generate needs of a model ------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.model.device

    @property
    def dtype(self) -> torch.dtype:
        return self.model.dtype

    @property
    def training(self) -> bool:
        return self.model.training

    def eval(self):
        self.model.eval()
        return self

    def train(self, mode: bool = True):
        self.model.train(mode)
        return self

    @property
    def nbytes(self) -> int:
        """Bytes of the packed copy (about the size of the weights: the price of the fast path)."""
        return sum(layer.nbytes for layer in self.layers) + self.lm_head.nbytes

    def __repr__(self):
        return (f"FastDecoder({self.config.n_layers} layers, d_model {self.config.d_model}, shards={self.shards}, "
                f"packed copy {self.nbytes:,} bytes)")

    # -- the step ------------------------------------------------------------------------------------------
    def _weight_versions(self):
        # a tensor made under torch.inference_mode has no version counter: only its replacement shows
        return [(p.data_ptr(), None if p.is_inference() else p._version) for p in self._params]

    def check_fresh(self):
        """Raise ``StaleWeightsError`` if the model's weights were changed in place or replaced after packing
        (in-place changes of weights created under ``torch.inference_mode``, which keep no version counter,
        cannot be seen)."""
        if self._weight_versions() != self._versions:
            raise StaleWeightsError("the model's weights changed after this FastDecoder packed its copy of them "
                                    "(a training step, load_state_dict, .to(...)); build a new FastDecoder(model)")

    def __call__(self, input_ids, cache=None, record: ForwardRecord | None = None, *, last_only: bool = False,
                 lengths=None, checked: bool = False):
        """Logits (B, T, vocab_size), or (B, 1, vocab_size) with ``last_only``, as the model returns them. A
        pass that records (``record``) or a model in training mode runs on the model's own weights; every
        other pass, the prefill included, on the packed ones. Whether the weights are still the packed
        ones is checked when a sequence starts (a pass without a cache, or on an empty one), not at every
        decode step (it walks every parameter: a tenth of a millisecond for GPT-2)."""
        if cache is None or min(cache.seq_lens) == 0:
            self.check_fresh()
        m = self.model
        if record is not None or m.training:
            return m(input_ids, cache=cache, record=record, last_only=last_only, lengths=lengths, checked=checked)
        with torch.no_grad():
            return m(input_ids, cache=cache, last_only=last_only, lengths=lengths, packed=self, checked=checked)
