"""A quantized KV cache: keys and values stored as 8-bit integers with one scale per token and head.

Quantization here is *symmetric absmax* per (sequence, KV head, position): the head_dim numbers of one key (or
value) vector share one scale, the largest magnitude among them divided by 127, and each number is stored as
the nearest integer of number / scale, in -127..127:

    scale = max |x| / 127               # one fp32 number per (token, head), for K and for V
    q     = round(x / scale)            # int8, head_dim of them
    x'    = q * scale                   # what attention gets back: |x' - x| <= scale / 2 per element

So a key vector of head_dim numbers costs head_dim bytes plus a 4-byte scale instead of head_dim × 2 bytes
(fp16) or × 4 (fp32). The cache follows the protocol of ``lib.cache`` (``begin`` / ``update`` / ``commit`` /
``rollback``), so the model never knows: ``update`` quantizes the new K/V, stores them, and hands attention
every key and value so far, dequantized into the model's dtype. A token's key is quantized once, when it is
written, and attention sees the same dequantized numbers at every later step (the prefill included).

Serving engines do the same to fit more tokens in memory: vLLM's ``kv_cache_dtype="fp8"`` stores the cache in
8-bit floats with scales; KIVI and KVQuant go down to 2-4 bits. Only 8 bits are implemented here.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from . import checks
from .cache import CacheBase
from .config import ModelConfig

BITS = (8,)  # what QuantizedKVCache accepts
QMAX = 127  # int8 symmetric range: -127..127 (-128 is never used, so the range is symmetric)
SCALE_DTYPE = torch.float32  # one scale per (token, head), stored in fp32: 4 bytes


def quantize(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric absmax int8 quantization over the last dimension: x (..., D) -> (q int8 (..., D),
    scale fp32 (..., 1)) with x ≈ q * scale and |q * scale - x| <= scale / 2 (up to float rounding).
    An all-zero vector gets scale 0 and q 0."""
    xf = x.float()
    scale = xf.abs().amax(dim=-1, keepdim=True) / QMAX  # (..., 1)
    q = torch.round(xf / torch.where(scale > 0, scale, torch.ones_like(scale)))  # an all-zero row stays 0
    return q.clamp_(-QMAX, QMAX).to(torch.int8), scale.to(SCALE_DTYPE)


def dequantize(q: torch.Tensor, scale: torch.Tensor, dtype=torch.float32) -> torch.Tensor:
    """q int8 (..., D) and scale (..., 1) -> q * scale in ``dtype``."""
    return (q.float() * scale.float()).to(dtype)


def check_bits(bits) -> int:
    """``bits`` as an int, or a clear error: only 8 is implemented."""
    return checks.integer(bits, "bits", 8, 8, allowed="8 (QuantizedKVCache stores int8 with a scale per token "
                          "and head; 4-bit packing is not implemented)")


