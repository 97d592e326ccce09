"""Blocks and block tables: the bookkeeping of a paged KV cache, with no tensors in it (vLLM's ``BlockPool`` and
``KVCacheManager``; ``lib.paged.PagedKVPool`` keeps the keys and values these block ids point to).

A pool is ``n_blocks`` blocks of ``block_size`` token positions. A sequence's ``BlockTable`` lists its blocks in
logical order: position p lives in slot p % block_size of block ``table.blocks[p // block_size]``. The
``BlockAllocator`` hands blocks out and takes them back:

    table = BlockTable()
    allocator.reserve(table, n)             # room for n more positions: new blocks at the table's end, and a
                                            #   private copy of a shared block before it is written (copy-on-write)
    child = allocator.fork(table)           # a second table holding the same blocks: each block's count + 1
    allocator.free(table)                   # each count - 1; a block nobody holds goes back to the free list
    allocator.match_prefix(table, ids)      # full blocks computed before from the same tokens, reused
    allocator.register_prefix(table, ids)   # index this table's full blocks for later requests

``blocks_for(n, block_size)`` is the one rounding-up of the course: the blocks that hold n positions.

The free list is allocated from the front. A freed block that holds no cached prefix goes to the front (reused
first); one the prefix index holds goes to the end, so cached blocks are evicted least recently used first, as
vLLM does. Nothing here changes unless the whole call succeeds: a pool too small raises ``PoolExhaustedError``
and leaves every count as it was.
"""
from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass, field

from . import checks, i18n


class PoolExhaustedError(RuntimeError):
    """Not enough free blocks for what was asked. ``needed`` and ``free`` are block counts; the scheduler
    above decides what to do (let the request wait, preempt a running sequence, finish one first)."""

    def __init__(self, needed: int, free: int, n_blocks: int, block_size: int, what: str | None = None):
        self.needed, self.free, self.n_blocks, self.block_size = needed, free, n_blocks, block_size
        super().__init__(i18n.t(  # in the notebook's language: 09 asks the learner to read it
            "KV block pool exhausted: {what} needs {needed} free block(s) of {block_size} tokens, but only {free} "
            "of {n_blocks} are free. Release finished sequences, preempt a running one, let the request wait, "
            "or build a pool with more blocks (n_blocks >= {least} would do).", what=what or i18n.t("this request"),
            needed=needed, block_size=block_size, free=free, n_blocks=n_blocks, least=n_blocks - free + needed))


