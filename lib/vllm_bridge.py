"""The bridge to vLLM: where each idea of this course lives in vLLM today, and how much KV cache vLLM gets.

Two things, both read from vLLM's own source (``VLLM_VERSION``, the V1 engine, the only one it has):

* ``BRIDGE``: the map, one ``Mapping`` per idea: lib's home for it (a dotted name that imports), the vLLM file
  and class or function that does it, the engine argument that sets it and its default in that version, one
  line on what vLLM does and one on how lib differs. ``check_against_source(path)`` re-reads an unpacked vLLM
  source tree (or a wheel) and says whether every file, name, argument, default and quoted line still holds.
* ``kv_capacity``: how many blocks and tokens of KV cache a model gets on a GPU, computed the way vLLM's
  worker computes it (``Worker.determine_available_memory`` and ``get_kv_cache_config_from_groups``)::

      requested  = ceil(total GPU memory × gpu_memory_utilization)
      available  = requested − weights − (peak activations + memory outside torch) − CUDA graphs
      block      = the K and V of block_size tokens, all layers together        (lib.costs.kv_cache_bytes)
      num_blocks = available // block

  vLLM *measures* the weights, the activation peak and the memory outside torch with one dummy forward pass
  over ``max_num_batched_tokens`` tokens; lib computes the weights (``lib.costs.weight_bytes``) and takes the
  rest as parameters (they depend on kernels, batch limits and the CUDA graphs captured, not on shapes alone).
  Not modelled: tensor or pipeline parallelism (one GPU holds the whole model), hybrid models whose layers
  need different page sizes, quantized caches that store scales inside the page, and alignment padding
  (none for the plain attention layers modelled here).

vLLM reports ``kv_cache_size_tokens`` = ``int(num_blocks / ceil(max_model_len / block_size) × max_model_len)``
(``get_kv_cache_capacity``): how many tokens fit if every request ran to ``max_model_len``. Block 0 is its
placeholder "null block" (``BlockPool.null_block``), so requests can use ``num_blocks − 1``.
"""
from __future__ import annotations

import ast
import math
import re
import textwrap
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch

from . import checks
from .costs import GiB, kv_cache_bytes, tensor_parallel_heads, weight_bytes, weight_bytes_per_gpu
from .device import DTYPES, dtype_info, dtype_name
from .presets import resolve_model
from .i18n import language, t
from .text import Code

VLLM_VERSION = "0.33.0"  # the vLLM release BRIDGE and kv_capacity were read from (wheel from the package registry)
VLLM_COMMIT = "g4ba787ec9"  # its vllm/_version.py commit id
VLLM_CHECKED = "0.33.0"  # the last version check_against_source passed on in full


# ------------------------------------------------------------------------------------------------- the map

@dataclass(frozen=True)
class Mapping:
    """One idea of the course and where it lives in vLLM.

    ``lib_names``: lib's home(s) for the idea, dotted names that import (``lib.paged.PagedKVPool``).
    ``vllm_path``: the file, relative to the source tree root (``vllm/v1/core/block_pool.py``).
    ``vllm_name``: a class, function, method or class attribute defined in that file (``BlockPool.free_blocks``).
    ``engine_arg``: the ``EngineArgs`` field (``--block-size`` on the command line) or ``None``; a sampling
    parameter is written ``SamplingParams.n``.
    ``default``: the default in ``VLLM_VERSION``, read from ``default_at`` = (file, "Class.attribute").
    ``evidence``: lines of vLLM's source (whitespace aside) that show what ``does`` says.
    """

    idea: str
    lib_names: tuple[str, ...]
    vllm_path: str
    vllm_name: str
    engine_arg: str | None
    default: object
    default_at: tuple[str, str] | None
    does: str
    lib_differs: str
    evidence: tuple[str, ...] = ()

    @property
    def default_text(self) -> str:
        return "—" if self.engine_arg is None else repr(self.default)


_CACHE = "vllm/config/cache.py"
_MANAGER = "vllm/v1/core/kv_cache_manager.py"
_POOL = "vllm/v1/core/block_pool.py"
_SCHED = "vllm/v1/core/sched/scheduler.py"

