"""lib.sampling, the one token chooser: filter_logits, greedy and seeded sampling, the residual rule."""
import pytest
import torch

from lib.checks import sampling as check_sampling
from lib.sampling import (choose, draw, filter_logits, make_generator, residual_distribution,
                          sampling_probs)


def test_filter_logits_on_hand_made_numbers():
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.15, 0.1]]))
    probs = lambda l: torch.softmax(l, -1)
    torch.testing.assert_close(probs(filter_logits(logits)), torch.tensor([[0.5, 0.25, 0.15, 0.1]]))
    torch.testing.assert_close(probs(filter_logits(logits, top_k=2)), torch.tensor([[2 / 3, 1 / 3, 0, 0]]))
    # top_p=0.7: 0.5 alone is short of 0.7, 0.5+0.25 reaches it -> keep two
    torch.testing.assert_close(probs(filter_logits(logits, top_p=0.7)), torch.tensor([[2 / 3, 1 / 3, 0, 0]]))
    torch.testing.assert_close(probs(filter_logits(logits, top_p=0.75)), torch.tensor([[2 / 3, 1 / 3, 0, 0]]))
    torch.testing.assert_close(probs(filter_logits(logits, top_p=0.76)), torch.tensor([[0.5, 0.25, 0.15, 0]]) / 0.9)
    torch.testing.assert_close(probs(filter_logits(logits, top_p=0.1)), torch.tensor([[1.0, 0, 0, 0]]))
    hot = probs(filter_logits(logits, temperature=2.0))
    torch.testing.assert_close(hot, torch.softmax(logits / 2, -1))
    assert hot[0, 0] < 0.5  # a higher temperature flattens the distribution


def test_choose_is_argmax_when_greedy_and_a_seeded_draw_otherwise():
    logits = torch.tensor([[0.1, 2.0, -1.0, 1.9], [3.0, 0.0, 0.0, 0.0]])
    assert choose(logits).tolist() == [1, 0]
    g1, g2 = make_generator(5, "cpu"), make_generator(5, "cpu")
    a = [choose(logits, 1.0, generator=g1).tolist() for _ in range(20)]
    b = [choose(logits, 1.0, generator=g2).tolist() for _ in range(20)]
    assert a == b and len({tuple(x) for x in a}) > 1  # same seed, same draws; and they do vary
    for _ in range(20):  # top-k 1 leaves only the argmax; top-p 0.01 likewise
        assert choose(logits, 1.5, top_k=1, generator=g1).tolist() == [1, 0]
        assert choose(logits, 1.5, top_p=0.01, generator=g1).tolist() == [1, 0]
    assert make_generator(None, "cpu") is None


def test_sampling_probs_are_what_is_drawn_from():
    logits = torch.log(torch.tensor([[0.5, 0.25, 0.15, 0.1]]))
    torch.testing.assert_close(sampling_probs(logits), torch.tensor([[0.5, 0.25, 0.15, 0.1]]))  # greedy: T=1 view
    torch.testing.assert_close(sampling_probs(logits, 1.0, top_k=2), torch.tensor([[2 / 3, 1 / 3, 0, 0]]))
    gen = make_generator(0, "cpu")
    counts = torch.bincount(torch.cat([draw(sampling_probs(logits, 1.0, top_k=2), gen) for _ in range(3000)]),
                            minlength=4)
    assert counts[2] == counts[3] == 0 and abs(counts[0] / 3000 - 2 / 3) < 0.03


def test_residual_distribution():
    p, q = torch.tensor([0.5, 0.3, 0.2]), torch.tensor([0.2, 0.3, 0.5])
    torch.testing.assert_close(residual_distribution(p, q), torch.tensor([1.0, 0.0, 0.0]))
    torch.testing.assert_close(residual_distribution(p, p), p)  # nothing left: p itself


@pytest.mark.parametrize("kw,msg", [
    (dict(temperature=-1), r"temperature must be a finite number >= 0 \(0 means greedy\), got -1"),
    (dict(temperature=float("nan")), r"temperature must be a finite number >= 0 \(0 means greedy\), got nan"),
    (dict(temperature=float("inf")), r"got inf"),
    (dict(temperature=True), r"got True"),
    (dict(temperature=1, top_k=0), r"top_k must be None \(no limit\) or an integer >= 1, got 0"),
    (dict(temperature=1, top_k=2.5), r"top_k must be None \(no limit\) or an integer >= 1, got 2.5"),
    (dict(temperature=1, top_p=0), r"top_p must be None \(no limit\) or a number in \(0, 1\], got 0"),
    (dict(temperature=1, top_p=1.5), r"got 1.5"),
])
def test_bad_settings_say_what_is_allowed(kw, msg):
    with pytest.raises(ValueError, match=msg):
        check_sampling(**kw)


def test_bad_seeds_say_what_is_allowed():
    import numpy as np
    assert make_generator(np.int64(3), "cpu").initial_seed() == 3  # numpy integers are integers
    for bad in (-1, 2 ** 70, 1.5, "7", True):
        with pytest.raises(ValueError, match=r"seed must be None or an integer from 0 to 2\*\*63 - 1, got"):
            make_generator(bad, "cpu")


@pytest.mark.parametrize("temperature", [1e-300, 4.6e-166, 1e-40, 0.5, 1.0, 3.0])
def test_the_unchecked_chooser_is_the_checked_one(temperature):
    """``next_token`` and ``probs`` (generate's loop: settings checked once, no read back from the device) give
    exactly what ``choose`` and ``sampling_probs`` give, the overflow of a tiny temperature included: there the
    logits are shifted by their maximum and divided in float64 (chosen on the device, by ``torch.where``)."""
    from lib.sampling import divide, next_token, probs
    logits = torch.tensor([[0.1, 2.0, -1.0, 1.9], [3.0, 0.0, 0.0, 2.5]]) * 100
    for top_k, top_p in ((None, None), (2, None), (None, 0.9)):
        assert torch.equal(probs(logits, temperature, top_k, top_p), sampling_probs(logits, temperature, top_k, top_p))
        g1, g2 = make_generator(3, "cpu"), make_generator(3, "cpu")
        assert torch.equal(next_token(logits, temperature, top_k, top_p, g1),
                           choose(logits, temperature, top_k, top_p, g2))
    safe = ((logits - logits.max(-1, keepdim=True).values).double() / temperature).float()
    overflows = not torch.isfinite(logits / temperature).all()
    assert torch.equal(divide(logits, temperature), safe if overflows else logits / temperature)
    assert overflows == (temperature < 1e-30)
