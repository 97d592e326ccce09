"""Paged KV cache: the keys and values live in fixed-size blocks, found through a block table (vLLM's idea).

A contiguous cache (``lib.KVCache``) reserves ``max_len`` positions per sequence up front. A paged cache
instead cuts one big preallocated pool into blocks of ``block_size`` token positions and hands a sequence a
new block only when its last one is full. Each sequence keeps a *block table*: its logical block i (token
positions i*block_size .. (i+1)*block_size - 1) lives in physical block ``table.blocks[i]``, anywhere in
the pool. Attention gathers the keys and values through that table, so the model computes exactly what it
computes with a contiguous cache; only the addresses change.

Because blocks are reference counted they can be shared:

* ``fork``: a second sequence starts with the same blocks as its parent; nothing is copied.
* copy-on-write: the first write into a block that more than one sequence holds copies it first, so the
  writer gets a private block and the other holders never see the change.
* prefix caching: full blocks are indexed by the tokens that produced them (the whole prefix up to the
  block's end), so a new request whose prompt starts the same way reuses them instead of recomputing.
* freeing a sequence decrements its blocks' counts; a block whose count reaches 0 goes back to the free list.

Fork and copy-on-write are the vLLM paper's design (Kwon et al., 2023) for parallel sampling and beam search,
and ``lib.generate(..., num_samples=n)`` uses them. vLLM today (the V1 engine) does it differently: a request
for n samples becomes n independent child requests that share only *full* blocks, found by the prefix cache's
hash (on by default); the last, partly filled block is computed by each child, so nothing is copied on write
(read in vLLM 0.33.0's source: ``lib.vllm_bridge.BRIDGE``); beam search runs outside the engine, on top of such
requests. Freed blocks that no prefix is cached in are handed out first; cached ones are evicted least
recently used first.

Layers, each on the one below:
``lib.blocks`` (``BlockAllocator``, ``BlockTable``, ``PoolExhaustedError``: bookkeeping only, free list, reference
counts, prefix index; import them from there) ->
``PagedKVPool`` (the K/V tensors, (n_blocks, n_kv_heads, block_size, head_dim) per layer, plus an allocator;
``swap_out`` / ``swap_in`` move a table's blocks to CPU memory and back) ->
``PagedKVCache`` (B sequences of equal length, the same protocol as ``lib.KVCache``, so
``model(ids, cache=paged_cache)`` runs unchanged) and ``forward_paged`` / ``decode_step`` (one forward pass for
sequences of *different* lengths, which continuous batching needs).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from . import checks, costs, i18n
from .blocks import BlockAllocator, BlockTable, PoolExhaustedError, blocks_for, check_n_blocks
from .cache import CacheBase, Feed, register_cache_kind
from .config import ModelConfig
from .device import cache_dtype_device


class PagedKVPool:
    """The memory: per layer one K and one V tensor of shape (n_blocks, n_kv_heads, block_size, head_dim),
    allocated once, plus the ``BlockAllocator`` that says which block belongs to whom."""

    def __init__(self, config: ModelConfig, n_blocks: int, block_size: int = 16, device=None, dtype=None,
                 record_events: bool = False):
        if not isinstance(config, ModelConfig):
            raise TypeError(f"a paged KV pool is built from a lib.ModelConfig, got {type(config).__name__}")
        self.config = config
        n_blocks, block_size = check_n_blocks(n_blocks), checks.integer(block_size, "block_size", 1)
        self.dtype, self.device = cache_dtype_device(dtype, device)
        self.block_nbytes = block_size * costs.kv_bytes_per_token(config, self.dtype)  # one block: K, V, every layer
        checks.fits_in_memory(n_blocks * self.block_nbytes, self.device,
                              f"a pool of n_blocks={n_blocks} blocks of block_size={block_size} tokens")
        self.allocator = BlockAllocator(n_blocks, block_size, record_events)
        self.n_blocks, self.block_size = n_blocks, block_size  # fixed for the pool's life
        shape = (n_blocks, config.n_kv_heads, block_size, config.head_dim)
        self.k = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(config.n_layers)]
        self.v = [torch.zeros(shape, dtype=self.dtype, device=self.device) for _ in range(config.n_layers)]
        self._on_cpu = {}  # id(table) -> (table, n_tokens, [(K, V) per layer]): tables swap_out moved to CPU memory

    @classmethod
    def for_model(cls, model, n_blocks: int, block_size: int = 16, record_events: bool = False) -> "PagedKVPool":
        """A pool on the model's device, in the model's dtype."""
        return cls(model.config, n_blocks, block_size, model.device, model.dtype, record_events)

    @property
    def nbytes(self) -> int:
        """Bytes the whole pool holds (all allocated up front)."""
        return sum(t.numel() * t.element_size() for t in self.k + self.v)

    # -- tables -------------------------------------------------------------------------------------------
    def new_table(self, name: str | None = None) -> BlockTable:
        return BlockTable(name=name)

    def reserve(self, table: BlockTable, n: int) -> list[tuple[int, int]]:
        """Room for n more positions in ``table`` (copy-on-write of a shared block included: its contents are
        copied here). Returns the (source, copy) pairs, which ``allocator.unreserve`` needs to undo it."""
        copies = self.allocator.reserve(table, n)
        for src, dst in copies:
            for t in self.k + self.v:
                t[dst] = t[src]
        return copies

    def fork(self, table: BlockTable, name: str | None = None) -> BlockTable:
        return self.allocator.fork(table, name)

    def free(self, table: BlockTable):
        self.allocator.free(table)

    def match_prefix(self, table: BlockTable, token_ids) -> int:
        return self.allocator.match_prefix(table, token_ids)

    def register_prefix(self, table: BlockTable, token_ids):
        self.allocator.register_prefix(table, token_ids)

    # -- swapping: a preempted sequence's blocks to CPU memory and back ------------------------------------
    def swap_out(self, table: BlockTable) -> int:
        """Copy the keys and values of ``table``'s blocks to CPU memory and give the blocks back to the pool (the
        vLLM paper's preemption by swapping). The table is left empty until ``swap_in``. Returns the blocks copied."""
        if id(table) in self._on_cpu:
            raise ValueError(f"swap_out: {table} is in CPU memory already; swap_in it before swapping it out again")
        self.allocator.check_held(table, "swap_out")
        blocks = torch.tensor(table.blocks, dtype=torch.long, device=self.device)  # (n,)
        saved = [(k[blocks].to("cpu"), v[blocks].to("cpu")) for k, v in zip(self.k, self.v)]  # per layer, each
        self._on_cpu[id(table)] = (table, table.n_tokens, saved)  # (n, n_kv_heads, block_size, head_dim)
        self.allocator.free(table)
        return len(blocks)

    def swap_in(self, table: BlockTable) -> int:
        """New blocks for the positions ``swap_out`` moved from ``table`` to CPU memory, and their keys and values
        copied back into them: the table holds what it held before, in other blocks. Returns the blocks copied.
        Raises PoolExhaustedError, changing nothing, when the free list is too short (the copy stays on the CPU)."""
        if id(table) not in self._on_cpu:
            raise ValueError(f"swap_in: nothing of {table} is in CPU memory; swap_out(table) puts it there")
        _, n_tokens, saved = self._on_cpu[id(table)]
        if table.blocks or table.n_tokens:
            raise ValueError(f"swap_in needs the empty table swap_out left, got {table}")
        self.reserve(table, n_tokens)  # ceil(n_tokens / block_size) blocks, or PoolExhaustedError
        blocks = torch.tensor(table.blocks, dtype=torch.long, device=self.device)  # (n,)
        for layer, (k, v) in enumerate(saved):
            self.k[layer][blocks] = k.to(self.device)  # (n, n_kv_heads, block_size, head_dim)
            self.v[layer][blocks] = v.to(self.device)
        table.n_tokens = n_tokens
        del self._on_cpu[id(table)]
        return len(blocks)

    def drop_swapped(self, table: BlockTable) -> int:
        """Forget the copy ``swap_out`` made of ``table`` (its request ended while it waited in CPU memory: an
        aborted request of a server). Returns the blocks the copy held."""
        if id(table) not in self._on_cpu:
            raise ValueError(f"drop_swapped: nothing of {table} is in CPU memory; swap_out(table) puts it there")
        _, n_tokens, _ = self._on_cpu.pop(id(table))
        return blocks_for(n_tokens, self.block_size)

    # -- reading and writing through block tables ---------------------------------------------------------
    def table_tensor(self, tables, n_positions: int) -> torch.Tensor:
        """(B, nb) physical block ids covering positions 0 .. n_positions - 1 of each table (0-padded where a
        table is shorter: those positions are masked or sliced away by the reader)."""
        nb = blocks_for(n_positions, self.block_size)
        rows = [t.blocks[:nb] + [0] * (nb - len(t.blocks[:nb])) for t in tables]
        return torch.tensor(rows, dtype=torch.long, device=self.device)

    def slots(self, table: BlockTable, start: int, n: int):
        """(block ids, offsets), each (n,): where positions start .. start + n - 1 of ``table`` live."""
        where = [table.locate(p, self.block_size) for p in range(start, start + n)]
        blocks = torch.tensor([b for b, _ in where], dtype=torch.long, device=self.device)
        offsets = torch.tensor([o for _, o in where], dtype=torch.long, device=self.device)
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