BRIDGE: tuple[Mapping, ...] = (
    Mapping(
        "block pool", ("lib.paged.PagedKVPool", "lib.blocks.BlockAllocator"),
        _POOL, "BlockPool", "num_gpu_blocks_override", None, (_CACHE, "CacheConfig.num_gpu_blocks_override"),
        "all KV blocks of the GPU in one pool: a free queue, reference counts, a hash → block map for prefix "
        "caching; block 0 is a placeholder (null block) no request uses",
        "lib's pool holds the tensors as well as the bookkeeping; vLLM keeps the tensors in the worker and only "
        "block ids in the scheduler's pool",
        ("self.null_block = self.free_block_queue.popleft()",)),
    Mapping(
        "block size", ("lib.paged.PagedKVCache", "lib.serving.simulate"),
        _CACHE, "CacheConfig.block_size", "block_size", 16, (_CACHE, "CacheConfig.DEFAULT_BLOCK_SIZE"),
        "tokens per KV block; an attention backend that needs another size may change it when none was given",
        "lib's default is also 16 (PagedKVPool.for_model); the notebooks use 2–4 to make blocks visible",
        ("self.block_size = self.DEFAULT_BLOCK_SIZE",)),
    Mapping(
        "block table", ("lib.blocks.BlockTable",),
        "vllm/v1/worker/block_table.py", "BlockTable", None, None, None,
        "on the GPU worker, one row of physical block ids per running request, and the slot of every new token",
        "lib keeps one BlockTable object per sequence and builds the tensor per pass (PagedKVPool.table_tensor)"),
    Mapping(
        "paged attention reads the blocks", ("lib.paged.PagedKVPool.gather", "lib.paged.forward_paged"),
        "vllm/v1/attention/backends/flash_attn.py", "FlashAttentionMetadata.block_table", None, None, None,
        "the attention backend (FlashAttention, FlashInfer, Triton, …) gets a block_table and reads keys and "
        "values where they lie; all sequences' tokens are laid end to end, no padding",
        "lib gathers a sequence's blocks into one tensor and runs the model's plain attention on it (same "
        "numbers, easier to read); ragged batches are padded",
        ("block_table: torch.Tensor",)),
    Mapping(
        "KV cache manager", ("lib.blocks.BlockAllocator.reserve",),
        _MANAGER, "KVCacheManager.allocate_slots", None, None, None,
        "the scheduler asks it for the blocks a step's new tokens need; it returns None when the pool is short",
        "lib raises PoolExhaustedError, and the caller (lib.serving) decides to wait or preempt"),
    Mapping(
        "GPU memory budget", ("lib.vllm_bridge.kv_capacity",),
        "vllm/v1/worker/gpu_worker.py", "Worker.determine_available_memory",
        "gpu_memory_utilization", 0.92, (_CACHE, "CacheConfig.gpu_memory_utilization"),
        "profiles one dummy pass; KV memory = total × utilization − weights − peak activations − memory outside "
        "torch − CUDA graphs",
        "kv_capacity computes the weights from the shapes and takes the activation peak, non-torch memory and "
        "CUDA graphs as parameters",
        ("self.requested_memory - profile_result.non_kv_cache_memory - cudagraph_memory_estimate_applied",)),
    Mapping(
        "number of KV blocks", ("lib.vllm_bridge.kv_capacity", "lib.costs.kv_cache_bytes"),
        "vllm/v1/core/kv_cache_planning.py", "get_kv_cache_config_from_groups", None, None, None,
        "num_blocks = available memory // bytes of one block over all layers",
        "the same division; one block's bytes come from lib.costs.kv_cache_bytes(model, block_size)",
        ("num_blocks = available_memory // bytes_per_block",)),
    Mapping(
        "bytes of one block", ("lib.costs.kv_cache_bytes",),
        "vllm/v1/kv_cache_interface.py", "AttentionSpec.page_size_bytes", None, None, None,
        "per layer: n_kv_heads × block_size × (head_dim of K + head_dim of V) × bytes per value",
        "the same count, summed over the layers",
        ("return (self.head_size + self.head_size_v) * get_dtype_size(self.dtype)",)),
    Mapping(
        "prefix caching", ("lib.blocks.BlockAllocator.match_prefix", "lib.blocks.BlockAllocator.register_prefix"),
        _MANAGER, "KVCacheManager.get_computed_blocks", "enable_prefix_caching", True,
        (_CACHE, "CacheConfig.enable_prefix_caching"),
        "full blocks are found again by a hash chained over the blocks before them; on by default; never the "
        "last prompt token (its logits are needed)",
        "lib indexes full blocks by the token tuple itself (no hash, no collision); off unless asked for",
        ("``request.num_tokens - 1``",)),
    Mapping(
        "free list and eviction", ("lib.blocks.BlockAllocator.free",),
        _POOL, "BlockPool.free_blocks", None, None, None,
        "a freed block that no hash names is reused first (front of the queue); a cached one goes to the back, "
        "so cached blocks are evicted least recently used first",
        "the same order: lib.blocks.BlockAllocator puts a freed block the prefix index does not hold at the front "
        "and a cached one at the back",
        ("self.free_block_queue.prepend_n(blocks_to_evict_first)",
         "self.free_block_queue.append_n(blocks_to_evict_last)")),
    Mapping(
        "preemption", ("lib.serving.simulate", "lib.serving.serve"),
        _SCHED, "Scheduler._preempt_request", None, None, None,
        "when blocks run out, the last request of the running queue (the most recently admitted, first come "
        "first served) frees all its blocks and goes back to the front of the waiting queue, to be recomputed; "
        "there is no swapping to CPU",
        "the same policy (recompute) in the simulation and in serve()",
        ("request.num_computed_tokens = 0", "self.waiting.prepend_request(request)")),
    Mapping(
        "watermark", ("lib.serving.simulate",),
        _MANAGER, "KVCacheManager.allocate_slots", "watermark", 0.0, ("vllm/config/scheduler.py",
                                                                   "SchedulerConfig.watermark"),
        "a fraction of the blocks kept free when admitting waiting or preempted requests; 0 (off) by default",
        "lib.serving.simulate's watermark applies the same way, at admission only",
        ("self.watermark_blocks = int(watermark * kv_cache_config.num_blocks)",)),
    Mapping(
        "continuous batching", ("lib.serving.serve",),
        _SCHED, "Scheduler.schedule", "max_num_seqs", None, ("vllm/engine/arg_utils.py", "EngineArgs.max_num_seqs"),
        "every step the scheduler picks the running and waiting requests that fit a token budget, at most "
        "max_num_seqs of them; None means a default per GPU (EngineArgs.get_batch_defaults): 1024 on an H100 or "
        "H200 (70 GiB or more, not an A100), 256 on smaller GPUs",
        "lib.serving.serve admits whole prompts (no token budget, no chunked prefill) up to max_batch",
        ("self.max_num_running_reqs = self.scheduler_config.max_num_seqs",
         "token_budget = self.max_num_scheduled_tokens")),
    Mapping(
        "token budget per step", ("lib.serving.serve",),
        "vllm/engine/arg_utils.py", "EngineArgs.get_batch_defaults", "max_num_batched_tokens", None,
        ("vllm/engine/arg_utils.py", "EngineArgs.max_num_batched_tokens"),
        "the tokens one step may feed, decode tokens first, then (chunks of) prompts; None means a default per GPU "
        "and entry point: 16384 for vllm.LLM and 8192 for the OpenAI server on an H100 or H200, 8192 / 2048 on "
        "smaller GPUs; a prompt longer than what is left is cut into chunks (chunked prefill, on by default)",
        "lib.serving.serve has no token budget: a step prefills every admitted prompt whole",
        ("UsageContext.LLM_CLASS: 16384,", "UsageContext.OPENAI_API_SERVER: 8192,",
         "UsageContext.LLM_CLASS: 1024,", "UsageContext.LLM_CLASS: 256,")),
    Mapping(
        "parallel sampling (n > 1)", ("lib.generate",),
        "vllm/v1/engine/parallel_sampling.py", "ParentRequest", "SamplingParams.n", 1,
        ("vllm/sampling_params.py", "SamplingParams.n"),
        "a request with n samples becomes n independent child requests; they share only full prompt blocks, "
        "found by prefix caching (no copy-on-write of a half-full block)",
        "lib.generate(num_samples=) prefills once and forks the cache with copy-on-write, as the 2023 paper did",
        ("def get_child_info(self, index: int) -> tuple[str, SamplingParams]:",)),
    Mapping(
        "speculative decoding", ("lib.speculative.speculative_generate",),
        "vllm/config/speculative.py", "SpeculativeConfig", "speculative_config", None,
        ("vllm/engine/arg_utils.py", "EngineArgs.speculative_config"),
        "a dict: method (draft model, ngram, EAGLE, MTP, …), model, num_speculative_tokens; off by default",
        "lib has the draft-model method only, with a separate cache per model"),
    Mapping(
        "KV cache dtype", ("lib.costs.kv_bytes_per_token",),
        _CACHE, "CacheConfig.cache_dtype", "kv_cache_dtype", "auto", (_CACHE, "CacheConfig.cache_dtype"),
        "'auto' stores K and V in the model's dtype; 'fp8' (e4m3) or 'fp8_e5m2' halve a 16-bit cache with one "
        "scale per layer; 'int8_per_token_head' (and fp8_ / int4_per_token_head) computes one scale per token "
        "and KV head as it writes",
        "lib.QuantizedKVCache is the int8_per_token_head scheme (absmax / 127 per token and head); lib.costs counts "
        "any dtype's bytes; kv_capacity takes the 16-bit and fp8 choices",
        ('"fp8_e5m2",', '"int8_per_token_head",')),
    Mapping(
        "sliding window", ("lib.ModelConfig",),
        "vllm/v1/core/single_type_kv_cache_manager.py", "SlidingWindowManager", "disable_sliding_window", False,
        ("vllm/config/model.py", "ModelConfig.disable_sliding_window"),
        "layers with a window free the blocks that fell out of it (remove_skipped_blocks); a hybrid model keeps "
        "a group of blocks per kind of layer",
        "lib's window (ModelConfig.sliding_window) keeps a ring buffer of the last positions per layer"),
    Mapping(
        "longest sequence", ("lib.ModelConfig",),
        "vllm/config/model.py", "ModelConfig.max_model_len", "max_model_len", None,
        ("vllm/config/model.py", "ModelConfig.max_model_len"),
        "None takes the model's own limit; the KV-cache size in tokens vLLM logs assumes requests this long",
        "lib's ModelConfig.max_seq_len; kv_capacity(max_model_len=) reproduces vLLM's logged token count"),
)


