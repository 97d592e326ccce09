"""KV Cache Lab's shared library: a small Transformer, its KV caches, traced generation and cost models.

    tokenizer ──> model (+ cache) ──> generate() ──> Trace ──> widgets / plots
    CharTokenizer  MiniTransformer      one loop:      every step:   lib.widgets (three tiers each)
                   KVCache, ConcatKVCache,   prefill, decode,   K/V computed vs read,
                   paged.PagedKVCache        sampling.choose    attention, top-k, bytes
    costs: analytic FLOPs and bytes of every step ──> plots; presets: every model by name (PRESETS)

Read the core in this order: config, model, cache, sampling, generate, trace (and tokenizer).
Around it: paged and serving (vLLM's block pool, continuous batching), speculative, fastdecode (speed),
hf (real checkpoints), measure / roofline / bench (measuring), demo / train (the shipped weights).
"""
from . import costs, notebook
from .cache import KVCache
from .concat import ConcatKVCache
from .config import ModelConfig
from .costs import kv_cache_bytes
from .demo import DEMOS, load_checkpoint, load_demo, save_checkpoint
from .device import pick_device, resolve_device
from .fastdecode import FastDecoder
from . import flash
from .flash import flash_attention
from .generate import GenerationResult, generate
from .hf import from_hf
from .model import ForwardRecord, MiniTransformer
from .paged import PagedKVCache, PagedKVPool
from .presets import PRESETS
from .quant import QuantizedKVCache
from .sampling import filter_logits
from .sinks import sink_share, streaming_drift
from .speculative import SpeculativeResult, speculative_generate
from .tokenizer import CharTokenizer, UnknownCharacterError
from .trace import Trace, TraceStep
from .vllm_bridge import kv_capacity

__all__ = [
    "ModelConfig", "MiniTransformer", "ForwardRecord", "KVCache", "ConcatKVCache", "PagedKVCache", "PagedKVPool",
    "generate", "GenerationResult", "filter_logits", "Trace", "TraceStep", "CharTokenizer", "UnknownCharacterError",
    "load_demo", "load_checkpoint", "save_checkpoint", "DEMOS", "FastDecoder", "from_hf", "speculative_generate",
    "SpeculativeResult", "pick_device", "resolve_device", "kv_cache_bytes", "PRESETS",
    "flash_attention",
    "kv_capacity",
    "sink_share", "streaming_drift",
    "QuantizedKVCache",
]
