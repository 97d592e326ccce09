"""Notebook 11's build-it exercises: merge two partial softmax results (m, l, acc), the step at the heart of
FlashAttention's online softmax and of FlashDecoding's split-K merge; and FlashAttention's loop itself, the online
softmax over tiles of keys (checked against ``lib.flash.online_softmax_update``, tile by tile)."""
from __future__ import annotations

import torch

from . import Case, Mismatch, _describe, compare, exercise
from ..flash import merge_softmax_states, online_softmax_update, softmax_state
from ..i18n import ordinal, t


def merge_states(a, b):
    """The worked solution (notebook 11 shows the same code in its collapsed cell)."""
    (m_a, l_a, acc_a), (m_b, l_b, acc_b) = a, b
    m = torch.maximum(m_a, m_b)  # the merged state's maximum
    c_a, c_b = torch.exp(m_a - m), torch.exp(m_b - m)  # rescale each side to the new maximum (both <= 1)
    return m, c_a * l_a + c_b * l_b, c_a[..., None] * acc_a + c_b[..., None] * acc_b


def _case(description, scores_a, scores_b, values_a, values_b):
    a, b = softmax_state(scores_a, values_a), softmax_state(scores_b, values_b)
    return Case(t(description), args=(a, b), expected=merge_softmax_states(a, b))


@exercise("merge_softmax_states", title="Merge two partial softmax results",
          hints=("Each half was normalised against its own maximum: what must change in l and acc before two "
                 "halves measured against different maxima can be added?",
                 "Take the larger maximum as the common one: a side's terms were exp(s - its m), so multiplying "
                 "them by exp(its m - m) restates them against the common m (online softmax's rescaling).",
                 "m is the larger of the two maxima; multiply each side's l and acc by exp(its m - m) before adding "
                 "(acc has one more dimension than m: use m[..., None]). Never take exp of a score or of m alone."),
          solution=merge_states)
def _cases():
    g = torch.Generator().manual_seed(9)
    s, v = torch.randn(1, 6, generator=g), torch.randn(6, 2, generator=g)
    yield _case("one query row, its 6 keys split into two halves", s[:, :3], s[:, 3:], v[:3], v[3:])
    s, v = torch.randn(4, 7, generator=g), torch.randn(7, 3, generator=g)
    s[:, 2:] += 5.0
    yield _case("4 query rows; the second part's scores are larger, so its maximum wins",
                s[:, :2], s[:, 2:], v[:2], v[2:])
    s, v = torch.randn(3, 8, generator=g) * 40 + 200, torch.randn(8, 2, generator=g)
    yield _case("scores in the hundreds (exp of a score alone overflows float32)", s[:, 5:], s[:, :5], v[5:], v[:5])
    s, v = torch.randn(2, 3, 5, 10, generator=g), torch.randn(2, 3, 10, 4, generator=g)
    yield _case("a batch: states of shape (batch 2, heads 3, queries 5), acc with head_dim 4",
                s[..., :4], s[..., 4:], v[..., :4, :], v[..., 4:, :])


# ------------------------------------------------------------------ 11: the tiled loop of FlashAttention

def flash_loop_solution(q, k, v, tile_size):
    """q (Tq, D), k and v (Tk, D), no mask: attention computed one tile of keys at a time with the online
    softmax. Returns (the output (Tq, D), the running maximum after each tile: a list of (Tq,) tensors)."""
    scale = q.shape[-1] ** -0.5
    m = torch.full((q.shape[0],), float("-inf"), dtype=q.dtype)  # nothing seen yet
    l = torch.zeros(q.shape[0], dtype=q.dtype)
    acc = torch.zeros(q.shape[0], v.shape[1], dtype=q.dtype)
    maxima = []
    for j in range(0, k.shape[0], tile_size):
        s = q @ k[j:j + tile_size].T * scale  # (Tq, tile): this tile's scores only
        m_new = torch.maximum(m, s.max(dim=-1).values)
        rescale = torch.exp(m - m_new)  # what was summed so far shrinks when the maximum grows (0 at the start)
        p = torch.exp(s - m_new[:, None])
        l, acc, m = rescale * l + p.sum(dim=-1), rescale[:, None] * acc + p @ v[j:j + tile_size], m_new
        maxima.append(m)
    return acc / l[:, None], maxima


def _tiles_by_lib(q, k, v, tile_size, *, rescale=True):
    """lib's online-softmax step over the tiles (``rescale=False``: the slip that forgets to shrink old sums)."""
    scores = q @ k.T / q.shape[-1] ** 0.5
    m = torch.full((q.shape[0],), float("-inf"), dtype=q.dtype)
    l, acc, maxima = torch.zeros(q.shape[0], dtype=q.dtype), torch.zeros(q.shape[0], v.shape[1], dtype=q.dtype), []
    for j in range(0, k.shape[0], tile_size):
        if rescale:
            m, l, acc = online_softmax_update(m, l, acc, scores[:, j:j + tile_size], v[j:j + tile_size])
        else:
            m = torch.maximum(m, scores[:, j:j + tile_size].max(dim=-1).values)
            p = torch.exp(scores[:, j:j + tile_size] - m[:, None])
            l, acc = l + p.sum(dim=-1), acc + p @ v[j:j + tile_size]
        maxima.append(m)
    return acc / l[:, None], maxima


