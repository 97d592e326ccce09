"""KV caches: where the keys and values of earlier tokens wait for the next decode step. A cache is an
object of its own, made per request; never a module buffer, so ``state_dict()`` holds none of it.

``KVCache`` is preallocated (one (B, n_kv_heads, max_len, head_dim) tensor for K and one for V per layer,
written in place at ``seq_len``, like gpt-fast); ``lib.concat.ConcatKVCache`` grows by ``torch.cat`` (O(n²)
copying, a lesson); ``lib.paged.PagedKVCache`` keeps blocks of a shared pool (vLLM) and ragged batches.

The protocol a forward pass follows (the model never changes for a new kind of cache; vLLM is built so too):

    feed = cache.begin(model, B, T, lengths)     # check, make room; -> Feed: positions (B, T) and the mask
    for every layer:
        keys, values = cache.update(layer, k, v)  # append this pass's K/V (B, n_kv_heads, T, head_dim);
                                                  # -> every key and value so far (B, n_kv_heads, S, head_dim)
    cache.commit()                                # the new positions count: seq_len grows by T
    (cache.rollback() instead, if the pass failed: the cache is as it was before ``begin``)

Around the passes: ``crop(n)`` forgets positions from n on, ``fork(n)`` copies every sequence n times (parallel
sampling), ``release()`` lets go of what a cache holds outside itself (a paged cache's blocks; else nothing).

The keys ``update`` hands back sit at positions ``feed.key_positions`` (None: 0, 1, 2, ...), and attention
builds its mask from those positions: causal, and with a sliding window only the last W positions. A cache
that keeps every position hands back 0..S-1; a windowed ``KVCache`` (a ring buffer of W slots) only the
positions this pass's queries can still see (and, with attention sinks, the first few).

Rotary positions count in the text (a key is rotated once, at its position, before it is cached), except in a
``KVCache(..., window=W, sinks=n, positions="cache")`` (StreamingLLM, §3.2: "positions within the cache rather
than those in the original text"): it keeps its keys unrotated, and every pass attention rotates the S keys it
hands back at 0..S-1 (the sinks, then the ring oldest to newest, then the fed tokens) and the T queries at
S-T..S-1 (``feed.rope_in_cache``). A decode step's query then sits at W-1 at most, whatever the length of the
text, so the ring streams past the model's context window in flat memory.

A kind of cache that ``generate(cache_kind=...)`` can build registers itself under its ``kind``:

    @register_cache_kind                          # CACHE_KINDS["static"] = KVCache
    class KVCache(CacheBase):
        kind = "static"
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from . import checks
from .config import ModelConfig
from .device import cache_dtype_device


CACHE_KINDS: dict = {}  # kind -> cache class, what generate(cache_kind=...) builds; filled by register_cache_kind


def register_cache_kind(cls):
    """Class decorator: ``generate(cache_kind=cls.kind)`` may build ``cls`` from now on, as
    ``cls(config, batch_size, max_len, device=..., dtype=...)``. A kind names one class: a second class under a
    taken name is an error (the same class again, as a module reload makes it, replaces it)."""
    kind = getattr(cls, "kind", None)
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"{cls.__name__} needs a class attribute kind, its name for generate(cache_kind=...) "
                        f"(KVCache's is 'static')")
    taken = CACHE_KINDS.get(kind)
    if taken is not None and (taken.__module__, taken.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"cache kind {kind!r} is taken by {taken.__module__}.{taken.__qualname__}; give "
                         f"{cls.__name__} a kind of its own (taken so far: {', '.join(map(repr, CACHE_KINDS))})")
    CACHE_KINDS[kind] = cls
    return cls


@dataclass
class Feed:
    """Where the tokens of one pass sit, as the cache hands it to attention: ``positions`` (B or 1, T) of the
    fed tokens (in a ragged, right-padded batch a padding slot repeats its row's last real position; its
    output is thrown away), ``n_keys`` (S, how many keys ``update`` hands back: the longest row after the
    pass), ``lengths`` (real tokens per row when they differ, else None); a cache that keeps only some
    positions also says which: ``key_positions`` (S,) of the keys it hands back (None: 0..S-1), and the
    ``window`` and ``sinks`` it keeps (each query then sees the first ``sinks`` positions and the last
    ``window - sinks``); ``rope_in_cache``: the keys handed back are not rotated yet and rotary positions count
    within the cache (keys 0..S-1, queries S-T..S-1), while ``positions`` and ``key_positions`` (in the text)
    still build the mask."""

    positions: torch.Tensor
    n_keys: int
    lengths: list | None = None
    key_positions: torch.Tensor | None = None
    window: int | None = None
    sinks: int = 0
    rope_in_cache: bool = False

    @classmethod
    def contiguous(cls, start: int, n_new: int, device) -> "Feed":
        """Every sequence starts at ``start`` and feeds ``n_new`` tokens."""
        return cls(torch.arange(start, start + n_new, device=device)[None], start + n_new)

    @classmethod
    def ragged(cls, starts: list, lengths: list, device) -> "Feed":
        """Sequence b starts at ``starts[b]`` and feeds ``lengths[b]`` tokens (right-padded to the longest)."""
        if len(set(starts)) == 1 and len(set(lengths)) == 1:
            return cls.contiguous(starts[0], lengths[0], device)
        start = torch.tensor(starts, device=device)[:, None]  # (B, 1)
        last = start + torch.tensor(lengths, device=device)[:, None] - 1  # (B, 1)
        positions = torch.minimum(start + torch.arange(max(lengths), device=device)[None], last)  # (B, T)
        return cls(positions, max(s + n for s, n in zip(starts, lengths)), list(lengths))

    def mask(self, window: int | None = None) -> torch.Tensor | None:
        """(B or 1, 1, T, S) bool, True where a query may see a key: the key at position j is visible from
        position p when j <= p and, with a sliding window W (the model's ``window`` or the cache's, the
        smaller), when j > p - W (the last W positions, p itself included) or j < sinks. Sequences in step with
        nothing windowed: the i-th of T queries sees the first S - T + i + 1 keys (causal by order, whatever
        positions a cache reports), and a single query every key (None: a decode step needs no mask). Built
        once per pass; every layer uses it."""
        windows = [w for w in (window, self.window) if w is not None]
        if self.lengths is None and not windows:
            T, S = self.positions.shape[1], self.n_keys
            if T == 1:
                return None
            causal = torch.ones(T, S, dtype=torch.bool, device=self.positions.device).tril(diagonal=S - T)  # (T, S)
            return causal[None, None]  # (1, 1, T, S)
        keys = self.key_positions
        if keys is None:
            keys = torch.arange(self.n_keys, device=self.positions.device)  # (S,)
        p = self.positions[:, :, None]  # (B or 1, T, 1)
        visible = keys[None, None, :] <= p  # (B or 1, T, S)
        if windows:
            recent = keys[None, None, :] > p - (min(windows) - self.sinks)
            visible = visible & (recent | (keys[None, None, :] < self.sinks))
        return visible[:, None]  # (B or 1, 1, T, S)

    def last(self, h: torch.Tensor) -> torch.Tensor:
        """(B, T, d) -> (B, 1, d): each sequence's last real position."""
        if self.lengths is None:
            return h[:, -1:]
        rows = torch.arange(h.shape[0], device=h.device)
        return h[rows, torch.tensor(self.lengths, device=h.device) - 1][:, None]