def bridge_rows() -> list[dict]:
    """The map as rows for ``lib.text.text_table``: idea, lib, vLLM file, vLLM name, engine argument, default."""
    return [{"idea": m.idea, "in lib": Code(m.lib_names[0].removeprefix("lib.")),
             "vLLM file": Code(m.vllm_path.removeprefix("vllm/")), "vLLM name": Code(m.vllm_name),
             "engine argument": Code(m.engine_arg) if m.engine_arg else "—", f"default ({VLLM_VERSION})": m.default_text}
            for m in BRIDGE]  # names from code are Code: a table in Chinese shows them as written


def bridge_notes(width: int = 110) -> str:
    """Per idea of the map: what vLLM does and how lib differs, as notebook 13 prints it (the English wrapped at
    ``width`` columns; in the notebook's language, through ``lib.i18n``)."""
    out = []
    for m in BRIDGE:
        out.append(f"{t(m.idea)}  [{m.vllm_name}]")
        if language() == "en":
            out += [textwrap.fill(f"{who} {text}.", width, initial_indent="  ", subsequent_indent="    ")
                    for who, text in (("vLLM:", m.does), ("lib: ", m.lib_differs))]
        else:
            out += [t("  vLLM: {text}.", text=t(m.does)), t("  lib:  {text}.", text=t(m.lib_differs))]
    return "\n".join(out)


