"""The roofline: why prefill is compute-bound and decode is memory-bound, in FLOPs per byte.

A forward pass does ``flops`` arithmetic and moves ``bytes`` between memory and the chip. Its arithmetic
intensity is ``flops / bytes`` (FLOP/byte). A machine with peak compute ``P`` (GFLOP/s) and memory
bandwidth ``BW`` (GB/s) can run it at most at

    attainable = min(P, intensity × BW)          (GFLOP/s)

so a pass whose intensity is below the ridge point ``P / BW`` is memory-bound (it waits for bytes) and one
above it is compute-bound. The time of a pass is at least ``max(flops / P, bytes / BW)``.

What is counted (analytic, from ``lib.costs``; no model is run):

- FLOPs: ``lib.costs.forward_flops`` (matmuls only, 1 multiply-add = 2 FLOPs), times the batch size.
- Bytes, three parts, so a plot can show which one dominates:
    weights   ``streamed_weight_bytes``: every parameter read once per pass, shared by the whole batch,
              except the lookup tables (learned positions, an untied token embedding): a pass only
              gathers the rows of its own tokens, which count as activations. A tied embedding is read
              whole by lm_head, so it stays. (``lib.costs.weight_bytes`` is what is *stored*.)
    KV read   ``lib.costs.kv_cache_bytes(config, n_past, batch)``: the cached keys and values of every
              sequence are read once (attention of the new token(s) over the context).
    KV write  ``lib.costs.kv_cache_bytes(config, n_new, batch)``: the new tokens' keys and values stored.
- Not counted: activations (embedding rows gathered, hidden states between layers, attention scores,
  logits). A fused kernel keeps
  most of them on chip, and for decode they are O(batch × d_model) per layer, small next to the weights.
  Leaving them out makes the intensity an upper bound (an ideal implementation).

Decode at context ``t`` with batch ``B`` (one new token per sequence):
    FLOPs = B·F(t)        bytes = W + B·(t + 1)·kv_per_token
so batching shares the weight read but not the KV reads: as B → ∞ the intensity rises to
F(t) / ((t + 1)·kv_per_token) and no further. KV reads outweigh weight reads once B·t·kv_per_token > W.

Measurement (``measure_machine``): peak = best of a few large fp32 matmuls, bandwidth = best of a few
sums over a tensor much larger than the CPU caches (read bandwidth), timed by ``lib.timing.benchmark``
(torch.utils.benchmark: warm-up, torch threads fixed and restored).
"""
from __future__ import annotations

import functools
import math
import numbers
from dataclasses import dataclass
from fractions import Fraction

import torch

from .config import ModelConfig
from .costs import (PRESETS, _count, _dtype_name, dtype_bytes, forward_flops, kv_bytes_per_token,
                    kv_cache_bytes, param_count)
from .demo import DEMOS, load_demo
from .device import describe_device, fixed_threads, resolve_device, resolve_dtype
from .timing import benchmark

MODEL_CHOICES = (*DEMOS, *PRESETS)  # names every function here accepts instead of a ModelConfig


# ------------------------------------------------------------------------------------------ model configs

@functools.lru_cache(maxsize=None)
def _demo_config(name: str) -> ModelConfig:
    return load_demo(name)[0].config  # loaded once: the shape lives in the checkpoint's metadata


def model_config(model) -> ModelConfig:
    """A ModelConfig, or a name: a demo model ("chat", "draft", "tiny") or a ``lib.PRESETS`` key."""
    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, str):
        if model in PRESETS:
            return PRESETS[model]
        if model in DEMOS:
            return _demo_config(model)
        raise ValueError(f"unknown model {model!r}; allowed: a lib.ModelConfig or one of {', '.join(MODEL_CHOICES)}")
    raise TypeError(f"model must be a lib.ModelConfig or a name ({', '.join(MODEL_CHOICES)}), "
                    f"got {type(model).__name__}")


# ------------------------------------------------------------------------------------ one forward pass

def streamed_weight_bytes(model, dtype=torch.float16) -> int:
    """Weight bytes one forward pass reads from memory: all parameters (``lib.costs.param_count``) except
    the lookup tables a pass only gathers a few rows from, the learned position table (max_seq_len × d)
    and an untied token embedding (vocab × d). A tied embedding is read whole by lm_head and stays."""
    c = model_config(model)
    lookup = c.max_seq_len * c.d_model if c.positions == "learned" else 0
    if not c.tie_embeddings:
        lookup += c.vocab_size * c.d_model
    return math.ceil((param_count(c) - lookup) * dtype_bytes(dtype))


