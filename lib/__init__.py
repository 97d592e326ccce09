"""KV Cache Lab's shared library: a small Transformer, its KV caches, traced generation and cost models.

    tokenizer ──> model (+ cache) ──> generate() ──> Trace ──> widgets / plots
    CharTokenizer  MiniTransformer      one loop:      every step:   lib.widgets (three tiers each)
                   KVCache (+ concat,   prefill, decode,   K/V computed vs read,
                   paged, quant)        sampling.choose    attention, top-k, bytes
    costs: analytic FLOPs and bytes of every step, real models' shapes (presets) ──> plots

The house, floor by floor, from the ground up (each file or folder one idea; a module imports only from its own
floor or below, imports inside functions included: tests/test_architecture.py holds the table, ``FLOORS``):
    visuals    widgets/ (every figure and widget, their style and font), exercises/, notebook
    training   train, train_lm (the toys and the real small language model)
    wings      serving/ (scheduling, batching), speculative, flash, sinks, heads, fastdecode, hf, vllm_bridge
    weights    demo (checkpoints), corpus, lm (the real model's text and prompts)
    caches     concat (torch.cat, a lesson), blocks + paged (vLLM's block pool), quant (int8)
    numbers    presets (every model by name, the demo models' shapes as data), costs, roofline, measure
    engine     config, model, cache, sampling, generate, trace, tokenizer   (read in this order, ~1,350 lines);
               tokenization (how real models cut text into tokens)
    shared     checks, text, device, timing, progress
    words      i18n/ (what lib prints and draws, in both languages: t, ZH; outputs: the printed lines' table)
``import lib`` loads no plotting library: ``lib.notebook`` (matplotlib, plotly) is imported the first time it is
asked for. Course tooling (site, classroom, editions, runner, bench) is in tools/, outside the package: lib never
imports it.

``__all__`` follows one rule: the engine's names (``ENGINE``), then each lesson's entry point (``LESSONS``).
"""
from . import corpus, costs, flash, heads, lm, presets  # modules the notebooks use by name (lib.lm.LOOP_PROMPT, ...)
from .cache import KVCache
from .concat import ConcatKVCache
from .config import ModelConfig
from .costs import kv_cache_bytes
from .demo import load_checkpoint, load_demo, save_checkpoint
from .device import pick_device, resolve_device
from .fastdecode import FastDecoder
from .flash import flash_attention
from .generate import GenerationResult, generate
from .hf import from_hf
from .model import ForwardRecord, MiniTransformer
from .paged import PagedKVCache, PagedKVPool
from .presets import DEMOS, PRESETS
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
    "speculative_generate", "SpeculativeResult",  # 08 speculative decoding
    "PagedKVCache", "PagedKVPool",            # 09 the paged cache
    "flash_attention",                        # 11 FlashAttention
    "sink_share", "streaming_drift",          # 12 sliding windows and attention sinks
    "kv_capacity",                            # 13 vLLM (and 05): how many tokens a GPU holds
    "FastDecoder", "from_hf",                 # speed (make bench), and bringing your own checkpoint (13)
]
__all__ = [*ENGINE, *LESSONS]

_LAZY = ("notebook",)  # lib.notebook sets up matplotlib and plotly: loaded when a notebook asks for it


def __getattr__(name: str):
    """``lib.notebook`` on first use, so that ``import lib`` (and ``import lib.model``) loads no plotting library."""
    if name in _LAZY:
        import importlib
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
