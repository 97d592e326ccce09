"""Notebook 11's build-it exercise: merge two partial softmax results (m, l, acc), the step at the heart of
FlashAttention's online softmax and of FlashDecoding's split-K merge."""
from __future__ import annotations

import torch

from . import Case, exercise
from ..flash import merge_softmax_states, softmax_state
from ..i18n import t


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