@dataclass
class BlockTable:
    """One sequence's map from logical to physical blocks: position p is slot p % block_size of block
    blocks[p // block_size]. ``n_tokens`` positions hold keys and values."""

    blocks: list = field(default_factory=list)
    n_tokens: int = 0
    name: str | None = None

    def locate(self, position: int, block_size: int) -> tuple[int, int]:
        """(physical block, offset in it) of token position ``position``: the table's entry
        position // block_size, and position % block_size. (vLLM's ``slot_mapping`` flattens the pair into one
        slot of the pool, block * block_size + offset.)"""
        block_size = checks.integer(block_size, "block_size", 1)
        position = checks.integer(position, "position", 0, len(self.blocks) * block_size - 1, allowed=(
            f"a position from 0 to {len(self.blocks) * block_size - 1} (the table has {len(self.blocks)} "
            f"block(s) of {block_size})"))
        return self.blocks[position // block_size], position % block_size

    def __repr__(self):
        return f"BlockTable({self.name or ''}: {self.n_tokens} tokens in blocks {self.blocks})"


def blocks_for(n_tokens: int, block_size: int) -> int:
    """Blocks of ``block_size`` positions that hold ``n_tokens`` positions: n_tokens / block_size rounded up (a
    partly filled last block is still a whole block)."""
    return -(-n_tokens // block_size)


MAX_BLOCKS = 2 ** 20  # a pool of more blocks would take seconds and gigabytes just to keep track of them


def check_n_blocks(n_blocks) -> int:
    return checks.integer(n_blocks, "n_blocks", 1, MAX_BLOCKS, allowed=(
        f"an integer from 1 to {MAX_BLOCKS:,} (each block's bookkeeping is a Python object)"))


class BlockAllocator:
    """Bookkeeping of a pool of ``n_blocks`` blocks of ``block_size`` token positions (no tensors).

    Free blocks wait in a free list, allocated from the front: a freed block that holds no cached prefix goes
    to the front (reused first), one the prefix index holds goes to the end, so cached blocks are evicted least
    recently used first (as vLLM does); every block in use has a reference count (how
    many block tables hold it). ``record_events=True`` keeps a log of every allocation, share, copy, free
    and prefix hit, for the block widget."""

    def __init__(self, n_blocks: int, block_size: int = 16, record_events: bool = False):
        self.n_blocks = check_n_blocks(n_blocks)
        self.block_size = checks.integer(block_size, "block_size", 1)
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
    def _allocate(self, what=None) -> int:
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

    def check_held(self, table: BlockTable, what: str, blocks=None):
        """Raise a ValueError, changing nothing, unless ``blocks`` (default: all) of ``table`` are blocks of this
        pool that the table holds: a table freed already (a hand-made copy of one) or a table of another pool
        would drive the reference counts wrong."""
        if not isinstance(table, BlockTable):
            raise TypeError(f"{what} takes a lib.blocks.BlockTable, got {type(table).__name__}")
        uses = Counter(table.blocks if blocks is None else blocks)
        bad = sorted((b for b, k in uses.items() if checks.as_int(b) is None or not 0 <= b < self.n_blocks
                      or self.refcounts[b] < k), key=str)
        if bad or not 0 <= table.n_tokens <= len(table.blocks) * self.block_size:
            raise ValueError(f"{what}: {table} is not a table of this pool ({self.n_blocks} blocks): "
                             f"{f'block(s) {bad} are not held' if bad else 'its n_tokens do not fit its blocks'}. "
                             f"Was it freed already (a copy of a freed table?) or made by another pool?")

    def _release(self, block: int):
        self.refcounts[block] -= 1
        if self.refcounts[block] == 0:
            self._free[block] = None  # back on the free list: a block the prefix index holds goes to the end
            if block not in self._prefix_of:  # (evicted least recently used first), any other to the front
                self._free.move_to_end(block, last=False)  # (reused first, so cached blocks live longer)
            self._log("free", block)

    # -- block tables ---------------------------------------------------------------------------------
    def blocks_needed(self, tables, n) -> int:
        """Blocks that appending ``n`` positions to every table in ``tables`` (or n[i] to tables[i]) would take
        from the free list: new blocks past each table's end, plus a copy of every shared block written."""
        tables = list(tables)
        ns = [n] * len(tables) if checks.as_int(n) is not None else list(n)
        bs, need, writers = self.block_size, 0, {}
        for t, k in zip(tables, ns):
            start, end = t.n_tokens, t.n_tokens + checks.integer(k, "the number of positions to add", 0)
            self.check_held(t, "blocks_needed", t.blocks[start // bs:blocks_for(end, bs)])
            need += max(0, blocks_for(end, bs) - len(t.blocks))
            for i in range(start // bs, min(len(t.blocks), blocks_for(end, bs))):
                writers[t.blocks[i]] = writers.get(t.blocks[i], 0) + 1
        for block, r in writers.items():  # r writers of a block held r_total times: all but a last sole holder copy
            if self.refcounts[block] > 1:
                need += r if self.refcounts[block] > r else r - 1
        return need

    def reserve(self, table: BlockTable, n: int) -> list[tuple[int, int]]:
        """Make positions table.n_tokens .. + n - 1 writable: copy a shared block that would be written
        (copy-on-write) and append new blocks. Returns the (source, copy) pairs whose contents the caller
        must copy. Raises PoolExhaustedError, changing nothing, when the free list is too short."""
        n = checks.integer(n, "reserve's n (positions to add)", 0)
        bs = self.block_size
        start, end = table.n_tokens, table.n_tokens + n
        need = self.blocks_needed([table], n)
        if need > self.n_free:
            raise PoolExhaustedError(need, self.n_free, self.n_blocks, bs,
                                     i18n.t("sequence {name}", name=repr(table.name)) if table.name
                                     else i18n.t("this sequence"))
        copies = []
        for i in range(start // bs, min(len(table.blocks), blocks_for(end, bs))):
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

    def unreserve(self, table: BlockTable, n_tokens: int, copies: list):
        """Undo ``reserve``: give back the blocks it appended past ``n_tokens`` positions and put back each
        shared block it had replaced by a copy (``copies``: what ``reserve`` returned). A forward pass that
        fails part-way calls it, so the pool is exactly as it was before the pass."""
        self._drop_blocks_past(table, n_tokens)
        for old, new in copies:
            table.blocks[table.blocks.index(new)] = old
            self.refcounts[old] += 1
            self._release(new)
            self.n_copies -= 1

    def fork(self, table: BlockTable, name: str | None = None) -> BlockTable:
        """A new table holding the same blocks (each block's count goes up by one; nothing is copied)."""
        self.check_held(table, "fork")
        for b in table.blocks:
            self.refcounts[b] += 1
            self._log("share", b, name)
        return BlockTable(list(table.blocks), table.n_tokens, name)

    def free(self, table: BlockTable):
        """The sequence is done: drop its references; blocks nobody holds return to the free list."""
        self.check_held(table, "free")
        for b in reversed(table.blocks):  # the tail first: the prefix blocks stay cached longest
            self._release(b)
        table.blocks, table.n_tokens = [], 0

    def truncate(self, table: BlockTable, n_tokens: int):
        """Keep only the first n_tokens positions; blocks past them are released."""
        self.check_held(table, "truncate")
        n_tokens = checks.integer(n_tokens, "truncate's n_tokens", 0, table.n_tokens,
                                  allowed=f"a length from 0 to the table's {table.n_tokens} tokens")
        self._drop_blocks_past(table, n_tokens)
        table.n_tokens = n_tokens

    def _drop_blocks_past(self, table: BlockTable, n_tokens: int):
        """Release the table's blocks that hold no position below ``n_tokens`` (the tail first)."""
        keep = blocks_for(n_tokens, self.block_size)
        for b in reversed(table.blocks[keep:]):
            self._release(b)
        del table.blocks[keep:]

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
