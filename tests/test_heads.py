"""The measurements that name heads and test in-context copying (lib.heads), checked on what they are built from:
the sequences they feed and, on a model made to copy, the numbers they must give."""
import math

import pytest
import torch

import lib
from lib import heads
from lib.corpus import encode_text, heldout_passages


@pytest.fixture(scope="module")
def lm_tokenizer():
    return lib.load_demo("lm")[1]


def test_repeated_random_from_an_alphabet_draws_only_its_characters(lm_tokenizer):
    ids = heads.repeated_random(lm_tokenizer, 50, seed=3, alphabet=heads.LETTERS)
    assert ids[0] == lm_tokenizer.bos_id and ids[1:51] == ids[51:]
    assert set(lm_tokenizer.decode(ids[1:])) <= set(heads.LETTERS)
    assert heads.repeated_random(lm_tokenizer, 50, seed=3, alphabet=heads.LETTERS) == ids  # seeded
    whole = heads.repeated_random(lm_tokenizer, 50, seed=3)
    assert min(whole[1:]) >= len(lm_tokenizer.itos) - len(lm_tokenizer.chars)  # never a special token


def test_passages_twice_are_held_out_passages_written_twice(lm_tokenizer):
    rows = heads.passages_twice(lm_tokenizer, "zh", n=100, count=5)
    assert len(rows) == 5 and all(len(r) == 201 for r in rows)
    starts = {tuple(encode_text(lm_tokenizer, p[:100])) for p in heldout_passages("zh") if len(p) >= 100}
    for r in rows:
        assert r[0] == lm_tokenizer.bos_id and r[1:101] == r[101:]
        assert tuple(r[1:101]) in starts  # (a rare character is <unk> in the ids, so compare ids)
    with pytest.raises(ValueError, match="fewer than count"):
        heads.passages_twice(lm_tokenizer, "en", n=100, count=10 ** 6)


def test_repeated_far_writes_the_opening_again_at_the_end(lm_tokenizer):
    x = heads.repeated_far(lm_tokenizer, "en", length=300, n=100, count=3)
    assert x.shape == (3, 300)
    assert torch.equal(x[:, 200:], x[:, 1:101]) and (x[:, 0] == lm_tokenizer.bos_id).all()
    with pytest.raises(ValueError, match="n"):
        heads.repeated_far(lm_tokenizer, "en", length=300, n=200)


class Copier(torch.nn.Module):
    """A stand-in that predicts the next token perfectly on <s> + x + x once it has seen x (and uniformly before):
    what a perfect induction head would give. Only ``copy_losses`` and ``passage_copying`` read it."""

    def __init__(self, vocab):
        super().__init__()
        self.vocab, self.n = vocab, None
        self.config = type("C", (), {"vocab_size": vocab})()
        self.device = torch.device("cpu")

    def forward(self, ids):
        T = ids.shape[1]
        logits = torch.zeros(1, T, self.vocab)
        n = (T + 1) // 2  # ids = <s> + x + x minus its last token: len(x) = n
        for t in range(n, T):  # from the second copy's first token on, the next token is known
            logits[0, t, ids[0, t - n + 1]] = 30.0
        return logits


def test_a_perfect_copier_scores_a_ratio_near_zero(lm_tokenizer):
    model = Copier(lm_tokenizer.vocab_size)
    c = heads.passage_copying(model, lm_tokenizer, "en", n=100, count=3)
    assert c["first"] == pytest.approx(math.log2(lm_tokenizer.vocab_size), rel=1e-4)  # uniform: log2(V) bits
    assert c["second"] < 1e-3 and c["ratio"] < 1e-3


def test_recent_share_is_the_weight_within_the_last_k_keys():
    from helpers import randomized_model

    model = randomized_model(seed=2, scale=0.5, max_seq_len=24)
    ids = torch.randint(0, 50, (20,), generator=torch.Generator().manual_seed(0)).tolist()
    ws = heads._weights(model, torch.tensor([ids]))  # (heads, T, T) per layer
    k, start = 5, 7
    by_hand = torch.stack([torch.stack([w[:, p, max(0, p - k + 1):p + 1].sum(-1) for p in range(start, 20)]).mean(0)
                           for w in ws])  # (layers, heads): each query's weight on keys p - k + 1 .. p
    share = heads.recent_share(model, ids, k, from_position=start)
    assert share.shape == (2, 4) and torch.allclose(share, by_hand, atol=1e-6)
    assert torch.allclose(heads.recent_share(model, ids, 20, from_position=0), torch.ones(2, 4), atol=1e-5)
    diag = torch.stack([w.diagonal(dim1=-2, dim2=-1)[:, 3:].mean(-1) for w in ws])  # k = 1: the query's own key
    assert torch.allclose(heads.recent_share(model, ids, 1, from_position=3), diag, atol=1e-6)
    with pytest.raises(ValueError, match="k"):
        heads.recent_share(model, ids, 0)