@dataclass(frozen=True)
class PassCost:
    """FLOPs and bytes moved by one forward pass over a batch (all counts for the whole batch)."""

    phase: str  # "decode": one token per sequence on top of a cache; else "prefill"
    batch: int
    n_new: int  # tokens fed per sequence
    n_past: int  # tokens already in each sequence's cache (the context a decode step reads)
    dtype: str  # weights and KV cache stored in this dtype ("fp16", "bf16", ...)
    flops: int
    weight_bytes: int  # weights streamed (streamed_weight_bytes), once for the whole batch
    kv_read_bytes: int
    kv_write_bytes: int

    @property
    def bytes(self) -> int:
        """All bytes moved: weights + KV read + KV write."""
        return self.weight_bytes + self.kv_read_bytes + self.kv_write_bytes

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte."""
        return self.flops / self.bytes

    @property
    def kv_read_share(self) -> float:
        """Share of all bytes that are KV-cache reads (0 for a prefill without a cached prefix)."""
        return self.kv_read_bytes / self.bytes

    @property
    def tokens(self) -> int:
        """Tokens processed by the pass, whole batch: batch × n_new."""
        return self.batch * self.n_new


def pass_cost(model, n_new: int, n_past: int = 0, batch: int = 1, dtype=torch.float16) -> PassCost:
    """FLOPs and bytes of one forward pass feeding ``n_new`` tokens to each of ``batch`` sequences that
    already hold ``n_past`` tokens in their caches."""
    c = model_config(model)
    n_new = _count(n_new, "n_new (tokens fed per sequence)", minimum=1)
    n_past = _count(n_past, "n_past (tokens already cached per sequence)")
    batch = _count(batch, "batch", minimum=1)
    return PassCost(
        phase="decode" if n_new == 1 and n_past > 0 else "prefill", batch=batch, n_new=n_new, n_past=n_past,
        dtype=_dtype_name(dtype),
        flops=batch * forward_flops(c, n_new, n_past)["total"],
        weight_bytes=streamed_weight_bytes(c, dtype),
        kv_read_bytes=kv_cache_bytes(c, n_past, batch, dtype),
        kv_write_bytes=kv_cache_bytes(c, n_new, batch, dtype),
    )


def prefill_cost(model, prompt_len: int, batch: int = 1, dtype=torch.float16) -> PassCost:
    """The prefill: the whole ``prompt_len``-token prompt of every sequence in one pass, empty cache."""
    return pass_cost(model, _count(prompt_len, "prompt_len", minimum=1), 0, batch, dtype)


def decode_cost(model, context: int, batch: int = 1, dtype=torch.float16) -> PassCost:
    """One decode step: one new token per sequence, reading ``context`` cached tokens per sequence."""
    return pass_cost(model, 1, _count(context, "context (tokens already cached)", minimum=1), batch, dtype)


# ------------------------------------------------------------------------- KV reads vs weight reads

def kv_read_crossover_tokens(model, dtype=torch.float16) -> int:
    """Smallest number of cached tokens over the batch (batch × context) at which one decode step reads
    more KV-cache bytes than weight bytes (``streamed_weight_bytes``).

    KV read bytes = batch·context·kv_per_token exactly (kv_per_token is a whole number of bytes in every
    dtype, since a token caches an even number of values), so the answer is weights // kv_per_token + 1.
    It depends only on the shapes: the bytes per value cancel (up to int4's rounding of the weights)."""
    c = model_config(model)
    return streamed_weight_bytes(c, dtype) // kv_bytes_per_token(c, dtype) + 1


def crossover_context(model, batch: int = 1, dtype=torch.float16) -> int:
    """Smallest context per sequence at which a decode step with ``batch`` sequences reads more KV bytes
    than weight bytes: ceil(kv_read_crossover_tokens / batch). May exceed the model's max_seq_len."""
    batch = _count(batch, "batch", minimum=1)
    return -(-kv_read_crossover_tokens(model, dtype) // batch)


def crossover_batch(model, context: int, dtype=torch.float16) -> int:
    """Smallest batch at which a decode step at ``context`` reads more KV bytes than weight bytes."""
    context = _count(context, "context (tokens already cached)", minimum=1)
    return -(-kv_read_crossover_tokens(model, dtype) // context)


# --------------------------------------------------------------------------- decode and the batch size

def decode_intensity_limit(model, context: int, dtype=torch.float16) -> float:
    """Decode intensity as batch → ∞ at ``context``: FLOPs per sequence / KV bytes per sequence (read
    ``context`` + write 1). The weights are shared by the batch, the KV cache is not, so batching can
    push decode up to here and no further."""
    c = model_config(model)
    context = _count(context, "context (tokens already cached)", minimum=1)
    return forward_flops(c, 1, context)["total"] / kv_cache_bytes(c, context + 1, 1, dtype)


def decode_batch_for_intensity(model, context: int, target: float, dtype=torch.float16) -> int | None:
    """Smallest batch at which a decode step at ``context`` reaches arithmetic intensity ``target``
    (e.g. a machine's ridge point), or None when no batch does (target >= decode_intensity_limit).

    Exact: with F the FLOPs per sequence, W the weight bytes and k the KV bytes per sequence,
    B·F / (W + B·k) >= target  <=>  B·(F − target·k) >= target·W, solved in rational arithmetic."""
    c = model_config(model)
    context = _count(context, "context (tokens already cached)", minimum=1)
    target = Fraction(_positive(target, "target intensity (FLOP/byte)"))
    f = forward_flops(c, 1, context)["total"]
    w = streamed_weight_bytes(c, dtype)
    k = kv_cache_bytes(c, context + 1, 1, dtype)  # per sequence: read context, write 1
    room = f - target * k
    if room <= 0:
        return None
    return math.ceil(target * w / room)


# --------------------------------------------------------------------------------------- the roofline

def _positive(value, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a positive number, got {type(value).__name__} {value!r}")
    if not (math.isfinite(value) and value > 0):
        raise ValueError(f"{name} must be a positive, finite number, got {value!r}")
    return float(value)


def attainable_gflops(intensity: float, peak_gflops: float, bandwidth_gbs: float) -> float:
    """The roofline: min(peak, intensity × bandwidth), in GFLOP/s (intensity in FLOP/byte, bandwidth in GB/s)."""
    intensity = _positive(intensity, "intensity (FLOP/byte)")
    return min(_positive(peak_gflops, "peak_gflops"), intensity * _positive(bandwidth_gbs, "bandwidth_gbs"))


def bound(intensity: float, peak_gflops: float, bandwidth_gbs: float) -> str:
    """ "memory-bound" when intensity × bandwidth < peak (left of the ridge), else "compute-bound"."""
    attained = attainable_gflops(intensity, peak_gflops, bandwidth_gbs)
    return "memory-bound" if attained < peak_gflops else "compute-bound"


@dataclass(frozen=True)
class Machine:
    """A roofline: peak compute (GFLOP/s, for ``dtype``) and memory bandwidth (GB/s), and where they came from."""

    name: str
    peak_gflops: float
    bandwidth_gbs: float
    dtype: str = "bf16"  # the dtype the peak is for
    source: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Machine.name must be a non-empty string, got {self.name!r}")
        _positive(self.peak_gflops, "Machine.peak_gflops")
        _positive(self.bandwidth_gbs, "Machine.bandwidth_gbs")
        object.__setattr__(self, "dtype", _dtype_name(self.dtype))

    @property
    def ridge(self) -> float:
        """Intensity (FLOP/byte) where the bandwidth slope meets the compute roof: peak / bandwidth."""
        return self.peak_gflops / self.bandwidth_gbs

    def attainable(self, intensity: float) -> float:
        return attainable_gflops(intensity, self.peak_gflops, self.bandwidth_gbs)

    def bound(self, intensity: float) -> str:
        return bound(intensity, self.peak_gflops, self.bandwidth_gbs)

    def seconds(self, cost: PassCost) -> float:
        """Lower bound on the time of a pass: max(flops / peak, bytes / bandwidth)."""
        if not isinstance(cost, PassCost):
            raise TypeError(f"Machine.seconds needs a PassCost (from pass_cost / prefill_cost / decode_cost), "
                            f"got {type(cost).__name__}")
        return max(cost.flops / (self.peak_gflops * 1e9), cost.bytes / (self.bandwidth_gbs * 1e9))

    def tokens_per_second(self, cost: PassCost) -> float:
        """Upper bound on tokens processed per second: batch × n_new / seconds(cost)."""
        return cost.tokens / self.seconds(cost)


_NVIDIA = ("dense BF16 Tensor Core peak: 1,979 TFLOP/s with 2:4 sparsity on NVIDIA's product pages, half of "
           "it dense (989.4 in the H100 architecture whitepaper); H100 and H200 share the GH100 compute die")
REFERENCE_MACHINES: dict[str, Machine] = {
    "H100 SXM": Machine("H100 SXM", 989_400.0, 3_350.0, "bf16",
                        "NVIDIA H100 datasheet (nvidia.com/en-us/data-center/h100): HBM3 3.35 TB/s; " + _NVIDIA),
    "H200 SXM": Machine("H200 SXM", 989_400.0, 4_800.0, "bf16",
                        "NVIDIA H200 datasheet (nvidia.com/en-us/data-center/h200): HBM3e 4.8 TB/s; " + _NVIDIA),
}


# --------------------------------------------------------------------------- measuring this machine

def measure_peak_gflops(device="cpu", n: int | None = None, repeats: int = 5, dtype=torch.float32,
                        threads: int | None = None) -> float:
    """Compute peak: GFLOP/s of the best of ``repeats`` (n × n) @ (n × n) matmuls (2·n³ FLOPs each) in
    ``dtype`` (fp32, bf16 or fp16). n defaults to 1024 on the CPU and 4096 on a GPU; fp32 matmuls on CUDA
    run without TF32 (torch's default), so compare them with a datasheet's FP32, not its tensor-core, figure.
    The best run counts: other processes only ever slow a run down (``lib.timing.benchmark``, at least
    ``repeats`` runs)."""
    dev, dtype = resolve_device(device), resolve_dtype(dtype)
    n = (1024 if dev.type == "cpu" else 4096) if n is None else _count(n, "n (matrix size)", minimum=1)
    repeats = _count(repeats, "repeats", minimum=1)
    gen = torch.Generator().manual_seed(0)
    a = torch.randn(n, n, generator=gen).to(device=dev, dtype=dtype)  # (n, n)
    b = torch.randn(n, n, generator=gen).to(device=dev, dtype=dtype)  # (n, n)
    with torch.inference_mode():
        seconds = benchmark(lambda: a @ b, dev, threads, min_runs=repeats).min
    return 2 * n ** 3 / seconds / 1e9


def measure_bandwidth_gbs(device="cpu", nbytes: int | None = None, repeats: int = 5,
                          threads: int | None = None) -> float:
    """Memory read bandwidth: GB/s of the best of ``repeats`` sums over an fp32 tensor of ``nbytes`` bytes
    (each byte read once; the one-number result is negligible). nbytes defaults to 256 MiB on the CPU
    (8× a 32 MiB L3 cache) and 1 GiB on a GPU; it must be far larger than the caches to measure memory.
    The best run counts (``lib.timing.benchmark``, at least ``repeats`` runs)."""
    dev = resolve_device(device)
    nbytes = (256 if dev.type == "cpu" else 1024) * 2 ** 20 if nbytes is None else _count(nbytes, "nbytes", minimum=4)
    repeats = _count(repeats, "repeats", minimum=1)
    x = torch.ones(nbytes // 4, device=dev)  # (nbytes/4,) fp32
    with torch.inference_mode():
        seconds = benchmark(lambda: x.sum(), dev, threads, min_runs=repeats).min
    return x.numel() * 4 / seconds / 1e9


def measure_machine(device="cpu", threads: int | None = None, repeats: int = 5, n: int | None = None,
                    nbytes: int | None = None) -> Machine:
    """This machine's fp32 roofline: ``measure_peak_gflops`` and ``measure_bandwidth_gbs`` on ``device``
    (n, nbytes: their sizes, None for the defaults). About a second on a CPU; the numbers vary run to run
    and machine to machine (never compare them exactly)."""
    dev = resolve_device(device)
    with fixed_threads(threads):
        peak = measure_peak_gflops(dev, n=n, repeats=repeats)
        bandwidth = measure_bandwidth_gbs(dev, nbytes=nbytes, repeats=repeats)
        where = describe_device(dev)  # "cpu (2 threads)", "cuda (NVIDIA H200)"
    return Machine(f"this machine ({dev.type})", peak, bandwidth, "fp32",
                   f"measured: best of {repeats} fp32 matmuls (peak) and tensor sums (read bandwidth) on {where}")