@register_cache_kind
class PagedKVCache(CacheBase):
    """B sequences whose keys and values live in a ``PagedKVPool``, with the protocol of every cache
    (``begin`` / ``update`` / ``commit``), so ``model(ids, cache=paged_cache)`` runs unchanged. ``update`` writes
    the new rows through the block tables and gathers every key and value so far (B, n_kv_heads, S, head_dim).

    The sequences may have different lengths (their block tables do): then a pass feeds a right-padded batch
    with ``model(ids, cache=cache, lengths=...)``, each sequence's real tokens go to its own next positions, and
    the mask keeps every query to its own sequence's keys — the ragged batch of continuous batching.

    ``PagedKVCache(config, batch_size, max_len)`` builds a private pool just large enough (like ``KVCache``;
    ``samples=n``: for n forks of every sequence); pass ``pool=`` (and ``tables=``) to share one pool."""

    kind = "paged"  # its name for generate(cache_kind=...) and Trace.cache_kind

    def __init__(self, config: ModelConfig | None = None, batch_size: int = 1, max_len: int | None = None,
                 device=None, dtype=None, *, block_size: int = 16, pool: PagedKVPool | None = None, tables=None,
                 samples: int = 1):
        if pool is not None:
            if not isinstance(pool, PagedKVPool):
                raise TypeError(f"pool must be a lib.paged.PagedKVPool, got {type(pool).__name__}")
            config = pool.config if config is None else config
            if dtype is not None and dtype != pool.dtype:
                raise ValueError(f"dtype mismatch: the pool stores {pool.dtype}, got dtype={dtype!r}")
            if device is not None and cache_dtype_device(pool.dtype, device)[1] != pool.device:
                raise ValueError(f"device mismatch: the pool lives on {pool.device}, got device={device!r}")
            device, dtype = pool.device, pool.dtype
        if config is None:
            raise TypeError("PagedKVCache needs a lib.ModelConfig (or pool=)")
        super().__init__(config, batch_size, config.max_seq_len if max_len is None else max_len, device, dtype)
        if pool is None:  # a private pool: room for every sequence at full length (``samples`` forks of each)
            block_size = checks.integer(block_size, "block_size", 1)
            n_blocks = batch_size * checks.integer(samples, "samples", 1) * blocks_for(self.max_len, block_size)
            pool = PagedKVPool(config, n_blocks, block_size, self.device, self.dtype)
        elif (config.n_layers, config.n_kv_heads, config.head_dim) != (
                pool.config.n_layers, pool.config.n_kv_heads, pool.config.head_dim):
            raise ValueError("the pool was made for a different model shape; make the cache from pool.config")
        self.pool = pool
        tables = [pool.new_table() for _ in range(batch_size)] if tables is None else list(tables)
        if len(tables) != batch_size:
            raise ValueError(f"batch_size={batch_size} but {len(tables)} block table(s) were given")
        self.tables = tables
        self.block_size = pool.block_size
        if max(self.seq_lens) > self.max_len:
            raise ValueError(f"the block tables hold up to {max(self.seq_lens)} tokens, more than max_len={self.max_len}")
        self._pass = None  # the pass in progress: (lengths, undo, slot blocks, slot offsets, valid, table, S)

    @property
    def seq_lens(self) -> list[int]:
        return [t.n_tokens for t in self.tables]

    @property
    def seq_len(self) -> int:
        """Positions every sequence holds; an error when the sequences hold different numbers (see seq_lens)."""
        lens = self.seq_lens
        if len(set(lens)) > 1:
            raise ValueError(f"the sequences of this cache hold different numbers of positions {lens}; "
                             f"read cache.seq_lens")
        return lens[0]

    @seq_len.setter
    def seq_len(self, value):
        if value != 0 or hasattr(self, "tables"):  # CacheBase starts it at 0; then the block tables hold it
            raise AttributeError("a PagedKVCache's length is what its block tables hold; use crop() or reset()")

    # -- the forward-pass protocol --------------------------------------------------------------------
    def check_compatible(self, model, batch_size: int):
        if (self.pool.dtype, self.pool.device) != (model.dtype, model.device):
            raise ValueError(f"the pool holds {self.pool.dtype} on {self.pool.device} but the model computes in "
                             f"{model.dtype} on {model.device}; build the pool with PagedKVPool.for_model(model, ...)")
        super().check_compatible(model, batch_size)

    def begin(self, model, batch_size: int, n_new: int, lengths=None) -> Feed:
        """Take the blocks the new tokens need now, before any layer runs (a full pool fails early and
        changes nothing), and find the slot of every real new token."""
        self.check_compatible(model, batch_size)
        lens = [n_new] * batch_size if lengths is None else [int(n) for n in lengths]
        starts = self.seq_lens
        for b, (start, n) in enumerate(zip(starts, lens)):
            if start + n > self.max_len:
                which = f"sequence {b} holds" if len(set(starts)) > 1 else "it holds"
                raise ValueError(f"KV cache is full: {which} {start} of max_len={self.max_len} positions and this "
                                 f"forward would add {n} more; make a cache with max_len >= {start + n} or reset() it")
        a = self.pool.allocator
        need = a.blocks_needed(self.tables, lens)
        if need > a.n_free:
            raise PoolExhaustedError(need, a.n_free, a.n_blocks, a.block_size,
                                     i18n.t("appending {n} token(s) to {m} sequence(s)", n=sum(lens), m=len(self.tables)))
        undo = [(t, t.n_tokens, self.pool.reserve(t, n)) for t, n in zip(self.tables, lens)]
        bs, dev = self.block_size, self.device
        slots = [(t.blocks[p // bs], p % bs) for t, s, n in zip(self.tables, starts, lens) for p in range(s, s + n)]
        blocks, offsets = torch.tensor(slots, dtype=torch.long, device=dev).unbind(1)  # (N,) each: real new tokens
        valid = None
        if len(set(lens)) > 1:  # ragged: which (row, index) of the padded (B, T) input are real tokens
            T = max(lens)
            valid = (torch.arange(T, device=dev)[None] < torch.tensor(lens, device=dev)[:, None]).nonzero(as_tuple=True)
        S = max(s + n for s, n in zip(starts, lens))
        self._pass = (lens, undo, blocks, offsets, valid, self.pool.table_tensor(self.tables, S), S)
        return Feed.ragged(starts, lens, dev)

    def _write(self, layer, k, v):
        _, _, blocks, offsets, valid, table, S = self._pass
        k, v = k.transpose(1, 2), v.transpose(1, 2)  # (B, T, n_kv_heads, head_dim)
        if valid is None:
            k, v = k.flatten(0, 1), v.flatten(0, 1)  # (B*T, n_kv_heads, head_dim)
        else:
            k, v = k[valid], v[valid]  # (N, n_kv_heads, head_dim): padding is not stored
        self.pool.write(layer, blocks, offsets, k, v)
        return self.pool.gather(layer, table, S)  # (B, n_kv_heads, S, head_dim) each, padded past each length

    def update(self, layer: int, k: torch.Tensor, v: torch.Tensor):
        if self._pass is None:
            raise RuntimeError("PagedKVCache.update was called outside a forward pass; call begin() first")
        return self._write(layer, k, v)

    def commit(self):
        for t, n in zip(self.tables, self._pass[0]):
            t.n_tokens += n
        self._pass = None

    def rollback(self):
        if self._pass is not None:
            for t, n_tokens, copies in self._pass[1]:
                self.pool.allocator.unreserve(t, n_tokens, copies)
        self._pass = None

    def kv(self, layer):
        n = self.seq_len
        return self.pool.gather(layer, self.pool.table_tensor(self.tables, n), n)

    def crop(self, seq_len: int):
        """Forget every position from ``seq_len`` on (the blocks past it go back to the pool)."""
        current = self.seq_len
        seq_len = checks.integer(seq_len, "crop's seq_len", 0, current,
                                 allowed=f"a length from 0 to the current seq_len={current}")
        for t in self.tables:
            self.pool.allocator.truncate(t, seq_len)

    # -- memory ---------------------------------------------------------------------------------------
    def _held(self) -> dict:
        """block -> positions filled in it, over this cache's tables (a shared block counted once)."""
        bs, held = self.block_size, {}
        for t in self.tables:
            n_blocks = blocks_for(t.n_tokens, bs)  # blocks holding at least one of its tokens
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
        """A new cache whose sequence i shares every block of this cache's sequence rows[i] (the vLLM paper's
        beam search reorders and duplicates rows this way; its parallel sampling forks one row n times).
        Nothing is copied."""
        rows = self._check_rows(rows)
        tables = [self.pool.fork(self.tables[r], f"{self.tables[r].name or r}.{i}") for i, r in enumerate(rows)]
        return PagedKVCache(self.config, len(rows), self.max_len, pool=self.pool, tables=tables)

    def reset(self):
        """Give every block back to the pool (a shared block only when its last holder lets go)."""
        self.rollback()
        for t in self.tables:
            self.pool.free(t)

    release = reset

    def __repr__(self):
        lens = self.seq_lens
        held = f"seq_len={lens[0]}" if len(set(lens)) == 1 else f"seq_lens={lens}"
        return (f"PagedKVCache(batch={self.batch_size}, {held}, block_size={self.block_size}, "
                f"blocks={self.block_table()}, nbytes={self.nbytes:,}, pool: {self.pool.allocator.n_used}/"
                f"{self.pool.n_blocks} blocks used)")


# ---------------------------------------------------------------------- vLLM's flat batch of one step

@dataclass(frozen=True)
class FlatBatch:
    """One step's new tokens laid out as vLLM's attention metadata lays them out: every sequence's tokens end to
    end in one flat batch, no padding. Sequence b's tokens are flat rows query_start_loc[b] ..
    query_start_loc[b + 1] - 1 (``cu_seqlens_q`` in FlashAttention); flat token i is position ``positions[i]``
    of its sequence and is written to ``slot_mapping[i]`` of the pool seen as one row per slot
    (block id × block_size + offset, ``PagedKVPool.slots``). ``seq_lens``: each sequence's length after the step."""

    block_size: int
    query_lens: list  # tokens each sequence feeds this step: a whole prompt (prefill) or 1 (decode)
    query_start_loc: list  # B + 1 cumulative offsets into the flat batch
    seq_lens: list  # positions each sequence holds after the step
    positions: list  # per flat token, its position in its sequence
    slot_mapping: list  # per flat token, its slot in the pool

    @property
    def flat_tokens(self) -> int:
        """Rows of the flat batch: the tokens the step really feeds."""
        return self.query_start_loc[-1]

    @property
    def padded_tokens(self) -> int:
        """Rows of a right-padded batch of the same step (as ``forward_paged`` feeds it): sequences × longest."""
        return len(self.query_lens) * max(self.query_lens)


def flat_batch(pool: PagedKVPool, tables, query_lens) -> FlatBatch:
    """The step that just fed ``query_lens[b]`` new tokens to ``tables[b]`` (its last positions), as vLLM's flat
    batch (``FlatBatch``): prefills and decodes of different lengths in one list of tokens, and each token's slot
    in the pool from the block tables (``PagedKVPool.slots``)."""
    if not isinstance(pool, PagedKVPool):
        raise TypeError(f"flat_batch needs a lib.paged.PagedKVPool, got {type(pool).__name__}")
    tables = list(tables)
    if not tables or len(query_lens) != len(tables):
        raise ValueError(f"flat_batch needs one query length per block table, at least one: got {len(query_lens)} "
                         f"length(s) for {len(tables)} table(s)")
    query_lens = [checks.integer(n, f"query_lens[{b}]", 1, t.n_tokens, allowed=(
        f"from 1 to the {t.n_tokens} positions table {b} holds")) for b, (n, t) in enumerate(zip(query_lens, tables))]
    starts, positions, slot_mapping = [0], [], []
    for t, n in zip(tables, query_lens):
        first = t.n_tokens - n
        blocks, offsets = pool.slots(t, first, n)
        positions += range(first, t.n_tokens)
        slot_mapping += (blocks * pool.block_size + offsets).tolist()
        starts.append(starts[-1] + n)
    return FlatBatch(pool.block_size, query_lens, starts, [t.n_tokens for t in tables], positions, slot_mapping)


# ----------------------------------------------------------------------------------- decoding through tables

@torch.no_grad()
def forward_paged(model, pool: PagedKVPool, tables, new_tokens) -> torch.Tensor:
    """One forward pass for sequences of *different* lengths, each feeding its own new tokens at its own
    positions: a whole prompt for a request that joins, one token for a running one (the mixed batch of
    continuous batching). Nothing special happens here: the token lists are right-padded into one (B, T)
    batch and the model runs on a ``PagedKVCache`` over the tables with ``lengths=``; the cache stores only
    the real tokens and masks the rest. Returns each sequence's last new token's logits, (B, vocab_size),
    and advances every table by the tokens it fed (or changes nothing, if the pass fails)."""
    V = model.config.vocab_size
    tables = list(tables)
    new_tokens = [checks.token_ids(x, f"new_tokens[{b}]", V, empty=True) for b, x in enumerate(new_tokens)]
    if not tables:
        raise ValueError("a paged forward needs at least one sequence")
    if len(new_tokens) != len(tables):
        raise ValueError(f"got {len(new_tokens)} token list(s) for {len(tables)} sequence(s); give one per sequence")
    lens = [len(x) for x in new_tokens]
    if min(lens) == 0:
        raise ValueError("every sequence must feed at least one token")
    T = max(lens)
    x = torch.tensor([ids + [0] * (T - len(ids)) for ids in new_tokens], dtype=torch.long, device=model.device)
    return model(x, cache=pool.cache(tables), lengths=lens, last_only=True)[:, -1]  # (B, vocab_size)


@torch.no_grad()
def decode_step(model, pool: PagedKVPool, tables, token_ids) -> torch.Tensor:
    """One decode step for B sequences of different lengths: sequence b feeds token_ids[b] at its own next
    position. ``forward_paged`` with one token each; returns (B, vocab_size)."""
    tables, token_ids = list(tables), checks.token_ids(token_ids, "token_ids", model.config.vocab_size, empty=True)
    if len(token_ids) != len(tables):
        raise ValueError(f"decode_step got {len(token_ids)} token(s) for {len(tables)} sequence(s); give one per "
                         f"sequence")
    if any(t.n_tokens == 0 for t in tables):
        raise ValueError("decode_step continues sequences that hold at least one token; prefill new ones first "
                         "(prefill(...) or forward_paged with their prompts)")
    return forward_paged(model, pool, tables, [[t] for t in token_ids])


@torch.no_grad()
def prefill(model, pool: PagedKVPool, table: BlockTable, token_ids, prefix_cache: bool = False) -> torch.Tensor:
    """Feed a new sequence's prompt through the model into ``table`` (empty, or already holding a prefix of
    ``token_ids``). With ``prefix_cache=True`` cached full blocks of the prompt are reused first and only the
    rest is computed; afterwards the table's full blocks are indexed for later requests.
    Returns the last position's logits, (vocab_size,). A prefill that fails gives back what it took."""
    ids, prefix_cache = checks.token_ids(token_ids, "token_ids", model.config.vocab_size), \
        checks.flag(prefix_cache, "prefix_cache")
    if len(ids) <= table.n_tokens:
        raise ValueError(f"the table already holds {table.n_tokens} tokens; the prompt has {len(ids)}: "
                         f"nothing left to prefill")
    had = table.n_tokens
    if prefix_cache and had == 0:
        pool.match_prefix(table, ids)
    try:
        logits = forward_paged(model, pool, [table], [ids[table.n_tokens:]])[0]
    except BaseException:
        pool.allocator.truncate(table, had)  # the prefix blocks it matched go back too
        raise
    if prefix_cache:
        pool.register_prefix(table, ids)
    return logits
