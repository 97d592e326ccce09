"""KV Cache Lab's shared library: a small Transformer, its KV caches, traced generation and cost models.

    tokenizer ──> model (+ cache) ──> generate() ──> Trace ──> widgets / plots
    CharTokenizer  MiniTransformer      one loop:      every step:   lib.widgets (three tiers each)
                   KVCache (+ concat,   prefill, decode,   K/V computed vs read,
                   paged, quant)        sampling.choose    attention, top-k, bytes
    costs: analytic FLOPs and bytes of every step, real models' shapes (presets) ──> plots

The house, floor by floor (each file or folder one idea; imports only go down):
    engine     config, model, cache, sampling, generate, trace, tokenizer   (read in this order, ~1,350 lines)
    caches     concat (torch.cat, a lesson), blocks + paged (vLLM's block pool), quant (int8)
    wings      serving/ (scheduling, batching), speculative, flash, sinks, heads, fastdecode, hf, vllm_bridge
    numbers    costs, presets, roofline, measure, timing
    weights    demo (checkpoints), corpus, train, train_lm (the toys and the real small language model)
    shared     checks, text, device, progress
    visuals    widgets/ (every figure and widget, their style, words and font), exercises/, notebook
Course tooling (site, classroom, editions, runner, bench) is in tools/, outside the package: lib never imports it.

``__all__`` follows one rule: the engine's names (``ENGINE``), then each lesson's entry point (``LESSONS``).
"""
from . import corpus, costs, flash, heads, lm, notebook  # modules the notebooks use by name (lib.lm.LOOP_PROMPT, ...)
from .cache import KVCache
from .concat import ConcatKVCache
from .config import ModelConfig
from .costs import kv_cache_bytes
from .demo import DEMOS, load_checkpoint, load_demo, save_checkpoint
from .device import pick_device, resolve_device
from .fastdecode import FastDecoder
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

ENGINE = ["ModelConfig", "MiniTransformer", "ForwardRecord", "KVCache", "CharTokenizer", "UnknownCharacterError",
          "generate", "GenerationResult", "filter_logits", "Trace", "TraceStep", "load_demo", "load_checkpoint",
          "save_checkpoint", "DEMOS", "pick_device", "resolve_device"]
LESSONS = [
    "ConcatKVCache",                          # 03 the KV cache: the torch.cat cache and its copying
    "kv_cache_bytes", "PRESETS",              # 05 memory: the formula, real models' shapes
    "QuantizedKVCache",                       # 05 an int8 KV cache
    "speculative_generate", "SpeculativeResult",  # 06 speculative decoding
    "PagedKVCache", "PagedKVPool",            # 07 the paged cache
    "flash_attention",                        # 09 FlashAttention
    "sink_share", "streaming_drift",          # 10 windows and attention sinks
    "kv_capacity",                            # 11 vLLM: how many tokens a GPU holds
    "FastDecoder", "from_hf",                 # speed, and bringing your own checkpoint
]
__all__ = [*ENGINE, *LESSONS]
