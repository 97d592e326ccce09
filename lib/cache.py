"""KV caches: where the keys and values of earlier tokens wait for the next decode step.

A cache is an object of its own, created per request and thrown away afterwards; it is never a module
buffer, so ``model.state_dict()`` and ``model.parameters()`` contain none of it.

* ``KVCache`` is preallocated: one (B, n_kv_heads, max_len, head_dim) tensor for K and one for V per layer,
  and each forward writes its new rows at position ``seq_len`` (like gpt-fast or HF's StaticCache).
* ``ConcatKVCache`` grows with ``torch.cat``: every step allocates a new tensor and copies the whole history
  into it. It gives the same numbers, but copies O(n²) bytes over a generation, which it counts.

A forward pass calls ``update(layer, k, v)`` once per layer (returns all keys and values so far) and then
``advance(T)`` once, which moves ``seq_len`` on by the T tokens it fed.
"""
from __future__ import annotations

import torch

from .config import ModelConfig


def _check_dtype_device(dtype, device):
    dtype = torch.get_default_dtype() if dtype is None else dtype
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise ValueError(f"a KV cache needs a floating-point torch dtype (e.g. torch.float32, torch.bfloat16, "
                         f"torch.float16), got {dtype!r}")
    from .device import resolve_device
    return dtype, resolve_device("cpu" if device is None else device)


class _CacheBase:
    """What both caches share: shapes, bookkeeping and the checks that give readable errors."""

    def __init__(self, config: ModelConfig, batch_size: int, max_len: int, device=None, dtype=None):
        if not isinstance(config, ModelConfig):
            raise TypeError(f"a KV cache is built from a lib.ModelConfig, got {type(config).__name__}")
        for name, v in (("batch_size", batch_size), ("max_len", max_len)):
            if isinstance(v, bool) or not isinstance(v, int) or v <= 0:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
        if max_len > config.max_seq_len:
            raise ValueError(f"max_len={max_len} is longer than the model's context window "
                             f"(max_seq_len={config.max_seq_len}); a cache can hold at most that many positions")
        self.config = config
        self.batch_size = batch_size
        self.max_len = max_len
        self.dtype, self.device = _check_dtype_device(dtype, device)
        self.seq_len = 0
        self._pending = 0  # tokens written by the layers of the forward pass in progress

    # -- shapes and sizes ---------------------------------------------------------------------------
    @property
    def n_layers(self) -> int:
        return self.config.n_layers

    def shape(self, n_positions: int) -> tuple:
        return (self.batch_size, self.config.n_kv_heads, n_positions, self.config.head_dim)

    @property
    def free(self) -> int:
        """Positions still free before the cache is full."""
        return self.max_len - self.seq_len

    # -- the protocol a forward pass follows ----------------------------------------------------------
    def check_compatible(self, model, batch_size: int, n_new: int):
        """Raise a clear error unless ``model`` may append ``n_new`` tokens of ``batch_size`` sequences."""
        c, mc = self.config, model.config
        if (c.n_layers, c.n_kv_heads, c.head_dim) != (mc.n_layers, mc.n_kv_heads, mc.head_dim):
            raise ValueError(
                f"this cache was made for {c.n_layers} layers x {c.n_kv_heads} KV heads x head_dim {c.head_dim}, "
                f"but the model has {mc.n_layers} x {mc.n_kv_heads} x {mc.head_dim}; make the cache from model.config")
        if batch_size != self.batch_size:
            raise ValueError(f"batch size mismatch: the cache holds {self.batch_size} sequence(s) but the input has "
                             f"{batch_size}; make a cache with batch_size={batch_size}")
        if model.dtype != self.dtype:
            raise ValueError(f"dtype mismatch: the cache stores {self.dtype} but the model computes in "
                             f"{model.dtype}; make the cache with dtype=model.dtype")
        if model.device != self.device:
            raise ValueError(f"device mismatch: the cache lives on {self.device} but the model is on "
                             f"{model.device}; make the cache with device=model.device")
        if self.seq_len + n_new > self.max_len:
            raise ValueError(
                f"KV cache is full: it holds {self.seq_len} of max_len={self.max_len} positions and this forward "
                f"would add {n_new} more; make a cache with max_len >= {self.seq_len + n_new} or reset() it")

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Append this pass's K and V (B, n_kv_heads, T, head_dim) of one layer; return all keys and values
        so far, (B, n_kv_heads, seq_len + T, head_dim)."""
        T = k.shape[2]
        if self.seq_len + T > self.max_len:  # also guards direct use without check_compatible
            raise ValueError(f"KV cache is full: {self.seq_len} + {T} positions exceed max_len={self.max_len}")
        self._pending = T
        return self._write(layer, k, v)

    def advance(self, n: int):
        """Called once after all layers have written: the n new positions now count as cached."""
        self.seq_len += n
        self._pending = 0

    def crop(self, seq_len: int):
        """Forget every position from ``seq_len`` on (speculative decoding drops rejected draft tokens)."""
        if isinstance(seq_len, bool) or not isinstance(seq_len, int) or not 0 <= seq_len <= self.seq_len:
            raise ValueError(f"crop takes a length from 0 to the current seq_len={self.seq_len}, got {seq_len!r}")
        self._crop(seq_len)
        self.seq_len = seq_len

    def keys(self, layer: int) -> torch.Tensor:
        """The cached keys of one layer, (B, n_kv_heads, seq_len, head_dim)."""
        return self._read(layer, 0)

    def values(self, layer: int) -> torch.Tensor:
        """The cached values of one layer, (B, n_kv_heads, seq_len, head_dim)."""
        return self._read(layer, 1)

    def _check_layer(self, layer):
        if not isinstance(layer, int) or not 0 <= layer < self.n_layers:
            raise IndexError(f"layer must be an int from 0 to {self.n_layers - 1}, got {layer!r}")

    def __repr__(self):
        return (f"{type(self).__name__}(layers={self.n_layers}, batch={self.batch_size}, "
                f"kv_heads={self.config.n_kv_heads}, head_dim={self.config.head_dim}, seq_len={self.seq_len}, "
                f"max_len={self.max_len}, dtype={self.dtype}, device={self.device}, nbytes={self.nbytes:,})")


class KVCache(_CacheBase):
    """Preallocated cache: K and V tensors of shape (B, n_kv_heads, max_len, head_dim) per layer,
    allocated once; each step writes its rows in place at positions seq_len .. seq_len + T - 1."""

    def __init__(self, config: ModelConfig, batch_size: int, max_len: int, device=None, dtype=None):
        super().__init__(config, batch_size, max_len, device, dtype)
        shape = self.shape(max_len)
        self.k = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(config.n_layers)]
        self.v = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(config.n_layers)]

    def _write(self, layer, k, v):
        start, end = self.seq_len, self.seq_len + k.shape[2]
        self.k[layer][:, :, start:end] = k  # write in place: nothing else moves
        self.v[layer][:, :, start:end] = v
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]  # views, no copy

    def _read(self, layer, which):
        self._check_layer(layer)
        return (self.k if which == 0 else self.v)[layer][:, :, :self.seq_len]

    @property
    def nbytes(self) -> int:
        """Bytes of GPU/CPU memory the cache holds: all of it is reserved up front."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v)

    @property
    def used_bytes(self) -> int:
        """Bytes holding real tokens so far (seq_len of max_len positions)."""
        return self.nbytes * self.seq_len // self.max_len

    def _crop(self, seq_len):
        pass  # positions past seq_len are simply overwritten by the next write

    def reset(self):
        """Forget every token (the memory stays allocated, ready for the next request)."""
        self.seq_len = 0
        self._pending = 0
        for t in self.k + self.v:
            t.zero_()


