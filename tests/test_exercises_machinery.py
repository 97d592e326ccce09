"""The build-it exercises of the real machinery (lib/exercises/machinery.py) tell each typical wrong solution
what it got wrong: a loop without a cache, lib's cache instead of one's own, a loop that feeds the whole text
again, a round without rollback or cropped one position short, blocks laid out in the wrong order."""
import torch

import lib
import lib.exercises as ex
from lib.exercises.machinery import ListKVCache


def _greedy(model, ids, n, make_cache, refeed=False):
    cache = make_cache(model.config, 512) if make_cache else None
    out = []
    logits = model(torch.tensor([ids]), cache=cache)
    for _ in range(n):
        out.append(int(logits[0, -1].argmax()))
        if refeed and cache is not None:
            cache.crop(0)
        logits = model(torch.tensor([ids + out] if refeed or cache is None else [[out[-1]]]), cache=cache)
    return out


def test_a_loop_must_use_its_own_cache_and_feed_one_token_a_step():
    said = {
        "never handed the model a cache": lambda m, i, n: _greedy(m, i, n, None),
        "that is lib's KVCache": lambda m, i, n: _greedy(m, i, n, lambda c, L: lib.KVCache(c, 1, L)),
        "call 2 fed 9 tokens: with a cache, every step after the prefill feeds only the newest token":
            lambda m, i, n: _greedy(m, i, n, ListKVCache, refeed=True),
    }
    for words, wrong in said.items():
        result = ex.check("cache_in_your_loop", wrong, quiet=True)
        assert not result.passed and words in result.message, result.message
    assert ex.check("cache_in_your_loop", lambda m, i, n: _greedy(m, i, n, ListKVCache), quiet=True).passed


def _round(target, cache, pending, drafts, crop_to):
    start = cache.seq_len
    choice = target(torch.tensor([[pending, *drafts]]), cache=cache)[0].argmax(-1).tolist()
    kept = 0
    while kept < len(drafts) and drafts[kept] == choice[kept]:
        kept += 1
    if crop_to is not None:
        cache.crop(crop_to(start, kept))
    return drafts[:kept] + [choice[kept]]


def test_a_round_must_roll_its_cache_back_to_what_it_kept():
    no_rollback = ex.check("speculative_round", lambda *a: _round(*a, None), quiet=True)
    assert "case 2 of 3" in no_rollback.message and "after your round the cache holds 12 positions" in \
        no_rollback.message
    short = ex.check("speculative_round", lambda *a: _round(*a, lambda s, k: s + k), quiet=True)
    assert "case 1 of 3" in short.message and "roll it back (cache.crop)" in short.message
    assert ex.check("speculative_round", lambda *a: _round(*a, lambda s, k: s + 1 + k), quiet=True).passed


def test_a_gather_must_put_the_heads_first_before_laying_blocks_end_to_end():
    def blocks_first(pool_k, table, n):
        return pool_k[torch.tensor(table)].reshape(pool_k.shape[1], -1, pool_k.shape[3])[:, :n]

    result = ex.check("paged_gather", blocks_first, quiet=True)
    assert not result.passed and "the right shape but its values are off" in result.message
