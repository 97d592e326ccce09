"""The naive KV cache: grow every layer's K and V with ``torch.cat`` at every step.

It gives exactly the numbers of ``lib.KVCache``, but each step allocates new tensors one position longer and
copies the whole history into them, so a generation of n tokens copies O(n²) bytes (and allocates 2 tensors
per layer per step) where the preallocated cache writes O(n). It counts both, for notebook 03 and the
benchmark. Nothing else differs: it follows the same protocol (``lib.cache.CacheBase``).
"""
from __future__ import annotations

import torch

from .cache import CacheBase, register_cache_kind
from .config import ModelConfig


@register_cache_kind
class ConcatKVCache(CacheBase):
    """Naive cache that grows by ``torch.cat``: each step allocates new tensors one step longer and copies
    all of history into them. ``bytes_copied`` counts every byte those copies move."""

    kind = "concat"  # its name for generate(cache_kind=...) and Trace.cache_kind

    def __init__(self, config: ModelConfig, batch_size: int, max_len: int | None = None, device=None, dtype=None):
        super().__init__(config, batch_size, config.max_seq_len if max_len is None else max_len, device, dtype)
        self.reset()

    def reset(self):
        self.k = [torch.zeros(self.shape(0), dtype=self.dtype, device=self.device) for _ in range(self.n_layers)]
        self.v = [torch.zeros_like(t) for t in self.k]
        self.seq_len, self._pending, self.bytes_copied, self.allocations = 0, 0, 0, 0

    def _write(self, layer, k, v):
        self.k[layer] = torch.cat([self.k[layer], k], dim=2)  # a new, longer tensor; old one copied over
        self.v[layer] = torch.cat([self.v[layer], v], dim=2)
        self.bytes_copied += (self.k[layer].numel() + self.v[layer].numel()) * self.k[layer].element_size()
        self.allocations += 2
        return self.k[layer], self.v[layer]

    def kv(self, layer):
        return self.k[layer], self.v[layer]

    def _crop(self, seq_len):
        self.k = [t[:, :, :seq_len].clone() if t.shape[2] > seq_len else t for t in self.k]
        self.v = [t[:, :, :seq_len].clone() if t.shape[2] > seq_len else t for t in self.v]