# ---------------------------------------------------------------------------------------- capacity

# vLLM's --kv-cache-dtype values modelled here → lib's number format. vLLM names 16-bit formats as torch does
# ("float16", "bfloat16"): lib.device's aliases, read from its table rather than spelled again.
KV_CACHE_DTYPES = {"auto": None,
                   **{str(DTYPES[n].torch_dtype).removeprefix("torch."): n for n in ("fp16", "bf16")},
                   "fp8": "fp8", "fp8_e4m3": "fp8", "fp8_e5m2": "fp8"}


@dataclass(frozen=True)
class KVCapacity:
    """What ``kv_capacity`` found; every field in bytes unless its name says otherwise."""

    model: str
    total_memory: int
    gpu_memory_utilization: float
    requested: int  # ceil(total × utilization)
    weights: int
    activation_peak: int
    non_torch: int
    cudagraph: int
    available: int  # for the KV cache; may be negative: then vLLM refuses to start
    kv_dtype: str
    block_size: int  # tokens
    block_bytes: int  # one block, all layers
    num_blocks: int  # what vLLM allocates (block 0 included)
    max_model_len: int
    reported_tokens: int  # vLLM's "KV cache size: N tokens"
    tensor_parallel_size: int = 1  # GPUs the model is split over; every other field is per GPU
    kv_heads_per_gpu: int | None = None  # KV heads each GPU caches (lib.costs.tensor_parallel_heads)

    @property
    def usable_blocks(self) -> int:
        """Blocks requests can hold: all but the null block."""
        return max(self.num_blocks - 1, 0)

    @property
    def tokens(self) -> int:
        """Token positions in the allocated blocks: num_blocks × block_size."""
        return self.num_blocks * self.block_size

    @property
    def blocks_per_request(self) -> int:
        """Blocks one request of ``max_model_len`` tokens needs: ceil(max_model_len / block_size)."""
        return math.ceil(self.max_model_len / self.block_size)

    @property
    def starts(self) -> bool:
        """Whether vLLM starts with this cache: its usable blocks (all but the null block) must hold one request
        of ``max_model_len`` tokens (``check_enough_kv_cache_memory`` in ``vllm/v1/core/kv_cache_planning.py``);
        otherwise it refuses with a ValueError that asks for a smaller ``max_model_len`` or more memory."""
        return self.usable_blocks >= self.blocks_per_request

    @property
    def max_concurrency(self) -> float:
        """vLLM's "maximum concurrency": requests of max_model_len tokens that fit at once."""
        return self.num_blocks / self.blocks_per_request

    @property
    def kv_bytes(self) -> int:
        """Bytes of the allocated KV cache: num_blocks × block_bytes."""
        return self.num_blocks * self.block_bytes


