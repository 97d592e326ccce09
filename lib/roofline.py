"""The roofline: why prefill is compute-bound and decode is memory-bound, in FLOPs per byte.

A forward pass does ``flops`` arithmetic and moves ``bytes`` between memory and the chip (both counted by
``lib.costs.step_cost``, per operator; see ``lib.costs`` for what is counted and the convention for
"context"). Its arithmetic intensity is ``flops / bytes`` (FLOP/byte). A machine with peak compute ``P``
(GFLOP/s) and memory bandwidth ``BW`` (GB/s) can run it at most at

    attainable = min(P, intensity × BW)          (GFLOP/s)

so a pass whose intensity is below the ridge point ``P / BW`` is memory-bound (it waits for bytes) and one
above it is compute-bound. The time of a pass is at least ``max(flops / P, bytes / BW)``.

``REFERENCE_MACHINES`` holds datasheet rooflines; ``DEFAULT_GPU`` (the H100 SXM) is the one the course means
when it says "a GPU". Decode at context ``t`` with batch ``B`` (one new token per sequence):
    FLOPs = B·F(t)        bytes = W + B·(t + 1)·kv_per_token      (read t tokens of K/V, write 1)
so batching shares the weight read but not the KV reads: as B → ∞ the intensity rises to
F(t) / ((t + 1)·kv_per_token) and no further (``lib.costs.decode_intensity_limit``).

That one number mixes two kinds of operator that a real engine runs as separate kernels
(``operator_groups``): the **weight products** (q/k/v, output, FFN, lm_head: each weight read once, used by
every sequence: 2·B FLOPs per weight, so B FLOP/byte in 16-bit, compute-bound from batch ≈ ridge whatever the
context) and **attention** (scores and weighted sum over each sequence's own cached K/V: about
2·n_heads / n_kv_heads / bytes-per-value FLOP/byte, 1 for multi-head attention in 16-bit, whatever the batch).

Measurement (``measure_machine``): peak = best of a few large fp32 matmuls, bandwidth = best of a few
sums over a tensor much larger than the CPU caches (read bandwidth), timed by ``lib.timing.benchmark``
(torch.utils.benchmark: warm-up, torch threads fixed and restored).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import torch

from . import checks
from .costs import OpCost, StepCost, kv_cache_bytes, step_cost
from .device import describe_device, dtype_bytes, dtype_name, fixed_threads, resolve_device, resolve_dtype
from .timing import benchmark


# --------------------------------------------------------------------------------------- the roofline

def attainable_gflops(intensity: float, peak_gflops: float, bandwidth_gbs: float) -> float:
    """The roofline: min(peak, intensity × bandwidth), in GFLOP/s (intensity in FLOP/byte, bandwidth in GB/s)."""
    intensity = checks.number(intensity, "intensity (FLOP/byte)", above=0)
    return min(checks.number(peak_gflops, "peak_gflops", above=0),
               intensity * checks.number(bandwidth_gbs, "bandwidth_gbs", above=0))


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
    memory_gib: float | None = None  # memory as CUDA reports it (GiB), where known; lib.vllm_bridge.kv_capacity reads it

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"Machine.name must be a non-empty string, got {self.name!r}")
        checks.number(self.peak_gflops, "Machine.peak_gflops", above=0)
        checks.number(self.bandwidth_gbs, "Machine.bandwidth_gbs", above=0)
        object.__setattr__(self, "dtype", dtype_name(self.dtype))
        if self.memory_gib is not None:
            checks.number(self.memory_gib, "Machine.memory_gib", above=0)

    @property
    def ridge(self) -> float:
        """Intensity (FLOP/byte) where the bandwidth slope meets the compute roof: peak / bandwidth."""
        return self.peak_gflops / self.bandwidth_gbs

    def attainable(self, intensity: float) -> float:
        return attainable_gflops(intensity, self.peak_gflops, self.bandwidth_gbs)

    def bound(self, intensity: float) -> str:
        return bound(intensity, self.peak_gflops, self.bandwidth_gbs)

    def seconds(self, cost: StepCost) -> float:
        """Lower bound on the time of a pass: max(flops / peak, bytes / bandwidth)."""
        if not isinstance(cost, StepCost):
            raise TypeError(f"Machine.seconds needs a lib.costs.StepCost (from step_cost / pass_cost / prefill_cost "
                            f"/ decode_cost), got {type(cost).__name__}")
        return max(cost.flops / (self.peak_gflops * 1e9), cost.bytes / (self.bandwidth_gbs * 1e9))

    def tokens_per_second(self, cost: StepCost) -> float:
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
# Memory capacity, for lib.vllm_bridge: what CUDA reports (torch.cuda.mem_get_info()'s total), which is what vLLM
# multiplies by gpu_memory_utilization, not the datasheet's 80 GB (HBM3) and 141 GB (HBM3e). The driver keeps part of
# the memory for itself: an H100 80GB HBM3 shows 81,559 MiB in nvidia-smi and vLLM logs "total_gpu_memory 79.22GiB"
# (vllm-project/vllm PR #10511); an H200 shows 143,771 MiB in nvidia-smi and about 139.8 GiB to CUDA.
_MEMORY_GIB = {"H100 SXM": 79.22, "H200 SXM": 139.8}
REFERENCE_MACHINES = {k: replace(m, memory_gib=_MEMORY_GIB.get(k)) for k, m in REFERENCE_MACHINES.items()}
DEFAULT_GPU = REFERENCE_MACHINES["H100 SXM"]  # "a GPU" wherever the course names one


def as_machine(machine, *, default: "Machine | None" = None) -> "Machine":
    """``machine`` checked to be a ``Machine`` (``default`` when it is None and a default is given): the one check
    of every function that prices work on a machine."""
    if machine is None and default is not None:
        return default
    if not isinstance(machine, Machine):
        raise TypeError(f"machine must be a lib.roofline.Machine (one of REFERENCE_MACHINES: "
                        f"{', '.join(repr(k) for k in REFERENCE_MACHINES)}; or measure_machine()), "
                        f"got {type(machine).__name__}")
    return machine


# ----------------------------------------------------------------------------- per operator group

OPERATOR_GROUPS = {
    "weight products": ("norms", "qkv_proj", "out_proj", "ffn", "lm_head"),  # read weights, shared by the batch
    "attention": ("kv_write", "attn_scores", "attn_values"),  # read / write each sequence's own K and V
}


def operator_groups(cost: StepCost) -> dict[str, OpCost]:
    """A pass's operators (``lib.costs.step_cost``) summed into the two groups of ``OPERATOR_GROUPS``: the weight
    products (and the norms, which read weights and multiply nothing) and the attention (with the K/V write).
    The two add up to the whole pass."""
    if not isinstance(cost, StepCost):
        raise TypeError(f"operator_groups needs a lib.costs.StepCost (from step_cost / decode_cost / ...), got "
                        f"{type(cost).__name__}")
    out = {}
    for group, names in OPERATOR_GROUPS.items():
        ops = [cost.by_operator[n] for n in names]
        out[group] = OpCost(flops=sum(o.flops for o in ops),
                            streamed_weight_bytes=sum(o.streamed_weight_bytes for o in ops),
                            kv_read_bytes=sum(o.kv_read_bytes for o in ops),
                            kv_write_bytes=sum(o.kv_write_bytes for o in ops))
    return out


def operator_intensity(cost: StepCost) -> dict[str, float]:
    """Arithmetic intensity (FLOP/byte) of each group of ``operator_groups`` and of the whole pass ("step")."""
    groups = operator_groups(cost)
    out = {g: op.flops / op.bytes for g, op in groups.items()}
    out["step"] = cost.intensity
    return out


def weight_products_ridge_batch(model, machine: "Machine", dtype=torch.float16) -> int:
    """The smallest batch at which a decode step's weight products reach ``machine``'s ridge (compute-bound).
    Their FLOPs grow with the batch (B·F) and their bytes do not (the weights W, read once), so it is
    ceil(ridge · W / F), whatever the context."""
    machine = as_machine(machine)
    one = operator_groups(step_cost(model, 2, 1, 1, dtype))["weight products"]  # batch 1; context is irrelevant
    b = math.ceil(machine.ridge * one.bytes / one.flops)
    while b > 1 and (b - 1) * one.flops >= machine.ridge * one.bytes:  # guard the float rounding of ceil
        b -= 1
    while b * one.flops < machine.ridge * one.bytes:
        b += 1
    return b


# ------------------------------------------------------------- when attention is not memory-bound

def attention_intensity(model, context: int, n_new: int = 1, batch: int = 1, shared_prefix: int = 0,
                        dtype=torch.float16) -> float:
    """FLOP/byte of a pass's attention (``operator_groups``' "attention": scores, weighted sum, K/V write) when
    ``batch`` sequences each feed ``n_new`` tokens over ``context`` positions. ``n_new = k + 1`` is a speculative
    verification pass (k draft tokens and the last accepted one read the same cache: k + 1 times the FLOPs for
    the same bytes). ``shared_prefix``: the first positions of every sequence are one shared prompt that a
    shared-prefix kernel reads once for the whole batch (cascade attention), not once per sequence.

    Per-sequence decode (``n_new = 1``, nothing shared) stays near n_heads / n_kv_heads FLOP/byte in 16-bit at
    any batch: the rule "batching never makes attention compute-bound" holds only for that case."""
    batch = checks.integer(batch, "batch", 1)
    shared_prefix = checks.integer(shared_prefix, "shared_prefix", 0)
    if shared_prefix > context - n_new:
        raise ValueError(f"shared_prefix={shared_prefix} must be at most the cached positions, context - n_new = "
                         f"{context - n_new}")
    att = operator_groups(step_cost(model, context, n_new, batch, dtype))["attention"]
    saved = (batch - 1) * kv_cache_bytes(model, shared_prefix, 1, dtype) if shared_prefix else 0
    return att.flops / (att.bytes - saved)


def mla_decode_intensity(mla, dtype=torch.bfloat16, n_new: int = 1) -> float:
    """FLOP/byte of absorbed multi-head latent attention in decode (DeepSeek-V2/V3, ``lib.presets.MLAConfig``):
    every one of the ``n_heads`` query heads scores each cached token against its latent and rotary key
    (2·(kv_lora_rank + qk_rope_head_dim) FLOPs) and mixes the latent (2·kv_lora_rank), while the cache holds
    one copy per token for all heads (kv_lora_rank + qk_rope_head_dim values). The heads share the bytes, so the
    intensity is about n_heads times MHA's: ~242 FLOP/byte for DeepSeek-V3 in bf16, near an H100's ridge.
    (The write of the new token's latent is left out: one position against the whole context.)"""
    from .presets import MLAConfig
    if not isinstance(mla, MLAConfig):
        raise TypeError(f"mla must be a lib.presets.MLAConfig (e.g. lib.presets.MLA_PRESETS['deepseek-v3']), got "
                        f"{type(mla).__name__}")
    n_new = checks.integer(n_new, "n_new", 1)
    flops = 2 * mla.n_heads * (mla.kv_lora_rank + mla.qk_rope_head_dim + mla.kv_lora_rank) * n_new
    return flops / (mla.cached_values_per_layer * dtype_bytes(dtype))


def attention_regimes(machine: "Machine", context: int = 4096, batch: int = 64, k: int = 4,
                      dtype=torch.bfloat16) -> list[dict]:
    """Decode attention's intensity in the cases that keep it memory-bound and in those that break the rule,
    at ``context`` positions, ``batch`` sequences, ``k`` draft tokens, against ``machine``'s ridge: rows for
    ``lib.text.text_table``."""
    from .presets import MLA_PRESETS
    machine = as_machine(machine)
    cases = [
        ("MHA, one cache per sequence", "llama-2-7b", attention_intensity("llama-2-7b", context, 1, batch, 0, dtype)),
        ("GQA (4 query heads per KV head)", "llama-3-8b",
         attention_intensity("llama-3-8b", context, 1, batch, 0, dtype)),
        (f"GQA, speculative verify of k={k}", "llama-3-8b",
         attention_intensity("llama-3-8b", context, k + 1, batch, 0, dtype)),
        (f"GQA, {batch} sequences share a {context - 256}-token prompt", "llama-3-8b",
         attention_intensity("llama-3-8b", context, 1, batch, context - 256, dtype)),
        ("MLA absorbed (DeepSeek-V3)", "deepseek-v3", mla_decode_intensity(MLA_PRESETS["deepseek-v3"], dtype)),
        ("MLA absorbed, fp8 cache, bf16 math", "deepseek-v3", mla_decode_intensity(MLA_PRESETS["deepseek-v3"], "fp8")),
    ]
    return [{"attention in decode": case, "model": model, "FLOP/byte": round(x, 1),
             "ridge": round(machine.ridge, 1), "bound": machine.bound(x)} for case, model, x in cases]


# --------------------------------------------------------------------------- measuring this machine

def measure_peak_gflops(device="cpu", n: int | None = None, repeats: int = 5, dtype=torch.float32,
                        threads: int | None = None) -> float:
    """Compute peak: GFLOP/s of the best of ``repeats`` (n × n) @ (n × n) matmuls (2·n³ FLOPs each) in
    ``dtype`` (fp32, bf16 or fp16). n defaults to 1024 on the CPU and 4096 on a GPU; fp32 matmuls on CUDA
    run without TF32 (torch's default), so compare them with a datasheet's FP32, not its tensor-core, figure.
    The best run counts: other processes only ever slow a run down (``lib.timing.benchmark``, at least
    ``repeats`` runs)."""
    dev, dtype = resolve_device(device), resolve_dtype(dtype)
    n = (1024 if dev.type == "cpu" else 4096) if n is None else checks.integer(n, "n (matrix size)", 1)
    repeats = checks.integer(repeats, "repeats", 1)
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
    nbytes = (256 if dev.type == "cpu" else 1024) * 2 ** 20 if nbytes is None else checks.integer(nbytes, "nbytes", 4)
    repeats = checks.integer(repeats, "repeats", 1)
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
