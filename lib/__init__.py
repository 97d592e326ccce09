"""KV Cache Lab's shared library: a small Transformer, its KV caches, traced generation and cost models.

Flow: tokenizer -> model (+ cache) -> generate() -> Trace -> widgets / plots; ``costs`` gives the analytic
counts, bytes and FLOPs (and the published shapes of real models) that the plots compare against.
"""
from . import costs, notebook
from .cache import ConcatKVCache, KVCache
from .config import ModelConfig
from .costs import PRESETS, kv_cache_bytes
from .demo import DEMOS, load_checkpoint, load_demo, save_checkpoint
from .device import pick_device, resolve_device
from .fastdecode import FastDecoder
from .hf import from_hf
from .generate import GenerationResult, generate, generate_paged
from .model import ForwardRecord, MiniTransformer
from .paged import PagedKVCache, PagedKVPool
from .sampling import filter_logits
from .speculative import SpeculativeResult, speculative_generate
from .tokenizer import CharTokenizer, UnknownCharacterError
from .trace import Trace, TraceStep

__all__ = [
    "ModelConfig", "from_hf", "FastDecoder", "MiniTransformer", "ForwardRecord", "KVCache", "ConcatKVCache", "generate", "GenerationResult",
    "filter_logits", "Trace", "TraceStep", "CharTokenizer", "UnknownCharacterError", "load_demo", "load_checkpoint",
    "save_checkpoint", "DEMOS", "PagedKVCache", "PagedKVPool", "generate_paged", "speculative_generate", "SpeculativeResult", "pick_device", "resolve_device", "kv_cache_bytes", "PRESETS",
]
