"""Exercise of notebook 13 (the bridge to vLLM): the number of KV blocks vLLM allocates at start-up."""
from __future__ import annotations

import math

from ..config import ModelConfig
from ..costs import GiB, weight_bytes
from ..device import dtype_bytes
from ..presets import llama
from ..vllm_bridge import kv_capacity
from ..i18n import t
from . import Case, exercise

def num_kv_blocks(total_bytes, gpu_memory_utilization, weight_bytes, activation_bytes, block_size, n_layers,
                  n_kv_heads, head_dim, bytes_per_value):
    """Worked solution: vLLM's budget, what is left after weights and activations, divided into whole blocks."""
    requested = math.ceil(total_bytes * gpu_memory_utilization)   # what this vLLM instance may use
    available = requested - weight_bytes - activation_bytes       # what is left for the KV cache
    block = 2 * n_layers * n_kv_heads * head_dim * block_size * bytes_per_value  # K and V, every layer
    return max(available, 0) // block


def _case(description, config: ModelConfig, total, util, block_size, dtype, activation):
    cap = kv_capacity(config, gpu=total, gpu_memory_utilization=util, block_size=block_size, dtype=dtype,
                      activation_peak=activation)
    kwargs = dict(total_bytes=total, gpu_memory_utilization=util, weight_bytes=weight_bytes(config, dtype),
                  activation_bytes=activation, block_size=block_size, n_layers=config.n_layers,
                  n_kv_heads=config.n_kv_heads, head_dim=config.head_dim, bytes_per_value=dtype_bytes(dtype))
    return Case(t(description), kwargs=kwargs, expected=cap.num_blocks)


def _llama(L, d, H, KV, ff, vocab=32000):
    return llama(vocab, L, d, H, KV, ff, 4096)


@exercise("vllm_num_blocks", title="KV blocks vLLM allocates",
          hints=("How much of the GPU's memory may vLLM use, and what is already taken before the KV cache gets "
                 "the rest?",
                 "The budget is total × gpu_memory_utilization (rounded up); the weights and the activation peak "
                 "come off it; one block holds the keys and values of block_size tokens in every layer.",
                 "Take gpu_memory_utilization of the total (rounded up to a whole byte, as vLLM does), subtract the "
                 "weights and the activation peak, then divide by the bytes of ONE block: keys and values (×2) of "
                 "block_size tokens in every layer. Keep whole blocks only (//), and none when nothing is left."),
          solution=num_kv_blocks)
def _num_blocks_cases():
    return [
        _case("a Llama-2-7B-shaped model (32 layers, 32 KV heads) in bf16 on an 80 GiB GPU, utilization 0.92, "
              "2 GiB of activations, blocks of 16", _llama(32, 4096, 32, 32, 11008), 80 * GiB, 0.92, 16, "bf16",
              2 * GiB),
        _case("a GQA model (32 layers, 8 KV heads) in fp16 on a 141 GiB GPU, utilization 0.9, 3 GiB of activations, "
              "blocks of 32", _llama(32, 4096, 32, 8, 14336, vocab=128256), 141 * GiB, 0.9, 32, "fp16", 3 * GiB),
        _case("a small fp32 model on a GPU whose total times the utilization is not a whole number of bytes",
              _llama(4, 256, 4, 2, 688), 1_000_000_007, 0.333, 16, "fp32", 12_345_678),
        _case("a model whose weights alone exceed the utilization budget", _llama(80, 8192, 64, 8, 28672),
              80 * GiB, 0.92, 16, "bf16", 2 * GiB),
    ]
