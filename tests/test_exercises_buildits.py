"""The build-its the course lacked (lib/exercises/paged.py, flash.py): a paged write through the slot mapping (09),
a new request's prefix-cache lookup (09), FlashAttention's loop of the online softmax over tiles (11). Each
typical wrong solution is named in the course's words, without the expected answer."""
import pytest
import torch

import lib.exercises as ex
from lib.exercises import flash, paged


@pytest.fixture(autouse=True)
def fresh_tries():
    ex.reset()
    yield
    ex.reset()


def _said(name, wrong):
    result = ex.check(name, wrong, quiet=True)
    assert not result.passed and "\n  Hint " in result.message, result.message
    return result.message


# -- 09: the paged write

def _write(pool_k, table, start, k_new, *, physical=True, offset_from_start=False):
    bs = pool_k.shape[2]
    for i in range(k_new.shape[1]):
        p = start + i
        block = table[p // bs] if physical else p // bs
        pool_k[block, :, (i if offset_from_start else p) % bs] = k_new[:, i]
    return pool_k


def test_a_paged_write_that_skips_the_table_or_counts_offsets_from_the_first_new_token_is_named():
    assert ex.check("paged_write", paged.paged_write_solution, quiet=True).passed
    logical = _said("paged_write", lambda *a: _write(*a, physical=False))
    assert "case 1 of 4 (a prefill of 7 tokens into blocks that are not in order: block table [5, 2]" in logical
    assert "your write put position 0 in block 0, which is its logical block number (position // block_size): " \
           "look that entry up in the block table" in logical, logical
    offsets = _said("paged_write", lambda *a: _write(*a, offset_from_start=True))
    assert "case 2 of 4" in offsets and "your write put position 6 at offset 0 of block 9: the offset inside a " \
           "block is the position % block_size" in offsets, offsets


def test_a_paged_write_that_touches_other_slots_or_writes_nothing_is_named():
    def also_clears(pool_k, table, start, k_new):
        pool_k = paged.paged_write_solution(pool_k, table, start, k_new)
        pool_k[table[-1], :, -1] = 0  # wipes a slot of the last block that no new token of case 1 fills
        return pool_k

    msg = _said("paged_write", also_clears)
    assert "your write changed block 2, offset 3, a slot no new token belongs to" in msg, msg
    assert "is nowhere in the pool your write returns: write k_new[:, 0] into its slot" in \
        _said("paged_write", lambda pool_k, table, start, k_new: pool_k)


# -- 09: the prefix-cache lookup

def _lookup(index, ids, bs, *, last=False, own=False, go_on=False):
    out = []
    for i in range((len(ids) if last else len(ids) - 1) // bs):
        key = tuple(ids[i * bs:(i + 1) * bs]) if own else tuple(ids[:(i + 1) * bs])
        if key not in index:
            if go_on:
                continue
            break
        out.append(index[key])
    return out


def test_a_prefix_lookup_that_reuses_the_last_block_keys_by_a_block_or_goes_on_after_a_miss_is_named():
    assert ex.check("prefix_lookup", paged.prefix_lookup_solution, quiet=True).passed
    last = _said("prefix_lookup", lambda *a: _lookup(*a, last=True))
    assert "case 2 of 5 (a prompt of 28 tokens that is an earlier prompt's first 28 tokens" in last
    assert "reused the block that holds the last token: the model must still compute that token's logits" in last
    own = _said("prefix_lookup", lambda *a: _lookup(*a, own=True))
    assert "case 1 of 5" in own and "your lookup keyed block 1 by its own tokens: a block's key is the whole " \
        "prefix up to its end" in own, own
    go_on = _said("prefix_lookup", lambda *a: _lookup(*a, go_on=True))
    assert "case 4 of 5 (a prompt of 20 tokens that is an earlier prompt whose 3rd block was evicted since" in go_on
    assert "went on after the first block the index does not hold: the 3rd block misses" in go_on, go_on


# -- 11: FlashAttention's loop

def _loop(q, k, v, tile, *, rescale=True, subtract_max=True, per_tile=True):
    scale = q.shape[-1] ** -0.5
    m = torch.full((q.shape[0],), float("-inf"), dtype=q.dtype)
    l, acc, maxima = torch.zeros(q.shape[0], dtype=q.dtype), torch.zeros(q.shape[0], v.shape[1], dtype=q.dtype), []
    for j in range(0, k.shape[0], tile):
        s = q @ k[j:j + tile].T * scale
        m_new = torch.maximum(m, s.max(dim=-1).values)
        r = torch.exp(m - m_new) if rescale and subtract_max else torch.ones_like(m)
        p = torch.exp(s - m_new[:, None]) if subtract_max else torch.exp(s)
        l, acc, m = r * l + p.sum(-1), r[:, None] * acc + p @ v[j:j + tile], m_new
        maxima.append(m)
    return acc / l[:, None], maxima if per_tile else maxima[:-1]


def test_a_tiled_loop_that_forgets_to_rescale_overflows_or_skips_a_tile_is_named():
    assert ex.check("flash_loop", flash.flash_loop_solution, quiet=True).passed
    no_rescale = _said("flash_loop", lambda *a: _loop(*a, rescale=False))
    assert "the running maxima are right but the output is off: when a tile raises the maximum, the l and acc " \
           "summed so far must shrink by exp(m_old − m_new)" in no_rescale, no_rescale
    overflow = _said("flash_loop", lambda *a: _loop(*a, subtract_max=False))
    assert "case 3 of 4" in overflow and "your output holds NaN or inf: exp of a score this large overflows" in overflow
    short = _said("flash_loop", lambda *a: _loop(*a, per_tile=False))
    assert "you returned 2 running maxima for 3 tiles of 4 keys (the last tile holds 2)" in short, short

    def whole_softmax(q, k, v, tile):  # right output, but not one maximum per tile
        return torch.softmax(q @ k.T / q.shape[-1] ** 0.5, -1) @ v, [(q @ k.T).max(-1).values]

    assert "running maxima for 3 tiles" in _said("flash_loop", whole_softmax)


def test_the_new_build_its_speak_chinese():
    from lib.i18n import speaking
    with speaking("zh"):
        write = ex.check("paged_write", lambda *a: _write(*a, physical=False), quiet=True).message
        lookup = ex.check("prefix_lookup", lambda *a: _lookup(*a, last=True), quiet=True).message
        loop = ex.check("flash_loop", lambda *a: _loop(*a, rescale=False), quiet=True).message
    assert "你把位置 0 写进了块 0，这是它的逻辑块号" in write and "提示 1/3（先想一个问题）" in write, write
    assert "你复用了最后一个 token 所在的块" in lookup, lookup
    assert "最大值都对，但输出有偏差" in loop and "按键的分块做在线 softmax" in loop, loop