def _machine_memory(gpu) -> tuple[int, str]:
    from .roofline import REFERENCE_MACHINES  # the one table of reference machines
    if isinstance(gpu, str):
        m = REFERENCE_MACHINES.get(gpu)
        known = [k for k, v in REFERENCE_MACHINES.items() if v.memory_gib]
        if m is None or not m.memory_gib:
            raise ValueError(f"gpu={gpu!r} has no memory size; allowed: {', '.join(known)}, or the total memory "
                             f"in bytes (an int, e.g. 80 * 2**30)")
        return int(m.memory_gib * GiB), gpu
    return checks.integer(gpu, "gpu", 1, allowed="a reference machine's name or its total memory in bytes "
                          "(an integer >= 1)"), "custom"


def kv_capacity(model, gpu="H100 SXM", gpu_memory_utilization: float = 0.92, block_size: int = 16,
                kv_cache_dtype: str = "auto", dtype="bf16", activation_peak: int = 0, non_torch: int = 0,
                cudagraph: int = 0, max_model_len: int | None = None, tensor_parallel_size: int = 1) -> KVCapacity:
    """How many KV blocks and tokens vLLM gives ``model`` on one GPU, computed as vLLM computes it.

    ``model``: a lib.ModelConfig, a ``lib.PRESETS`` name or a demo model. ``gpu``: a
    ``lib.roofline.REFERENCE_MACHINES`` name with a memory size, or the total memory in bytes (what CUDA reports,
    which vLLM multiplies). ``dtype``: the weights' dtype ("bf16", "fp16", "fp32"; vLLM's ``dtype``);
    ``kv_cache_dtype``: vLLM's value ("auto" = the weights' dtype, "float16", "bfloat16", "fp8", "fp8_e4m3",
    "fp8_e5m2"). ``activation_peak``, ``non_torch``, ``cudagraph``: bytes vLLM measures at start-up (peak
    activations of its profiling pass, memory outside torch such as NCCL, CUDA graphs); 0 leaves them out.
    ``max_model_len``: None takes the model's ``max_seq_len``. ``tensor_parallel_size``: GPUs of ``gpu``'s size
    the model is split over (vLLM's argument): each holds its share of the weights (``weight_bytes_per_gpu``) and
    caches only its KV heads (``tensor_parallel_heads``: 1/size of them, or one replicated head when the model has
    fewer KV heads than GPUs), so a block is smaller and the same block ids hold the same tokens on every GPU; the
    memory fields are per GPU, the blocks and tokens the engine's. A size that cannot split the heads is an error.

        available  = ceil(total × gpu_memory_utilization) − weights − activation_peak − non_torch − cudagraph
        num_blocks = available // kv_cache_bytes(model, block_size, dtype=kv dtype)   (0 when available < 0)
    (per GPU under tensor parallelism: its weights, and the block bytes × its KV heads / n_kv_heads)
    """
    name, config = resolve_model(model)
    total, _ = _machine_memory(gpu)
    util = checks.number(gpu_memory_utilization, "gpu_memory_utilization", above=0, maximum=1,
                         allowed="a fraction above 0 and at most 1 (vLLM's default is 0.92)")
    block_size = checks.integer(block_size, "block_size", 1)
    checks.choice(kv_cache_dtype, "kv_cache_dtype", tuple(KV_CACHE_DTYPES))
    weights_dtype = dtype_name(dtype)
    if weights_dtype not in ("fp32", "bf16", "fp16"):
        raise ValueError(f"dtype (the weights') must be fp32, bf16 or fp16 here, got {dtype!r}; a quantized "
                         f"model's weight bytes depend on its quantization scheme, which kv_capacity does not model")
    kv_dtype = KV_CACHE_DTYPES[kv_cache_dtype] or weights_dtype
    activation_peak = checks.integer(activation_peak, "activation_peak", 0, allowed="a number of bytes >= 0")
    non_torch = checks.integer(non_torch, "non_torch", 0, allowed="a number of bytes >= 0")
    cudagraph = checks.integer(cudagraph, "cudagraph", 0, allowed="a number of bytes >= 0")
    max_model_len = config.max_seq_len if max_model_len is None else checks.integer(max_model_len, "max_model_len", 1)
    tp = checks.integer(tensor_parallel_size, "tensor_parallel_size", 1, allowed="a number of GPUs >= 1")
    _, kv_heads = tensor_parallel_heads(config, tp)

    requested = math.ceil(total * util)  # vllm/v1/worker/utils.py request_memory
    weights = weight_bytes_per_gpu(config, tp, dtype=weights_dtype)
    available = requested - weights - activation_peak - non_torch - cudagraph
    block_bytes = kv_cache_bytes(config, block_size, dtype=kv_dtype) // config.n_kv_heads * kv_heads  # one block, every layer
    num_blocks = max(available, 0) // block_bytes
    reported = int(num_blocks / math.ceil(max_model_len / block_size) * max_model_len)  # get_kv_cache_capacity
    return KVCapacity(name, total, util, requested, weights, activation_peak, non_torch, cudagraph, available,
                      kv_dtype, block_size, block_bytes, num_blocks, max_model_len, reported, tp, kv_heads)