def _flash_loop_compare(q, k, v, tile_size):
    def check(got, want):
        out, maxima = want
        if not isinstance(got, (tuple, list)) or len(got) != 2:
            compare(got, want, what=t("your result"))  # raises Mismatch: not a pair
        got_out, got_max = got
        n_tiles = len(maxima)
        if not isinstance(got_max, (list, tuple)) or len(got_max) != n_tiles:
            n = len(got_max) if isinstance(got_max, (list, tuple)) else _describe(got_max)
            return t("you returned {n} running maxima for {m} tiles of {tile} keys (the last tile holds {r}): one "
                     "maximum after each tile", n=n, m=n_tiles, tile=tile_size, r=k.shape[0] - (n_tiles - 1) * tile_size)
        for i, (g, w) in enumerate(zip(got_max, maxima), 1):
            try:
                compare(g, w, what=t("the running maximum after the {nth} tile", nth=ordinal(i)))
            except Mismatch as m:
                return t("{problem}: it is the larger of the maximum so far and this tile's largest score (the "
                         "scores scaled by 1/√D)", problem=m)
        if isinstance(got_out, torch.Tensor) and tuple(got_out.shape) == tuple(out.shape):
            if not torch.isfinite(got_out).all():
                return t("your output holds NaN or inf: exp of a score this large overflows; take exp of the "
                         "score minus the running maximum")
            forgot, _ = _tiles_by_lib(q, k, v, tile_size, rescale=False)
            if not torch.allclose(got_out, out, atol=1e-5, rtol=1e-4) and torch.allclose(got_out, forgot, atol=1e-5,
                                                                                         rtol=1e-4):
                return t("the running maxima are right but the output is off: when a tile raises the maximum, the l "
                         "and acc summed so far must shrink by exp(m_old − m_new) before the tile's terms are added")
        compare(got_out, out, what=t("your output"))
        return None
    return check


@exercise("flash_loop", title="FlashAttention's loop: the online softmax over tiles of keys",
          hints=("You see the keys one tile at a time and never all the scores at once: what must you keep per "
                 "query row so that the softmax comes out exact at the end?",
                 "Keep three things per row: the running maximum m, the sum l of exp(score − m) and the weighted "
                 "sum acc of the values; a tile that raises m changes the reference point of everything summed "
                 "before it. Divide acc by l at the end.",
                 "start with m = -inf, l = 0, acc = 0; for each tile: s = q @ k_tileᵀ / √D; m_new = max(m, "
                 "s.max(-1)); r = exp(m − m_new); p = exp(s − m_new[:, None]); l = r·l + p.sum(-1); acc = "
                 "r[:, None]·acc + p @ v_tile; m = m_new; keep m. Return (acc / l[:, None], the list of m)."),
          solution=flash_loop_solution)
def _flash_loop_cases():
    g = torch.Generator().manual_seed(17)
    for Tq, Tk, D, tile, scale, what in (
            (3, 10, 4, 4, 1.0, t("the last tile holds only 2 keys")),
            (2, 12, 8, 3, 1.0, t("a later tile holds each row's largest score")),
            (4, 9, 4, 4, 300.0, t("float32 scores in the hundreds: exp of a score alone overflows")),
            (2, 5, 4, 8, 1.0, t("one tile holds every key"))):
        dtype = torch.float32 if scale > 1 else torch.float64
        q = torch.randn(Tq, D, generator=g, dtype=dtype) * scale ** 0.5
        k = torch.randn(Tk, D, generator=g, dtype=dtype) * scale ** 0.5
        v = torch.randn(Tk, D, generator=g, dtype=dtype)
        if Tk == 12:  # the case of a later tile
            k[-1] = q.sum(dim=0) * 2  # the last key scores highest for every row
        want = _tiles_by_lib(q, k, v, tile)
        reference = torch.softmax(q @ k.T / D ** 0.5, dim=-1) @ v  # the whole softmax at once agrees
        assert torch.allclose(want[0], reference, atol=1e-5, rtol=1e-4), "the online softmax disagrees with softmax"
        yield Case(t("{Tq} query rows, {Tk} keys of head_dim {D} in tiles of {tile}: {what}", Tq=Tq, Tk=Tk, D=D,
                     tile=tile, what=what), args=(q, k, v, tile), expected=want, compare=_flash_loop_compare(q, k, v, tile))