CACHE_POSITIONS = ("text", "cache")  # KVCache(positions=...): where rotary positions count (see the docstring above)


class CacheBase:
    """What every cache shares: shapes, the forward-pass protocol, and the checks that give readable errors.
    A subclass stores K and V: ``_write`` (append; return everything so far), ``kv`` (read), ``_crop``."""

    positions = "text"  # rotary positions count in the text; "cache": within the cache (KVCache's option)

    def __init__(self, config: ModelConfig, batch_size: int, max_len: int, device=None, dtype=None):
        if not isinstance(config, ModelConfig):
            raise TypeError(f"a KV cache is built from a lib.ModelConfig, got {type(config).__name__}")
        batch_size, max_len = checks.integer(batch_size, "batch_size", 1), checks.integer(max_len, "max_len", 1)
        if max_len > config.max_seq_len:
            raise ValueError(f"max_len={max_len} is longer than the model's context window "
                             f"(max_seq_len={config.max_seq_len}); a cache can hold at most that many positions")
        self.config, self.batch_size, self.max_len = config, batch_size, max_len
        self.dtype, self.device = cache_dtype_device(dtype, device)
        checks.cache_memory(self, 1)  # a cache that cannot hold one position of every row is a typo
        self.seq_len = 0  # positions cached (every sequence holds the same number)
        self._pending = 0  # tokens the pass in progress has written (not yet committed)

    @property
    def n_layers(self) -> int:
        return self.config.n_layers

    def shape(self, n_positions: int) -> tuple:
        return (self.batch_size, self.config.n_kv_heads, n_positions, self.config.head_dim)
    @property
    def seq_lens(self) -> list[int]:
        """Cached positions of every sequence (all equal here; a paged cache may hold ragged rows)."""
        return [self.seq_len] * self.batch_size

    @property
    def next_positions(self) -> list[int]:
        """Per sequence, the position the next fed token gets, as the model's position table or rotary angles
        count it (what the context window limits): ``seq_lens`` here; a cache with positions="cache" counts
        the keys it keeps."""
        return self.seq_lens

    @property
    def nbytes(self) -> int:
        """Bytes the cache's K and V tensors hold right now."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v)

    # -- the protocol a forward pass follows ----------------------------------------------------------
    def check_compatible(self, model, batch_size: int):
        """Raise a clear error unless this cache fits ``model`` and a batch of ``batch_size`` sequences."""
        c, mc = self.config, model.config
        if (c.n_layers, c.n_kv_heads, c.head_dim) != (mc.n_layers, mc.n_kv_heads, mc.head_dim):
            raise ValueError(
                f"this cache was made for {c.n_layers} layers x {c.n_kv_heads} KV heads x head_dim {c.head_dim}, "
                f"but the model has {mc.n_layers} x {mc.n_kv_heads} x {mc.head_dim}; make the cache from model.config")
        if self.positions == "cache":  # a cache made for another config: the model must have rotary positions too
            check_positions_in_cache(mc, self.window, self.max_len)
        if batch_size != self.batch_size:
            raise ValueError(f"batch size mismatch: the cache holds {self.batch_size} sequence(s) but the input has "
                             f"{batch_size}; make a cache with batch_size={batch_size}")
        for what, mine, theirs in (("dtype", self.dtype, model.dtype), ("device", self.device, model.device)):
            if mine != theirs:
                raise ValueError(f"{what} mismatch: the cache is in {mine} but the model in {theirs}; make the "
                                 f"cache with {what}=model.{what}")

    def begin(self, model, batch_size: int, n_new: int, lengths=None) -> Feed:
        """Start a forward pass that feeds ``n_new`` tokens to each of ``batch_size`` sequences (or
        ``lengths[b]`` real tokens to sequence b, right-padded to n_new): check, make room, and say where
        the tokens sit. Raises a clear error, changing nothing, when they do not fit."""
        self.check_compatible(model, batch_size)
        if lengths is not None and any(n != n_new for n in lengths):
            raise ValueError(f"{type(self).__name__} holds sequences of one length, so every row must feed "
                             f"the same number of tokens (got lengths {list(lengths)}); use "
                             f"lib.paged.PagedKVCache for a ragged batch, as lib.serving.serve does")
        if self.seq_len + n_new > self.max_len and self.positions == "text":  # a ring numbered within never fills
            raise ValueError(
                f"KV cache is full: it holds {self.seq_len} of max_len={self.max_len} positions and this forward "
                f"would add {n_new} more; make a cache with max_len >= {self.seq_len + n_new} or reset() it")
        self._pending = n_new
        return Feed.contiguous(self.seq_len, n_new, self.device)

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        """Append this pass's K and V (B, n_kv_heads, T, head_dim) of one layer; return all keys and values
        so far, (B, n_kv_heads, seq_len + T, head_dim)."""
        if k.shape[2] != self._pending:
            raise RuntimeError("a cache is written inside a forward pass: call begin() first (model(...) does)")
        return self._write(layer, k, v)

    def commit(self):
        """Called once after every layer has written: the new positions now count as cached."""
        self.seq_len, self._pending = self.seq_len + self._pending, 0

    def rollback(self):
        """The pass failed part-way (an error, Ctrl-C): forget whatever it wrote, so the cache is exactly as
        it was before ``begin`` and the step can simply be run again."""
        self._crop(self.seq_len)
        self._pending = 0

    def crop(self, seq_len: int):
        """Forget every position from ``seq_len`` on (speculative decoding drops rejected draft tokens)."""
        self._crop(checks.integer(seq_len, "crop's length", 0, self.seq_len,
                                  allowed=f"from 0 to the current seq_len={self.seq_len}"))
        self.seq_len = int(seq_len)

    def keys(self, layer: int) -> torch.Tensor:
        """The cached keys of one layer, (B, n_kv_heads, seq_len, head_dim)."""
        return self.kv(self._layer(layer))[0]

    def values(self, layer: int) -> torch.Tensor:
        """The cached values of one layer, (B, n_kv_heads, seq_len, head_dim)."""
        return self.kv(self._layer(layer))[1]

    def _layer(self, layer) -> int:
        return checks.index(layer, "layer", self.n_layers, f"the cache holds {self.n_layers} layers")

    def select(self, rows) -> "CacheBase":
        """A new cache whose sequence i holds what this cache's sequence rows[i] holds (a copy here; a paged
        cache shares the blocks instead)."""
        rows = self._check_rows(rows)
        out = type(self)(self.config, len(rows), self.max_len, device=self.device, dtype=self.dtype)
        index = torch.tensor(rows, device=self.device)
        out._pending = self.seq_len
        for layer in range(self.n_layers):
            k, v = self.kv(layer)
            out._write(layer, k[index], v[index])
        out.commit()
        return out

    def _check_rows(self, rows) -> list[int]:
        if not isinstance(rows, (list, tuple, range)) or not rows or any(
                checks.as_int(r) is None or not 0 <= r < self.batch_size for r in rows):
            raise ValueError(f"rows must be a non-empty list of sequence indices from 0 to {self.batch_size - 1}, "
                             f"got {rows!r}")
        return [int(r) for r in rows]

    def release(self):
        """Let go, for good, of what the cache holds outside itself: a paged cache gives its blocks back to
        the shared pool. Nothing to do here: this cache's tensors are its own and go when it is dropped."""

    def fork(self, n: int) -> "CacheBase":
        """A cache of batch_size * n sequences: every sequence repeated n times in a row (parallel sampling:
        n continuations of one prompt share its prefill)."""
        n = checks.integer(n, "fork's number of copies", 1)
        checks.cache_memory(self, self.max_len, copies=n)
        return self.select([b for b in range(self.batch_size) for _ in range(n)])

    def __repr__(self):
        return (f"{type(self).__name__}(layers={self.n_layers}, batch={self.batch_size}, "
                f"kv_heads={self.config.n_kv_heads}, head_dim={self.config.head_dim}, seq_len={self.seq_len}, "
                f"max_len={self.max_len}, dtype={self.dtype}, device={self.device}, nbytes={self.nbytes:,})")


