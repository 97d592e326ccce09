"""Notebook 01's claims about sampling on the real model: greedy poetry falls into a loop (lines written again word
for word), sampling at a moderate temperature escapes it, and temperature reshapes a real distribution's long tail."""
import functools

import pytest
import torch

import lib
from lib import lm
from lib.widgets import sampling

torch.set_num_threads(1)


@functools.lru_cache(maxsize=None)
def real():
    return lib.load_demo("lm")


def test_repeated_lines_counts_complete_lines_that_repeat():
    assert lm.repeated_lines("") == (0, 0)
    assert lm.repeated_lines("a\nb\na\n") == (3, 1)
    assert lm.repeated_lines("a\n\na\na") == (2, 1)          # blank lines and the unfinished last line do not count
    assert lm.repeated_lines("x\ny\nz\n") == (3, 0)


def _continuation(model, tok, n, **sampling_args):
    r = lib.generate(model, tok.encode(lm.LOOP_PROMPT), n, eos_id=tok.eos_id, **sampling_args)
    return tok.decode(r.new_tokens[0])


def test_greedy_poetry_loops_and_sampling_escapes():
    model, tok = real()
    n = lm.STORED_GENERATIONS[lm.LOOP_PROMPT]
    lines, repeats = lm.repeated_lines(_continuation(model, tok, n))
    assert lines >= 6 and repeats >= 2, (lines, repeats)
    sampled = [lm.repeated_lines(_continuation(model, tok, n, temperature=0.8, seed=s))[1] for s in range(3)]
    assert max(sampled) < repeats, (sampled, repeats)


@pytest.mark.parametrize("prompt", [lm.EN_PROMPTS[0], lm.FIVE_CHARACTER_PROMPTS[0]])
def test_temperature_spreads_a_real_tail(prompt):
    """Raising T takes mass from the top token and needs more tokens to hold 0.9 of the probability (on the toy a
    dozen bars is all there is; the real model has hundreds of plausible next characters after a poem's start)."""
    model, tok = real()
    z = sampling.next_token_logits(model, tok, prompt)
    top = [sampling.sampling_views(z, temperature=t)[1].max().item() for t in (0.5, 1.0, 2.0)]
    n90 = [sampling.sampling_bars(z, tok, temperature=t, top_p=0.9).n_kept for t in (0.5, 1.0, 2.0)]
    assert top[0] > top[1] > top[2] and n90[0] < n90[1] < n90[2], (top, n90)
    assert n90[1] >= 5


def test_the_poem_start_has_a_long_tail():
    model, tok = real()
    z = sampling.next_token_logits(model, tok, lm.FIVE_CHARACTER_PROMPTS[0])
    assert sampling.sampling_bars(z, tok, top_p=0.9).n_kept >= 100
