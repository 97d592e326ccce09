"""Build-it exercises of notebook 12: where a position lives in a sliding window's ring buffer (with attention
sinks), and the sliding-window mask of a chunk of queries over the keys a cache hands back.

Every hidden case comes from lib's own code: ``KVCache.slot`` of a real ring-buffer cache, and the mask
``Feed.mask`` builds for the model's attention.
"""
from __future__ import annotations

import torch

from ..cache import Feed, KVCache
from ..config import ModelConfig
from ..i18n import t
from . import Case, exercise


# ------------------------------------------------------------------ the ring buffer's slot

def ring_slot_solution(position, window, sinks=0):
    """The slot of ``position`` in a ring of ``window`` slots whose first ``sinks`` slots keep positions 0..sinks-1."""
    if position < sinks:
        return position                                    # a sink keeps its own slot for good
    return sinks + (position - sinks) % (window - sinks)   # the others take turns in the remaining slots


def _ring(window, sinks):
    config = ModelConfig(vocab_size=8, n_layers=1, d_model=4, n_heads=1, max_seq_len=256)
    return KVCache(config, 1, 256, window=window, sinks=sinks)


@exercise("ring_slot", title="The ring buffer's slot of a position",
          hints=("Once the window is full, whose slot does a new position take over, and which slots are never "
                 "taken over when there are sinks?",
                 "A ring counts positions modulo its size; with sinks, the first `sinks` slots stay put and only "
                 "the other window - sinks slots form the ring, counted from the position after the sinks.",
                 "without sinks, position p goes to slot p % window; with sinks, positions below `sinks` keep their "
                 "own slot and the rest go round the other window - sinks slots, starting after the sinks."),
          solution=ring_slot_solution)
def _ring_slot_cases():
    for position, window, sinks in ((5, 8, 0), (13, 8, 0), (100, 4096 // 64, 0), (2, 8, 4), (11, 8, 4),
                                    (37, 10, 2), (9, 10, 2)):
        slot = int(_ring(window, sinks).slot(torch.tensor(position)))
        what = t("{n} sinks", n=sinks) if sinks else t("no sinks")
        yield Case(t("position {position}, a window of {window} slots, {what}", position=position, window=window,
                     what=what),
                   args=(position, window), kwargs={"sinks": sinks}, expected=slot)


# ------------------------------------------------------------------ the sliding-window mask of a chunk

def window_mask_solution(query_positions, key_positions, window):
    """(Tq,) query positions, (S,) key positions -> (Tq, S) bool: True where the query may see the key."""
    q = query_positions[:, None]                 # (Tq, 1)
    k = key_positions[None, :]                   # (1, S)
    return (k <= q) & (k > q - window)           # not in the future, and among the last `window` positions


@exercise("window_mask", title="The sliding-window mask of a chunk",
          hints=("Which keys may a query at position p see: how far back, and how far ahead?",
                 "Two conditions on positions (not on indices into the tensors): causal, and within the last "
                 "`window` positions; the queries' and the keys' positions are given, so compare them by "
                 "broadcasting.",
                 "a query at position p may see a key at position j when j <= p (causal) and j > p - window (the "
                 "last `window` positions, p itself included); compare the positions, not the indices."),
          solution=window_mask_solution)
def _window_mask_cases():
    for q0, n_new, first_key, window in ((0, 6, 0, 3), (9, 4, 6, 4), (20, 1, 13, 8), (5, 5, 0, 16)):
        queries = torch.arange(q0, q0 + n_new)
        keys = torch.arange(first_key, q0 + n_new)  # a ring's held keys, then the chunk's own
        mask = Feed(queries[None], len(keys), key_positions=keys).mask(window)[0, 0]  # what attention uses
        yield Case(t("queries at positions {q0}..{q1}, keys at positions {k0}..{q1}, window {window}", q0=q0,
                     q1=q0 + n_new - 1, k0=first_key, window=window), args=(queries, keys, window), expected=mask)