@register_cache_kind
class KVCache(CacheBase):
    """Preallocated cache: K and V tensors of shape (B, n_kv_heads, max_len, head_dim) per layer,
    allocated once; each step writes its rows in place at positions seq_len .. seq_len + T - 1.

    With a sliding window W shorter than max_len (the model's ``config.sliding_window``, or ``window=``
    given here: then the cache, not the model, limits what a query sees) it is a ring buffer of ``slots`` =
    W positions: position p lives in slot p % W, so ``nbytes`` stops growing at W positions while
    ``seq_len`` keeps counting (positions, and with them RoPE or learned positions, go on; lib never
    re-numbers them). ``sinks=n`` (StreamingLLM's attention sinks) keeps positions 0..n-1 for good and rings
    the last W - n. ``keys(layer)`` returns the positions it holds in position order (``held_positions()``).
    A pass hands attention the held keys its queries can see plus its own, and writes its own into the ring
    at ``commit`` (so a failed pass overwrites nothing).

    ``positions="cache"`` (StreamingLLM; a window is needed, and a model with rotary positions) numbers the
    positions within the cache instead of the text: the ring (always one, of W slots) keeps keys before their
    rotation, and attention rotates the keys each pass hands back at 0..S-1 and its queries after them. So a
    query never sits past W - 1 in a decode step, and the cache takes any number of tokens (``seq_len`` goes
    past ``max_len`` and the model's ``max_seq_len``; ``nbytes`` stays at W positions). A pass of several
    tokens numbers them on from the keys it sees (as StreamingLLM's prefill does), so its S keys must fit in
    the context window. ``keys(layer)`` then returns unrotated keys. The default, ``positions="text"``, is the
    cache described above."""

    kind = "static"  # its name for generate(cache_kind=...) and Trace.cache_kind

    def __init__(self, config: ModelConfig, batch_size: int, max_len: int, device=None, dtype=None, *,
                 window: int | None = None, sinks: int = 0, positions: str = "text"):
        super().__init__(config, batch_size, max_len, device, dtype)
        self.window, self.sinks = checks.cache_window(window, sinks, config.sliding_window)
        self.positions = checks.choice(positions, "positions", CACHE_POSITIONS)
        if self.positions == "cache":
            check_positions_in_cache(config, self.window, self.max_len)
        self.slots = max_len if self.window is None else min(self.window, max_len)  # positions it can hold
        self.ring = self.slots < max_len or self.positions == "cache"  # a ring buffer: older positions are overwritten
        checks.cache_memory(self, self.slots)
        self.k = [torch.zeros(self.shape(self.slots), dtype=self.dtype, device=self.device)
                  for _ in range(self.n_layers)]
        self.v = [torch.zeros_like(t) for t in self.k]
        self._new = {}  # ring: layer -> this pass's (k, v), written at commit

    def begin(self, model, batch_size: int, n_new: int, lengths=None) -> Feed:
        feed = super().begin(model, batch_size, n_new, lengths)
        if self.window is not None:  # the cache limits what a query sees (a ring: also which keys it hands back)
            feed.window, feed.sinks = self.window, self.sinks
        if self.ring:  # the sinks, and the oldest recent key any query of this pass sees (the first query's)
            new = torch.arange(self.seq_len, self.seq_len + n_new, device=self.device)
            feed.key_positions = torch.cat([self._handed(), new])  # (S,)
            feed.n_keys = len(feed.key_positions)
        feed.rope_in_cache = self.positions == "cache"  # rotary positions 0..S-1 within the cache
        return feed

    def _handed(self) -> torch.Tensor:
        """The held positions a pass hands attention: the sinks and the recent ones its first query still sees."""
        return self.held_positions(self.seq_len - self.slots + self.sinks + 1)

    @property
    def next_positions(self) -> list[int]:
        """``seq_lens``; with positions="cache" the number of keys the next pass is handed (W - 1 at most)."""
        if self.positions == "cache":  # the next token comes after the keys it is handed, 0..S-1 within the cache
            return [len(self._handed())] * self.batch_size
        return self.seq_lens

    def held_positions(self, first: int | None = None) -> torch.Tensor:
        """The positions the cache holds, in order (the sinks, then from ``first`` on; None: all it holds)."""
        if not self.ring:
            return torch.arange(self.seq_len, device=self.device)
        first = max(0, self.seq_len - self.slots + self.sinks if first is None else first)
        return torch.cat([torch.arange(min(self.sinks, self.seq_len), device=self.device),
                          torch.arange(min(max(first, self.sinks), self.seq_len), self.seq_len, device=self.device)])

    def slot(self, positions: torch.Tensor) -> torch.Tensor:
        """Where positions live: p itself, or in a ring a sink's own slot and then p's turn in the ring."""
        if not self.ring:
            return positions
        return torch.where(positions < self.sinks, positions,
                           self.sinks + (positions - self.sinks) % (self.slots - self.sinks))

    def _write(self, layer, k, v):
        if self.ring:
            self._new[layer] = (k, v)
            slots = self.slot(self._handed())  # a gather: a copy
            return (torch.cat([self.k[layer][:, :, slots], k], dim=2),  # (B, n_kv_heads, S, head_dim)
                    torch.cat([self.v[layer][:, :, slots], v], dim=2))
        start, end = self.seq_len, self.seq_len + k.shape[2]
        self.k[layer][:, :, start:end] = k  # write in place: nothing else moves
        self.v[layer][:, :, start:end] = v
        return self.k[layer][:, :, :end], self.v[layer][:, :, :end]  # views, no copy

    def commit(self):
        for layer, (k, v) in self._new.items():  # ring: the fed positions that stay (sinks, the last ones)
            end = self.seq_len + k.shape[2]
            new = torch.arange(self.seq_len, end, device=self.device)
            stays = (new < self.sinks) | (new >= end - (self.slots - self.sinks))
            self.k[layer][:, :, self.slot(new[stays])] = k[:, :, stays]
            self.v[layer][:, :, self.slot(new[stays])] = v[:, :, stays]
        self._new = {}
        super().commit()

    def kv(self, layer):
        if self.ring:
            slots = self.slot(self.held_positions())
            return self.k[layer][:, :, slots], self.v[layer][:, :, slots]
        return self.k[layer][:, :, :self.seq_len], self.v[layer][:, :, :self.seq_len]

    def _crop(self, seq_len):
        self._new = {}  # positions past seq_len are simply overwritten by the next write
        if self.ring and 0 < seq_len < self.seq_len and self.seq_len > self.slots:
            raise ValueError(
                f"this sliding-window cache holds only {self.slots} of its {self.seq_len} positions (a ring): "
                f"the others are overwritten, so it cannot go back to seq_len={seq_len}; crop to 0 (empty) or "
                f"keep seq_len={self.seq_len}")

    def select(self, rows) -> "KVCache":
        if not self.ring:
            return super().select(rows)
        index = torch.tensor(self._check_rows(rows), device=self.device)
        out = type(self)(self.config, len(index), self.max_len, device=self.device, dtype=self.dtype,
                         window=self.window, sinks=self.sinks, positions=self.positions)
        out.k, out.v = [t[index] for t in self.k], [t[index] for t in self.v]  # the rings, copied slot for slot
        out.seq_len = self.seq_len
        return out

    @property
    def used_bytes(self) -> int:
        """Bytes holding real tokens so far (min(seq_len, slots) of its slots); ``nbytes`` is reserved up front."""
        return self.nbytes * min(self.seq_len, self.slots) // self.slots

    def reset(self):
        """Forget every token (the memory stays allocated, ready for the next request)."""
        self.seq_len, self._pending, self._new = 0, 0, {}
        for t in self.k + self.v:
            t.zero_()


def check_positions_in_cache(config: ModelConfig, window, max_len: int):
    """Refuse ``KVCache(..., positions="cache")`` where positions cannot be numbered within the cache."""
    if config.positions != "rope":
        raise ValueError(
            f"positions='cache' numbers positions within the cache by rotating the cached keys again at every "
            f"step, which needs rotary positions; this model has positions={config.positions!r} (a learned table "
            f"added to each token before its key is computed, so a cached key cannot be moved). Use a model with "
            f"positions='rope', or keep positions='text' (the default)")
    if window is None:
        raise ValueError("positions='cache' needs a window: it keeps the first `sinks` positions and the last "
                         "window - sinks, numbered 0..window-1 within the cache; give window=... (and sinks=...)")
    if window > max_len:
        raise ValueError(f"positions='cache' keeps window={window} positions numbered 0..{window - 1} within the "
                         f"cache, so window must be <= max_len={max_len} (which is at most the model's "
                         f"max_seq_len={config.max_seq_len}); give a smaller window or a larger max_len")