class QuantizedKVCache(CacheBase):
    """Preallocated KV cache in int8 with one fp32 scale per (sequence, KV head, position), for K and V
    separately (symmetric absmax, see the module docstring). ``update`` returns the keys and values so far
    dequantized into ``dtype`` (the model's: None means torch's default, fp32). ``nbytes`` counts the int8
    data and the scales: 2 × layers × batch × KV heads × max_len × (head_dim + 4) bytes."""

    kind = "int8"  # its name in a Trace (Trace.cache_kind)

    def __init__(self, config: ModelConfig, batch_size: int, max_len: int, bits: int = 8, device=None, dtype=None):
        self.bits = check_bits(bits)
        super().__init__(config, batch_size, max_len, device, dtype)
        checks.cache_memory(self, max_len)  # an upper bound: it counts dtype bytes per number, more than int8
        data = self.shape(max_len)  # (B, n_kv_heads, max_len, head_dim)
        scales = data[:-1] + (1,)  # (B, n_kv_heads, max_len, 1)
        self.k_q = [torch.zeros(data, dtype=torch.int8, device=self.device) for _ in range(self.n_layers)]
        self.v_q = [torch.zeros_like(t) for t in self.k_q]
        self.k_scale = [torch.zeros(scales, dtype=SCALE_DTYPE, device=self.device) for _ in range(self.n_layers)]
        self.v_scale = [torch.zeros_like(t) for t in self.k_scale]

    def tensors(self) -> list[torch.Tensor]:
        """Every tensor the cache holds: int8 K and V data, then their fp32 scales."""
        return self.k_q + self.v_q + self.k_scale + self.v_scale

    @property
    def nbytes(self) -> int:
        """Bytes held: the int8 data plus the fp32 scales (exact tensor sizes, allocated for max_len)."""
        return sum(t.numel() * t.element_size() for t in self.tensors())

    @property
    def data_bytes(self) -> int:
        """Bytes of the int8 K and V data alone."""
        return sum(t.numel() * t.element_size() for t in self.k_q + self.v_q)

    @property
    def scale_bytes(self) -> int:
        """Bytes of the scales alone (4 per position, KV head, layer, sequence, for K and for V)."""
        return sum(t.numel() * t.element_size() for t in self.k_scale + self.v_scale)

    @property
    def used_bytes(self) -> int:
        """Bytes holding real tokens so far (seq_len of max_len positions)."""
        return self.nbytes * self.seq_len // self.max_len

    def _write(self, layer, k, v):
        start, end = self.seq_len, self.seq_len + k.shape[2]
        for data, scales, x in ((self.k_q, self.k_scale, k), (self.v_q, self.v_scale, v)):
            q, s = quantize(x)  # (B, n_kv_heads, T, head_dim) int8, (B, n_kv_heads, T, 1) fp32
            data[layer][:, :, start:end] = q
            scales[layer][:, :, start:end] = s
        return self._read(layer, end)

    def _read(self, layer, end):
        """Dequantized keys and values of positions 0..end-1, (B, n_kv_heads, end, head_dim) in self.dtype."""
        return (dequantize(self.k_q[layer][:, :, :end], self.k_scale[layer][:, :, :end], self.dtype),
                dequantize(self.v_q[layer][:, :, :end], self.v_scale[layer][:, :, :end], self.dtype))

    def kv(self, layer):
        return self._read(layer, self.seq_len)

    def _crop(self, seq_len):
        pass  # positions past seq_len are simply overwritten by the next write

    def select(self, rows) -> "QuantizedKVCache":
        """A new cache whose sequence i holds what this one's sequence rows[i] holds: the int8 data and the
        scales are copied as they are (no second rounding)."""
        rows = self._check_rows(rows)
        out = QuantizedKVCache(self.config, len(rows), self.max_len, self.bits, device=self.device, dtype=self.dtype)
        index = torch.tensor(rows, device=self.device)
        for mine, theirs in zip(self.tensors(), out.tensors()):
            theirs[:, :, :self.seq_len] = mine[index, :, :self.seq_len]
        out.seq_len = self.seq_len
        return out

    def reset(self):
        """Forget every token (the memory stays allocated, ready for the next request)."""
        self.seq_len, self._pending = 0, 0
        for t in self.tensors():
            t.zero_()

    def __repr__(self):
        return super().__repr__()[:-1] + f", bits={self.bits}, data={self.data_bytes:,}, scales={self.scale_bytes:,})"


# ------------------------------------------------------------------------------- measured on a real model

@dataclass(frozen=True)
class QuantMeasurement:
    """What int8 storage of the cache costs and changes on one model, over greedy runs of ``prompts``:
    cache bytes for the longest run (int8 data + scales, against fp32 and fp16 ``KVCache``s of the same
    length), the largest |logit difference| against the fp32 cache at every position of every run (fed the
    fp32 run's tokens, so an early difference cannot snowball), the smallest gap between the fp32 run's top
    two logits (a token can only flip where the error reaches it), and how many generated tokens agree."""

    n_positions: int  # cache length the bytes are measured at (the longest run)
    int8_bytes: int
    int8_scale_bytes: int
    fp32_bytes: int
    fp16_bytes: int
    max_logit_error: float
    min_top2_gap: float
    tokens_same: int
    tokens_total: int

    @property
    def vs_fp32(self) -> float:
        return self.fp32_bytes / self.int8_bytes

    @property
    def vs_fp16(self) -> float:
        return self.fp16_bytes / self.int8_bytes


