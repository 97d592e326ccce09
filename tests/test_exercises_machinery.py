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


def _step(running, waiting, free, bs, *, lifo=False, preempt=True, boundary=True):
    """A scheduler step with one of the typical slips switched on."""
    running, waiting, free = [dict(r) for r in running], list(waiting), list(free)
    admitted = []
    while waiting:
        head = waiting[-1] if lifo else waiting[0]
        need = -(-(head["length"] + 1) // bs)
        if need > len(free):
            break
        waiting.remove(head)
        admitted.append({"rid": head["rid"], "length": head["length"] + 1, "blocks": [free.pop(0) for _ in range(need)]})
    i = 0
    while i < len(running):
        r = running[i]
        if boundary and r["length"] % bs == 0:  # boundary=False: it never notices that its last block is full
            if not free:
                if not preempt:
                    i += 1
                    continue
                victim = running.pop()
                free.extend(victim["blocks"])
                waiting.insert(0, {"rid": victim["rid"], "length": victim["length"], "blocks": []})
                if victim is r:
                    break
                continue
            r["blocks"] = r["blocks"] + [free.pop(0)]
        r["length"] += 1
        i += 1
    return running + admitted, waiting, free


def test_a_scheduler_step_is_told_which_case_it_gets_wrong_and_not_the_answer():
    assert ex.check("scheduler_step", _step, quiet=True).passed
    no_preemption = ex.check("scheduler_step", lambda *a: _step(*a, preempt=False), quiet=True)
    assert "a preemption: a block is needed and none is free" in no_preemption.message
    assert "the order of the running requests (rids) has 2 items" in no_preemption.message
    lifo = ex.check("scheduler_step", lambda *a: _step(*a, lifo=True), quiet=True)
    assert "admission limited by blocks, first come first served" in lifo.message
    assert "item 1 of the order of the running requests (rids) is 'E'" in lifo.message
    boundary = ex.check("scheduler_step", lambda *a: _step(*a, boundary=False), quiet=True)
    assert "case 2 of 6 (growth across a block boundary" in boundary.message
    assert "running request A holds 2 blocks for its 9 positions" in boundary.message
    for result in (no_preemption, lifo, boundary):
        assert not result.passed and "Hint:" in result.message
        assert "'C', 'D'" not in result.message and "[('A'" not in result.message  # never the expected lists