def max_sequences(model, context: int, gpu="H100 SXM", dtype="bf16", **settings) -> int:
    """How many sequences of ``context`` tokens the KV pool vLLM gives ``model`` on ``gpu`` holds at once: its usable
    blocks // the blocks one sequence needs (``kv_capacity``'s arithmetic; ``settings``: its other arguments). The
    batch a decode at that context can run at on one GPU, whatever the compute roof would allow; 0 when the
    weights alone do not fit."""
    cap = kv_capacity(model, gpu, dtype=dtype, **settings)
    context = checks.integer(context, "context", 1, allowed="a number of tokens >= 1")
    return cap.usable_blocks // math.ceil(context / cap.block_size)


# ------------------------------------------------------------------------------- checking the source

class _Source:
    """Files of a vLLM source tree: a directory that holds ``vllm/`` (or is it), or a wheel (.whl)."""

    def __init__(self, path):
        p = Path(path)
        self.zip = None
        if p.is_file() and p.suffix == ".whl":
            self.zip = zipfile.ZipFile(p)
            self.names = set(self.zip.namelist())
        elif (p / "vllm" / "__init__.py").is_file():
            self.root = p
        elif (p / "__init__.py").is_file() and p.name == "vllm":
            self.root = p.parent
        else:
            raise FileNotFoundError(f"{path} is neither a vLLM wheel (.whl) nor a directory holding vllm/__init__.py "
                                    f"(unpack the wheel: unzip vllm-*.whl -d DIR, then pass DIR)")

    def read(self, rel: str) -> str | None:
        if self.zip is not None:
            return self.zip.read(rel).decode() if rel in self.names else None
        f = self.root / rel
        return f.read_text() if f.is_file() else None


def _version(src: _Source) -> str | None:
    text = src.read("vllm/_version.py") or ""
    m = re.search(r"""version\s*=\s*['"]([^'"]+)['"]""", text)
    return m.group(1) if m else None


