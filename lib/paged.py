"""Paged KV cache: the keys and values live in fixed-size blocks, found through a block table (vLLM's idea).

A contiguous cache (``lib.KVCache``) reserves ``max_len`` positions per sequence up front. A paged cache
instead cuts one big preallocated pool into blocks of ``block_size`` token positions and hands a sequence a
new block only when its last one is full. Each sequence keeps a *block table*: its logical block i (token
positions i*block_size .. (i+1)*block_size - 1) lives in physical block ``table.blocks[i]``, anywhere in
the pool. Attention gathers the keys and values through that table, so the model computes exactly what it
computes with a contiguous cache; only the addresses change.

Because blocks are reference counted they can be shared:

* ``fork``: a second sequence (parallel sampling, beam search) starts with the same blocks as its parent;
  nothing is copied.
* copy-on-write: the first write into a block that more than one sequence holds copies it first, so the
  writer gets a private block and the other holders never see the change.
* prefix caching: full blocks are indexed by the tokens that produced them (the whole prefix up to the
  block's end), so a new request whose prompt starts the same way reuses them instead of recomputing.
* freeing a sequence decrements its blocks' counts; a block whose count reaches 0 goes back to the free list.

Layers of this module:
``BlockAllocator`` (bookkeeping only: free list, reference counts, block tables, prefix index) ->
``PagedKVPool`` (the K/V tensors, (n_blocks, n_kv_heads, block_size, head_dim) per layer, plus an allocator) ->
``PagedKVCache`` (B sequences of equal length, the same protocol as ``lib.KVCache``, so
``model(ids, cache=paged_cache)`` runs unchanged) and ``forward_paged`` / ``decode_step`` (one forward pass for
sequences of *different* lengths, which continuous batching needs).
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass, field

import torch

from .cache import _CacheBase, _check_dtype_device
from .config import ModelConfig
from .generate import GenerationResult, check_generate_args, filter_logits
from .model import apply_rope, rope_tables


class PoolExhaustedError(RuntimeError):
    """Not enough free blocks for what was asked. ``needed`` and ``free`` are block counts; the scheduler
    above decides what to do (let the request wait, preempt a running sequence, finish one first)."""

    def __init__(self, needed: int, free: int, n_blocks: int, block_size: int, what: str = "this request"):
        self.needed, self.free, self.n_blocks, self.block_size = needed, free, n_blocks, block_size
        super().__init__(
            f"KV block pool exhausted: {what} needs {needed} free block(s) of {block_size} tokens, but only {free} "
            f"of {n_blocks} are free. Release finished sequences, preempt a running one, let the request wait, "
            f"or build a pool with more blocks (n_blocks >= {n_blocks - free + needed} would do).")


@dataclass
class BlockTable:
    """One sequence's map from logical to physical blocks: position p is slot p % block_size of block
    blocks[p // block_size]. ``n_tokens`` positions hold keys and values."""

    blocks: list = field(default_factory=list)
    n_tokens: int = 0
    name: str | None = None

    def __repr__(self):
        return f"BlockTable({self.name or ''}: {self.n_tokens} tokens in blocks {self.blocks})"


def _check_pos_int(name, v, minimum=1):
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ValueError(f"{name} must be an integer >= {minimum}, got {v!r}")


class BlockAllocator:
    """Bookkeeping of a pool of ``n_blocks`` blocks of ``block_size`` token positions (no tensors).

    Free blocks wait in a free list (oldest freed first); every block in use has a reference count (how
    many block tables hold it). ``record_events=True`` keeps a log of every allocation, share, copy, free
    and prefix hit, for the block widget."""

    def __init__(self, n_blocks: int, block_size: int = 16, record_events: bool = False):
        _check_pos_int("n_blocks", n_blocks)
        _check_pos_int("block_size", block_size)
        self.n_blocks, self.block_size = n_blocks, block_size
        self._free = OrderedDict.fromkeys(range(n_blocks))  # free list: allocate from the front
        self.refcounts = [0] * n_blocks
        self._prefix_of = {}  # block -> the token prefix (tuple) its contents were computed from
        self._by_prefix = {}  # token prefix (tuple) -> block
        self.record_events = record_events
        self.events = []  # (op, block, detail) when record_events
        self.n_copies = 0  # copy-on-write copies made
        self.n_prefix_hits = 0  # blocks reused from the prefix cache

    # -- counts ---------------------------------------------------------------------------------------
    @property
    def n_free(self) -> int:
        return len(self._free)

    @property
    def n_used(self) -> int:
        return self.n_blocks - len(self._free)

    def free_blocks(self) -> list[int]:
        """The free list in allocation order."""
        return list(self._free)

    def _log(self, op, block, detail=None):
        if self.record_events:
            self.events.append((op, block, detail))

    # -- single blocks --------------------------------------------------------------------------------
    def _allocate(self, what="this request") -> int:
        if not self._free:
            raise PoolExhaustedError(1, 0, self.n_blocks, self.block_size, what)
        block, _ = self._free.popitem(last=False)
        old = self._prefix_of.pop(block, None)  # its old contents are overwritten: forget them
        if old is not None:
            del self._by_prefix[old]
            self._log("evict", block)
        self.refcounts[block] = 1
        self._log("alloc", block, what)
        return block

    def _release(self, block: int):
        self.refcounts[block] -= 1
        if self.refcounts[block] == 0:
            self._free[block] = None  # back on the free list (kept in the prefix index until reused)
            self._log("free", block)

    # -- block tables ---------------------------------------------------------------------------------
    def blocks_needed(self, tables, n) -> int:
        """Blocks that appending ``n`` positions to every table in ``tables`` (or n[i] to tables[i]) would take
        from the free list: new blocks past each table's end, plus a copy of every shared block written."""
        tables = list(tables)
        ns = [n] * len(tables) if isinstance(n, int) else list(n)
        bs, need, writers = self.block_size, 0, {}
        for t, k in zip(tables, ns):
            start, end = t.n_tokens, t.n_tokens + k
            need += max(0, -(-end // bs) - len(t.blocks))
            for i in range(start // bs, min(len(t.blocks), -(-end // bs))):
                writers[t.blocks[i]] = writers.get(t.blocks[i], 0) + 1
        for block, r in writers.items():  # r writers of a block held r_total times: all but a last sole holder copy
            if self.refcounts[block] > 1:
                need += r if self.refcounts[block] > r else r - 1
        return need

    def reserve(self, table: BlockTable, n: int) -> list[tuple[int, int]]:
        """Make positions table.n_tokens .. + n - 1 writable: copy a shared block that would be written
        (copy-on-write) and append new blocks. Returns the (source, copy) pairs whose contents the caller
        must copy. Raises PoolExhaustedError, changing nothing, when the free list is too short."""
        _check_pos_int("n", n, 0)
        bs = self.block_size
        start, end = table.n_tokens, table.n_tokens + n
        need = self.blocks_needed([table], n)
        if need > self.n_free:
            raise PoolExhaustedError(need, self.n_free, self.n_blocks, bs,
                                     f"sequence {table.name!r}" if table.name else "this sequence")
        copies = []
        for i in range(start // bs, min(len(table.blocks), -(-end // bs))):
            old = table.blocks[i]
            key = self._prefix_of.get(old)
            if key is not None and self.refcounts[old] == 1:  # written in place (after a crop): contents change
                del self._prefix_of[old], self._by_prefix[key]
            if self.refcounts[old] > 1:  # shared: the writer gets its own copy
                new = self._allocate(table.name)
                self._release(old)
                table.blocks[i] = new
                copies.append((old, new))
                self.n_copies += 1
                self._log("cow", new, old)
        while len(table.blocks) * bs < end:
            table.blocks.append(self._allocate(table.name))
        return copies

    def fork(self, table: BlockTable, name: str | None = None) -> BlockTable:
        """A new table holding the same blocks (each block's count goes up by one; nothing is copied)."""
        for b in table.blocks:
            self.refcounts[b] += 1
            self._log("share", b, name)
        return BlockTable(list(table.blocks), table.n_tokens, name)

    def free(self, table: BlockTable):
        """The sequence is done: drop its references; blocks nobody holds return to the free list."""
        for b in reversed(table.blocks):  # the tail first: the prefix blocks stay cached longest
            self._release(b)
        table.blocks, table.n_tokens = [], 0

    def truncate(self, table: BlockTable, n_tokens: int):
        """Keep only the first n_tokens positions; blocks past them are released."""
        if isinstance(n_tokens, bool) or not isinstance(n_tokens, int) or not 0 <= n_tokens <= table.n_tokens:
            raise ValueError(f"truncate takes a length from 0 to the table's {table.n_tokens} tokens, got {n_tokens!r}")
        keep = -(-n_tokens // self.block_size)
        for b in reversed(table.blocks[keep:]):
            self._release(b)
        del table.blocks[keep:]
        table.n_tokens = n_tokens

    # -- prefix caching -------------------------------------------------------------------------------
    def is_cached(self, block: int) -> bool:
        """Whether the prefix index holds this block (a free one could still be handed out again)."""
        return block in self._prefix_of

    def match_prefix(self, table: BlockTable, token_ids) -> int:
        """Give an empty table the cached blocks of the longest matching prefix of ``token_ids`` (full blocks
        only, and never the last token: the model must still compute its logits). Returns how many tokens
        are reused. vLLM indexes blocks by a hash of the prefix; the tuple itself is used here, so a hash
        collision cannot hand over the wrong keys."""
        if table.blocks or table.n_tokens:
            raise ValueError(f"match_prefix needs an empty block table, got {table}")
        ids, bs = tuple(int(t) for t in token_ids), self.block_size
        for i in range((len(ids) - 1) // bs):
            block = self._by_prefix.get(ids[:(i + 1) * bs])
            if block is None:
                break
            if self.refcounts[block] == 0:
                del self._free[block]  # revive a freed block that still holds these keys and values
            self.refcounts[block] += 1
            table.blocks.append(block)
            table.n_tokens += bs
            self.n_prefix_hits += 1
            self._log("hit", block, table.name)
        return table.n_tokens

    def register_prefix(self, table: BlockTable, token_ids):
        """Index the table's full blocks by the tokens that fill them and every token before them
        (``token_ids`` are the table's tokens, at least n_tokens of them)."""
        ids, bs = tuple(int(t) for t in token_ids), self.block_size
        if len(ids) < table.n_tokens:
            raise ValueError(f"register_prefix needs the ids of all {table.n_tokens} cached tokens, got {len(ids)}")
        for i in range(table.n_tokens // bs):
            key = ids[:(i + 1) * bs]
            if key not in self._by_prefix and table.blocks[i] not in self._prefix_of:
                self._by_prefix[key] = table.blocks[i]
                self._prefix_of[table.blocks[i]] = key


class PagedKVPool:
    """The memory: per layer one K and one V tensor of shape (n_blocks, n_kv_heads, block_size, head_dim),
    allocated once, plus the ``BlockAllocator`` that says which block belongs to whom."""

    def __init__(self, config: ModelConfig, n_blocks: int, block_size: int = 16, device=None, dtype=None,
                 record_events: bool = False):
        if not isinstance(config, ModelConfig):
            raise TypeError(f"a paged KV pool is built from a lib.ModelConfig, got {type(config).__name__}")
        self.config = config
        self.allocator = BlockAllocator(n_blocks, block_size, record_events)
        self.dtype, self.device = _check_dtype_device(dtype, device)
        shape = (n_blocks, config.n_kv_heads, block_size, config.head_dim)
        self.k = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(config.n_layers)]
        self.v = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(config.n_layers)]

    @classmethod
    def for_model(cls, model, n_blocks: int, block_size: int = 16, record_events: bool = False) -> "PagedKVPool":
        """A pool on the model's device, in the model's dtype."""
        return cls(model.config, n_blocks, block_size, model.device, model.dtype, record_events)

    @property
    def n_blocks(self) -> int:
        return self.allocator.n_blocks

    @property
    def block_size(self) -> int:
        return self.allocator.block_size

    @property
    def block_nbytes(self) -> int:
        """Bytes of one block: K and V, every layer."""
        c = self.config
        return 2 * c.n_layers * c.n_kv_heads * self.block_size * c.head_dim * self.k[0].element_size()

    @property
    def nbytes(self) -> int:
        """Bytes the whole pool holds (all allocated up front)."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v)

    # -- tables -------------------------------------------------------------------------------------------
    def new_table(self, name: str | None = None) -> BlockTable:
        return BlockTable(name=name)

    def reserve(self, table: BlockTable, n: int):
        """Room for n more positions in ``table`` (copy-on-write of a shared block included)."""
        for src, dst in self.allocator.reserve(table, n):
            for t in self.k + self.v:
                t[dst] = t[src]

    def fork(self, table: BlockTable, name: str | None = None) -> BlockTable:
        return self.allocator.fork(table, name)

    def free(self, table: BlockTable):
        self.allocator.free(table)

    def match_prefix(self, table: BlockTable, token_ids) -> int:
        return self.allocator.match_prefix(table, token_ids)

    def register_prefix(self, table: BlockTable, token_ids):
        self.allocator.register_prefix(table, token_ids)

    # -- reading and writing through block tables ---------------------------------------------------------
    def table_tensor(self, tables, n_positions: int) -> torch.Tensor:
        """(B, nb) physical block ids covering positions 0 .. n_positions - 1 of each table (0-padded where a
        table is shorter: those positions are masked or sliced away by the reader)."""
        nb = -(-n_positions // self.block_size)
        rows = [t.blocks[:nb] + [0] * (nb - len(t.blocks[:nb])) for t in tables]
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    def slots(self, table: BlockTable, start: int, n: int):
        """(block ids, offsets), each (n,): where positions start .. start + n - 1 of ``table`` live."""
        pos = range(start, start + n)
        blocks = torch.tensor([table.blocks[p // self.block_size] for p in pos], dtype=torch.long, device=self.device)
        offsets = torch.tensor([p % self.block_size for p in pos], dtype=torch.long, device=self.device)
        return blocks, offsets

    def write(self, layer: int, blocks: torch.Tensor, offsets: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
        """Store k, v (..., n_kv_heads, head_dim) at the slots (blocks, offsets) (each shaped like k's leading dims)."""
        self.k[layer][blocks, :, offsets] = k  # advanced indices on dims 0 and 2: (..., n_kv_heads, head_dim)
        self.v[layer][blocks, :, offsets] = v

    def gather(self, layer: int, table: torch.Tensor, n_positions: int):
        """Keys and values of positions 0 .. n_positions - 1 through the block-id rows ``table`` (B, nb)
        (from ``table_tensor``): each (B, n_kv_heads, n_positions, head_dim), gathered (a copy)."""
        out = []
        for pool in (self.k[layer], self.v[layer]):
            src = pool[table]  # (B, nb, n_kv_heads, block_size, head_dim)
            B, nb, H, bs, hd = src.shape
            out.append(src.transpose(1, 2).reshape(B, H, nb * bs, hd)[:, :, :n_positions])
        return out[0], out[1]

    def cache(self, tables) -> "PagedKVCache":
        """A model-facing cache over these tables (all of the same length)."""
        return PagedKVCache(self.config, len(tables), pool=self, tables=list(tables))

    def usage(self) -> dict:
        a = self.allocator
        return dict(n_blocks=a.n_blocks, used=a.n_used, free=a.n_free, shared=sum(r > 1 for r in a.refcounts),
                    copies=a.n_copies, prefix_hits=a.n_prefix_hits)

    def __repr__(self):
        return (f"PagedKVPool(blocks={self.n_blocks} x {self.block_size} tokens, used={self.allocator.n_used}, "
                f"layers={self.config.n_layers}, kv_heads={self.config.n_kv_heads}, head_dim={self.config.head_dim}, "
                f"dtype={self.dtype}, device={self.device}, nbytes={self.nbytes:,})")


class PagedKVCache(_CacheBase):
    """B sequences of equal length whose keys and values live in a ``PagedKVPool``: the same protocol as
    ``lib.KVCache`` (``check_compatible`` / ``update`` / ``advance`` / ``seq_len``), so ``model(ids, cache=...)``
    runs unchanged. ``update`` writes the new rows through the block tables and gathers every key and value
    so far, (B, n_kv_heads, seq_len + T, head_dim).

    ``PagedKVCache(config, batch_size, max_len)`` builds a private pool just large enough (like ``KVCache``);
    pass ``pool=`` (and ``tables=``) to share one pool between many requests."""

    def __init__(self, config: ModelConfig | None = None, batch_size: int = 1, max_len: int | None = None,
                 device=None, dtype=None, *, block_size: int = 16, pool: PagedKVPool | None = None, tables=None):
        if pool is not None:
            if not isinstance(pool, PagedKVPool):
                raise TypeError(f"pool must be a lib.paged.PagedKVPool, got {type(pool).__name__}")
            config = pool.config if config is None else config
            if dtype is not None and dtype != pool.dtype:
                raise ValueError(f"dtype mismatch: the pool stores {pool.dtype}, got dtype={dtype!r}")
            if device is not None and _check_dtype_device(pool.dtype, device)[1] != pool.device:
                raise ValueError(f"device mismatch: the pool lives on {pool.device}, got device={device!r}")
            device, dtype = pool.device, pool.dtype
        if config is None:
            raise TypeError("PagedKVCache needs a lib.ModelConfig (or pool=)")
        super().__init__(config, batch_size, config.max_seq_len if max_len is None else max_len, device, dtype)
        if pool is None:
            pool = PagedKVPool(config, batch_size * -(-self.max_len // block_size), block_size, self.device, self.dtype)
        elif (config.n_layers, config.n_kv_heads, config.head_dim) != (
                pool.config.n_layers, pool.config.n_kv_heads, pool.config.head_dim):
            raise ValueError("the pool was made for a different model shape; make the cache from pool.config")
        self.pool = pool
        if tables is None:
            tables = [pool.new_table() for _ in range(batch_size)]
        tables = list(tables)
        if len(tables) != batch_size:
            raise ValueError(f"batch_size={batch_size} but {len(tables)} block table(s) were given")
        lengths = {t.n_tokens for t in tables}
        if len(lengths) > 1:
            raise ValueError(f"the sequences of one PagedKVCache must have the same length, got {sorted(lengths)}; "
                             f"run sequences of different lengths with lib.paged.forward_paged")
        self.tables = tables
        self.seq_len = tables[0].n_tokens
        if self.seq_len > self.max_len:
            raise ValueError(f"the block tables hold {self.seq_len} tokens, more than max_len={self.max_len}")
        self._ready = None  # (seq_len, T, slot blocks (B, T), slot offsets (T,), table (B, nb)) of the pass in progress

    @property
    def block_size(self) -> int:
        return self.pool.block_size

    # -- the forward-pass protocol --------------------------------------------------------------------
    def check_compatible(self, model, batch_size: int, n_new: int):
        super().check_compatible(model, batch_size, n_new)
        self._prepare(n_new)  # take the blocks now, before any layer runs: a full pool fails early

    def _prepare(self, T: int):
        if self._ready is not None and self._ready[:2] == (self.seq_len, T):
            return
        need = self.pool.allocator.blocks_needed(self.tables, T)
        if need > self.pool.allocator.n_free:
            a = self.pool.allocator
            raise PoolExhaustedError(need, a.n_free, a.n_blocks, a.block_size,
                                     f"appending {T} token(s) to {len(self.tables)} sequence(s)")
        for t in self.tables:
            self.pool.reserve(t, T)
        blocks = torch.stack([self.pool.slots(t, self.seq_len, T)[0] for t in self.tables])  # (B, T)
        offsets = torch.arange(self.seq_len, self.seq_len + T, device=self.device) % self.block_size  # (T,)
        table = self.pool.table_tensor(self.tables, self.seq_len + T)  # (B, nb) for the gathers
        self._ready = (self.seq_len, T, blocks, offsets, table)

    def _write(self, layer, k, v):
        T = k.shape[2]
        self._prepare(T)
        _, _, blocks, offsets, table = self._ready
        self.pool.write(layer, blocks, offsets, k.transpose(1, 2), v.transpose(1, 2))  # (B, T, n_kv_heads, hd)
        return self.pool.gather(layer, table, self.seq_len + T)  # (B, n_kv_heads, seq_len + T, head_dim) each

    def advance(self, n: int):
        super().advance(n)
        for t in self.tables:
            t.n_tokens += n
        self._ready = None

    def _read(self, layer, which):
        self._check_layer(layer)
        return self.pool.gather(layer, self.pool.table_tensor(self.tables, self.seq_len), self.seq_len)[which]

    def _crop(self, seq_len):
        for t in self.tables:
            self.pool.allocator.truncate(t, seq_len)
        self._ready = None

    # -- memory ---------------------------------------------------------------------------------------
    def _held(self) -> dict:
        """block -> positions filled in it, over this cache's tables (a shared block counted once)."""
        bs, held = self.block_size, {}
        for t in self.tables:
            n_blocks = -(-t.n_tokens // bs)  # blocks holding at least one of its tokens
            for i, b in enumerate(t.blocks[:n_blocks]):
                held[b] = max(held.get(b, 0), min(bs, t.n_tokens - i * bs))
        return held

    @property
    def nbytes(self) -> int:
        """Bytes of the blocks these sequences hold (a block shared by several of them counted once)."""
        return len({b for t in self.tables for b in t.blocks}) * self.pool.block_nbytes

    @property
    def used_bytes(self) -> int:
        """Bytes of the filled positions in those blocks (the rest is the last blocks' empty slots)."""
        return sum(self._held().values()) * self.pool.block_nbytes // self.block_size

    def block_table(self) -> list[list[int]]:
        """Each sequence's physical block ids, in logical order."""
        return [list(t.blocks) for t in self.tables]

    # -- sharing and freeing ----------------------------------------------------------------------------
    def select(self, rows) -> "PagedKVCache":
        """A new cache whose sequence i shares every block of this cache's sequence rows[i] (beam search
        reorders and duplicates rows this way; parallel sampling forks one row n times). Nothing is copied."""
        rows = list(rows)
        if not rows or any(isinstance(r, bool) or not isinstance(r, int) or not 0 <= r < self.batch_size for r in rows):
            raise ValueError(f"select takes a non-empty list of rows from 0 to {self.batch_size - 1}, got {rows!r}")
        tables = [self.pool.fork(self.tables[r], f"{self.tables[r].name or r}.{i}") for i, r in enumerate(rows)]
        return PagedKVCache(self.config, len(rows), self.max_len, pool=self.pool, tables=tables)

    def fork(self, n: int) -> "PagedKVCache":
        """n sequences that all share this single sequence's blocks (parallel sampling)."""
        if self.batch_size != 1:
            raise ValueError(f"fork(n) copies a cache of one sequence; this one holds {self.batch_size}, "
                             f"use select(rows) instead")
        _check_pos_int("n", n)
        return self.select([0] * n)

    def reset(self):
        """Give every block back to the pool (a shared block only when its last holder lets go)."""
        for t in self.tables:
            self.pool.free(t)
        self.seq_len, self._pending, self._ready = 0, 0, None

    release = reset

    def __repr__(self):
        return (f"PagedKVCache(batch={self.batch_size}, seq_len={self.seq_len}, block_size={self.block_size}, "
                f"blocks={self.block_table()}, nbytes={self.nbytes:,}, pool: {self.pool.allocator.n_used}/"
                f"{self.pool.n_blocks} blocks used)")


# ----------------------------------------------------------------------------------- decoding through tables

def _ids(token_ids) -> list[int]:
    return [int(t) for t in (token_ids.tolist() if hasattr(token_ids, "tolist") else token_ids)]


@torch.no_grad()
def forward_paged(model, pool: PagedKVPool, tables, new_tokens) -> torch.Tensor:
    """One forward pass for B sequences of *different* lengths, each feeding its own new tokens at its own
    positions: a whole prompt for a request that joins, one token for a running one (the mixed batch of
    continuous batching). Runs the model's own layers (embedding, norms, projections, FFN, lm_head); only
    attention is written here: each sequence writes its new keys and values into its blocks, gathers all of
    its keys and values through its block table, and masks what it may not see (later positions, and the
    padding that makes the ragged batch rectangular). Returns the logits of each sequence's last new token,
    (B, vocab_size), and advances every table by the tokens it fed."""
    c = model.config
    tables, new_tokens = list(tables), [_ids(x) for x in new_tokens]
    B = len(tables)
    if B == 0:
        raise ValueError("a paged forward needs at least one sequence")
    if len(new_tokens) != B:
        raise ValueError(f"got {len(new_tokens)} token list(s) for {B} sequence(s); give one per sequence")
    lens = [len(x) for x in new_tokens]
    if min(lens) == 0:
        raise ValueError("every sequence must feed at least one token")
    if max(t.n_tokens + n for t, n in zip(tables, lens)) > c.max_seq_len:
        raise ValueError(f"a sequence would pass the context window (max_seq_len={c.max_seq_len})")
    if (pool.dtype, pool.device) != (model.dtype, model.device):
        raise ValueError(f"the pool holds {pool.dtype} on {pool.device} but the model computes in {model.dtype} on "
                         f"{model.device}; build the pool with PagedKVPool.for_model(model, ...)")
    a = pool.allocator
    need = a.blocks_needed(tables, lens)
    if need > a.n_free:
        raise PoolExhaustedError(need, a.n_free, a.n_blocks, a.block_size,
                                 f"a forward pass of {B} sequence(s) ({sum(lens)} new tokens)")
    for t, n in zip(tables, lens):
        pool.reserve(t, n)
    dev, hd, bs, T = model.device, c.head_dim, pool.block_size, max(lens)
    start = torch.tensor([t.n_tokens for t in tables], device=dev)  # (B,) where each sequence's new tokens begin
    pos = start[:, None] + torch.arange(T, device=dev)[None, :]  # (B, T) their absolute positions
    valid = torch.arange(T, device=dev)[None, :] < torch.tensor(lens, device=dev)[:, None]  # (B, T) not padding
    S = int((start + torch.tensor(lens, device=dev)).max())  # the longest sequence after this pass
    vb, vi = valid.nonzero(as_tuple=True)  # (N,) the real new tokens: sequence and index
    vpos = pos[vb, vi].tolist()
    slot_blocks = torch.tensor([tables[b].blocks[p // bs] for b, p in zip(vb.tolist(), vpos)], device=dev)  # (N,)
    slot_offsets = pos[vb, vi] % bs  # (N,)
    table = pool.table_tensor(tables, S)  # (B, nb) block ids, 0-padded for the shorter sequences
    visible = torch.arange(S, device=dev)[None, None, :] <= pos[:, :, None]  # (B, T, S) causal, per sequence
    x = torch.tensor([ids + [0] * (T - len(ids)) for ids in new_tokens], dtype=torch.long, device=dev)  # (B, T)
    h = model.tok_emb(x)  # (B, T, d_model)
    rope = None
    if c.positions == "learned":
        h = h + model.pos_emb(pos.clamp(max=c.max_seq_len - 1))  # (padding rows clamped; their output is dropped)
    else:
        cos, sin = rope_tables(hd, pos.flatten(), c.rope_theta)  # (B*T, head_dim)
        rope = cos.view(B, 1, T, hd), sin.view(B, 1, T, hd)  # one angle set per sequence and position
    for block in model.blocks:
        attn, layer = block.attn, block.attn.layer
        xin = block.norm1(h)
        q = attn.q_proj(xin).view(B, T, c.n_heads, hd).transpose(1, 2)  # (B, n_heads, T, head_dim)
        k = attn.k_proj(xin).view(B, T, c.n_kv_heads, hd).transpose(1, 2)  # (B, n_kv_heads, T, head_dim)
        v = attn.v_proj(xin).view(B, T, c.n_kv_heads, hd).transpose(1, 2)
        if rope is not None:
            q, k = apply_rope(q, *rope), apply_rope(k, *rope)
        # the real new tokens' K and V into their slots: (N, n_kv_heads, head_dim)
        pool.write(layer, slot_blocks, slot_offsets, k.transpose(1, 2)[vb, vi], v.transpose(1, 2)[vb, vi])
        keys, values = pool.gather(layer, table, S)  # (B, n_kv_heads, S, head_dim), padded past each length
        if c.n_rep > 1:
            keys, values = keys.repeat_interleave(c.n_rep, dim=1), values.repeat_interleave(c.n_rep, dim=1)
        scores = (q @ keys.transpose(-2, -1)) / math.sqrt(hd)  # (B, n_heads, T, S)
        scores = scores.masked_fill(~visible[:, None], float("-inf"))
        weights = torch.softmax(scores.float(), dim=-1).to(q.dtype)
        out = (weights @ values).transpose(1, 2).reshape(B, T, c.n_heads * hd)  # (B, T, n_heads * head_dim)
        h = h + attn.o_proj(out)
        h = h + block.mlp(block.norm2(h))
    for t, n in zip(tables, lens):
        t.n_tokens += n
    last = h[torch.arange(B, device=dev), torch.tensor(lens, device=dev) - 1]  # (B, d_model)
    return model.lm_head(model.norm_f(last))  # (B, vocab_size)


@torch.no_grad()
def decode_step(model, pool: PagedKVPool, tables, token_ids) -> torch.Tensor:
    """One decode step for B sequences of different lengths: sequence b feeds token_ids[b] at its own next
    position. ``forward_paged`` with one token each; returns (B, vocab_size)."""
    tables = list(tables)
    if len(token_ids) != len(tables):
        raise ValueError(f"decode_step got {len(token_ids)} token(s) for {len(tables)} sequence(s); give one per "
                         f"sequence")
    if any(t.n_tokens == 0 for t in tables):
        raise ValueError("decode_step continues sequences that hold at least one token; prefill new ones first "
                         "(prefill(...) or forward_paged with their prompts)")
    return forward_paged(model, pool, tables, [[int(t)] for t in token_ids])


@torch.no_grad()
def prefill(model, pool: PagedKVPool, table: BlockTable, token_ids, prefix_cache: bool = False) -> torch.Tensor:
    """Feed a new sequence's prompt through the model into ``table`` (empty, or already holding a prefix of
    ``token_ids``). With ``prefix_cache=True`` cached full blocks of the prompt are reused first and only the
    rest is computed; afterwards the table's full blocks are indexed for later requests.
    Returns the last position's logits, (vocab_size,)."""
    ids = _ids(token_ids)
    if len(ids) <= table.n_tokens:
        raise ValueError(f"the table already holds {table.n_tokens} tokens; the prompt has {len(ids)}: "
                         f"nothing left to prefill")
    if prefix_cache and table.n_tokens == 0:
        pool.match_prefix(table, ids)
    x = torch.tensor([ids[table.n_tokens:]], dtype=torch.long, device=model.device)  # (1, T) the uncached rest
    logits = model(x, cache=pool.cache([table]), last_only=True)[0, -1]
    if prefix_cache:
        pool.register_prefix(table, ids)
    return logits


@torch.no_grad()
def generate_paged(model, input_ids, max_new_tokens: int, temperature: float = 0.0, top_k: int | None = None,
                   top_p: float | None = None, eos_id: int | None = None, seed: int | None = None, *,
                   n: int = 1, block_size: int = 16, pool: PagedKVPool | None = None,
                   pad_id: int | None = None) -> GenerationResult:
    """``lib.generate`` on a paged cache: same arguments, same tokens (with the same seed), no trace.

    ``n > 1`` is parallel sampling of one prompt: the prompt is prefilled once and its blocks are shared by
    the n samples (copy-on-write when they diverge); the result equals ``lib.generate`` on the prompt
    repeated n times. ``pool`` lets several calls share one pool; otherwise a private one is made.
    ``result.cache`` is the PagedKVCache (release() it to give its blocks back)."""
    input_ids = check_generate_args(model, input_ids, max_new_tokens, temperature, top_k, top_p, eos_id, "static")
    _check_pos_int("n", n)
    B, prompt_len = input_ids.shape
    if n > 1 and B != 1:
        raise ValueError(f"n={n} samples are drawn from one prompt; got a batch of {B} prompts")
    device, pad = model.device, (eos_id if pad_id is None else pad_id)
    max_len = prompt_len + max_new_tokens - 1
    if pool is None:
        pool = PagedKVPool.for_model(model, max(B, n) * -(-max_len // block_size), block_size)
    cache = PagedKVCache(model.config, B, max_len, pool=pool)
    gen = None
    if seed is not None:
        gen = torch.Generator(device=device)
        gen.manual_seed(seed)
    seq = input_ids
    was_training = model.training
    model.eval()
    try:
        for step in range(max_new_tokens):
            fed = seq if step == 0 else seq[:, -1:]
            logits = model(fed, cache=cache, last_only=True)[:, -1, :].float()  # (B, vocab)
            if step == 0 and n > 1:  # fork after the prefill: n samples share the prompt's blocks
                forked = cache.fork(n)
                cache.release()
                cache, seq, logits = forked, seq.expand(n, -1), logits.expand(n, -1)
                finished = torch.zeros(n, dtype=torch.bool, device=device)
            elif step == 0:
                finished = torch.zeros(B, dtype=torch.bool, device=device)
            if temperature == 0:
                next_ids = torch.argmax(logits, dim=-1)
            else:
                probs = torch.softmax(filter_logits(logits, temperature, top_k, top_p), dim=-1)
                next_ids = torch.multinomial(probs, 1, generator=gen).squeeze(1)
            if eos_id is not None:
                next_ids = torch.where(finished, torch.full_like(next_ids, pad), next_ids)
                finished = finished | (next_ids == eos_id)
            seq = torch.cat([seq, next_ids[:, None]], dim=1)
            if eos_id is not None and bool(finished.all()):
                break
    finally:
        model.train(was_training)
    return GenerationResult(sequences=seq, trace=None, cache=cache, prompt_len=prompt_len)