@torch.no_grad()
def measure(model, tokenizer, prompts) -> QuantMeasurement:
    """Greedy runs of every prompt (to ``<eos>``) with the fp32 cache and with a ``QuantizedKVCache``; see
    ``QuantMeasurement``. The model must compute in fp32."""
    from .cache import KVCache
    from .generate import generate

    if model.dtype != torch.float32:
        raise ValueError(f"measure compares against the fp32 cache, so the model must be in fp32, not {model.dtype}")
    c, limit = model.config, model.config.max_seq_len
    err, gap, same, total, longest = 0.0, float("inf"), 0, 0, 1
    for prompt in prompts:
        ids = tokenizer.encode(prompt)
        n_new = checks.new_tokens_fit(c, len(ids), min(32, limit - len(ids) + 1))
        ref = generate(model, ids, n_new, eos_id=tokenizer.eos_id)
        quant = generate(model, ids, n_new, eos_id=tokenizer.eos_id,
                         cache=QuantizedKVCache(c, 1, len(ids) + n_new - 1, device=model.device))
        a, b = ref.new_tokens[0], quant.new_tokens[0]
        n = min(a.numel(), b.numel())
        same += int((a[:n] == b[:n]).sum())
        total += max(a.numel(), b.numel())
        fed = ref.sequences[:, :-1]  # every position the fp32 run fed, in one pass through each cache
        longest = max(longest, fed.shape[1])
        exact = model(fed, cache=KVCache(c, 1, fed.shape[1], device=model.device))
        approx = model(fed, cache=QuantizedKVCache(c, 1, fed.shape[1], device=model.device))
        err = max(err, float((exact - approx).abs().max()))
        top2 = exact[0, len(ids) - 1:].topk(2, dim=-1).values  # the positions that chose a new token
        gap = min(gap, float((top2[:, 0] - top2[:, 1]).min()))
    int8 = QuantizedKVCache(c, 1, longest, device=model.device)
    return QuantMeasurement(
        n_positions=longest, int8_bytes=int8.nbytes, int8_scale_bytes=int8.scale_bytes,
        fp32_bytes=KVCache(c, 1, longest, dtype=torch.float32, device=model.device).nbytes,
        fp16_bytes=KVCache(c, 1, longest, dtype=torch.float16, device=model.device).nbytes,
        max_logit_error=err, min_top2_gap=gap, tokens_same=same, tokens_total=total)


@torch.no_grad()
def perplexity_change(model, windows: torch.Tensor) -> dict:
    """Teacher-forced next-token loss on ``windows`` (n, T) of held-out text through an fp32 ``KVCache`` and
    through a ``QuantizedKVCache``: each one's perplexity, the relative change, and how many positions' top-1
    token differs (the same text fed to both, so a difference cannot snowball)."""
    from .cache import KVCache

    c, nll, top1_diff, count = model.config, {"fp32": 0.0, "int8": 0.0}, 0, 0
    for row in windows.to(model.device):
        x, y = row[None, :-1], row[None, 1:]
        logits = {}
        for name, cache in (("fp32", KVCache(c, 1, x.shape[1], device=model.device)),
                            ("int8", QuantizedKVCache(c, 1, x.shape[1], device=model.device))):
            logits[name] = model.eval()(x, cache=cache).float()
            nll[name] += float(torch.nn.functional.cross_entropy(logits[name][0], y[0], reduction="sum"))
        top1_diff += int((logits["fp32"].argmax(-1) != logits["int8"].argmax(-1)).sum())
        count += y.numel()
    ppl = {k: math.exp(v / count) for k, v in nll.items()}
    return {"positions": count, "fp32": ppl["fp32"], "int8": ppl["int8"], "change": ppl["int8"] / ppl["fp32"] - 1,
            "top1_differs": top1_diff}


@torch.no_grad()
def first_divergence(model, input_ids, max_new_tokens: int) -> dict:
    """Greedy decoding of ``input_ids`` with the fp32 cache and with the int8 one: the first generated step
    whose token differs (None if none does within ``max_new_tokens``) and, there, the fp32 run's lead of its top
    logit over the second — where the rounding can flip a token, it is a near-tie — and the int8 run's lead of
    its own token over the fp32 run's token (how far the rounding moved the two apart, the other way)."""
    from .generate import generate

    ids = checks.token_ids(input_ids, "input_ids", model.config.vocab_size)
    n = checks.new_tokens_fit(model.config, len(ids), max_new_tokens)
    ref = generate(model, ids, n, trace=True, trace_top_k=2)
    quant = generate(model, ids, n, cache=QuantizedKVCache(model.config, 1, len(ids) + n - 1, device=model.device),
                     trace=True, trace_top_k=2)
    a, b = ref.new_tokens[0].tolist(), quant.new_tokens[0].tolist()
    step = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    lead = int8_lead = None
    if step is not None:
        top2 = torch.topk(ref.trace.steps[step].logits[0], 2).values
        lead = float(top2[0] - top2[1])
        there = quant.trace.steps[step].logits[0]
        int8_lead = float(there[b[step]] - there[a[step]])
    return {"steps": n, "first_difference": step, "fp32_lead_there": lead, "int8_lead_there": int8_lead,
            "fp32_tokens": a, "int8_tokens": b}


# The int8 divergences a notebook stores (prompt -> max_new_tokens; notebook 05). tests/test_lm_quant.py checks each
# is unchanged when the weights are perturbed (lib.lm.PERTURBATION): the near-tie it shows must not be another
# CPU's rounding; the fp32 run before the divergence is in lib.lm.STORED_GENERATIONS.
STORED_DIVERGENCES: dict[str, int] = {
    "<s>FIRST CITIZEN.\n": 32,  # notebook 05, section 5 (lib.lm.INT8_PROMPT): which speaker comes next; no other near-tie by step 60
}