class ConcatKVCache(_CacheBase):
    """Naive cache that grows by ``torch.cat``: each step allocates new tensors one step longer and copies
    all of history into them. ``bytes_copied`` counts every byte those copies move."""

    def __init__(self, config: ModelConfig, batch_size: int, max_len: int | None = None, device=None, dtype=None):
        super().__init__(config, batch_size, config.max_seq_len if max_len is None else max_len, device, dtype)
        self.reset()

    def reset(self):
        empty = self.shape(0)
        self.k = [torch.zeros(empty, dtype=self.dtype, device=self.device) for _ in range(self.n_layers)]
        self.v = [torch.zeros(empty, dtype=self.dtype, device=self.device) for _ in range(self.n_layers)]
        self.seq_len = 0
        self._pending = 0
        self.bytes_copied = 0
        self.allocations = 0

    def _write(self, layer, k, v):
        self.k[layer] = torch.cat([self.k[layer], k], dim=2)  # a new, longer tensor; old one copied over
        self.v[layer] = torch.cat([self.v[layer], v], dim=2)
        self.bytes_copied += (self.k[layer].numel() + self.v[layer].numel()) * self.k[layer].element_size()
        self.allocations += 2
        return self.k[layer], self.v[layer]

    def _read(self, layer, which):
        self._check_layer(layer)
        return (self.k if which == 0 else self.v)[layer]

    def _crop(self, seq_len):
        self.k = [t[:, :, :seq_len].clone() for t in self.k]
        self.v = [t[:, :, :seq_len].clone() for t in self.v]

    @property
    def nbytes(self) -> int:
        """Bytes the cache's tensors hold right now (grows with every token)."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v)