def _find(tree: ast.AST, dotted: str):
    """The AST node that defines ``Class.attr`` / ``func`` / ``Class`` (class body or module level)."""
    node = tree
    for part in dotted.split("."):
        found = None
        for child in getattr(node, "body", []):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and child.name == part:
                found = child
            elif isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name) and child.target.id == part:
                found = child
            elif isinstance(child, ast.Assign) and any(isinstance(t, ast.Name) and t.id == part for t in child.targets):
                found = child
            if found is not None:
                break
        if found is None:
            return None
        node = found
    return node


_NO_DEFAULT = object()


def _default_of(node) -> object:
    """The literal default of a class attribute: ``x: int = 3``, ``x = Field(default=3, ...)``, ``field(default=3)``."""
    value = getattr(node, "value", None)
    if value is None:
        return _NO_DEFAULT
    if isinstance(value, ast.Call):
        for kw in value.keywords:
            if kw.arg == "default":
                value = kw.value
                break
        else:
            return _NO_DEFAULT
    try:
        return ast.literal_eval(value)
    except ValueError:
        return _NO_DEFAULT


def _squash(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


@dataclass(frozen=True)
class SourceReport:
    """What ``check_against_source`` found: the version of the tree, how many facts it checked, what failed."""

    version: str | None
    checked: int
    problems: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not self.problems

    def __str__(self) -> str:
        head = f"vLLM {self.version or '(version unknown)'}: {self.checked} facts of lib.vllm_bridge checked"
        if self.ok:
            return f"{head}, all hold."
        return f"{head}, {len(self.problems)} do not:\n" + "\n".join(f"  - {p}" for p in self.problems)


def check_against_source(path) -> SourceReport:
    """Check ``BRIDGE`` against a vLLM source tree (the directory a wheel was unzipped into, or the ``.whl``):
    every file exists, every class/function/attribute is defined there (read with ``ast``), every engine
    argument is a field of ``EngineArgs``, every default is the one written in the map, every evidence line is
    in its file. Returns a ``SourceReport`` (``.ok``, ``.problems``); never imports vLLM."""
    src = _Source(path)
    trees: dict[str, ast.AST | None] = {}
    texts: dict[str, str | None] = {}

    def tree(rel):
        if rel not in trees:
            texts[rel] = src.read(rel)
            trees[rel] = None if texts[rel] is None else ast.parse(texts[rel])
        return trees[rel]

    problems, checked = [], 0
    for m in BRIDGE:
        checked += 1
        t = tree(m.vllm_path)
        if t is None:
            problems.append(f"{m.idea}: {m.vllm_path} is missing")
            continue
        checked += 1
        if _find(t, m.vllm_name) is None:
            problems.append(f"{m.idea}: {m.vllm_name} is not defined in {m.vllm_path}")
        if m.engine_arg is not None and not m.engine_arg.startswith("SamplingParams."):
            checked += 1
            if _find(tree("vllm/engine/arg_utils.py"), f"EngineArgs.{m.engine_arg}") is None:
                problems.append(f"{m.idea}: EngineArgs has no field {m.engine_arg}")
        if m.default_at is not None:
            checked += 1
            rel, attr = m.default_at
            node = None if tree(rel) is None else _find(tree(rel), attr)
            found = _NO_DEFAULT if node is None else _default_of(node)
            if found is _NO_DEFAULT:
                problems.append(f"{m.idea}: no literal default for {attr} in {rel}")
            elif found != m.default or type(found) is not type(m.default):
                problems.append(f"{m.idea}: {attr} defaults to {found!r} in {rel}, the map says {m.default!r}")
        for line in m.evidence:
            checked += 1
            if _squash(line) not in _squash(texts[m.vllm_path]):
                problems.append(f"{m.idea}: {m.vllm_path} no longer contains {line!r}")
    return SourceReport(_version(src), checked, tuple(problems))


def find_vllm_source(candidates=("/tmp/vllm-src", "/tmp/vllm-wheel")) -> Path | None:
    """A vLLM source tree or wheel on this machine: an installed ``vllm`` package (found without importing it),
    else the first candidate directory that is a tree or holds a ``vllm-*.whl``; None when there is none."""
    import importlib.util
    spec = importlib.util.find_spec("vllm")
    if spec is not None and spec.origin:
        return Path(spec.origin).parent
    for c in candidates:
        p = Path(c)
        if (p / "vllm" / "__init__.py").is_file():
            return p
        wheels = sorted(p.glob("vllm-*.whl")) if p.is_dir() else []
        if wheels:
            return wheels[-1]
    return None


# ---------------------------------------------------------------------------------- a live engine

ENGINE_MODEL = "openai-community/gpt2"  # the tiny engine's model: vLLM runs GPT-2, lib.costs has its shape
ENGINE_PRESET = "gpt2"


def why_no_engine() -> str | None:
    """Why a live vLLM engine cannot start here ("vllm is not installed", "no CUDA GPU"), or None when it can."""
    import importlib.util
    if importlib.util.find_spec("vllm") is None:
        return "vllm is not installed in this environment (it needs an NVIDIA GPU machine: pip install vllm)"
    if not torch.cuda.is_available():
        return "no CUDA GPU is visible to torch (vLLM's GPU worker needs one)"
    return None


def _worker_memory(worker) -> tuple[int, int, int, int]:  # runs inside vLLM's GPU worker (vllm/v1/worker/gpu_worker.py)
    return (int(worker.init_snapshot.total_memory), int(worker.requested_memory),
            int(worker.available_kv_cache_memory_bytes), int(worker.model_runner.model_memory_usage))


def engine_capacity(model_path: str = ENGINE_MODEL, gpu_memory_utilization: float = 0.3,
                    max_model_len: int = 1024, dtype="bf16") -> dict:
    """Start a small vLLM engine (``vllm.LLM``) and return what it measured and allocated: ``total_memory``,
    ``requested``, ``available`` (for the KV cache), ``weights`` (bytes, as vLLM measured them), ``num_blocks``,
    ``block_size``. Call only where ``why_no_engine()`` is None; the model is fetched the way vLLM fetches it
    (a local path, or the Hugging Face hub where the machine has a network)."""
    reason = why_no_engine()
    if reason is not None:
        raise RuntimeError(f"cannot start a vLLM engine here: {reason}")
    import vllm
    torch_name = str(dtype_info(dtype).torch_dtype).removeprefix("torch.")  # vLLM's name for it
    llm = vllm.LLM(model=model_path, gpu_memory_utilization=gpu_memory_utilization, max_model_len=max_model_len,
                   dtype=torch_name, enforce_eager=True)
    cache = llm.llm_engine.vllm_config.cache_config
    total, requested, available, weights = llm.collective_rpc(_worker_memory)[0]
    return {"total_memory": total, "gpu_memory_utilization": gpu_memory_utilization,
            "requested": requested, "available": available,
            "weights": weights, "num_blocks": cache.num_gpu_blocks, "block_size": cache.block_size}


def compare_with_engine(measured: dict, model=ENGINE_PRESET, dtype="bf16", kv_cache_dtype: str = "auto") -> list[dict]:
    """Rows (quantity, vLLM, lib) comparing ``engine_capacity``'s numbers with lib's: the requested memory
    (ceil(total × utilization)), the weights (measured vs ``lib.costs.weight_bytes``) and the number of blocks
    that vLLM's own available memory makes with lib's block bytes (``kv_capacity`` given vLLM's measured
    non-KV memory as ``activation_peak``)."""
    util = measured["gpu_memory_utilization"]
    lib_cap = kv_capacity(model, gpu=measured["total_memory"], gpu_memory_utilization=util,
                          block_size=measured["block_size"], kv_cache_dtype=kv_cache_dtype, dtype=dtype)
    non_kv = lib_cap.requested - lib_cap.weights - measured["available"]
    same = kv_capacity(model, gpu=measured["total_memory"], gpu_memory_utilization=util,
                       block_size=measured["block_size"], kv_cache_dtype=kv_cache_dtype, dtype=dtype,
                       activation_peak=max(non_kv, 0))
    return [{"quantity": "requested memory (bytes)", "vLLM": measured["requested"], "lib": lib_cap.requested},
            {"quantity": "weights (bytes)", "vLLM": measured["weights"], "lib": lib_cap.weights},
            {"quantity": "KV memory (bytes)", "vLLM": measured["available"], "lib": same.available},
            {"quantity": "KV blocks", "vLLM": measured["num_blocks"], "lib": same.num_blocks}]
